"""Served runs: ``graph-agent serve`` against LangGraph Server on the same 3-node chain (issue 20).

Each server runs as its own process on 127.0.0.1; all are started and warmed up, then measured
in turns, round after round (one server at a time), and answer the same HTTP requests: a stateless
``POST /runs/wait`` of a chain of three nodes that each add one to ``x``. Measured:

- the latency of one ``runs/wait`` at one client (sequential requests, 50 per server; the
  median is the p50);
- runs per second with 10 and with 50 concurrent clients (asyncio, each client on one
  keep-alive HTTP/1.1 connection of its own, sending its next request as soon as the last one
  is answered), and the CPU time each run cost: ``cpu_ms_per_run_median``, our server's
  processes and the PostgreSQL backends they are connected to, read from ``/proc`` (steadier
  than runs/s on a shared machine); ``langgraph_server_cpu_ms_per_run``, LangGraph Server's
  processes; ``client_cpu_ms_per_run``, this process's (the clients').

The clients run on the same cores as the servers, so what they spend is taken from the
servers. They use :mod:`benchmarks.lean_http` (about 0.3 ms of CPU per run); with
``--client httpx`` (one ``httpx.AsyncClient`` per client, what this benchmark used before) the
clients cost 2.4-2.9 ms per run, half of what our server spends on a durable run, and our
runs/s at 10 clients read 63 against 86-121 with the lean clients (SQLite, on threads, a
machine loaded by other work). Every server is measured with the same client.

With ``--on-threads`` each client sends its runs on a thread of its own
(``/threads/{id}/runs/wait``): durable runs, whose checkpoints and records are stored, where a
stateless run that deletes its thread runs in memory (see ``graph_agent.serve.runs``).

Servers: ``graph-agent serve`` on the SQLite default; ``graph-agent serve --postgres DSN
--workers 2`` (two processes, each serving HTTP on the port and running the runs it receives;
a fresh schema, dropped afterwards) when PostgreSQL answers at ``GRAPH_AGENT_BENCH_POSTGRES``
(default the test server); and LangGraph Server (``langgraph dev --no-browser --no-reload``: its
in-memory runtime on its defaults; ``--n-jobs-per-worker 10`` made it slower here, 10 runs/s at
10 clients against 37-56) when ``langgraph-cli[inmem]`` is installed. Its pins clash with the
dev extra's, so it may live in a venv of its own, named by ``GRAPH_AGENT_BENCH_LANGGRAPH`` (the
path of its ``langgraph`` executable; else one beside this Python or on ``PATH``)::

    python3 -m venv ~/lgvenv
    ~/lgvenv/bin/pip install 'langgraph-cli[inmem]' langgraph
    GRAPH_AGENT_BENCH_LANGGRAPH=~/lgvenv/bin/langgraph python -m benchmarks.serve --on-threads

LangGraph Server is started on a free port (``--port``: 2024, its default, may be taken) and
reached on the port its log says it took. ``langgraph dev`` runs one job at a time and keeps
every run in memory, and here it slowed down as they piled up: on a 2-core machine loaded by other
work (load 10-15) it finished 320 runs a minute at first and 15 after 3,000 runs, when its
queue held runs for minutes; five rounds of all three then took over half an hour, one round
(``--rounds 1``) less than four minutes. Its rows list its runs/s round by round, and the
targets compare ours with its best round too. So this is not in ``python -m benchmarks``; run
it alone with ``python -m benchmarks.serve [--quick] [--without-langgraph] [--without-postgres]
[--without-sqlite] [--on-threads] [--client lean|httpx] [--baseline TREE] [--rounds N]
[--cpus LIST]``.
Its last lines give issue 35's targets: our runs/s over LangGraph Server's per backend and
client count (≥ ×5), and our CPU per run (≤ 1.5 ms SQLite, ≤ 4 ms PostgreSQL with its
backends).

``--baseline TREE`` serves the ``graph_agent`` of another source tree (a ``git worktree`` of an
older commit) on SQLite beside ours, in the same turns: how "new features cost nothing when
unused" is checked, e.g. ``git worktree add /tmp/old a3420de`` and ``python -m
benchmarks.serve --on-threads --without-langgraph --without-postgres --baseline /tmp/old``.

Where a durable run's server CPU goes (``--on-threads``, SQLite; issue 35's target: 1.5 ms)
------------------------------------------------------------------------------------------
First, the cores. On an idle 2-core VM a durable run cost 2.2-2.5 ms (440 runs/s at 10 clients),
and 0.9-1.1 ms (950 runs/s) with the server kept on one CPU (``--cpus``, or ``taskset``): its
threads, spread by the kernel over both cores, hand each run to each other several times and
release the GIL at each SQLite call and socket write, so a thread woken on the other core waits
for the lock: 80 context switches per run against 13 on one core (``/proc/PID/task/*/status``).
The lone nodes of a run now run in the thread that reads its stream (no pool thread per node:
44 switches, 2.0 ms spread out). The same machine loaded by other work (one core's worth for the
server, in effect) gave 1.1-1.4 ms, which is why the figures below, measured so, differ.

About 4 ms per run on the shared 2-core VM (5.5 ms before issue 35): a bit under half on the
event loop's thread, the rest on worker threads (``/proc/PID/task``). The loop's half, about
1.9 ms (2.2 ms before its route table and the collector's settings), by a ``cProfile`` of its
thread's CPU time (``time.thread_time``):

- HTTP, 20%: uvicorn and httptools (parsing, writing), Starlette's error and exception
  middlewares and responses, the guard and body-limit middlewares. The API's routes are
  looked up in a table by method and path shape (``routes.RouteTable``), not matched one
  regular expression after another, and their endpoint is called with the body the limit
  already read; a server without keys has no API-key layer;
- the runs and routes' own code, 20%: the run's task, its record, its request and thread;
- the run's events and JSON, 16%: ``RunEvents`` turning each ``values`` output into an event,
  JSON encoding (``json`` of the standard library: orjson would save a few percent of the
  total at most, and escapes lone surrogates differently), the result;
- the records, 15%: reading the thread's record, then two SQLite transactions per run (the
  run ``running`` and its thread busy; the run's events, one ``executemany``, with its end
  and the thread idle), each a WAL commit; the thread's row is rewritten only when the run
  changes its metadata;
- asyncio and the thread hop's wake-ups 9% (a run's outputs that come while the loop is busy
  are handed over in one wake-up), the request's checks (pydantic ``RunCreate``, assistant,
  input keys) 5%, the engine's loop side 1%.

``graph-agent serve`` freezes what it loaded before serving (``gc.freeze``) and collects less
often (thresholds 10,000/20/10): with Python's 700/10/10 the collector's passes over the
finished runs kept in memory cost about 0.2 ms per run, and a full pass some 100 ms now and
then. What is left on the loop is spread thin: the records' commits (SQLite's own C, about
0.3 ms), uvicorn, and a few dozen small Python calls per run each.

The worker threads' half is the graph itself, read with its sync ``stream`` in one thread
(``CompiledGraph.runs_sync``: a graph of plain functions; ``astream`` on the loop cost
twice as much CPU, a thread hop per node and per saver call): the SQLite checkpoint saver
about 0.85 ms in five transactions (the lease taken in the one that reads the thread's newest
checkpoint, ``SqliteSaver.acquire_loading``; the input's and each step's checkpoint written,
each its own commit as durability requires, at ~40 µs of SQLite's own work per commit; the
lease's row deleted in the last one, ``put_releasing``), the engine 0.3-0.4 ms (the three
nodes themselves ~20 µs), the pool's dispatch of the nodes (each on a pool thread, so that a
cancel stops it at once) about 0.35 ms. A micro-benchmark of that path (the stream made on
one thread and read on a pool thread, as ``serve/runs.py`` does) took 2.1 ms of CPU per run
with seven transactions and 1.95 with five, in the same process on the loaded VM (1.7 and
1.5 at best); served (10 and 50 clients), two back-to-back pairs there gave 5.0 and 5.2 ms
before, 4.55 and 4.56 after, then 5.4 and 6.1 before, 5.45 and 5.3 after: mostly noise.
What is left: the dispatch (a node run inline in the reading thread would save its 0.35 ms,
but a cancel would then wait for the running node to return), the load at a run's start
(~0.1 ms decoding what the last run wrote).

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
import dataclasses
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import httpx

from benchmarks.harness import GRAPH_AGENT, LANGGRAPH, Row, Settings
from benchmarks.lean_http import Connection
from benchmarks.postgres import DSN, fresh_schema, unavailable

ASSISTANT = "chain"
BODY = {"assistant_id": ASSISTANT, "input": {"x": 0}}
ANSWER = {"x": 3}
CLIENTS = (10, 50)
CPU_TARGET_MS = {"sqlite": 1.5, "postgres": 4.0}
"""Issue 35's targets for the server's CPU time per durable run (PostgreSQL: its backends
included)."""
THROUGHPUT_TARGET = 5.0
"""Issue 35's target for runs/s: at least five times LangGraph Server's, at every client count."""
LABELS = {"sqlite": "SQLite", "baseline": "SQLite, --baseline", "postgres": "PostgreSQL, 2 workers"}

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
    client_ms_per_run: dict[int, list[float]] = field(default_factory=dict)
    """CPU time per run of the benchmark's own process (the clients) while measuring runs/s:
    it shares the two cores with the servers."""


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
    client: str = "lean",
    baseline: Path | None = None,
    rounds: int | None = None,
    cpus: str | None = None,
) -> list[Row]:
    """Every server's figures as rows (graph_agent's PostgreSQL figures in rows of their own);
    ``client`` is ``lean`` (:mod:`benchmarks.lean_http`) or ``httpx``, the same for every
    server; ``baseline``, a source tree whose server is measured beside ours on SQLite;
    ``rounds``, each server's turns (default :func:`sizes`'); ``cpus``, ``graph-agent serve
    --cpus`` for ours, and LangGraph Server's process kept on the first CPU of it."""
    size = sizes(settings)
    if rounds is not None:
        size = dataclasses.replace(size, rounds=rounds)
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as folder, contextlib.ExitStack() as up:
        root = Path(folder)
        (root / "ga_chain.py").write_text(OURS)
        (root / "lg_chain.py").write_text(THEIRS)
        (root / "langgraph.json").write_text(LANGGRAPH_JSON)
        servers: dict[str, _Served] = {}
        pinned = ["--cpus", cpus] if cpus else []
        if with_sqlite:
            options = ["--db", str(root / "serve.db"), *pinned]
            servers["sqlite"] = up.enter_context(_ours(root, options))
        if baseline is not None:
            options = ["--db", str(root / "baseline.db")]  # an older tree may lack --cpus
            servers["baseline"] = up.enter_context(_ours(root, options, source=baseline))
        if with_postgres:
            reason = unavailable()
            if reason:
                print(f"graph-agent serve --postgres skipped: {reason}", file=sys.stderr)
            else:
                from psycopg.conninfo import conninfo_to_dict

                dsn = up.enter_context(fresh_schema("bench_serve"))
                application = str(conninfo_to_dict(dsn)["application_name"])
                options = ["--postgres", dsn, "--workers", "2", *pinned]
                served = _ours(root, options, application)
                servers["postgres"] = up.enter_context(served)
        if settings.with_langgraph:
            if not langgraph_cli_available():
                print(
                    "LangGraph Server skipped: pip install 'langgraph-cli[inmem]' (here, or in a "
                    "venv of its own named by GRAPH_AGENT_BENCH_LANGGRAPH)",
                    file=sys.stderr,
                )
            else:
                first = int(cpus.split(",")[0].split("-")[0]) if cpus else None
                servers["langgraph"] = up.enter_context(_langgraph_dev(root, first))
        connect = CLIENT_KINDS[client]
        figures = asyncio.run(_measure(servers, size, clients, connect, on_threads))
    return _rows(figures, clients, " on threads" if on_threads else "")


