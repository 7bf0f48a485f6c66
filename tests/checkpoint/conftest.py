"""Every saver runs the same conformance tests; later savers add themselves here."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from graph_agent import MemorySaver
from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.checkpoint.postgres import PostgresSaver
from graph_agent.checkpoint.sqlite import SqliteSaver
from tests.checkpoint.postgres_db import fresh_schema

SAVERS = ["memory", "sqlite", "postgres"]


def make_saver(kind: str, tmp_path) -> CheckpointSaver:
    if kind == "memory":
        return MemorySaver()
    if kind == "sqlite":
        return SqliteSaver(tmp_path / "checkpoints.db")
    raise ValueError(kind)


@pytest.fixture(params=SAVERS)
def saver(request: pytest.FixtureRequest, tmp_path) -> Iterator[CheckpointSaver]:
    if request.param == "postgres":  # a fresh schema per test, dropped afterwards
        with fresh_schema() as dsn, PostgresSaver(dsn, pool_size=4) as postgres:
            yield postgres
        return
    yield make_saver(request.param, tmp_path)


@pytest.fixture
def reopen(saver: CheckpointSaver) -> Iterator[Callable[[], CheckpointSaver]]:
    """Opens another saver on the storage of ``saver``, as a new process would (nothing cached
    in the first one helps it); for ``MemorySaver``, whose storage is itself, the same one."""
    opened: list[SqliteSaver | PostgresSaver] = []

    def open_again() -> CheckpointSaver:
        fresh: SqliteSaver | PostgresSaver
        if isinstance(saver, PostgresSaver):
            fresh = PostgresSaver(saver.conninfo, pool_size=2)
        elif isinstance(saver, SqliteSaver):
            fresh = SqliteSaver(saver.path)
        else:
            return saver
        opened.append(fresh)
        return fresh

    yield open_again
    for fresh in opened:
        fresh.close()
