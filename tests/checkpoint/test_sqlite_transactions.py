"""The SQLite saver's transactions per run: the lease taken with the thread's read, released
with the run's last checkpoint; each step's checkpoint still its own commit."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from graph_agent import (
    END,
    START,
    CheckpointStoreError,
    CompileConfig,
    RunnableConfig,
    StateGraph,
    ThreadBusyError,
)
from graph_agent.checkpoint.sqlite import SqliteSaver


def chain(saver: SqliteSaver):
    graph = StateGraph("chain")
    for name in ("first", "second", "third"):
        graph.add_node(name, lambda state: {"x": state["x"] + 1})
    graph.add_edge(START, "first").add_edge("first", "second")
    graph.add_edge("second", "third").add_edge("third", END)
    return graph.compile(CompileConfig(saver=saver))


def transactions(saver: SqliteSaver) -> list[str]:
    """Start tracing the saver's connection: the statements that begin a transaction."""
    begun: list[str] = []
    saver._conn.set_trace_callback(
        lambda sql: begun.append(sql) if sql.startswith("BEGIN") else None
    )
    return begun


def lease_rows(path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT COUNT(*) FROM leases").fetchone()[0]


def test_a_run_of_three_steps_takes_five_transactions_one_commit_per_checkpoint(tmp_path):
    saver = SqliteSaver(tmp_path / "x.db")
    app = chain(saver)
    cfg = RunnableConfig(thread_id="t")
    app.invoke({"x": 0}, cfg)
    begun = transactions(saver)
    assert app.invoke({"x": 0}, cfg) == {"x": 3}
    # lease + read; the input's checkpoint and each step's; the last with the lease's release
    assert begun == ["BEGIN IMMEDIATE"] * 5
    assert lease_rows(tmp_path / "x.db") == 0
    assert len(list(saver.list("t"))) == 8


def test_the_lease_row_goes_with_the_last_checkpoint_the_lease_itself_with_the_call(tmp_path):
    path = tmp_path / "x.db"
    app = chain(SqliteSaver(path))
    cfg = RunnableConfig(thread_id="t")
    outputs = app.stream({"x": 0}, cfg)
    seen = [next(outputs) for _ in range(3)]
    assert lease_rows(path) == 1  # the last step has not run yet
    seen.append(next(outputs))  # the last step's output: its checkpoint is committed
    assert (seen[-1].node, seen[-1].update) == ("third", {"x": 3})
    assert lease_rows(path) == 0
    with pytest.raises(ThreadBusyError):  # in this process, the call still holds the thread
        app.invoke({"x": 0}, cfg)
    assert list(outputs) == []
    assert app.invoke({"x": 0}, cfg) == {"x": 3}  # released with the call


def test_a_second_process_takes_the_thread_only_once_the_last_checkpoint_is_committed(tmp_path):
    path = tmp_path / "x.db"
    app = chain(SqliteSaver(path))
    cfg = RunnableConfig(thread_id="t")
    outputs = app.stream({"x": 0}, cfg)
    next(outputs)
    probe = (
        "import sys\n"
        "from graph_agent.checkpoint.sqlite import SqliteSaver\n"
        "from graph_agent import ThreadBusyError\n"
        "saver = SqliteSaver(sys.argv[1])\n"
        "try:\n"
        "    saver.release(saver.acquire('t'))\n"
        "except ThreadBusyError:\n"
        "    print('busy')\n"
        "else:\n"
        "    print('free', saver.get('t').values)\n"
    )

    def other_process() -> str:
        done = subprocess.run(
            [sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert other_process() == "busy"
    for _ in range(3):
        next(outputs)
    assert other_process() == "free {'x': 3}"  # the run's last checkpoint came with the lease
    outputs.close()


def test_a_last_checkpoint_that_fails_to_commit_leaves_the_lease_to_release(tmp_path, monkeypatch):
    path = tmp_path / "x.db"
    saver = SqliteSaver(path)
    app = chain(saver)
    cfg = RunnableConfig(thread_id="t")
    real_put = SqliteSaver._put

    def put(self, checkpoint, lease):
        if lease is not None:  # the last one
            with self._transaction() as conn:
                conn.execute("SELECT 1")
            raise CheckpointStoreError("disk full")
        real_put(self, checkpoint, lease)

    monkeypatch.setattr(SqliteSaver, "_put", put)
    with pytest.raises(CheckpointStoreError):
        app.invoke({"x": 0}, cfg)
    assert lease_rows(path) == 0  # release() deleted it
    assert saver._rows_gone == set()
    monkeypatch.setattr(SqliteSaver, "_put", real_put)
    assert app.get_state(cfg).values == {"x": 2}  # the last step is not stored: it runs again
    assert app.invoke(None, cfg) == {"x": 3}


def test_acquire_loading_reads_what_get_reads_in_the_leases_transaction(tmp_path):
    saver = SqliteSaver(tmp_path / "x.db")
    lease, loaded = saver.acquire_loading("t")
    assert loaded == (None,)
    saver.release(lease)
    chain(saver).invoke({"x": 0}, RunnableConfig(thread_id="t"))
    lease, loaded = saver.acquire_loading("t")
    try:
        assert loaded is not None and loaded[0] is not None
        newest = saver.get("t")
        assert (loaded[0].id, loaded[0].values, loaded[0].next) == (
            newest.id,
            newest.values,
            newest.next,
        )
        with pytest.raises(ThreadBusyError):
            saver.acquire_loading("t")
    finally:
        saver.release(lease)


def test_a_damaged_newest_checkpoint_is_left_for_the_runs_own_read_to_report(tmp_path):
    path = tmp_path / "x.db"
    saver = SqliteSaver(path)
    app = chain(saver)
    cfg = RunnableConfig(thread_id="t")
    app.invoke({"x": 0}, cfg)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE checkpoints SET header = x'00' WHERE checkpoint_id = "
            "(SELECT MAX(checkpoint_id) FROM checkpoints)"
        )
    lease, loaded = saver.acquire_loading("t")
    saver.release(lease)
    assert loaded is None
    with pytest.raises(Exception) as raised:
        app.invoke({"x": 0}, cfg)
    with pytest.raises(type(raised.value)):
        saver.get("t")
    assert lease_rows(path) == 0


def test_a_subclass_that_overrides_put_get_or_acquire_has_them_called_for_every_checkpoint(
    tmp_path,
):
    calls: list[str] = []

    class Watched(SqliteSaver):
        def acquire(self, thread_id, checkpoint_ns=""):
            calls.append("acquire")
            return super().acquire(thread_id, checkpoint_ns)

        def get(self, thread_id, checkpoint_id=None, checkpoint_ns=""):
            calls.append("get")
            return super().get(thread_id, checkpoint_id, checkpoint_ns)

        def put(self, checkpoint):
            calls.append(f"put:{','.join(checkpoint.next)}")
            super().put(checkpoint)

    saver = Watched(tmp_path / "x.db")
    assert chain(saver).invoke({"x": 0}, RunnableConfig(thread_id="t")) == {"x": 3}
    # the run's last checkpoint (nothing next) goes through the subclass's put too
    assert calls == ["acquire", "get", "put:first", "put:second", "put:third", "put:"]
    assert lease_rows(tmp_path / "x.db") == 0