def _rows(servers: dict[str, Figures], clients: tuple[int, ...], runs: str = "") -> list[Row]:
    theirs = servers.get("langgraph")
    rows = []
    for name, label in LABELS.items():
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
            extra: dict[str, object] = {}
            cpu = mine.cpu_ms_per_run.get(count, [])
            if cpu:
                extra["cpu_ms_per_run_median"] = round(_median(cpu), 2)
                extra["cpu_ms_per_run_target"] = CPU_TARGET_MS.get(name, CPU_TARGET_MS["sqlite"])
            backends = mine.backend_ms_per_run.get(count, [])
            if name == "postgres" and backends:
                extra["of_which_postgres_backends_ms"] = round(_median(backends), 2)
            client_cpu = {GRAPH_AGENT: mine.client_ms_per_run.get(count, [])}
            if theirs is not None:
                throughput[LANGGRAPH] = theirs.runs_per_second[count]
                rounds = theirs.runs_per_second[count]
                extra["langgraph_runs_per_second_by_round"] = [round(rate, 1) for rate in rounds]
                client_cpu[LANGGRAPH] = theirs.client_ms_per_run.get(count, [])
                server = theirs.cpu_ms_per_run.get(count, [])
                if server:
                    extra["langgraph_server_cpu_ms_per_run"] = round(_median(server), 2)
            extra["client_cpu_ms_per_run"] = {
                who: round(_median(values), 2) for who, values in client_cpu.items() if values
            }
            rows.append(
                Row(
                    key=f"Serve runs/wait{runs}, {count} clients ({label})",
                    unit="runs/s",
                    samples=throughput,
                    target=f"≥ ×{THROUGHPUT_TARGET:g} LangGraph Server's",
                    extra=extra,
                )
            )
    return rows


