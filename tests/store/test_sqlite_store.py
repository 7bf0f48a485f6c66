"""SqliteStore on its own: sharing the checkpoint file, and files it must refuse."""

from __future__ import annotations

import sqlite3

import pytest

from graph_agent import END, START, CompileConfig, RunnableConfig, SerializationError, StateGraph
from graph_agent.checkpoint.sqlite import SqliteSaver
from graph_agent.store.sqlite import SqliteStore


def _graph(saver: SqliteSaver, store: SqliteStore):
    def note(state, config):
        config.store.put(("notes",), config.thread_id, {"n": state["n"]})
        return {"n": state["n"] + 1}

    g = StateGraph("notes")
    g.add_node("note", note)
    g.add_edge(START, "note").add_edge("note", END)
    return g.compile(CompileConfig(saver=saver, store=store))


@pytest.mark.parametrize("store_first", [True, False])
def test_the_store_and_the_saver_share_one_file_in_either_order(tmp_path, store_first):
    path = tmp_path / "agent.db"
    if store_first:
        store, saver = SqliteStore(path), SqliteSaver(path)
    else:
        saver, store = SqliteSaver(path), SqliteStore(path)
    app = _graph(saver, store)
    assert app.invoke({"n": 1}, RunnableConfig(thread_id="t1"))["n"] == 2
    saver.close()
    store.close()
    saver, store = SqliteSaver(path), SqliteStore(path)
    assert saver.get("t1") is not None
    assert store.get(("notes",), "t1").value == {"n": 1}
    saver.close()
    store.close()


def test_a_file_of_another_program_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "theirs.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE store (prefix TEXT, key TEXT, value TEXT)")
    with pytest.raises(SerializationError, match="another program's tables"):
        SqliteStore(path)
    with sqlite3.connect(path) as conn:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master")]
    assert tables == ["store"]


def test_a_file_that_is_not_a_database_is_refused(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("just some notes\n")
    with pytest.raises(SerializationError, match="not a usable SQLite database"):
        SqliteStore(path)
    assert path.read_text() == "just some notes\n"


def test_a_store_table_with_other_columns_is_refused(tmp_path):
    path = tmp_path / "odd.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at REAL)")
        conn.execute("CREATE TABLE store_items (namespace TEXT, key TEXT)")
    with pytest.raises(SerializationError, match="store_items table has the columns"):
        SqliteStore(path)
