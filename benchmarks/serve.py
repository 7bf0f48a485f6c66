"""Served runs: ``graph-agent serve`` against LangGraph Server on the same 3-node chain (issue 20).

Each server runs as its own process on 127.0.0.1; all are started and warmed up, then measured
in turns, round after round (one server at a time), and answer the same HTTP requests: a stateless
``POST /runs/wait`` of a chain of three nodes that each add one to ``x``. Measured:

- the latency of one ``runs/wait`` at one client (sequential requests, 50 per server; the
  median is the p50);
- runs per second with 10 and with 50 concurrent clients (asyncio + one ``httpx.AsyncClient``
  per client, each sending its next request as soon as the last one is answered), and, for our
  servers, the CPU time each run cost (``cpu_ms_per_run_median``: the server's processes and
  the PostgreSQL backends they are connected to, read from ``/proc``; steadier than runs/s on
  a shared machine).

With ``--on-threads`` each client sends its runs on a thread of its own
(``/threads/{id}/runs/wait``): durable runs, whose checkpoints and records are stored, where a
stateless run that deletes its thread runs in memory (see ``graph_agent.serve.runs``).

Servers: ``graph-agent serve`` on the SQLite default; ``graph-agent serve --postgres DSN
--workers 2`` (two processes, each serving HTTP on the port and running the runs it receives;
a fresh schema, dropped afterwards) when PostgreSQL answers at ``GRAPH_AGENT_BENCH_POSTGRES``
(default the test server); and LangGraph Server (``langgraph dev --no-browser --no-reload``: its
in-memory runtime on its defaults; ``--n-jobs-per-worker 10`` made it slower here, 10 runs/s at
10 clients against 37-56) when ``langgraph-cli[inmem]`` is installed. It takes about three
minutes with all three, so it is not in ``python -m benchmarks``; run it alone with
``python -m benchmarks.serve [--quick] [--without-langgraph] [--without-postgres]
[--without-sqlite] [--on-threads]``. LangGraph Server is started on a free port (``--port``) and
reached on the port its log says it took.

Where a durable run's server CPU goes (``--on-threads``, SQLite; issue 35's target: 1.5 ms)
------------------------------------------------------------------------------------------
About 4 ms per run on the shared 2-core VM (5.5 ms before issue 35): about half on the
event loop's thread and half on worker threads (``/proc/PID/task``). The loop's half, by a
``cProfile`` of its thread's CPU time (``time.thread_time``):

- HTTP, 22%: uvicorn and httptools (parsing, writing), Starlette's routing (a linear match
  over the routes) and responses, the guard, API-key and body-limit middlewares;
- the run's events and JSON, 15%: ``RunEvents`` turning each ``values`` output into an event,
  JSON encoding (``json`` of the standard library: orjson would save a few percent of the
  total at most, and escapes lone surrogates differently), the result;
- the records, 15%: reading the thread's record, then three SQLite transactions per run
  (the run and its thread busy; the run's events with its end and the thread idle; ``running``
  rides on the first for a run that starts at once), each a WAL commit;
- the runs and routes' own code 10%, asyncio and the thread hop's wake-ups 9%, the request's
  checks (pydantic ``RunCreate``, assistant, input keys) 7%, the engine's loop side 4%.

The worker threads' half is the graph itself, read with its sync ``stream`` in one thread
(``CompiledGraph.runs_sync``: a graph of plain functions; ``astream`` on the loop cost
twice as much CPU, a thread hop per node and per saver call): the SQLite checkpoint saver
about 1 ms (a lease taken and released, the thread's checkpoint read, four checkpoints written:
seven transactions), the engine 0.3-0.4 ms (the three nodes themselves ~20 µs), the pool's
dispatch of the nodes (each on a pool thread, so that a cancel stops it at once) the rest.
What is left to reach 1.5 ms: fewer saver transactions per run (the lease taken with the
first write and released with the last, several steps' checkpoints in one commit), and a
leaner HTTP path (a route table looked up by path, fewer ASGI layers).

PostgreSQL (``--workers 2``; target 4 ms with its backends): 13-17 ms per run on a quiet
machine, a third of it PostgreSQL's backends. Measured while five helpers shared the 2 cores
(load 10-13), the saver changes below against the tree before them, in turns (10/50 clients):
24.4/24.0 -> 21.8/22.1 ms, then 27.9/31.1 -> 26.3/25.8 ms (backends 8-11 ms); runs that were
not paired spread over 21-26 ms for either, so the gain is within that noise. The records take
two round trips per run (start with its claim, end with its events) plus a read of the thread.
The checkpoint saver took ten (lease; the thread's read: header, snapshot with the header
again, blobs, commit; four writes; release) and takes seven: the lease with the thread's
newest header in one pipeline (the run's first ``aget`` starts from it), the blobs in one
statement that also says whether the checkpoint is still there (no snapshot transaction), four
writes, the release. Measured alone (the chain on ``AsyncPostgresSaver`` with ``astream``, 10
clients on their threads, 8 runs of each in turns): 6.9 -> 6.2 ms of the process and 5.1 ->
4.4 ms of the backends per run, 3,600 -> 2,950 Python calls. Of those calls a third are
builtins, and most of the rest asyncio, selectors, psycopg and psycopg_pool: the fixed cost of
each awaited statement (a future and an ``add_reader``/``remove_reader`` per wait, the pool's
check-out and return, query conversion and parameter dumping; statements are already prepared
by psycopg after five uses on a connection), not the saver's own code (~140 calls). What is
left: fewer awaited statements per run (several steps' checkpoints in one commit, the release
with the last write: engine hooks), the records' start as one statement instead of a pipelined
transaction of six, and the sync read of the thread on the loop (``routes/runs.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from benchmarks.harness import GRAPH_AGENT, LANGGRAPH, Row, Settings
from benchmarks.postgres import DSN, fresh_schema, unavailable

ASSISTANT = "chain"
BODY = {"assistant_id": ASSISTANT, "input": {"x": 0}}
ANSWER = {"x": 3}
CLIENTS = (10, 50)
CPU_TARGET_MS = {"sqlite": 1.5, "postgres": 4.0}
"""Issue 35's targets for the server's CPU time per durable run (PostgreSQL: its backends
included)."""

OURS = """\
from graph_agent import END, START, StateGraph


