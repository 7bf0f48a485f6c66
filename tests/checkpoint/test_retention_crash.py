"""A sweeping process killed (SIGKILL) midway leaves every thread whole or as the policy wants
it, on SQLite and PostgreSQL: never a checkpoint without its blobs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graph_agent import RunnableConfig
from graph_agent.checkpoint import RetentionPolicy
from graph_agent.checkpoint.base import CheckpointSaver
from tests.checkpoint.test_retention import steps_graph

THREADS = [f"t{n:03d}" for n in range(80)]


@pytest.fixture(params=["sqlite", "postgres"])
def stored(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    from graph_agent.checkpoint.postgres import PostgresSaver
    from graph_agent.checkpoint.sqlite import SqliteSaver
    from tests.checkpoint.postgres_db import fresh_schema

    if request.param == "postgres":
        with fresh_schema() as dsn, PostgresSaver(dsn, pool_size=2) as postgres:
            yield dsn, postgres
        return
    path = str(tmp_path / "checkpoints.db")
    sqlite = SqliteSaver(path)
    yield path, sqlite
    sqlite.close()


def test_a_sweeper_killed_midway_leaves_every_thread_whole_or_pruned(stored, request):
    where, saver = stored
    app = steps_graph(saver)
    for thread in THREADS:
        app.invoke({"log": []}, RunnableConfig(thread_id=thread))
        app.invoke({"log": []}, RunnableConfig(thread_id=thread))
    kind = request.node.callspec.params["stored"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    sweeper = subprocess.Popen(
        [sys.executable, "-m", "tests.checkpoint.retention_sweeper", kind, where],
        stdout=subprocess.PIPE,
        env=env,
    )
    try:
        assert sweeper.stdout is not None and sweeper.stdout.readline().strip() == b"sweeping"
        deadline = time.monotonic() + 60
        while pruned(saver) < 10 and time.monotonic() < deadline:
            time.sleep(0.02)
        sweeper.send_signal(signal.SIGKILL)
    finally:
        sweeper.wait(30)
    shapes = [check_thread(saver, app, thread) for thread in THREADS]
    assert "whole" in shapes and "pruned" in shapes
    saver.sweep(RetentionPolicy(checkpoint_keep=1))
    assert {check_thread(saver, app, thread) for thread in THREADS} == {"pruned"}


def pruned(saver: CheckpointSaver) -> int:
    return sum(1 for thread in THREADS[:40] if len(list(saver.list(thread, limit=2))) == 1)


def check_thread(saver: CheckpointSaver, app: Any, thread: str) -> str:
    """ "whole" (all 8 checkpoints) or "pruned" (the latest only), loading the same state
    (listing a thread loads each checkpoint's values: a missing blob would raise)."""
    checkpoints = list(saver.list(thread))
    assert len(checkpoints) in (1, 8), thread
    state = app.get_state(RunnableConfig(thread_id=thread))
    assert list(state.values["log"]) == ["a", "b", "c"] * 2
    return "whole" if len(checkpoints) == 8 else "pruned"
