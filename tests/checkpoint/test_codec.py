"""Checkpoint headers: what every saver stores per checkpoint, and how a damaged one fails."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from graph_agent import SerializationError, SqliteSaver
from graph_agent.checkpoint.base import Checkpoint
from graph_agent.checkpoint.codec import decode_header, encode_header
from graph_agent.checkpoint.serde import dumps, loads

CHECKPOINT = Checkpoint(
    id="00a",
    thread_id="t",
    parent_id="009",
    step=3,
    next=("a", "b"),
    versions={"log": "00a"},
    barriers={"join": ("a",)},
    metadata={"source": "loop", "step": 3},
    created_at=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
)


def test_a_header_round_trips_every_field():
    loaded = decode_header(encode_header(CHECKPOINT), "t")

    assert loaded == CHECKPOINT


DAMAGE = [
    ("parent_id", None, "missing"),
    ("step", "3", "step is not an integer"),
    ("step", True, "step is not an integer"),
    ("next", "a", "next is not a list"),
    ("next", [1], "next is not a list"),
    ("versions", {"log": 1}, "versions is not a map"),
    ("versions", [], "versions is not a map"),
    ("barriers", {"join": "a"}, "barriers is not a map"),
    ("metadata", [], "metadata is not a map"),
    ("created_at", "yesterday", "created_at is not a time"),
    ("created_at", 2**62, "beyond any datetime"),
    ("created_at", -(2**62), "beyond any datetime"),
    ("id", 7, "id is not a string"),
]


@pytest.mark.parametrize(("field", "value", "problem"), DAMAGE)
def test_a_damaged_header_is_a_serialization_error_naming_the_field(
    field: str, value: Any, problem: str
) -> None:
    header = loads(encode_header(CHECKPOINT))
    if problem == "missing":
        del header[field]
    else:
        header[field] = value

    with pytest.raises(SerializationError, match=r"header .* is damaged") as caught:
        decode_header(dumps(header))
    assert (field if problem == "missing" else problem) in str(caught.value)


def test_a_saver_refuses_a_damaged_stored_header(tmp_path):
    saver = SqliteSaver(tmp_path / "runs.db")
    saver.put(Checkpoint(id="0001", thread_id="t", step=0, metadata={"source": "input"}))
    with saver._conn:
        saver._conn.execute("UPDATE checkpoints SET header = ?", (dumps({"id": "0001"}),))

    with pytest.raises(SerializationError, match="'0001' of thread 't' is damaged: field"):
        saver.get("t")
    assert not saver._conn.in_transaction  # the failed read ended its transaction
    saver.put(Checkpoint(id="0002", thread_id="u", step=0, metadata={"source": "input"}))
    assert saver.get("u").id == "0002"


def test_a_read_whose_transaction_sqlite_already_ended_raises_its_own_error(tmp_path, monkeypatch):
    saver = SqliteSaver(tmp_path / "runs.db")
    saver.put(Checkpoint(id="0001", thread_id="t", step=0, metadata={"source": "input"}))

    def failing_load(thread, ns, header, decoded=None):  # as when SQLite rolls back on a disk error
        saver._conn.execute("ROLLBACK")
        raise OSError("disk I/O error")

    monkeypatch.setattr(saver, "_load", failing_load)
    with pytest.raises(OSError, match="disk I/O error"):  # not "cannot commit"
        saver.get("t")
    assert not saver._conn.in_transaction