def chain() -> StateGraph:
    graph = StateGraph("chain")
    graph.add_node("first", lambda state: {"x": state["x"] + 1})
    graph.add_node("second", lambda state: {"x": state["x"] + 1})
    graph.add_node("third", lambda state: {"x": state["x"] + 1})
    graph.add_edge(START, "first").add_edge("first", "second")
    graph.add_edge("second", "third").add_edge("third", END)
    return graph
"""

THEIRS = """\
from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    x: int


builder = StateGraph(State)
builder.add_node("first", lambda state: {"x": state["x"] + 1})
builder.add_node("second", lambda state: {"x": state["x"] + 1})
builder.add_node("third", lambda state: {"x": state["x"] + 1})
builder.add_edge(START, "first")
builder.add_edge("first", "second")
builder.add_edge("second", "third")
builder.add_edge("third", END)
graph = builder.compile()
"""

LANGGRAPH_JSON = '{"dependencies": ["."], "graphs": {"chain": "./lg_chain.py:graph"}}\n'


@dataclass(frozen=True, kw_only=True)
class Sizes:
    """How many requests each measurement sends."""

    sequential: int  # sequential requests per round
    per_client: int  # requests per concurrent client
    rounds: int  # each server's turns; one sample of runs/s per client count in each


def sizes(settings: Settings) -> Sizes:
    if settings.quick:
        return Sizes(sequential=5, per_client=2, rounds=1)
    return Sizes(sequential=10, per_client=10, rounds=5)


@dataclass
class Figures:
    latencies_ms: list[float]
    runs_per_second: dict[int, list[float]]
    cpu_ms_per_run: dict[int, list[float]] = field(default_factory=dict)
    """CPU time per run while measuring runs/s (ours only): of the server's processes, and
    of PostgreSQL's backends serving them."""
    backend_ms_per_run: dict[int, list[float]] = field(default_factory=dict)
    """The part of :attr:`cpu_ms_per_run` spent by PostgreSQL's backends."""


