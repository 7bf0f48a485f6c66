"""Every saver runs the same conformance tests; later savers add themselves here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from graph_agent import MemorySaver
from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.checkpoint.sqlite import SqliteSaver

SAVERS = ["memory", "sqlite"]


def make_saver(kind: str, tmp_path) -> CheckpointSaver:
    if kind == "memory":
        return MemorySaver()
    if kind == "sqlite":
        return SqliteSaver(tmp_path / "checkpoints.db")
    raise ValueError(kind)


@pytest.fixture(params=SAVERS)
def saver(request: pytest.FixtureRequest, tmp_path) -> Iterator[CheckpointSaver]:
    yield make_saver(request.param, tmp_path)
