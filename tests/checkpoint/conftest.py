"""Every saver runs the same conformance tests; later savers add themselves here."""

from __future__ import annotations

from collections.abc import Iterator

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
