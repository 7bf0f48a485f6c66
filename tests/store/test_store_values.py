"""How stored values are decoded (the plain fast path and its fallback to the registry), and
searches mixing a namespace's own items with deeper ones."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import msgpack
import pytest

from graph_agent import SerializationError
from graph_agent.checkpoint.serde import FORMAT_VERSION, dumps, loads
from graph_agent.messages import UserMessage
from graph_agent.store import SqliteStore
from graph_agent.store.base import load_value


@pytest.mark.parametrize(
    "value",
    [
        {"text": "likes tea", "n": 3, "ok": True, "none": None, "x": 1.5, "tags": ["a", "b"]},
        {"nested": {"deep": [{"k": "v"}, [1, 2.0, False]]}, "raw": b"\x00\xff"},
        {"when": datetime(2024, 5, 1, tzinfo=UTC), "pair": (1, 2), "set": {3}},
        {"message": UserMessage(content="hi"), "surrogate": "\udc80"},
        {1: "an int key", "big": 2**64 - 1},
        {"text": "x" * 70_000},  # past the fast path's size: loads decodes it
    ],
)
def test_load_value_returns_what_loads_returns(value):
    data = dumps(value)
    decoded = load_value(data)
    assert decoded == value == loads(data)
    assert [type(v) for v in decoded.values()] == [type(v) for v in value.values()]


def test_a_value_holding_registered_types_round_trips_through_every_store(store):
    value = {"message": UserMessage(content="hi"), "when": datetime(2024, 5, 1, tzinfo=UTC)}
    store.put(("n",), "typed", value)
    store.put(("n",), "plain", {"text": "tea"})
    assert store.get(("n",), "typed").value == value
    assert isinstance(store.get(("n",), "typed").value["message"], UserMessage)
    found = {item.key: item.value for item in store.search(("n",), filter={"when": value["when"]})}
    assert found == {"typed": value}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        # an ext code no class is registered under: nothing is built from the row
        (bytes([FORMAT_VERSION]) + msgpack.packb({"v": msgpack.ExtType(99, b"os.system")}), "99"),
        (bytes([FORMAT_VERSION]) + msgpack.packb({"t": msgpack.Timestamp(1)}), "Timestamp"),
        (bytes([FORMAT_VERSION]) + msgpack.packb({"v": 1})[:-1], "truncated"),
        (bytes([7]) + msgpack.packb({"v": 1}), "format version 7"),
        (msgpack.packb({"v": 1}), "format version"),
    ],
)
def test_a_crafted_row_loads_nothing_it_should_not(tmp_path, data, message):
    with pytest.raises(SerializationError, match=message):
        load_value(data)
    with SqliteStore(tmp_path / "store.db") as store:
        store.put(("n",), "k", {"v": 1})
        store._conn.execute("UPDATE store_items SET value = ?", (sqlite3.Binary(data),))
        with pytest.raises(SerializationError, match=message):
            store.get(("n",), "k")
        with pytest.raises(SerializationError, match=message):
            store.search(("n",))


def test_a_search_merges_a_namespaces_own_items_with_deeper_ones_newest_first(store, clock):
    for number in range(6):
        namespace = ("users", "u1") if number % 2 else ("users", "u1", "notes")
        store.put(namespace, f"k{number}", {"kind": "fact", "n": number})
        clock(1)
    store.put(("users", "u10"), "beside", {"kind": "fact"})  # not under ("users", "u1")
    expected = [f"k{number}" for number in range(5, -1, -1)]
    assert [item.key for item in store.search(("users", "u1"))] == expected
    pages = [store.search(("users", "u1"), limit=2, offset=start) for start in (0, 2, 4)]
    assert [item.key for page in pages for item in page] == expected
    filtered = store.search(("users", "u1"), filter={"kind": "fact"}, limit=3, offset=1)
    assert [item.key for item in filtered] == expected[1:4]


def test_a_filtered_search_reads_on_past_rows_that_only_look_like_matches(store, clock):
    for number in range(30):  # the field's bytes sit in a nested dict: not a match
        store.put(("n",), f"decoy{number}", {"inner": {"kind": "fact"}})
        clock(1)
    store.put(("n",), "old", {"kind": "fact"})
    clock(-100)
    store.put(("n",), "older", {"kind": "fact"})
    found = store.search(("n",), filter={"kind": "fact"}, limit=1, offset=1)
    assert [item.key for item in found] == ["older"]


def test_a_filtered_search_whose_rows_all_match_reads_one_page(tmp_path, monkeypatch):
    with SqliteStore(tmp_path / "store.db") as store:
        for number in range(10):
            store.put(("n",), f"k{number}", {"kind": "fact", "n": number})
        scans = []
        scan = store._scan
        monkeypatch.setattr(store, "_scan", lambda *args: scans.append(args) or scan(*args))
        assert len(store.search(("n",), filter={"kind": "fact"}, limit=3, offset=2)) == 3
        assert [limit for _, _, limit, _, _ in scans] == [5]  # offset + limit rows, one query
        assert store.search(("n",), filter={"kind": "fact"}, limit=0) == []
