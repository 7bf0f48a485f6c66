"""Long-term memory: put, get and search throughput of graph_agent's stores and LangGraph's, on
SQLite and PostgreSQL, for 10,000 items.

Both stores get the same items (100 users × 100 memories, each ``{"text", "n", "kind"}`` under
``("users", "u<k>")``), one call per operation, the way an agent's tools and hooks use a store:

- **put**: the first 2,000 items, one ``put`` each, into an empty store (the other 8,000 are
  then loaded in batches of 500, untimed);
- **get**: 10,000 ``get`` calls of items put before;
- **search**: one user's newest 10 items (``search(("users", "u<k>"), limit=10)``), 1,000 times;
- **filtered search**: one user's items with ``filter={"kind": "fact"}`` (a third of them);
- **ranked search**: one user's 10 items nearest a query text, with an index (the same local
  embedder, :class:`~graph_agent.store.embeddings.HashEmbeddings` with 64 dimensions, for both,
  over 2,000 items). LangGraph's SQLite store ranks in sqlite-vec, which needs a Python whose
  ``sqlite3`` loads extensions, its PostgreSQL store needs pgvector: without them that row has
  no LangGraph figure.

Each store as its documentation makes it: graph_agent's ``SqliteStore(path)`` (WAL journal,
``synchronous=NORMAL``), LangGraph's ``SqliteStore.from_conn_string(path)`` (SQLite's defaults:
a rollback journal, an fsync per commit); ``PostgresStore(dsn)`` (``durability="normal"``: a
commit does not wait for the WAL flush) and LangGraph's ``PostgresStore.from_conn_string(dsn)``
(waits); every store on a fresh file or schema. Two more sets of rows set the other store up
like ours: LangGraph's SQLite file switched to WAL and ``synchronous=NORMAL``, and graph_agent's
PostgreSQL store with ``durability="full"``. Figures are operations per second (higher is
better), three runs each, the stores taking turns ten times within each operation (the
machine's load then weighs on each alike); the ratio is graph_agent's over LangGraph's. Run
it alone with ``python -m benchmarks.store [--quick]``.
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
from typing import Any, Literal

from benchmarks.harness import GRAPH_AGENT, LANGGRAPH, Row, Settings
from benchmarks.postgres import DSN, fresh_schema, unavailable
from graph_agent.store.base import BaseStore, PutOp
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
    sizes = _Sizes(settings)
    rows = _rows("SQLite", _sqlite_stores(settings), sizes, "LangGraph's file in WAL mode")
    reason = unavailable()
    if reason:
        print(f"PostgreSQL store workload skipped: {reason}", file=sys.stderr)
        return rows
    return rows + _rows("PostgreSQL", _postgres_stores(settings), sizes, "durability='full'")


class _Sizes:
    def __init__(self, settings: Settings) -> None:
        self.items = 300 if settings.quick else 10_000
        self.timed_puts = 300 if settings.quick else 2_000
        """The puts timed one by one; the rest of the items are loaded in one batch."""
        self.searches = 50 if settings.quick else 1_000
        self.repeat = 1 if settings.quick else 3


Opener = Callable[[bool], contextlib.AbstractContextManager[Any]]
"""Opens a fresh store (with an index when asked) as a context manager, which gives None when
the store cannot rank on this server."""


def _rows(backend: str, openers: dict[str, Opener], sizes: _Sizes, variant: str) -> list[Row]:
    """A row per operation, graph_agent against LangGraph, and rows for ``openers["variant"]``
    (LangGraph or graph_agent set up otherwise) against the other one."""
    figures: dict[str, dict[str, list[float]]] = {name: {} for name in openers}
    for _ in range(sizes.repeat):
        for name, operations in _measure(openers, sizes).items():
            for operation, per_second in operations.items():
                figures[name].setdefault(operation, []).append(per_second)
    ours, theirs = figures[GRAPH_AGENT], figures.get(LANGGRAPH, {})
    rows = [
        _row(f"Store, {backend}, {operation}", ours[operation], theirs.get(operation), sizes)
        for operation in ours
    ]
    for operation, samples in figures.get("variant", {}).items():
        if variant.startswith("LangGraph"):
            mine, others = ours[operation], samples
        else:
            mine, others = samples, theirs.get(operation)
        rows.append(_row(f"Store, {backend}, {operation}, {variant}", mine, others, sizes))
    return rows


def _row(key: str, ours: list[float], theirs: list[float] | None, sizes: _Sizes) -> Row:
    samples = {GRAPH_AGENT: ours} if theirs is None else {GRAPH_AGENT: ours, LANGGRAPH: theirs}
    return Row(
        key=key,
        unit="operations per second (higher is better)",
        samples=samples,
        target="≥ 2× LangGraph",
        extra={"items": sizes.items, "timed puts": sizes.timed_puts},
    )


def _measure(openers: dict[str, Opener], sizes: _Sizes) -> dict[str, dict[str, float]]:
    """One run of every operation on every store, as ``{store: {operation: per second}}``;
    the variant store skips the ranked search. The stores take turns every
    ``1/ROUNDS`` of an operation's calls (the machine's load changes by the second: each
    pays the same)."""
    items, searches = sizes.items, sizes.searches
    values = [_value(i) for i in range(items)]
    places = [(("users", f"u{i % USERS}"), f"k{i}") for i in range(items)]
    timed = sizes.timed_puts
    users = [("users", f"u{i % USERS}") for i in range(searches)]
    queries = [f"{WORDS[i % len(WORDS)]} lover" for i in range(searches)]
    figures: dict[str, dict[str, float]] = {name: {} for name in openers}
    with contextlib.ExitStack() as opened:
        stores = {name: opened.enter_context(opener(False)) for name, opener in openers.items()}
        work: dict[str, tuple[int, Callable[[Any, slice], Any]]] = {
            "put": (timed, lambda store, part: _put_all(store, places[part], values[part])),
            "get": (items, lambda store, part: _get_all(store, places[part])),
            "search": (
                searches,
                lambda store, part: [store.search(ns, limit=10) for ns in users[part]],
            ),
            "filtered search": (
                searches,
                lambda store, part: [
                    store.search(ns, filter={"kind": "fact"}, limit=10) for ns in users[part]
                ],
            ),
        }
        for operation, (count, run) in work.items():
            for name, per_second in _rates(stores, count, run).items():
                figures[name][operation] = per_second
            if operation == "put":
                for store in stores.values():
                    _load(store, places[timed:], values[timed:])
    indexed_items = min(items, 2_000)  # puts with an index embed: fewer items, same per user
    with contextlib.ExitStack() as opened:
        ranking = {
            name: opened.enter_context(opener(True))
            for name, opener in openers.items()
            if name != "variant"
        }
        ranking = {name: store for name, store in ranking.items() if store is not None}
        for store in ranking.values():  # (None: this store cannot rank here)
            _load(store, places[:indexed_items], values[:indexed_items])

        def ranked(store: Any, part: slice) -> None:
            for ns, query in zip(users[part], queries[part], strict=True):
                store.search(ns, query=query, limit=10)

        for name, per_second in _rates(ranking, searches, ranked).items():
            figures[name]["ranked search"] = per_second
    return figures


ROUNDS = 10


def _rates(
    stores: dict[str, Any], count: int, run: Callable[[Any, slice], Any]
) -> dict[str, float]:
    """Each store's calls per second at ``run(store, part)`` over ``count`` calls, cut in
    ``ROUNDS`` parts; in each round every store runs the same part, the first store of the
    round changing from round to round."""
    spent = dict.fromkeys(stores, 0.0)
    names = list(stores)
    bounds = [count * n // ROUNDS for n in range(ROUNDS + 1)]
    for turn in range(ROUNDS):
        part = slice(bounds[turn], bounds[turn + 1])
        first = turn % len(names) if names else 0
        for name in names[first:] + names[:first]:
            started = time.perf_counter()
            run(stores[name], part)
            spent[name] += time.perf_counter() - started
    return {name: count / seconds for name, seconds in spent.items()}


def _put_all(store: Any, places: list[tuple[tuple[str, ...], str]], values: list[dict]) -> None:
    for (namespace, key), value in zip(places, values, strict=True):
        store.put(namespace, key, value)


def _load(store: Any, places: list[tuple[tuple[str, ...], str]], values: list[dict]) -> None:
    """Put many items in one batch, with the store's own operations."""
    if isinstance(store, BaseStore):
        ops: list[Any] = [
            PutOp(namespace=ns, key=key, value=value)
            for (ns, key), value in zip(places, values, strict=True)
        ]
    else:
        from langgraph.store.base import PutOp as TheirPutOp

        ops = [TheirPutOp(ns, key, value) for (ns, key), value in zip(places, values, strict=True)]
    for start in range(0, len(ops), 500):
        store.batch(ops[start : start + 500])


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