@dataclass(frozen=True)
class _Served:
    url: str
    pid: int  # of the server, leader of its process group
    application: str | None = None  # PostgreSQL's application_name of its connections


def langgraph_cli_available() -> bool:
    """True when ``langgraph dev`` can run here: ``pip install "langgraph-cli[inmem]"`` in this
    venv, or in a venv of its own whose ``langgraph`` executable is on ``PATH`` or named by
    ``GRAPH_AGENT_BENCH_LANGGRAPH`` (its pins may clash with the dev extra's)."""
    import importlib.util

    executable = _langgraph_executable()
    if executable is None:
        return False
    beside = Path(executable).parent == Path(sys.executable).parent
    return not beside or importlib.util.find_spec("langgraph_api") is not None


def run(
    settings: Settings,
    *,
    with_postgres: bool = True,
    with_sqlite: bool = True,
    clients: tuple[int, ...] = CLIENTS,
    on_threads: bool = False,
) -> list[Row]:
    """Every server's figures as rows (graph_agent's PostgreSQL figures in rows of their own)."""
    size = sizes(settings)
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as folder, contextlib.ExitStack() as up:
        root = Path(folder)
        (root / "ga_chain.py").write_text(OURS)
        (root / "lg_chain.py").write_text(THEIRS)
        (root / "langgraph.json").write_text(LANGGRAPH_JSON)
        ours: dict[str, _Served] = {}
        if with_sqlite:
            ours["sqlite"] = up.enter_context(_ours(root, ["--db", str(root / "serve.db")]))
        if with_postgres:
            reason = unavailable()
            if reason:
                print(f"graph-agent serve --postgres skipped: {reason}", file=sys.stderr)
            else:
                from psycopg.conninfo import conninfo_to_dict

                dsn = up.enter_context(fresh_schema("bench_serve"))
                application = str(conninfo_to_dict(dsn)["application_name"])
                served = _ours(root, ["--postgres", dsn, "--workers", "2"], application)
                ours["postgres"] = up.enter_context(served)
        urls = {name: served.url for name, served in ours.items()}
        if settings.with_langgraph:
            if not langgraph_cli_available():
                print(
                    "LangGraph Server skipped: pip install 'langgraph-cli[inmem]'", file=sys.stderr
                )
            else:
                urls["langgraph"] = up.enter_context(_langgraph_dev(root))
        servers = asyncio.run(_measure(urls, size, clients, ours, on_threads))
    return _rows(servers, clients, " on threads" if on_threads else "")


