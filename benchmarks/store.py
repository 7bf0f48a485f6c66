"""Long-term memory: put, get and search throughput of graph_agent's stores and LangGraph's, on
SQLite and PostgreSQL, for 10,000 items.

Both stores get the same items (100 users × 100 memories, each ``{"text", "n", "kind"}`` under
``("users", "u<k>")``), one call per operation, the way an agent's tools and hooks use a store:

- **put**: 10,000 ``put`` calls into an empty store (with the index: each embeds its text);
- **get**: 10,000 ``get`` calls of items put before;
- **search**: one user's newest 10 items (``search(("users", "u<k>"), limit=10)``);
- **filtered search**: one user's items with ``filter={"kind": "fact"}`` (a third of them);
- **ranked search**: one user's 10 items nearest a query text, with an index (the same local
  embedder, :class:`~graph_agent.store.embeddings.HashEmbeddings` with 64 dimensions, for both;
  LangGraph's SQLite store ranks in sqlite-vec, which needs a Python whose ``sqlite3`` loads
  extensions, its PostgreSQL store needs pgvector: without them that row has no LangGraph
  figure).

Each store as its documentation makes it: graph_agent's ``SqliteStore(path)`` (WAL journal,
``synchronous=NORMAL``), LangGraph's ``SqliteStore.from_conn_string(path)`` (SQLite's defaults);
``PostgresStore(dsn)`` and LangGraph's ``PostgresStore.from_conn_string(dsn)``; every store on a
fresh file or schema. Figures are operations per second (higher is better); the ratio is
graph_agent's over LangGraph's. Run it alone with ``python -m benchmarks.store [--quick]``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.harness import GRAPH_AGENT, LANGGRAPH, Row, Settings
from benchmarks.postgres import DSN, fresh_schema, unavailable
from graph_agent.store.embeddings import HashEmbeddings

USERS = 100
DIMS = 64
KINDS = ("fact", "preference", "event")
WORDS = (
    "tea",
    "coffee",
    "music",
    "travel",
    "books",
    "garden",
    "running",
    "chess",
    "cooking",
    "movies",
    "painting",
    "hiking",
    "python",
    "jazz",
    "cats",
    "dogs",
    "sailing",
    "yoga",
    "poetry",
    "cycling",
)


def run(settings: Settings) -> list[Row]:
    items = 600 if settings.quick else 10_000
    searches = 100 if settings.quick else 1_000
    rows = _backend_rows("SQLite", _sqlite_stores(settings), items, searches, settings)
    reason = unavailable()
    if reason:
        print(f"PostgreSQL store workload skipped: {reason}", file=sys.stderr)
        return rows
    return rows + _backend_rows("PostgreSQL", _postgres_stores(settings), items, searches, settings)


Opener = Callable[[bool], contextlib.AbstractContextManager[Any]]
"""Opens a fresh store (with an index when asked) as a context manager, which gives None when
the store cannot rank on this server."""


def _backend_rows(
    backend: str,
    openers: dict[str, Opener | None],
    items: int,
    searches: int,
    settings: Settings,
) -> list[Row]:
    repeat = 1 if settings.quick else 3
    figures: dict[str, dict[str, list[float]]] = {}
    for name, opener in openers.items():
        if opener is None:
            continue
        for _ in range(repeat):
            for operation, per_second in _measure(opener, items, searches).items():
                figures.setdefault(operation, {}).setdefault(name, []).append(per_second)
    return [
        Row(
            key=f"Store, {backend}, {operation}",
            unit="operations per second (higher is better)",
            samples=samples,
            target="≥ 2× LangGraph",
            extra={"items": items},
        )
        for operation, samples in figures.items()
    ]


def _measure(opener: Opener, items: int, searches: int) -> dict[str, float]:
    values = [_value(i) for i in range(items)]
    places = [(("users", f"u{i % USERS}"), f"k{i}") for i in range(items)]
    figures = {}
    with opener(False) as store:
        figures["put"] = _rate(items, lambda: _put_all(store, places, values))
        figures["get"] = _rate(items, lambda: _get_all(store, places))
        figures["search"] = _rate(
            searches,
            lambda: [store.search(("users", f"u{i % USERS}"), limit=10) for i in range(searches)],
        )
        figures["filtered search"] = _rate(
            searches,
            lambda: [
                store.search(("users", f"u{i % USERS}"), filter={"kind": "fact"}, limit=10)
                for i in range(searches)
            ],
        )
    indexed_items = min(items, 2_000)  # puts with an index embed: fewer items, same per user
    with opener(True) as store:
        if store is None:  # this store cannot rank here
            return figures
        _put_all(store, places[:indexed_items], values[:indexed_items])
        figures["ranked search"] = _rate(
            searches,
            lambda: [
                store.search(
                    ("users", f"u{i % USERS}"), query=f"{WORDS[i % len(WORDS)]} lover", limit=10
                )
                for i in range(searches)
            ],
        )
    return figures


def _rate(count: int, work: Callable[[], Any]) -> float:
    started = time.perf_counter()
    work()
    return count / (time.perf_counter() - started)


def _put_all(store: Any, places: list[tuple[tuple[str, ...], str]], values: list[dict]) -> None:
    for (namespace, key), value in zip(places, values, strict=True):
        store.put(namespace, key, value)


def _get_all(store: Any, places: list[tuple[tuple[str, ...], str]]) -> None:
    for namespace, key in places:
        if store.get(namespace, key) is None:
            raise RuntimeError(f"the store lost {namespace}/{key}")


def _value(i: int) -> dict[str, Any]:
    words = " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(3))
    return {"text": f"memory {i}: likes {words}", "n": i, "kind": KINDS[i % len(KINDS)]}


def _index(ours: bool) -> dict[str, Any]:
    embed = HashEmbeddings(DIMS)
    if ours:
        return {"embed": embed, "fields": ["text"]}
    return {"embed": embed, "dims": DIMS, "fields": ["text"]}


def _sqlite_stores(settings: Settings) -> dict[str, Opener | None]:
    @contextlib.contextmanager
    def ours(indexed: bool) -> Iterator[Any]:
        from graph_agent.store.sqlite import SqliteStore

        index = _index(True) if indexed else None
        with (
            tempfile.TemporaryDirectory(prefix="graph-agent-bench-") as folder,
            SqliteStore(Path(folder) / "store.db", index=index) as store,
        ):
            yield store

    @contextlib.contextmanager
    def theirs(indexed: bool) -> Iterator[Any]:
        from langgraph.store.sqlite import SqliteStore

        if indexed and not hasattr(sqlite3.Connection, "enable_load_extension"):
            yield None  # LangGraph's SQLite store ranks in sqlite-vec: this Python cannot load it
            return
        with tempfile.TemporaryDirectory(prefix="graph-agent-bench-") as folder:
            path = str(Path(folder) / "store.db")
            index: Any = _index(False) if indexed else None
            with SqliteStore.from_conn_string(path, index=index) as store:
                store.setup()
                yield store

    with_langgraph = settings.with_langgraph and _installed("langgraph.store.sqlite")
    return {GRAPH_AGENT: ours, LANGGRAPH: theirs if with_langgraph else None}


def _postgres_stores(settings: Settings) -> dict[str, Opener | None]:
    @contextlib.contextmanager
    def ours(indexed: bool) -> Iterator[Any]:
        from graph_agent.store.postgres import PostgresStore

        index = _index(True) if indexed else None
        with fresh_schema() as dsn, PostgresStore(dsn, index=index) as store:
            yield store

    @contextlib.contextmanager
    def theirs(indexed: bool) -> Iterator[Any]:
        from langgraph.store.postgres import PostgresStore

        if indexed and not _has_pgvector():
            yield None  # LangGraph's PostgreSQL store ranks with pgvector only
            return
        with fresh_schema() as dsn:
            index: Any = _index(False) if indexed else None
            with PostgresStore.from_conn_string(dsn, index=index) as store:
                store.setup()
                yield store

    with_langgraph = settings.with_langgraph and _installed("langgraph.store.postgres")
    return {GRAPH_AGENT: ours, LANGGRAPH: theirs if with_langgraph else None}


def _has_pgvector() -> bool:
    import psycopg

    with psycopg.connect(DSN, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        return found.fetchone() is not None


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.store", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="600 items (for CI)")
    args = parser.parse_args(argv)
    from benchmarks.harness import langgraph_available

    settings = Settings(quick=args.quick, with_langgraph=langgraph_available())
    for row in run(settings):
        medians = {
            name: sorted(samples)[len(samples) // 2] for name, samples in row.samples.items()
        }
        shown = ", ".join(f"{name} {value:,.0f}" for name, value in medians.items())
        ratio = (
            f"  ratio {medians[GRAPH_AGENT] / medians[LANGGRAPH]:.2f}×"
            if LANGGRAPH in medians
            else ""
        )
        print(f"{row.key}: {shown} /s{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