def _sqlite_stores(settings: Settings) -> dict[str, Opener]:
    @contextlib.contextmanager
    def ours(indexed: bool) -> Iterator[Any]:
        from graph_agent.store.sqlite import SqliteStore

        index = _index(True) if indexed else None
        with (
            tempfile.TemporaryDirectory(prefix="graph-agent-bench-") as folder,
            SqliteStore(Path(folder) / "store.db", index=index) as store,
        ):
            yield store

    def theirs(wal: bool) -> Opener:
        @contextlib.contextmanager
        def open_theirs(indexed: bool) -> Iterator[Any]:
            from langgraph.store.sqlite import SqliteStore

            if indexed and not hasattr(sqlite3.Connection, "enable_load_extension"):
                yield None  # LangGraph ranks in sqlite-vec: this Python's sqlite3 cannot load it
                return
            with tempfile.TemporaryDirectory(prefix="graph-agent-bench-") as folder:
                path = str(Path(folder) / "store.db")
                index: Any = _index(False) if indexed else None
                with SqliteStore.from_conn_string(path, index=index) as store:
                    store.setup()
                    if wal:  # as graph_agent's store sets its file up
                        store.conn.execute("PRAGMA journal_mode=WAL")
                        store.conn.execute("PRAGMA synchronous=NORMAL")
                    yield store

        return open_theirs

    if not (settings.with_langgraph and _installed("langgraph.store.sqlite")):
        return {GRAPH_AGENT: ours}
    return {GRAPH_AGENT: ours, LANGGRAPH: theirs(wal=False), "variant": theirs(wal=True)}


def _postgres_stores(settings: Settings) -> dict[str, Opener]:
    def ours(durability: Literal["normal", "full"]) -> Opener:
        @contextlib.contextmanager
        def open_ours(indexed: bool) -> Iterator[Any]:
            from graph_agent.store.postgres import PostgresStore

            index = _index(True) if indexed else None
            with (
                fresh_schema() as dsn,
                PostgresStore(dsn, index=index, durability=durability) as store,
            ):
                yield store

        return open_ours

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

    openers: dict[str, Opener] = {GRAPH_AGENT: ours("normal"), "variant": ours("full")}
    if settings.with_langgraph and _installed("langgraph.store.postgres"):
        openers[LANGGRAPH] = theirs
    return openers


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
    parser.add_argument("--quick", action="store_true", help="300 items (for CI)")
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
