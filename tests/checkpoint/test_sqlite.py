"""SqliteSaver specifics: pragmas, schema versions, bad files, leases that expire."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    CheckpointStoreError,
    CompileConfig,
    GraphRuntimeError,
    RunnableConfig,
    SerializationError,
    StateGraph,
    ThreadBusyError,
)
from graph_agent.checkpoint.sqlite import SCHEMA_VERSION, SqliteSaver
from graph_agent.graph.saver import Blob
from tests.checkpoint.test_conformance import chain, checkpoint


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


def slow_graph(saver, entered, release):
    def slow(state):
        entered.set()
        release.wait(timeout=10)
        return {"by": "slow"}

    g = StateGraph("g")
    g.add_node("work", slow).add_edge(START, "work").add_edge("work", END)
    return g.compile(CompileConfig(saver=saver))


def run_in_thread(app, cfg, errors):
    def run():
        try:
            app.invoke({}, cfg)
        except ThreadBusyError as exc:
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    return worker


def test_a_run_whose_thread_was_advanced_by_another_writer_cannot_fork_it(tmp_path):
    from graph_agent.checkpoint.base import Checkpoint, new_checkpoint_id

    path = tmp_path / "x.db"
    entered, release = threading.Event(), threading.Event()
    app = slow_graph(SqliteSaver(path), entered, release)
    cfg = RunnableConfig(thread_id="t")
    errors: list[ThreadBusyError] = []
    worker = run_in_thread(app, cfg, errors)
    assert entered.wait(timeout=10)
    other = SqliteSaver(path)  # a writer that ignores the lease, e.g. a buggy tool
    head = other.get("t")
    intruder = Checkpoint(
        id=new_checkpoint_id(after=head.id),
        thread_id="t",
        parent_id=head.id,
        step=head.step + 1,
        versions=head.versions,
        metadata={"source": "update"},
    )
    other.put(intruder)
    release.set()
    worker.join(timeout=10)
    assert errors and "moved on while this run was working" in str(errors[0])
    history = list(other.list("t"))
    parents = [cp.parent_id for cp in history if cp.parent_id]
    assert len(parents) == len(set(parents)), "the thread's history forked"
    assert other.get("t").id == intruder.id


def test_a_run_that_outlives_lease_ttl_keeps_its_thread(tmp_path):
    path = tmp_path / "x.db"
    entered, release = threading.Event(), threading.Event()
    app = slow_graph(SqliteSaver(path, lease_ttl=0.05), entered, release)
    cfg = RunnableConfig(thread_id="t")
    errors: list[ThreadBusyError] = []
    worker = run_in_thread(app, cfg, errors)
    assert entered.wait(timeout=10)
    time.sleep(0.1)
    other = slow_graph(SqliteSaver(path), threading.Event(), threading.Event())
    with pytest.raises(ThreadBusyError, match="busy"):
        other.invoke({}, cfg)
    release.set()
    worker.join(timeout=10)
    assert not errors and app.get_state(cfg).values == {"by": "slow"}


def test_a_lease_from_another_host_binds_until_it_expires(tmp_path):
    saver = SqliteSaver(tmp_path / "x.db")
    insert = (
        "INSERT OR REPLACE INTO leases (thread_id, checkpoint_ns, owner, pid, expires_at, host) "
        "VALUES (?, ?, ?, ?, ?, ?)"
    )
    saver._conn.execute(insert, ("t", "", "them", 1, time.time() + 60, "another-host"))
    with pytest.raises(ThreadBusyError):
        saver.acquire("t")
    saver._conn.execute(insert, ("t", "", "them", 1, time.time() - 1, "another-host"))
    saver.release(saver.acquire("t"))


def test_a_version_one_file_is_migrated(tmp_path):
    import sqlite3

    from graph_agent.checkpoint.sqlite_schema import _MIGRATIONS

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at REAL)")
    for statement in _MIGRATIONS[1]:
        conn.execute(statement)
    conn.execute("INSERT INTO schema_version VALUES (1, 0)")
    conn.commit()
    conn.close()
    saver = SqliteSaver(path)
    assert saver.schema_version() == SCHEMA_VERSION
    saver.release(saver.acquire("t"))


def test_prune_refuses_a_negative_count(tmp_path):
    with pytest.raises(ValueError, match="keep_last"):
        SqliteSaver(tmp_path / "x.db").prune("t", -1)


def langgraph_database(path):
    """A file with LangGraph's checkpoint table: another program's, with one row."""
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE checkpoints (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL "
        "DEFAULT '', checkpoint_id TEXT NOT NULL, parent_checkpoint_id TEXT, type TEXT, "
        "checkpoint BLOB, metadata BLOB, PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id))"
    )
    conn.execute("INSERT INTO checkpoints VALUES ('t1', '', 'c1', NULL, 'msgpack', x'00', x'00')")
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize("read_only", [False, True])
def test_another_programs_database_is_refused_and_left_untouched(tmp_path, read_only):
    path = langgraph_database(tmp_path / "langgraph.sqlite")
    before = path.read_bytes()

    with pytest.raises(
        SerializationError,
        match=r"langgraph.sqlite is not a graph_agent checkpoint database: it holds another "
        r"program's tables \(checkpoints\) and no graph_agent schema_version table",
    ):
        SqliteSaver(path, read_only=read_only)

    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["langgraph.sqlite"]


def test_a_graph_agent_table_with_other_columns_is_refused(tmp_path):
    path = tmp_path / "x.db"
    SqliteSaver(path).close()
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE writes")
    conn.execute("CREATE TABLE writes (thread_id TEXT, payload BLOB)")
    conn.commit()
    conn.close()

    with pytest.raises(
        SerializationError, match=r"its writes table has the columns \(thread_id, payload\)"
    ):
        SqliteSaver(path)


def test_a_short_file_that_is_not_sqlite_is_refused_instead_of_overwritten(tmp_path):
    path = tmp_path / "notes.db"
    path.write_bytes(b"x")

    with pytest.raises(SerializationError, match=r"notes.db is not a usable .* not a database"):
        SqliteSaver(path)

    assert path.read_bytes() == b"x"


def test_an_empty_file_is_a_new_database_but_nothing_to_read(tmp_path):
    path = tmp_path / "empty.db"
    path.touch()

    with pytest.raises(SerializationError, match=r"empty.db .* it is empty \(no tables\)"):
        SqliteSaver(path, read_only=True)
    assert path.read_bytes() == b""
    assert SqliteSaver(path).schema_version() == SCHEMA_VERSION


def test_read_only_reads_the_threads_and_creates_or_writes_nothing(tmp_path):
    path = tmp_path / "x.db"
    released = threading.Event()
    released.set()
    app = slow_graph(SqliteSaver(path), threading.Event(), released)
    app.invoke({}, RunnableConfig(thread_id="t"))
    app.saver.close()
    before = path.read_bytes()

    reader = SqliteSaver(path, read_only=True)

    assert reader.threads() == ["t"] and reader.get("t").values == {"by": "slow"}
    with pytest.raises(CheckpointStoreError, match="readonly"):
        reader.delete_thread("t")
    reader.close()
    assert path.read_bytes() == before
    with pytest.raises(GraphRuntimeError, match="cannot open the checkpoint database"):
        SqliteSaver(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()


def test_a_folder_that_cannot_be_made_is_a_clear_error(tmp_path):
    (tmp_path / "afile").write_text("x")

    with pytest.raises(GraphRuntimeError, match=r"cannot open the checkpoint database .*afile"):
        SqliteSaver(tmp_path / "afile" / "x.db")


def fill_up(saver: SqliteSaver) -> None:
    """Make the database full (SQLITE_FULL) at its current size, as a full disk does."""
    pages = saver._conn.execute("PRAGMA page_count").fetchone()[0]
    saver._conn.execute(f"PRAGMA max_page_count = {pages}")


def test_a_full_disk_is_a_checkpoint_store_error_naming_the_thread_and_nothing_is_half_written(
    tmp_path,
):
    saver = SqliteSaver(tmp_path / "runs.db")
    (first,) = chain(saver, 1, thread="busy")
    big = checkpoint("busy", parent=first.id, step=1, blobs={"log": Blob("full", ["x" * 65_536])})
    fill_up(saver)

    with pytest.raises(CheckpointStoreError, match=r"thread 'busy'.*full") as caught:
        saver.put(big)
    assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
    with pytest.raises(CheckpointStoreError, match=r"thread 'busy'.*full"):
        saver.put_writes("busy", "", first.id, "task", [("out", "y" * 65_536)])

    assert not saver._conn.in_transaction
    assert saver.get("busy").id == first.id and saver.get("busy").pending_writes == ()
    saver._conn.execute("PRAGMA max_page_count = 1073741823")  # space again
    saver.put(big)
    assert saver.get("busy").values["log"] == ["x" * 65_536]


def test_a_run_on_a_full_disk_fails_with_a_checkpoint_store_error_and_resumes_later(tmp_path):
    saver = SqliteSaver(tmp_path / "runs.db")
    g = StateGraph("fill", key_strategies={"log": AppendStrategy()})
    g.add_node("grow", lambda s: {"log": ["x" * 65_536]})
    g.add_edge(START, "grow").add_edge("grow", END)
    app = g.compile(CompileConfig(saver=saver))
    config = RunnableConfig(thread_id="fill")
    app.invoke({"log": []}, RunnableConfig(thread_id="warm-up"))
    fill_up(saver)

    with pytest.raises(CheckpointStoreError, match=r"thread 'fill'.*full"):
        app.invoke({"log": []}, config)

    saver._conn.execute("PRAGMA max_page_count = 1073741823")
    assert len(app.invoke({"log": []}, config)["log"]) == 1
