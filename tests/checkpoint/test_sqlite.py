"""SqliteSaver specifics: pragmas, schema versions, bad files, leases that expire."""

from __future__ import annotations

import threading
import time

import pytest

from graph_agent import (
    END,
    START,
    CompileConfig,
    RunnableConfig,
    SerializationError,
    StateGraph,
    ThreadBusyError,
)
from graph_agent.checkpoint.sqlite import SCHEMA_VERSION, SqliteSaver


def test_the_file_uses_wal_and_synchronous_normal_by_default(tmp_path):
    saver = SqliteSaver(tmp_path / "x.db")
    assert saver._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert saver._conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    full = SqliteSaver(tmp_path / "y.db", durability="full")
    assert full._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_migrations_are_recorded_once_and_reopening_is_idempotent(tmp_path):
    path = tmp_path / "x.db"
    first = SqliteSaver(path)
    second = SqliteSaver(path)
    assert first.schema_version() == second.schema_version() == SCHEMA_VERSION
    rows = second._conn.execute("SELECT COUNT(*) FROM schema_version").fetchone()[0]
    assert rows == SCHEMA_VERSION


def test_a_folder_for_the_file_is_created(tmp_path):
    SqliteSaver(tmp_path / "nested" / "dir" / "x.db")
    assert (tmp_path / "nested" / "dir" / "x.db").exists()


def test_a_file_that_is_not_a_database_gives_a_clear_error(tmp_path):
    path = tmp_path / "notes.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(SerializationError, match=r"notes.db is not a usable graph_agent SQLite"):
        SqliteSaver(path)


def test_a_database_from_a_newer_version_is_refused(tmp_path):
    path = tmp_path / "x.db"
    saver = SqliteSaver(path)
    saver._conn.execute("INSERT INTO schema_version VALUES (99, 0)")
    with pytest.raises(SerializationError, match="schema version 99"):
        SqliteSaver(path)


def test_a_run_whose_lease_lapsed_cannot_fork_the_thread_by_accident(tmp_path):
    path = tmp_path / "x.db"
    entered, release = threading.Event(), threading.Event()

    def slow(state):
        entered.set()
        release.wait(timeout=10)
        return {"by": "slow"}

    def build(saver):
        g = StateGraph("g")
        g.add_node("work", slow if saver.lease_ttl < 1 else (lambda s: {"by": "fast"}))
        g.add_edge(START, "work").add_edge("work", END)
        return g.compile(CompileConfig(saver=saver))

    cfg = RunnableConfig(thread_id="t")
    slow_app = build(SqliteSaver(path, lease_ttl=0.05))
    fast_app = build(SqliteSaver(path, lease_ttl=60))
    errors = []

    def run_slow():
        try:
            slow_app.invoke({}, cfg)
        except ThreadBusyError as exc:
            errors.append(exc)

    worker = threading.Thread(target=run_slow)
    worker.start()
    assert entered.wait(timeout=10)
    time.sleep(0.1)  # the slow run's lease has lapsed: another run may take the thread
    assert fast_app.invoke({}, cfg)["by"] == "fast"
    release.set()
    worker.join(timeout=10)
    assert errors and "moved on while this run was working" in str(errors[0])
    history = list(fast_app.get_state_history(cfg))
    parents = [s.parent_config.checkpoint_id for s in history if s.parent_config]
    assert len(parents) == len(set(parents)), "the thread's history forked"
    assert fast_app.get_state(cfg).values["by"] == "fast"