def targets(rows: list[Row]) -> list[str]:
    """Issue 35's targets, one line per backend and client count, from the rows of one run:
    ours / LangGraph Server's runs/s (≥ ×5; medians, and ours over LangGraph's best round:
    ``langgraph dev`` keeps every run in memory and slows down as they pile up, so its later
    rounds are its slowest) and our server's CPU per run (≤ 1.5 ms SQLite, ≤ 4 ms PostgreSQL
    with its backends)."""
    lines = []
    for row in rows:
        if row.unit != "runs/s":
            continue
        label = row.key.split("wait", 1)[1].strip()
        text = f"{label:<48}"
        mine = _median(row.samples[GRAPH_AGENT])
        if LANGGRAPH in row.samples:
            theirs = row.samples[LANGGRAPH]
            ratio, against_best = mine / _median(theirs), mine / max(theirs)
            met = "met" if ratio >= THROUGHPUT_TARGET else "NOT met"
            text += f" runs/s {mine:6.1f} = ×{ratio:5.2f} LangGraph's ({met:>7};"
            text += f" ×{against_best:.2f} its best round)"
        else:
            text += f" runs/s {mine:6.1f} (no LangGraph Server to compare)"
        cpu, bound = row.extra.get("cpu_ms_per_run_median"), row.extra.get("cpu_ms_per_run_target")
        if isinstance(cpu, float) and isinstance(bound, float):
            met = "met" if cpu <= bound else "NOT met"
            text += f"   CPU {cpu:5.2f} ms/run, ≤ {bound:g} ({met})"
        lines.append(text)
    return lines


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class _Client(Protocol):
    """One client's connection: the lean one or httpx's, the same for every server."""

    async def post(self, path: str, body: object) -> tuple[int, bytes]: ...

    async def aclose(self) -> None: ...


