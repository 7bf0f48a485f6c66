"""Kill an agent in the middle of a parallel tool batch, resume it elsewhere: no recorded call
runs again.

A child process runs an agent on a SqliteSaver whose model asks for six tool calls at once. Each
tool writes its call id to a ledger file (flushed and fsynced) before it returns, so the ledger
holds every call that ran, in every process. The child dies at seeded random moments (SIGKILL),
right after the k-th tool result is recorded, or inside the k-th tool after its ledger line.
The test process then resumes the thread with ``invoke(None, cfg)`` and checks that the run
finishes with one result per call, and that no call whose result was committed before the
crash ran again (a call may run twice only if its first run was never recorded).

Children are forked by a server process (``python -m tests.agent.test_agent_crash``) that
imported graph_agent and compiled the agent once, so each trial costs milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graph_agent import RunnableConfig, ToolContext, tool
from graph_agent.agent import ReactAgent
from graph_agent.checkpoint.sqlite import SqliteSaver
from graph_agent.graph.task import RECORD_PREFIX
from graph_agent.messages import AssistantMessage, ToolCall, ToolResponseMessage, UserMessage
from graph_agent.models import ScriptedChatModel
from graph_agent.models.base import ModelRequest
from tests.forkserver import ForkServer, child_ready, serve

THREAD = "agent-crash"
CALLS = [f"c{i}" for i in range(6)]
TOOL_RECORD = RECORD_PREFIX + "tool:"
ANSWER = "all six done"


@tool
def work(n: int, ctx: ToolContext) -> str:
    """Do the n-th piece of work (its duration grows with n, so the batch finishes in turn)."""
    context = ctx.config.context
    with open(context["ledger"], "a") as ledger:
        ledger.write(f"{os.getpid()} {ctx.call_id}\n")
        ledger.flush()
        os.fsync(ledger.fileno())
    if context.get("die_in") == ctx.call_id:
        os._exit(137)  # after the side effect, before the result is recorded
    time.sleep(0.008 * (n + 1))
    return f"done {n}"


def decide(request: ModelRequest) -> AssistantMessage:
    """Ask for the whole batch after the user's message; answer once the results are in."""
    if isinstance(request.messages[-1], UserMessage):
        return AssistantMessage(
            tool_calls=[ToolCall(call_id, "work", {"n": i}) for i, call_id in enumerate(CALLS)]
        )
    return AssistantMessage(ANSWER)


def build(saver: Any) -> ReactAgent:
    agent = ReactAgent("crashy_agent", ScriptedChatModel([decide] * 4), tools=[work], saver=saver)
    agent.graph  # noqa: B018 - compile now (imports networkx), not inside the timed child
    return agent


class RecordCrashingSaver(SqliteSaver):
    """Dies right after the k-th tool result is committed, as a power cut or OOM kill would."""

    def __init__(self, path: str, crash_after: int) -> None:
        super().__init__(path)
        self.records = 0
        self.crash_after = crash_after
        self.counter_lock = threading.Lock()

    def put_writes(self, *args: Any) -> None:
        super().put_writes(*args)
        writes = args[-1]
        if any(channel.startswith(TOOL_RECORD) for channel, _ in writes):
            with self.counter_lock:
                self.records += 1
                if self.records == self.crash_after:
                    os._exit(137)


def _child(fields: list[str], ready_fd: int) -> None:
    db, ledger, mode = fields
    kind, _, arg = mode.partition(":")
    saver = RecordCrashingSaver(db, int(arg)) if kind == "record" else SqliteSaver(db)
    agent = build(saver)
    context = {"ledger": ledger}
    if kind == "tool":
        context["die_in"] = arg
    child_ready(ready_fd)
    agent.invoke("do all six", RunnableConfig(thread_id=THREAD, context=context))


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    fork_server = ForkServer("tests.agent.test_agent_crash")
    yield fork_server
    fork_server.close()


def ledger_lines(path: Path) -> list[tuple[int, str]]:
    if not path.exists():
        return []
    return [
        (int(pid), call)
        for pid, call in (line.split() for line in path.read_text().split("\n") if line)
    ]


