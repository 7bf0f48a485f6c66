"""Conformance for damaged storage: rows a crash, a bad disk or a hand edit left wrongly shaped
load as a typed error naming the thread and what is wrong, at once, on every saver."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from graph_agent import (
    END,
    START,
    CompileConfig,
    RunnableConfig,
    SerializationError,
    StateGraph,
)
from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.checkpoint.codec import encode_header
from graph_agent.checkpoint.postgres import PostgresSaver
from graph_agent.checkpoint.serde import dumps, loads
from graph_agent.checkpoint.sqlite import SqliteSaver
from graph_agent.graph.saver import Blob
from graph_agent.graph.types import Interrupt
from tests.checkpoint import tamper
from tests.checkpoint.postgres_db import fresh_schema
from tests.checkpoint.test_conformance import chain, checkpoint


def outcome_within(
    seconds: float, saver: CheckpointSaver, call: Callable[[], Any]
) -> tuple[Any, float]:
    """What ``call()`` returned or raised, and how long it took; the test fails if it takes
    longer than ``seconds`` (a SQLite query still running then is interrupted, so it ends)."""
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(call())
        except BaseException as exc:
            result.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    started = time.perf_counter()
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        if isinstance(saver, SqliteSaver):
            saver._conn.interrupt()
        worker.join(10)
        pytest.fail(f"the call was still running after {seconds} s")
    return result[0], time.perf_counter() - started


# a delta chain that loops


@pytest.mark.parametrize("loop", ["self", "two"])
def test_a_delta_chain_that_loops_is_a_serialization_error_naming_thread_and_key_at_once(
    saver, loop
):
    made = chain(saver, 3, thread="looping")
    newest, middle = made[-1].id, made[-2].id
    if loop == "self":
        tamper.set_blob_base(saver, "looping", "log", newest, base=newest)
    else:
        tamper.set_blob_base(saver, "looping", "log", middle, base=newest)
    chain(saver, 2, thread="neighbour")

    for load in (lambda: saver.get("looping"), lambda: list(saver.list("looping"))):
        error, elapsed = outcome_within(5, saver, load)
        assert isinstance(error, SerializationError), error
        assert "'looping'" in str(error) and "state['log']" in str(error)
        assert "loops" in str(error)
        assert elapsed < 0.5, elapsed
    assert saver.get("neighbour").values["log"] == ["item-0", "item-1"]


def test_a_delta_whose_base_is_gone_is_a_serialization_error_naming_thread_and_key(saver):
    made = chain(saver, 2, thread="broken")
    tamper.set_blob_base(saver, "broken", "log", made[-1].id, base="0000-gone")

    with pytest.raises(SerializationError, match=r"state\['log'\] of thread 'broken'.*0000-gone"):
        saver.get("broken")


def test_a_checkpoint_whose_delta_names_a_later_base_is_stored_whole_and_loads(saver):
    first = checkpoint(blobs={"log": Blob("full", ["a"])})
    saver.put(first)
    second = checkpoint(parent=first.id, step=1, blobs={"log": Blob("full", ["a", "b"])})
    saver.put(second)
    # a hand-built checkpoint that sorts before `second` yet appends to it: put stores it
    # whole (from its values), since a chain only ever leads back to older versions
    forked = checkpoint(step=2, source="fork", blobs={})
    forked.id = first.id[:-1] + "~"  # sorts after first, before second
    forked.parent_id = first.id
    forked.versions = {"log": forked.id}
    forked.blobs = {"log": Blob("delta", ["c"], base=second.id)}
    forked.values = {"log": ["a", "b", "c"]}
    saver.put(forked)

    assert saver.get("t1", forked.id).values["log"] == ["a", "b", "c"]


# pending writes and headers of the wrong shape


def paused_graph(saver):
    """A one-node graph whose first run stores a checkpoint to tamper with."""
    g = StateGraph("shapes")
    g.add_node("work", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "work").add_edge("work", END)
    return g.compile(CompileConfig(saver=saver, interrupt_before=("work",)))


BAD_WRITES = [
    ("__interrupt__", "please answer", "a list of Interrupt"),
    ("__breakpoint__", [{"id": "i1"}], "a list of Interrupt"),
    ("__interrupt__", [Interrupt(7, "v", "work")], "a list of Interrupt"),
    ("__resume__", ["yes"], "a map of interrupt ids"),
    ("__write__", b"junk", "a map with 'update'"),
    ("__write__", {"update": {"n": 1}}, "a map with 'update'"),
    ("__write__", {"update": {"n": 1}, "goto": "work"}, "a map with 'update'"),
    ("__nested__", {"node": "work"}, "a map with 'node'"),
    ("__scoped__", {"i1": "scope"}, "a map of interrupt ids to"),
]


@pytest.mark.parametrize(("channel", "value", "expected"), BAD_WRITES)
def test_a_stored_pending_write_of_the_wrong_shape_is_a_serialization_error_naming_it(
    saver, channel, value, expected
):
    app, config = paused_graph(saver), RunnableConfig(thread_id="shapes")
    app.invoke({"n": 0}, config)
    newest = saver.get("shapes").id
    tamper.add_write_row(saver, "shapes", newest, "task-1", channel, dumps(value))

    for load in (lambda: app.get_state(config), lambda: app.invoke(None, config)):
        with pytest.raises(SerializationError) as caught:
            load()
        message = str(caught.value)
        assert f"{channel!r}" in message and "'task-1'" in message, message
        assert "thread 'shapes'" in message and expected in message, message


@pytest.mark.parametrize(("channel", "value", "expected"), BAD_WRITES)
def test_put_writes_refuses_a_pending_write_the_engine_could_not_read_back(
    saver, channel, value, expected
):
    (first,) = chain(saver, 1)
    with pytest.raises(SerializationError, match=expected):
        saver.put_writes("t1", "", first.id, "task-1", [(channel, value)])
    assert saver.get("t1").pending_writes == ()


@pytest.fixture(params=["sqlite", "postgres"])
def durable_saver(request: pytest.FixtureRequest, tmp_path):
    """The savers that store a checkpoint's header as bytes (MemorySaver keeps its fields)."""
    if request.param == "sqlite":
        yield SqliteSaver(tmp_path / "runs.db")
        return
    with fresh_schema() as dsn, PostgresSaver(dsn, pool_size=2) as postgres:
        yield postgres


@pytest.mark.parametrize("created_at", [2**62, -(2**62)])
def test_a_stored_header_whose_time_is_out_of_range_is_a_serialization_error(
    durable_saver, created_at
):
    (first,) = chain(durable_saver, 1)
    header = loads(encode_header(first))
    header["created_at"] = created_at
    tamper.set_header(durable_saver, "t1", first.id, dumps(header))

    with pytest.raises(SerializationError, match=r"of thread 't1' is damaged: created_at"):
        durable_saver.get("t1")