class _Httpx:
    """An ``httpx.AsyncClient`` as a :class:`_Client` (``--client httpx``: what the benchmark
    used before; it costs the shared cores more CPU per request than the lean client)."""

    def __init__(self, url: str, timeout: float = 300) -> None:
        self._client = httpx.AsyncClient(base_url=url, timeout=timeout)

    async def post(self, path: str, body: object) -> tuple[int, bytes]:
        for _ in range(2):  # langgraph dev drops a connection now and then at 50 clients
            try:
                response = await self._client.post(path, json=body)
                break
            except httpx.TransportError:
                continue
        else:
            response = await self._client.post(path, json=body)
        return response.status_code, response.content

    async def aclose(self) -> None:
        await self._client.aclose()


Connect = Callable[[str, float], _Client]
"""Opens one client's connection to a server's URL, with a timeout per request in seconds."""
CLIENT_KINDS: dict[str, Connect] = {"lean": Connection, "httpx": _Httpx}


async def _measure(
    servers: dict[str, _Served],
    size: Sizes,
    clients: tuple[int, ...],
    connect: Connect = Connection,
    on_threads: bool = False,
) -> dict[str, Figures]:
    """Every server measured in turns, one round of each measurement after another, so that a
    neighbour's load on the shared machine slows them alike (as :func:`timed_together` does)."""
    figures = {name: Figures([], {count: [] for count in clients}) for name in servers}
    for served in servers.values():
        client = connect(served.url, 120)
        try:
            path = await _path(client, on_threads)
            for _ in range(3):  # warm-up: imports, connections, caches
                await _one(client, path)
        finally:
            await client.aclose()
    for _ in range(size.rounds):
        for name, served in servers.items():
            client = connect(served.url, 120)
            try:
                path = await _path(client, on_threads)
                for _ in range(size.sequential):
                    started = time.perf_counter()
                    await _one(client, path)
                    figures[name].latencies_ms.append((time.perf_counter() - started) * 1000)
            finally:
                await client.aclose()
        for count in clients:
            for name, served in servers.items():
                sample = _throughput(figures[name], name, served, connect, count, size, on_threads)
                await sample
    return figures