def committed_calls(saver: SqliteSaver) -> set[str]:
    """Calls whose result is committed: recorded by the tool task, or in the saved messages."""
    head = saver.get(THREAD)
    if head is None:
        return set()
    recorded = {
        w.channel[len(TOOL_RECORD) :]
        for w in head.pending_writes
        if w.channel.startswith(TOOL_RECORD)
    }
    saved = {
        m.tool_call_id
        for m in head.values.get("messages", ())
        if isinstance(m, ToolResponseMessage)
    }
    return recorded | saved


def resume_and_check(db: Path, ledger: Path) -> None:
    saver = SqliteSaver(db)
    try:
        before = committed_calls(saver)
        child_runs = Counter(call for _, call in ledger_lines(ledger))
        agent = build(saver)
        config = RunnableConfig(thread_id=THREAD, context={"ledger": str(ledger)})
        head = saver.get(THREAD)
        if head is None:
            final = agent.invoke("do all six", config).data()
        elif head.next:
            final = agent.invoke(None, config).data()
        else:
            final = agent.get_state(config).values
    finally:
        saver.close()

    messages = list(final["messages"])
    results = [m for m in messages if isinstance(m, ToolResponseMessage)]
    assert [m.tool_call_id for m in results] == CALLS
    assert [m.content for m in results] == [f"done {i}" for i in range(len(CALLS))]
    assert messages[-1].text == ANSWER
    resumed_runs = Counter(call for pid, call in ledger_lines(ledger) if pid == os.getpid())
    rerun = before & set(resumed_runs)
    assert not rerun, f"calls recorded before the crash ran again: {sorted(rerun)}"
    assert max(child_runs.values(), default=1) == 1, child_runs
    assert max(resumed_runs.values(), default=1) == 1, resumed_runs
    assert set(child_runs) | set(resumed_runs) == set(CALLS)


def full_run_duration(server: ForkServer, tmp_path: Path) -> float:
    db, ledger = tmp_path / "full.db", tmp_path / "full.ledger"
    server.start(db, ledger, "none")
    started = time.monotonic()
    assert server.wait() == 0
    duration = time.monotonic() - started
    assert Counter(call for _, call in ledger_lines(ledger)) == Counter(CALLS)
    return duration


def test_an_agent_killed_at_random_moments_resumes_without_rerunning_recorded_calls(
    server, tmp_path
):
    duration = full_run_duration(server, tmp_path)
    rng = random.Random(20261130)
    for attempt in range(10):
        db, ledger = tmp_path / f"kill-{attempt}.db", tmp_path / f"kill-{attempt}.ledger"
        pid = server.start(db, ledger, "none")
        time.sleep(rng.uniform(0, duration))
        server.kill(pid)
        server.wait()
        resume_and_check(db, ledger)


def test_an_agent_killed_right_after_the_kth_recorded_result_resumes_with_the_others_only(
    server, tmp_path
):
    for k in range(1, len(CALLS) + 1):
        db, ledger = tmp_path / f"record-{k}.db", tmp_path / f"record-{k}.ledger"
        server.start(db, ledger, f"record:{k}")
        assert server.wait() == 137
        with contextlib.closing(SqliteSaver(db)) as saver:
            assert len(committed_calls(saver)) == k
        resume_and_check(db, ledger)


def test_a_call_killed_before_its_result_was_recorded_runs_again_on_resume(server, tmp_path):
    for victim in (CALLS[0], CALLS[-1]):
        db, ledger = tmp_path / f"tool-{victim}.db", tmp_path / f"tool-{victim}.ledger"
        server.start(db, ledger, f"tool:{victim}")
        assert server.wait() == 137
        resume_and_check(db, ledger)
        runs = Counter(call for _, call in ledger_lines(ledger))
        assert runs[victim] == 2  # once in the child (unrecorded), once on resume


if __name__ == "__main__":
    serve(lambda: build(SqliteSaver(":memory:")), _child)
