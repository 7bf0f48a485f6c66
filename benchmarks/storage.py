"""Storage: bytes a SQLite saver keeps per run of the ReAct workload, and commits per step.

One run per T (the bytes are deterministic up to id lengths) on a fresh thread. graph_agent
counts with ``saver.stored_bytes(thread_id)`` (headers, blobs, pending writes); for LangGraph the
same is summed from its tables (checkpoint and metadata blobs, pending write values). The growth
exponent is ``log(B_large / B_medium) / log(large / medium)``: 1 is linear, 2 quadratic.

Commits are counted with SQLite's statement trace. Per one-node superstep they are measured as
a difference, ``(commits(20 iterations) - commits(10 iterations)) / 20`` (ten iterations add
twenty supersteps), leaving out what a run pays once (its lease, its input checkpoint).
"""

from __future__ import annotations

import math
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import react
from benchmarks.harness import GRAPH_AGENT, LANGGRAPH, Row, Settings, fresh_thread
from graph_agent import RunnableConfig


def sizes(settings: Settings) -> tuple[int, int, int]:
    """Iterations per run: small, medium, large (large = 4 x medium)."""
    return (10, 20, 80) if settings.quick else (10, 50, 200)


def run(settings: Settings) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="graph-agent-bench-") as name:
        folder = Path(name)
        implementations: dict[str, _SqliteRuns] = {GRAPH_AGENT: _GraphAgentRuns(folder)}
        if settings.with_langgraph:
            implementations[LANGGRAPH] = _LangGraphRuns(folder)
        small, medium, large = sizes(settings)
        stored = {
            name: {t: runs.stored_bytes(t) for t in (small, medium, large)}
            for name, runs in implementations.items()
        }
        commits = {name: runs.commits() for name, runs in implementations.items()}
    rows = [
        Row(
            key=f"Storage, SQLite, T={t}",
            unit="bytes stored per run",
            samples={name: [float(by_t[t])] for name, by_t in stored.items()},
            target=f"≤ 1/20 of LangGraph at T={large}" if t == large else "",
        )
        for t in (small, medium, large)
    ]
    rows.append(
        Row(
            key="Storage growth exponent",
            unit=f"log(B{large}/B{medium}) / log {large // medium}",
            samples={
                name: [math.log(by_t[large] / by_t[medium]) / math.log(large / medium)]
                for name, by_t in stored.items()
            },
            target="≤ 1.1 (1 = linear, 2 = quadratic)",
        )
    )
    rows.append(
        Row(
            key="SQLite commits per one-node superstep",
            unit="commits",
            samples={name: [per_step] for name, (per_step, _) in commits.items()},
            target="≤ 1",
            extra={"commits per run of 10 iterations": {n: c for n, (_, c) in commits.items()}},
        )
    )
    return rows


class _SqliteRuns:
    """Runs of the ReAct workload on one SQLite database, counting its commits."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        self.committed = 0
        connection.set_trace_callback(self._trace)

    def _trace(self, statement: str) -> None:
        if statement.lstrip().upper().startswith("COMMIT"):
            self.committed += 1

    def run(self, iterations: int, thread: str) -> None:
        raise NotImplementedError

    def bytes_of(self, thread: str) -> int:
        raise NotImplementedError

    def stored_bytes(self, iterations: int) -> int:
        thread = fresh_thread()
        self.run(iterations, thread)
        return self.bytes_of(thread)

    def commits(self) -> tuple[float, int]:
        """Commits per superstep (as a difference) and commits of one 10-iteration run."""
        counts = []
        for iterations in (react.ITERATIONS, 2 * react.ITERATIONS):
            before = self.committed
            self.run(iterations, fresh_thread())
            counts.append(self.committed - before)
        return (counts[1] - counts[0]) / (2 * react.ITERATIONS), counts[0]


class _GraphAgentRuns(_SqliteRuns):
    def __init__(self, folder: Path) -> None:
        self.saver = react.graph_agent_saver("sqlite", folder)
        self.apps: dict[int, Any] = {}
        super().__init__(self.saver._conn)  # the saver's own connection, only to count commits

    def run(self, iterations: int, thread: str) -> None:
        app = _cached(
            self.apps, iterations, lambda: react.graph_agent_react(iterations, self.saver)
        )
        config = RunnableConfig(thread_id=thread, max_steps=react.max_steps(iterations))
        app.invoke({"messages": react.history(0)}, config)

    def bytes_of(self, thread: str) -> int:
        return int(self.saver.stored_bytes(thread))


class _LangGraphRuns(_SqliteRuns):
    def __init__(self, folder: Path) -> None:
        self.saver = react.langgraph_saver("sqlite", folder)
        self.apps: dict[int, Any] = {}
        super().__init__(self.saver.conn)

    def run(self, iterations: int, thread: str) -> None:
        app = _cached(self.apps, iterations, lambda: react.langgraph_react(iterations, self.saver))
        config = {
            "configurable": {"thread_id": thread},
            "recursion_limit": react.max_steps(iterations),
        }
        app.invoke({"messages": react.dict_history(0)}, config)

    def bytes_of(self, thread: str) -> int:
        total = 0
        for sql in (
            "SELECT SUM(LENGTH(checkpoint) + LENGTH(metadata)) FROM checkpoints "
            "WHERE thread_id = ?",
            "SELECT SUM(LENGTH(value)) FROM writes WHERE thread_id = ?",
        ):
            total += self.connection.execute(sql, (thread,)).fetchone()[0] or 0
        return total


def _cached(apps: dict[int, Any], iterations: int, build: Callable[[], Any]) -> Any:
    if iterations not in apps:
        apps[iterations] = build()
    return apps[iterations]