async def _throughput(
    figures: Figures,
    name: str,
    served: _Served,
    connect: Connect,
    count: int,
    size: Sizes,
    on_threads: bool,
) -> None:
    """One sample of runs/s at ``count`` clients, with the CPU time each run cost the server
    (its process group, and its PostgreSQL backends) and the clients (this process)."""
    before = _cpu_split(served)
    try:
        rate, client_seconds = await _runs_per_second(
            served.url, count, size.per_client, connect, on_threads
        )
    except (httpx.HTTPError, ConnectionError, TimeoutError) as exc:  # which server failed
        raise RuntimeError(f"{name} at {count} clients: {exc!r}") from exc
    after = _cpu_split(served)
    figures.runs_per_second[count].append(rate)
    runs = count * (size.per_client + 1)  # + connecting's
    figures.cpu_ms_per_run.setdefault(count, []).append((sum(after) - sum(before)) * 1000 / runs)
    figures.backend_ms_per_run.setdefault(count, []).append((after[1] - before[1]) * 1000 / runs)
    timed = count * size.per_client
    figures.client_ms_per_run.setdefault(count, []).append(client_seconds * 1000 / timed)


async def _runs_per_second(
    url: str,
    clients: int,
    per_client: int,
    connect: Connect = Connection,
    on_threads: bool = False,
) -> tuple[float, float]:
    """``clients`` clients, each with its own connection, sending ``per_client`` runs in turn:
    runs per second, and the CPU seconds this process (the clients) spent meanwhile."""
    sessions = [connect(url, 900) for _ in range(clients)]  # langgraph dev queues for minutes
    try:
        paths = await asyncio.gather(*(_path(session, on_threads) for session in sessions))
        await asyncio.gather(*map(_one, sessions, paths))  # connect everyone

        async def client(session: _Client, path: str) -> None:
            for _ in range(per_client):
                await _one(session, path)

        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*map(client, sessions, paths))
        cpu, elapsed = time.process_time() - cpu, time.perf_counter() - started
        return clients * per_client / elapsed, cpu
    finally:
        await asyncio.gather(*(session.aclose() for session in sessions))


async def _path(client: _Client, on_thread: bool) -> str:
    """Where a client sends its runs: stateless, or on a thread of its own (made here)."""
    if not on_thread:
        return "/runs/wait"
    status, body = await client.post("/threads", {})
    if status != 200:
        raise RuntimeError(f"POST /threads answered {status}: {body[:300]!r}")
    return f"/threads/{json.loads(body)['thread_id']}/runs/wait"


async def _one(client: _Client, path: str) -> None:
    status, body = await client.post(path, BODY)
    if status != 200 or json.loads(body) != ANSWER:
        raise RuntimeError(f"runs/wait answered {status}: {body[:300]!r}")


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
def _ours(
    root: Path, options: list[str], application: str | None = None, source: Path | None = None
) -> Iterator[_Served]:
    """``graph-agent serve`` of this tree, or of the source tree at ``source`` (``--baseline``:
    its ``graph_agent`` first on ``PYTHONPATH``)."""
    port = _free_port()
    command = [sys.executable, "-m", "graph_agent", "serve", "ga_chain.py:chain"]
    command += ["--port", str(port), *options]
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(source), env.get("PYTHONPATH")]))
        _check_source(source, env)
    log = (root / f"ours-{port}.log").open("w+")
    # its own process group: with --workers 2 the server starts a second worker process, which
    # a SIGTERM of the server alone leaves running (uvicorn re-raises the signal, so the server
    # dies before it stops its helpers)
    process = subprocess.Popen(
        command, cwd=root, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, log, 30)
        yield _Served(url, process.pid, application)
    finally:
        _stop(process)
        log.close()


