"""PostgreSQL: checkpointed steps per second with 1, 2 and 4 worker processes on one database.

Each worker process has its own ``PostgresSaver`` (pool of 2) and runs its own threads through
a 20-step graph (one node per step, ``{"n": int}`` replaced), so every step commits one
checkpoint; nothing is shared but the database. Workers start together (a barrier after they
have connected and warmed up); the time runs until the last one finishes. Two node kinds:
an empty one (the figure is what the saver, psycopg and the server sustain: it grows with the
workers until the CPUs, the server's included, run out) and one that waits 5 ms like a model or
tool call (it should grow about linearly: nothing in the saver serialises runs, LESSONS 25).

Needs a PostgreSQL server: ``GRAPH_AGENT_BENCH_POSTGRES`` (a libpq DSN; default the test server,
``host=127.0.0.1 port=5432 dbname=test user=postgres``). Without one the workload is skipped.
Every measurement uses a fresh schema, dropped afterwards. Run it alone with
``python -m benchmarks.postgres [--quick]``.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

from benchmarks.harness import GRAPH_AGENT, Row, Settings

DSN = os.environ.get(
    "GRAPH_AGENT_BENCH_POSTGRES", "host=127.0.0.1 port=5432 dbname=test user=postgres"
)
STEPS = 20
WORKERS = (1, 2, 4)


NODE_SECONDS = 0.005  # the waiting node: a stand-in for a model or tool call


def run(settings: Settings) -> list[Row]:
    reason = unavailable()
    if reason:
        print(f"PostgreSQL workload skipped: {reason}", file=sys.stderr)
        return []
    repeat = 1 if settings.quick else 3
    rows = []
    for node_seconds, threads, label in (
        (0.0, 4 if settings.quick else 40, "empty node"),
        (NODE_SECONDS, 2 if settings.quick else 10, f"{NODE_SECONDS * 1000:.0f} ms node"),
    ):
        for workers in WORKERS:
            samples = [_steps_per_second(workers, threads, node_seconds) for _ in range(repeat)]
            plural = "es" if workers > 1 else ""
            rows.append(
                Row(
                    key=f"PostgreSQL saver, {label}, {workers} worker process{plural}",
                    unit="steps/s, all workers together (one checkpoint per step)",
                    samples={GRAPH_AGENT: samples},
                    target="grows with the workers (no global lock in the saver)",
                    ratios=False,
                    extra={"steps": workers * threads * STEPS, "CPUs": os.cpu_count()},
                )
            )
    return rows


def unavailable() -> str | None:
    """Why the benchmark's PostgreSQL cannot be used, or None when it answers."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install -e '.[postgres]')"
    try:
        psycopg.connect(DSN, connect_timeout=3).close()
    except psycopg.Error as exc:
        return f"cannot connect to {DSN!r}: {str(exc).strip().splitlines()[0]}"
    return None


@contextlib.contextmanager
def fresh_schema(prefix: str = "bench") -> Iterator[str]:
    """A new schema on the benchmark's server, dropped afterwards: a DSN whose tables live
    in it, and whose connections carry the schema's name as their ``application_name`` (so
    the benchmark can find their server processes)."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(DSN, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    try:
        yield make_conninfo(DSN, options=f"-c search_path={schema}", application_name=schema)
    finally:
        with psycopg.connect(DSN, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


def _steps_per_second(workers: int, threads: int, node_seconds: float) -> float:
    import psycopg
    from psycopg.conninfo import make_conninfo

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(DSN, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    dsn = make_conninfo(DSN, options=f"-c search_path={schema}")
    try:
        # workers fork from a clean server process (no threads, no connections) that has
        # imported graph_agent once
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["graph_agent", "graph_agent.checkpoint.postgres"])
        start = context.Barrier(workers + 1)
        done = context.Queue()
        processes = [
            context.Process(target=_worker, args=(dsn, number, threads, node_seconds, start, done))
            for number in range(workers)
        ]
        for process in processes:
            process.start()
        start.wait(timeout=60)
        started = time.perf_counter()
        for _ in processes:
            done.get(timeout=300)
        elapsed = time.perf_counter() - started
        for process in processes:
            process.join(timeout=60)
            if process.exitcode != 0:
                raise RuntimeError(f"a benchmark worker failed (exit code {process.exitcode})")
    finally:
        with psycopg.connect(DSN, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")
    return workers * threads * STEPS / elapsed


def _graph(saver: Any, node_seconds: float = 0.0) -> Any:
    from graph_agent import END, START, CompileConfig, StateGraph

    def step(state: Any) -> dict[str, int]:
        if node_seconds:
            time.sleep(node_seconds)
        return {"n": state["n"] + 1}

    g = StateGraph("steps")
    g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: "step" if s["n"] < STEPS else END)
    return g.compile(CompileConfig(saver=saver))


def _worker(
    dsn: str, number: int, threads: int, node_seconds: float, start: Any, done: Any
) -> None:
    from graph_agent import RunnableConfig
    from graph_agent.checkpoint.postgres import PostgresSaver

    with PostgresSaver(dsn, pool_size=2) as saver:
        app = _graph(saver, node_seconds)
        app.invoke({"n": 0}, RunnableConfig(thread_id=f"warmup-{number}"))
        start.wait(timeout=60)
        for i in range(threads):
            app.invoke({"n": 0}, RunnableConfig(thread_id=f"worker-{number}-{i}"))
    done.put(number)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.postgres", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny runs (for CI)")
    args = parser.parse_args(argv)
    for row in run(Settings(quick=args.quick, with_langgraph=False)):
        samples = sorted(row.samples[GRAPH_AGENT])
        print(
            f"{row.key}: {samples[len(samples) // 2]:,.0f} {row.unit}  (samples: "
            + ", ".join(f"{s:,.0f}" for s in samples)
            + ")"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
