"""Worker processes sharing threads on one PostgreSQL schema, and the fork server that starts them.

``python -m tests.checkpoint.pg_workers`` imports graph_agent and psycopg once, then forks a
child per request read from stdin (one JSON object a line), so a worker costs milliseconds.
Requests: ``{"op": "spawn", "task": ..., ...}`` answers ``{"pid": N}`` once the child is set up;
``{"op": "wait", "pid": N, "timeout": s}`` answers ``{"pid": N, "code": exit code or null}``.
Children never touch the server's connections (it has none) and never write to stdout.

Tasks:

- ``work``: run ``threads`` (created beforehand, paused before their first step) to the end,
  skipping those another worker holds (``ThreadBusyError``) or finished (``InvalidResumeError``);
  with ``crash_after=k`` the process dies right after its k-th committed checkpoint.
- ``hold``: run one thread whose node sleeps ``seconds``.
- ``setup``: make a saver (which migrates the schema) at ``start_at`` (a ``time.time()``).

Every execution of the step node is written to the ``ledger`` table *before* the node returns:
the task id, the checkpoint it runs after, and the thread's head at that moment. A node that
runs after its result was committed would find the head moved past its checkpoint.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from typing import Any

import psycopg

from graph_agent import (
    END,
    START,
    CompileConfig,
    InvalidResumeError,
    RunnableConfig,
    StateGraph,
    ThreadBusyError,
)
from graph_agent.checkpoint.postgres import PostgresSaver
from graph_agent.checkpoint.postgres_plans import thread_key

STEPS = 20

LEDGER_TABLES = (
    "CREATE TABLE ledger (thread text NOT NULL, task_id text NOT NULL, after text NOT NULL, "
    "head text, pid integer NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())",
    "CREATE TABLE completions (thread text NOT NULL, pid integer NOT NULL)",
)


def build(saver: Any, ledger: psycopg.Connection[Any] | None = None, **compile_options: Any) -> Any:
    """START -> step (x20) -> END: each step adds one to ``n``."""

    def step(state: Any, config: RunnableConfig) -> dict[str, Any]:
        if ledger is not None:
            task = config.task
            ledger.execute(
                "INSERT INTO ledger (thread, task_id, after, head, pid) SELECT %s, %s, %s, "
                "(SELECT checkpoint_id FROM graph_agent_heads WHERE thread_key = %s "
                "AND checkpoint_ns = ''::bytea), %s",
                (
                    config.thread_id,
                    task.id,
                    task.checkpoint_id,
                    thread_key(config.thread_id),
                    os.getpid(),
                ),
            )
        return {"n": state["n"] + 1}

    g = StateGraph("steps")
    g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: "step" if s["n"] < STEPS else END)
    return g.compile(CompileConfig(saver=saver, **compile_options))


def create_threads(dsn: str, threads: list[str]) -> None:
    """Each thread gets its input checkpoint, paused before the first step."""
    with PostgresSaver(dsn, pool_size=1) as saver:
        app = build(saver, interrupt_before=["step"])
        for thread in threads:
            app.invoke({"n": 0}, RunnableConfig(thread_id=thread))


class CrashingSaver(PostgresSaver):
    """Dies right after its k-th committed checkpoint, as an OOM kill would."""

    def __init__(self, dsn: str, crash_after: int, **options: Any) -> None:
        super().__init__(dsn, **options)
        self.commits = 0
        self.crash_after = crash_after

    def put(self, checkpoint: Any) -> None:
        super().put(checkpoint)
        self.commits += 1
        if self.commits == self.crash_after:
            os._exit(137)


def work(dsn: str, threads: list[str], seed: int, crash_after: int, ready: Any) -> None:
    options: dict[str, Any] = {"pool_size": 2}
    saver = (
        CrashingSaver(dsn, crash_after, **options) if crash_after else PostgresSaver(dsn, **options)
    )
    ledger = psycopg.connect(dsn, autocommit=True)
    app = build(saver, ledger)
    pending = list(threads)
    random.Random(seed).shuffle(pending)
    ready()
    deadline = time.monotonic() + 60
    while pending and time.monotonic() < deadline:
        for thread in list(pending):
            try:
                app.invoke(None, RunnableConfig(thread_id=thread))
            except ThreadBusyError:
                continue
            except InvalidResumeError:  # finished by another worker
                pending.remove(thread)
                continue
            ledger.execute("INSERT INTO completions VALUES (%s, %s)", (thread, os.getpid()))
            pending.remove(thread)
        if pending:
            time.sleep(0.002)
    if pending:
        raise TimeoutError(f"threads left unfinished: {pending}")


def hold(dsn: str, thread: str, seconds: float, ready: Any) -> None:
    saver = PostgresSaver(dsn, pool_size=1, lease_ttl=60)
    g = StateGraph("hold")
    g.add_node("sleep", lambda s: time.sleep(seconds) or {"slept": True})
    g.add_edge(START, "sleep").add_edge("sleep", END)
    app = g.compile(CompileConfig(saver=saver))
    ready()
    app.invoke({}, RunnableConfig(thread_id=thread))


def setup(dsn: str, start_at: float, ready: Any) -> None:
    ready()
    time.sleep(max(0.0, start_at - time.time()))
    PostgresSaver(dsn, pool_size=1).close()


def _child(request: dict[str, Any], ready: Any) -> None:
    task = request["task"]
    if task == "work":
        work(
            request["dsn"],
            request["threads"],
            request["seed"],
            request.get("crash_after", 0),
            ready,
        )
    elif task == "hold":
        hold(request["dsn"], request["thread"], request["seconds"], ready)
    elif task == "setup":
        setup(request["dsn"], request["start_at"], ready)
    else:
        raise ValueError(task)


def _spawn(request: dict[str, Any]) -> int:
    ready_read, ready_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_read)

        def ready() -> None:
            os.write(ready_write, b"R")
            os.close(ready_write)

        code = 0
        try:
            _child(request, ready)
        except BaseException as exc:
            print(f"worker {os.getpid()} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            code = 1
        os._exit(code)
    os.close(ready_write)
    os.read(ready_read, 1)  # empty if the child died before it was ready
    os.close(ready_read)
    return pid


def _wait(pid: int, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.005)


def serve() -> None:
    build(None)  # compiling imports networkx: do it once, before forking
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "spawn":
            reply: dict[str, Any] = {"pid": _spawn(request)}
        else:
            reply = {"pid": request["pid"], "code": _wait(request["pid"], request["timeout"])}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    serve()