def _check_source(source: Path, env: dict[str, str]) -> None:
    """Fail unless ``graph_agent`` imports from ``source`` with ``env``."""
    script = "import graph_agent; print(graph_agent.__file__)"
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    where = Path(done.stdout.strip() or ".").resolve()
    if not where.is_relative_to(source.resolve()):
        raise RuntimeError(f"--baseline {source}: graph_agent imports from {where}: {done.stderr}")


@contextlib.contextmanager
def _langgraph_dev(root: Path, cpu: int | None = None) -> Iterator[_Served]:
    """``langgraph dev`` on a free port (on ``cpu``, with all it starts, when given)."""
    executable = _langgraph_executable()
    assert executable is not None
    wanted = _free_port()
    command = [executable, "dev", "--no-browser", "--no-reload", "--port", str(wanted)]
    env = {**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false"}
    if Path(executable).parent != Path(sys.executable).parent:  # a venv of its own
        for name in ("PYTHONPATH", "VIRTUAL_ENV"):  # this venv's, and this tree's packages
            env.pop(name, None)
    log = (root / "langgraph.log").open("w+")
    process = subprocess.Popen(
        command,
        cwd=root,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
        preexec_fn=None if cpu is None else lambda: os.sched_setaffinity(0, {cpu}),
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
        yield _Served(url, process.pid)
    finally:
        _stop(process)
        log.close()


def _langgraph_executable() -> str | None:
    named = os.environ.get("GRAPH_AGENT_BENCH_LANGGRAPH")
    if named:
        path = Path(named).expanduser()
        return str(path) if path.exists() else None
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
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="TREE",
        help="also serve graph_agent from the source tree TREE (e.g. a git worktree of an older "
        "commit) on SQLite, measured in the same turns",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        help="each server's turns (default 5, 1 with --quick): fewer for a shorter, rougher run",
    )
    parser.add_argument(
        "--client",
        choices=sorted(CLIENT_KINDS),
        default="lean",
        help="the clients' HTTP: a lean keep-alive connection (default) or httpx.AsyncClient",
    )
    parser.add_argument(
        "--cpus",
        metavar="LIST",
        help="graph-agent serve --cpus LIST for ours (each process on one CPU of it), and "
        "LangGraph Server's process on the first CPU of it",
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
        client=args.client,
        baseline=args.baseline,
        rounds=args.rounds,
        cpus=args.cpus,
    )
    print(report.as_text(rows, settings))
    if settings.with_langgraph:
        print(f"LangGraph Server: {_langgraph_version()} ({_langgraph_executable()} dev)")
    print(f"clients: {args.client}; client_cpu_ms_per_run is this process's CPU per run")
    if args.cpus:
        print(f"--cpus {args.cpus}: ours with graph-agent serve --cpus, LangGraph's on one CPU")
    if args.baseline is not None:
        print(f"--baseline: {args.baseline} at {_commit(args.baseline)}")
    print(f"\nIssue 35's targets{' (durable runs on threads)' if args.on_threads else ''}:")
    print("\n".join(f"  {line}" for line in targets(rows)))
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


def _commit(tree: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(tree), "log", "-1", "--format=%h %s"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip()[:80] or "an unknown commit"


def _langgraph_version() -> str:
    """langgraph-api's and langgraph's versions in the venv of ``langgraph dev``."""
    executable = _langgraph_executable()
    python = Path(executable).with_name("python") if executable else None
    if python is None or not python.exists():
        return "version unknown"
    script = (
        "from importlib.metadata import version as v; "
        "print(f\"langgraph-api {v('langgraph-api')}, langgraph {v('langgraph')}\")"
    )
    done = subprocess.run([str(python), "-c", script], capture_output=True, text=True, check=False)
    return done.stdout.strip() or "version unknown"


if __name__ == "__main__":
    sys.exit(main())