def _rows(servers: dict[str, Figures], clients: tuple[int, ...], runs: str = "") -> list[Row]:
    theirs = servers.get("langgraph")
    rows = []
    for name, label, cpu_target in (
        ("sqlite", "SQLite", CPU_TARGET_MS["sqlite"]),
        ("postgres", "PostgreSQL, 2 workers", CPU_TARGET_MS["postgres"]),
    ):
        if name not in servers:
            continue
        mine = servers[name]
        latency = {GRAPH_AGENT: mine.latencies_ms}
        if theirs is not None:
            latency[LANGGRAPH] = theirs.latencies_ms
        rows.append(
            Row(
                key=f"Serve runs/wait{runs}, one client ({label})",
                unit="ms per run (the median is the p50)",
                samples=latency,
                target="p50 ≤ 1/20 of LangGraph Server's",
                extra={"p90_ms": _percentile(mine.latencies_ms, 0.9)},
            )
        )
        for count in clients:
            throughput = {GRAPH_AGENT: mine.runs_per_second[count]}
            if theirs is not None:
                throughput[LANGGRAPH] = theirs.runs_per_second[count]
            extra = {}
            cpu = sorted(mine.cpu_ms_per_run.get(count, []))
            if cpu:
                extra["cpu_ms_per_run_median"] = round(cpu[len(cpu) // 2], 2)
                extra["cpu_ms_per_run_target"] = cpu_target
            backends = sorted(mine.backend_ms_per_run.get(count, []))
            if name == "postgres" and backends:
                extra["of_which_postgres_backends_ms"] = round(backends[len(backends) // 2], 2)
            rows.append(
                Row(
                    key=f"Serve runs/wait{runs}, {count} clients ({label})",
                    unit="runs/s",
                    samples=throughput,
                    target="≥ ×5 LangGraph Server's",
                    extra=extra,
                )
            )
    return rows


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def _measure(
    urls: dict[str, str],
    size: Sizes,
    clients: tuple[int, ...],
    ours: dict[str, _Served],
    on_threads: bool = False,
) -> dict[str, Figures]:
    """Every server measured in turns, one round of each measurement after another, so that a
    neighbour's load on the shared machine slows them alike (as :func:`timed_together` does)."""
    figures = {name: Figures([], {count: [] for count in clients}) for name in urls}
    for url in urls.values():
        async with httpx.AsyncClient(base_url=url, timeout=120) as client:
            path = await _path(client, on_threads)
            for _ in range(3):  # warm-up: imports, connections, caches
                await _one(client, path)
    for _ in range(size.rounds):
        for name, url in urls.items():
            async with httpx.AsyncClient(base_url=url, timeout=120) as client:
                path = await _path(client, on_threads)
                for _ in range(size.sequential):
                    started = time.perf_counter()
                    await _one(client, path)
                    figures[name].latencies_ms.append((time.perf_counter() - started) * 1000)
        for count in clients:
            for name, url in urls.items():
                served = ours.get(name)
                before = _cpu_split(served) if served is not None else (0.0, 0.0)
                try:
                    rate = await _runs_per_second(url, count, size.per_client, on_threads)
                except httpx.HTTPError as exc:  # which server dropped a request
                    raise RuntimeError(f"{name} at {count} clients: {exc!r}") from exc
                figures[name].runs_per_second[count].append(rate)
                if served is not None:
                    after = _cpu_split(served)
                    runs = count * (size.per_client + 1)  # + connecting's
                    per_run = (sum(after) - sum(before)) * 1000 / runs
                    figures[name].cpu_ms_per_run.setdefault(count, []).append(per_run)
                    backends = (after[1] - before[1]) * 1000 / runs
                    figures[name].backend_ms_per_run.setdefault(count, []).append(backends)
    return figures


async def _runs_per_second(
    url: str, clients: int, per_client: int, on_threads: bool = False
) -> float:
    """``clients`` clients, each with its own connection, sending ``per_client`` runs in turn."""
    sessions = [httpx.AsyncClient(base_url=url, timeout=300) for _ in range(clients)]
    try:
        paths = await asyncio.gather(*(_path(session, on_threads) for session in sessions))
        await asyncio.gather(*map(_one, sessions, paths))  # connect everyone

        async def client(session: httpx.AsyncClient, path: str) -> None:
            for _ in range(per_client):
                await _one(session, path)

        started = time.perf_counter()
        await asyncio.gather(*map(client, sessions, paths))
        return clients * per_client / (time.perf_counter() - started)
    finally:
        await asyncio.gather(*(session.aclose() for session in sessions))


async def _path(client: httpx.AsyncClient, on_thread: bool) -> str:
    """Where a client sends its runs: stateless, or on a thread of its own (made here)."""
    if not on_thread:
        return "/runs/wait"
    response = await client.post("/threads", json={})
    return f"/threads/{response.json()['thread_id']}/runs/wait"


async def _one(client: httpx.AsyncClient, path: str) -> None:
    for _ in range(2):  # langgraph dev drops a connection now and then at 50 clients
        try:
            response = await client.post(path, json=BODY)
            break
        except httpx.TransportError:
            continue
    else:
        response = await client.post(path, json=BODY)
    if response.status_code != 200 or response.json() != ANSWER:
        raise RuntimeError(f"runs/wait answered {response.status_code}: {response.text[:300]}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _cpu_seconds(served: _Served) -> float:
    """CPU time used so far by the server's process group and by the PostgreSQL backends
    connected as its ``application_name`` (read from ``/proc``; 0 where it is unreadable)."""
    return sum(_cpu_split(served))


def _cpu_split(served: _Served) -> tuple[float, float]:
    """:func:`_cpu_seconds` in two: the server's processes, and its PostgreSQL backends."""
    pids = set()
    proc = Path("/proc")
    for entry in proc.iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int(_stat(entry.name)[2]) == served.pid:  # its process group
                    pids.add(entry.name)
    backends: set[str] = set()
    if served.application is not None:
        import psycopg

        with psycopg.connect(DSN, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s",
                (served.application,),
            ).fetchall()
        backends = {str(row[0]) for row in rows}
    return _cpu_of(pids), _cpu_of(backends)


def _cpu_of(pids: set[str]) -> float:
    ticks = 0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = _stat(pid)
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def _stat(pid: str) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command's name (state is the first)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


@contextlib.contextmanager
def _ours(root: Path, options: list[str], application: str | None = None) -> Iterator[_Served]:
    port = _free_port()
    command = [sys.executable, "-m", "graph_agent", "serve", "ga_chain.py:chain"]
    command += ["--port", str(port), *options]
    log = (root / f"ours-{port}.log").open("w+")
    # its own process group: with --workers 2 the server starts a second worker process, which
    # a SIGTERM of the server alone leaves running (uvicorn re-raises the signal, so the server
    # dies before it stops its helpers)
    process = subprocess.Popen(
        command, cwd=root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, log, 30)
        yield _Served(url, process.pid, application)
    finally:
        _stop(process)
        log.close()


@contextlib.contextmanager
def _langgraph_dev(root: Path) -> Iterator[str]:
    executable = _langgraph_executable()
    assert executable is not None
    wanted = _free_port()
    command = [executable, "dev", "--no-browser", "--no-reload", "--port", str(wanted)]
    env = {**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false"}
    log = (root / "langgraph.log").open("w+")
    process = subprocess.Popen(
        command, cwd=root, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    try:
        # the port it really listens on: its log says "API: http://127.0.0.1:PORT"
        deadline = time.monotonic() + 90
        port = None
        while port is None and time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"langgraph dev exited: {_tail(log)}")
            log.seek(0)
            text = re.sub(r"\x1b\[[0-9;]*m", "", log.read())  # its colours
            found = re.search(r"API: http://[\w.]+:(\d+)", text)
            port = int(found.group(1)) if found else None
            time.sleep(0.1)
        if port is None:
            raise RuntimeError(f"langgraph dev did not say its port: {_tail(log)}")
        url = f"http://127.0.0.1:{port}"
        _wait_ready(url, process, log, 60)
        yield url
    finally:
        _stop(process)
        log.close()


def _langgraph_executable() -> str | None:
    named = os.environ.get("GRAPH_AGENT_BENCH_LANGGRAPH")
    if named:
        return named if Path(named).exists() else None
    beside = Path(sys.executable).with_name("langgraph")
    return str(beside) if beside.exists() else shutil.which("langgraph")


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: object, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server at {url} exited: {_tail(log)}")
        try:
            if httpx.get(f"{url}/ok", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the server at {url} did not start: {_tail(log)}")


def _tail(log: object) -> str:
    assert hasattr(log, "seek") and hasattr(log, "read")
    log.seek(0)
    return str(log.read())[-2000:]


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the server and every process it started (its process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(20)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # whatever is left of the group
    process.wait(10)


def main(argv: list[str] | None = None) -> int:
    from benchmarks import report

    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few requests (for CI)")
    parser.add_argument(
        "--without-langgraph", action="store_true", help="leave LangGraph Server out"
    )
    parser.add_argument(
        "--without-postgres", action="store_true", help="leave graph-agent serve --postgres out"
    )
    parser.add_argument(
        "--without-sqlite", action="store_true", help="leave graph-agent serve on SQLite out"
    )
    parser.add_argument(
        "--on-threads",
        action="store_true",
        help="each client sends its runs on a thread of its own (durable runs: checkpoints and "
        "records stored) instead of stateless runs",
    )
    args = parser.parse_args(argv)
    settings = Settings(
        quick=args.quick,
        with_langgraph=not args.without_langgraph and langgraph_cli_available(),
    )
    started = time.perf_counter()
    rows = run(
        settings,
        with_postgres=not args.without_postgres,
        with_sqlite=not args.without_sqlite,
        on_threads=args.on_threads,
    )
    print(report.as_text(rows, settings))
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
