"""The saver conformance suite: every saver must pass it unchanged."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import enum
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel

from graph_agent import (
    END,
    START,
    AppendStrategy,
    CompileConfig,
    MergeStrategy,
    RemoveMessage,
    ReplaceAll,
    RunnableConfig,
    SerializationError,
    StateGraph,
    ThreadBusyError,
    tool,
)
from graph_agent.agent import ReactAgent
from graph_agent.checkpoint import codec
from graph_agent.checkpoint.base import Checkpoint, new_checkpoint_id
from graph_agent.checkpoint.serde import register
from graph_agent.graph.saver import COPY_TASK, IDS_THREAD, Blob
from graph_agent.messages import AssistantMessage, ToolCall, ToolResponseMessage, UserMessage
from graph_agent.models import ScriptedChatModel


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


register(Color, 90)


def checkpoint(thread="t1", parent=None, step=0, ns="", blobs=None, versions=None, **extra):
    cid = new_checkpoint_id()
    blobs = blobs or {}
    versions = dict(versions or {})
    versions.update({key: cid for key in blobs})
    return Checkpoint(
        id=cid,
        thread_id=thread,
        checkpoint_ns=ns,
        parent_id=parent,
        step=step,
        next=("a", "b"),
        versions=versions,
        blobs=blobs,
        metadata={"source": "loop", "step": step, "writers": ["a"], **extra},
    )


def chain(saver, count, thread="t1", ns=""):
    """`count` checkpoints appending one item each to 'log' (deltas after the first)."""
    made = []
    parent = None
    versions: dict[str, str] = {}
    for step in range(count):
        if step == 0:
            blob = Blob("full", ["item-0"])
        else:
            blob = Blob("delta", [f"item-{step}"], base=versions["log"])
        cp = checkpoint(thread, parent, step, ns, {"log": blob}, versions)
        saver.put(cp)
        versions = cp.versions
        parent = cp.id
        made.append(cp)
    return made


def test_put_then_get_returns_the_checkpoint_with_its_values(saver):
    cp = checkpoint(blobs={"x": Blob("full", 41), "log": Blob("full", ["a"])})
    saver.put(cp)
    loaded = saver.get("t1")
    assert loaded.id == cp.id and loaded.thread_id == "t1" and loaded.parent_id is None
    assert loaded.values == {"x": 41, "log": ["a"]}
    assert loaded.next == ("a", "b") and loaded.step == 0
    assert loaded.metadata == {"source": "loop", "step": 0, "writers": ["a"]}
    assert loaded.versions == {"x": cp.id, "log": cp.id}
    assert isinstance(loaded.created_at, datetime)
    assert saver.get("t1", cp.id).id == cp.id


def test_changing_a_checkpoint_after_put_changes_nothing_stored(saver):
    cp = checkpoint(blobs={"log": Blob("full", ["a"])}, tag=["t"])
    cp.barriers = {"join": ("x",)}
    saver.put(cp)
    cp.versions["other"] = cp.id
    cp.barriers["join"] = ("x", "y")
    cp.metadata["tag"].append("changed")
    cp.metadata["writers"].append("b")
    cp.blobs["log"].value.append("b")
    got = saver.get("t1")
    assert got.versions == {"log": cp.id} and got.barriers == {"join": ("x",)}
    assert got.metadata["tag"] == ["t"] and got.metadata["writers"] == ["a"]
    assert got.values == {"log": ["a"]} and got.created_at == cp.created_at
    again = saver.get("t1")  # what one caller does with a loaded checkpoint stays its own
    got.versions.clear()
    got.barriers.clear()
    got.metadata.clear()
    assert saver.get("t1").versions == again.versions == {"log": cp.id}
    assert saver.get("t1").barriers == {"join": ("x",)} and saver.get("t1").metadata


@pytest.mark.parametrize(
    "metadata",
    [
        {"source": "loop", "step": 3, "writers": ["a"]},  # a one-node step, as the engine writes
        {"source": "loop", "step": True, "writers": ["a"]},  # the same shape, other types
        {"source": "loop", "step": 3, "writers": ("a",)},
        {"source": "loop", "step": 3, "writers": ["a", "b"]},
        {"source": "loop", "step": 3, "writers": [1]},
        {"source": "loop", "step": 3.0, "writers": ["a"]},
        {"step": 3, "writers": ["a"], "source": "loop"},  # another key order
        {"source": "loop", "step": 3, "other": ["a"]},
        {"source": "loop", "step": 3, "writers": ["a"], "user": {"k": [1]}},
    ],
)
def test_metadata_comes_back_equal_with_its_types_and_key_order(saver, metadata):
    metadata = copy.deepcopy(metadata)  # the parameter is shared by every saver's run
    cp = checkpoint()
    cp.metadata = metadata
    saver.put(cp)
    cp.metadata = {}  # replaced after put, and the original changed: nothing stored changes
    for value in metadata.values():
        if isinstance(value, list):
            value.append("changed")
    got = saver.get("t1").metadata
    expected = {k: v[:-1] if isinstance(v, list) else v for k, v in metadata.items()}
    assert got == expected and list(got) == list(expected)
    assert [type(v) for v in got.values()] == [type(v) for v in expected.values()]
    assert [type(x) for x in got.get("writers", ())] == [
        type(x) for x in expected.get("writers", ())
    ]


def test_a_created_at_no_saver_can_store_is_refused_at_put_storing_nothing(saver):
    class Zone(tzinfo):  # a tzinfo serde cannot store (only timezone and ZoneInfo)
        def utcoffset(self, dt):
            return timedelta(hours=1)

        def dst(self, dt):
            return timedelta(0)

    cp = checkpoint(blobs={"x": Blob("full", 1)})
    cp.created_at = datetime.now(Zone())
    with pytest.raises(SerializationError, match=r"checkpoint\['created_at'\]"):
        saver.put(cp)
    assert saver.get("t1") is None


def test_a_naive_or_offset_created_at_comes_back_equal(saver):
    parent = None
    for moment in (
        datetime(2024, 5, 1, 12),
        datetime(2024, 5, 1, 12, tzinfo=timezone(timedelta(hours=8))),
    ):
        cp = checkpoint(parent=parent)
        cp.created_at = moment
        saver.put(cp)
        parent = cp.id
        assert saver.get("t1").created_at == moment


def test_get_of_an_unknown_thread_or_id_is_none(saver):
    assert saver.get("nobody") is None
    chain(saver, 1)
    assert saver.get("t1", "no-such-id") is None


def test_every_checkpoint_of_a_delta_chain_loads_exactly(saver):
    made = chain(saver, 70)
    for step, cp in enumerate(made):
        assert saver.get("t1", cp.id).values["log"] == [f"item-{i}" for i in range(step + 1)]


def test_unchanged_keys_are_read_from_the_checkpoint_that_wrote_them(saver):
    first = checkpoint(blobs={"x": Blob("full", 1), "y": Blob("full", "kept")})
    saver.put(first)
    second = checkpoint(
        parent=first.id, step=1, blobs={"x": Blob("full", 2)}, versions=first.versions
    )
    saver.put(second)
    assert saver.get("t1").values == {"x": 2, "y": "kept"}
    assert saver.get("t1", first.id).values == {"x": 1, "y": "kept"}


def test_list_is_newest_first_with_limit_and_before(saver):
    made = chain(saver, 5)
    ids = [cp.id for cp in saver.list("t1")]
    assert ids == [cp.id for cp in reversed(made)]
    assert [cp.id for cp in saver.list("t1", limit=2)] == ids[:2]
    assert [cp.id for cp in saver.list("t1", before=made[2].id)] == [made[1].id, made[0].id]
    assert [cp.id for cp in saver.list("t1", limit=1, before=made[2].id)] == [made[1].id]
    assert next(iter(saver.list("t1"))).values["log"] == [f"item-{i}" for i in range(5)]


def test_threads_are_isolated(saver):
    chain(saver, 3, thread="a")
    chain(saver, 1, thread="b")
    assert len(list(saver.list("a"))) == 3
    assert saver.get("b").values["log"] == ["item-0"]
    assert sorted(saver.threads()) == ["a", "b"]


def test_namespaces_are_isolated(saver):
    chain(saver, 2, ns="")
    chain(saver, 3, ns="child:1")
    assert len(list(saver.list("t1"))) == 2
    assert len(list(saver.list("t1", checkpoint_ns="child:1"))) == 3
    assert saver.get("t1", checkpoint_ns="child:1").values["log"] == ["item-0", "item-1", "item-2"]


def test_delete_thread_forgets_everything_of_that_thread_only(saver):
    made = chain(saver, 3, thread="gone")
    chain(saver, 1, thread="stays")
    saver.put_writes("gone", "", made[-1].id, "task", [("out", {"x": 1})])
    saver.delete_thread("gone")
    assert saver.get("gone") is None and list(saver.list("gone")) == []
    assert saver.get("stays") is not None
    assert "gone" not in saver.threads()


def test_prune_keeps_the_newest_checkpoints_loading_exactly_and_frees_space(saver):
    made = chain(saver, 100)
    before = saver.stored_bytes("t1")
    removed = saver.prune("t1", keep_last=10)
    assert removed == 90
    remaining = list(saver.list("t1"))
    assert [cp.id for cp in remaining] == [cp.id for cp in reversed(made[-10:])]
    for cp in remaining:
        assert cp.values["log"] == [f"item-{i}" for i in range(cp.step + 1)]
    assert saver.stored_bytes("t1") < before / 3


def test_prune_keeps_what_a_fork_from_a_dropped_checkpoint_needs(saver):
    made = chain(saver, 20)
    fork = checkpoint(
        parent=made[5].id,
        step=6,
        blobs={"log": Blob("delta", ["forked"], base=made[5].versions["log"])},
        versions=made[5].versions,
        source="fork",
    )
    saver.put(fork)
    saver.prune("t1", keep_last=3)
    assert saver.get("t1", fork.id).values["log"] == [f"item-{i}" for i in range(6)] + ["forked"]


def test_a_listing_skips_what_a_prune_or_delete_took_meanwhile(saver):
    made = chain(saver, 12)
    listing = saver.list("t1")
    first = [next(listing) for _ in range(3)]

    saver.prune("t1", keep_last=5)  # another run or process prunes now
    rest = list(listing)

    assert [cp.id for cp in first + rest] == [cp.id for cp in reversed(made[-5:])]
    for cp in rest:
        assert cp.values["log"] == [f"item-{i}" for i in range(cp.step + 1)]
    listing = saver.list("t1")
    next(listing)
    saver.delete_thread("t1")
    assert list(listing) == []


def test_alist_reads_one_consistent_listing(saver):
    made = chain(saver, 4)
    listed = asyncio.run(saver.alist("t1"))
    assert [cp.id for cp in listed] == [cp.id for cp in reversed(made)]
    assert asyncio.run(saver.aget("t1", made[1].id)).values["log"] == ["item-0", "item-1"]


def test_pending_writes_are_idempotent_and_belong_to_their_checkpoint(saver):
    first, second = chain(saver, 2)
    saver.put_writes("t1", "", first.id, "task-a", [("out", {"v": 1}), ("__record__:k", 5)])
    saver.put_writes("t1", "", first.id, "task-a", [("out", {"v": 2})])
    saver.put_writes("t1", "", first.id, "task-b", [("out", {"v": 3})])
    writes = {(w.task_id, w.channel): w.value for w in saver.get("t1", first.id).pending_writes}
    assert writes == {
        ("task-a", "out"): {"v": 2},
        ("task-a", "__record__:k"): 5,
        ("task-b", "out"): {"v": 3},
    }
    assert saver.get("t1", second.id).pending_writes == ()


VALUES = {
    "none": None,
    "bool": True,
    "int": -12,
    "big": 2**80,
    "float": 1.5,
    "str": "héllo\x00world",
    "bytes": b"\x00\xff",
    "list": [1, [2, 3]],
    "tuple": (1, (2, "x")),
    "set": {1, 2, 3},
    "frozenset": frozenset({"a"}),
    "dict": {"a": {"b": (1, 2)}, 3: "int key"},
    "datetime": datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
    "naive": datetime(2026, 1, 2, 3, 4, 5),
    "delta": timedelta(seconds=3.5),
    "decimal": Decimal("1.10"),
    "enum": Color.BLUE,
    "remove": RemoveMessage("m1"),
    "replace_all": ReplaceAll(["a", "b"]),
}


@pytest.mark.parametrize("name", sorted(VALUES))
def test_every_state_type_round_trips(saver, name):
    value = VALUES[name]
    saver.put(checkpoint(blobs={"v": Blob("full", value)}))
    loaded = saver.get("t1").values["v"]
    assert loaded == value and type(loaded) is type(value)


def test_a_checkpoint_whose_parent_is_not_the_newest_is_refused(saver):
    first, _second = chain(saver, 2)
    with pytest.raises(ThreadBusyError, match="moved on while this run was working"):
        saver.put(checkpoint(parent=first.id, step=1))


def test_an_explicit_fork_from_an_old_checkpoint_is_accepted(saver):
    first, second = chain(saver, 2)
    fork = checkpoint(parent=first.id, step=1, source="fork")
    saver.put(fork)
    assert saver.get("t1").id == fork.id
    assert saver.get("t1", second.id) is not None


def test_a_thread_can_be_held_by_one_run_at_a_time(saver):
    lease = saver.acquire("t1")
    with pytest.raises(ThreadBusyError, match="busy"):
        saver.acquire("t1")
    other = saver.acquire("t2")
    saver.release(lease)
    saver.release(lease)
    saver.release(saver.acquire("t1"))
    saver.release(other)


@pytest.mark.parametrize(
    "thread", ["../x", "a'b\"c;--", "nul\x00byte", "x" * 10_000, "ü/\\", "lone\udcffsurrogate"]
)
def test_odd_thread_ids_are_opaque_strings(saver, thread):
    chain(saver, 2, thread=thread)
    chain(saver, 1, thread="plain")
    assert saver.get(thread).values["log"] == ["item-0", "item-1"]
    assert thread in saver.threads()
    saver.release(saver.acquire(thread))
    saver.delete_thread(thread)
    assert saver.get(thread) is None and saver.get("plain") is not None


def test_lone_surrogates_in_names_values_metadata_and_writes_come_back_exactly(saver, reopen):
    # what os.listdir() returns for undecodable bytes, and half of a split surrogate pair
    odd = "report-\udcff.txt"
    thread, ns, key, channel = f"t-{odd}", f"ns-{odd}", f"key-{odd}", f"__record__:{odd}"
    stored = {odd: [odd, ("\ud83d", b"x")], "plain": "ok"}
    cp = checkpoint(thread, ns=ns, blobs={key: Blob("full", stored)}, name=odd)
    saver.put(cp)
    saver.put_writes(thread, ns, cp.id, "task", [(channel, odd)])
    saver.release(saver.acquire(thread, ns))

    fresh = reopen()
    loaded = fresh.get(thread, checkpoint_ns=ns)
    assert loaded.values == {key: stored} and loaded.metadata["name"] == odd
    assert [(w.task_id, w.channel, w.value) for w in loaded.pending_writes] == [
        ("task", channel, odd)
    ]
    assert [c.id for c in fresh.list(thread, checkpoint_ns=ns)] == [cp.id]
    assert fresh.threads() == [thread]


def test_async_twins_match_the_sync_methods(saver):
    async def scenario():
        cp = checkpoint(blobs={"x": Blob("full", 1)})
        await saver.aput(cp)
        await saver.aput_writes("t1", "", cp.id, "task", [("out", {"x": 2})])
        loaded = await saver.aget("t1")
        listed = await saver.alist("t1", limit=5)
        lease = await saver.aacquire("t1")
        await saver.arelease(lease)
        return loaded, listed

    loaded, listed = asyncio.run(scenario())
    assert loaded.values == {"x": 1} and len(loaded.pending_writes) == 1
    assert [cp.id for cp in listed] == [loaded.id]


# a checkpoint moved to another thread or namespace, and copy_thread


@pytest.mark.parametrize(("thread", "ns"), [("t1", "child"), ("t2", ""), ("t2", "child")])
def test_a_loaded_checkpoint_put_into_another_thread_or_namespace_loads_there(saver, thread, ns):
    made = chain(saver, 5)
    source = saver.get("t1")
    saver.put(dataclasses.replace(source, thread_id=thread, checkpoint_ns=ns, parent_id=None))
    copied = saver.get(thread, checkpoint_ns=ns)
    assert copied.id == made[-1].id and copied.values == source.values
    assert copied.versions == source.versions
    following = checkpoint(  # the next step there appends a delta to the copied list
        thread,
        copied.id,
        5,
        ns,
        {"log": Blob("delta", ["item-5"], base=copied.versions["log"])},
        copied.versions,
    )
    saver.put(following)
    saver.prune(thread, keep_last=1)
    assert saver.get(thread, checkpoint_ns=ns).values["log"] == [f"item-{i}" for i in range(6)]
    assert saver.get("t1").values == source.values


def test_a_checkpoint_put_into_another_thread_stays_readable_once_the_source_is_gone(saver):
    chain(saver, 5)
    source = saver.get("t1")
    saver.put(dataclasses.replace(source, thread_id="t2", parent_id=None))
    saver.delete_thread("t1")
    assert saver.get("t2").values == source.values


def test_an_explicit_fork_into_another_namespace_keeps_its_parent_and_loads(saver):
    made = chain(saver, 3)
    source = saver.get("t1")
    fork = dataclasses.replace(source, checkpoint_ns="child", metadata={"source": "fork"})
    saver.put(fork)
    copied = saver.get("t1", checkpoint_ns="child")
    assert copied.parent_id == made[-2].id and copied.values == source.values


def test_a_checkpoint_naming_a_version_its_thread_lacks_and_no_value_is_refused(saver):
    made = chain(saver, 3)
    dangling = checkpoint("t2", versions={"log": made[-1].versions["log"]})
    with pytest.raises(SerializationError, match=r"state\['log'\].*no value"):
        saver.put(dangling)
    assert saver.get("t2") is None and "t2" not in saver.threads()


def test_a_delta_on_a_version_its_thread_lacks_is_refused_storing_nothing(saver):
    made = chain(saver, 3)
    delta = Blob("delta", ["item-3"], base=made[-1].versions["log"])
    with pytest.raises(SerializationError, match=r"state\['log'\]"):
        saver.put(checkpoint("t2", blobs={"log": delta, "x": Blob("full", 1)}))
    assert saver.get("t2") is None and saver.stored_bytes("t2") == 0


def two_namespaces_with_writes(saver, thread="src"):
    """A thread with 5 checkpoints at top level, 3 in 'child:1', pending writes in both."""
    top = chain(saver, 5, thread=thread)
    child = chain(saver, 3, thread=thread, ns="child:1")
    saver.put_writes(thread, "", top[-1].id, "task-a", [("out", {"v": (1, "a")})])
    saver.put_writes(thread, "child:1", child[0].id, "task-b", [("__record__:k", 5)])
    return top, child


STORED = ("id", "parent_id", "step", "next", "versions", "barriers", "metadata", "created_at")


def snapshot_of(saver, thread, *, copied_from=None):
    """Everything a thread holds, per namespace, newest first; for a copy (``copied_from``),
    without the write naming the source on each checkpoint with pending writes, after
    checking it is there (see IDS_THREAD)."""
    snapshot = {}
    for ns in ("", "child:1"):
        rows = []
        for cp in saver.list(thread, checkpoint_ns=ns):
            writes = cp.pending_writes
            if copied_from is not None and writes:
                alias = [w for w in writes if w.channel == IDS_THREAD]
                assert [(w.task_id, w.value) for w in alias] == [(COPY_TASK, copied_from)]
                writes = tuple(w for w in writes if w.channel != IDS_THREAD)
            rows.append((*(getattr(cp, name) for name in STORED), cp.values, writes))
        snapshot[ns] = rows
    return snapshot


def test_copy_thread_copies_every_namespace_checkpoint_and_pending_write(saver):
    two_namespaces_with_writes(saver)
    before = snapshot_of(saver, "src")
    saver.copy_thread("src", "dst")
    assert snapshot_of(saver, "dst", copied_from="src") == snapshot_of(saver, "src") == before
    assert len(before[""]) == 5 and len(before["child:1"]) == 3
    copied_writes = saver.get("dst").pending_writes
    assert next(w.value for w in copied_writes if w.channel != IDS_THREAD) == {"v": (1, "a")}
    assert sorted(saver.threads()) == ["dst", "src"]


def test_a_copied_thread_stays_readable_after_its_source_is_pruned_then_deleted(saver):
    two_namespaces_with_writes(saver)
    copied = snapshot_of(saver, "src")
    saver.copy_thread("src", "dst")
    saver.prune("src", keep_last=1)
    assert snapshot_of(saver, "dst", copied_from="src") == copied
    saver.delete_thread("src")
    assert snapshot_of(saver, "dst", copied_from="src") == copied


def test_a_copied_thread_and_its_source_go_on_apart(saver):
    two_namespaces_with_writes(saver)
    saver.copy_thread("src", "dst")
    for thread, item in (("src", "from-src"), ("dst", "from-dst")):
        head = saver.get(thread)
        blob = Blob("delta", [item], base=head.versions["log"])
        saver.put(checkpoint(thread, head.id, 5, "", {"log": blob}, head.versions))
    assert saver.get("src").values["log"][-2:] == ["item-4", "from-src"]
    assert saver.get("dst").values["log"][-2:] == ["item-4", "from-dst"]
    saver.prune("dst", keep_last=1)
    assert len(list(saver.list("src"))) == 6


def test_copy_thread_onto_a_thread_with_checkpoints_is_refused_and_changes_nothing(saver):
    two_namespaces_with_writes(saver)
    chain(saver, 2, thread="dst")
    before = snapshot_of(saver, "dst")
    with pytest.raises(ValueError, match=r"'dst' already has checkpoints.*delete_thread"):
        saver.copy_thread("src", "dst")
    with pytest.raises(ValueError, match="already has checkpoints"):
        saver.copy_thread("src", "src")
    assert snapshot_of(saver, "dst") == before


def test_copy_thread_of_a_thread_without_checkpoints_is_refused(saver):
    with pytest.raises(ValueError, match=r"'nobody' has no checkpoints"):
        saver.copy_thread("nobody", "dst")
    assert saver.get("dst") is None


def test_acopy_thread_matches_copy_thread(saver):
    two_namespaces_with_writes(saver)
    asyncio.run(saver.acopy_thread("src", "dst"))
    assert snapshot_of(saver, "dst", copied_from="src") == snapshot_of(saver, "src")


# every type a checkpoint stores, written by nodes, read back through a fresh saver


class Mood(enum.Enum):
    CALM = "calm"


class Reading(BaseModel):
    """A registered model whose fields hold the stored types too."""

    label: str
    pair: tuple[int, str]
    extra: Any = None


register(Mood, 91)
register(Reading, 92)


def every_stored_type():
    return {
        "tuple": (1, "a"),
        "nested_tuple": (1, (2, ("x", b"y"))),
        "set": {1, 2},
        "frozenset": frozenset({"f"}),
        "bytes": b"\x00\xff",
        "aware": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        "naive": datetime(2026, 1, 2, 3, 4, 5),
        "enum": Mood.CALM,
        "model": Reading(label="r", pair=(1, "a"), extra={"k": (2, {3})}),
        "messages": [
            UserMessage("hi"),
            AssistantMessage(tool_calls=[ToolCall("c1", "look", {"at": [1, 2]})]),
            ToolResponseMessage(tool_call_id="c1", content="seen"),
        ],
        "in_list": [(1, 2), {3}, Mood.CALM],
        "in_dict": {"k": (5, 6), 7: b"b", "when": datetime(2026, 5, 1, tzinfo=UTC)},
    }


def typed(value):
    """``value`` as a tree that tells apart every type in it (a tuple from a list...)."""
    if isinstance(value, dict):
        return ("dict", sorted((repr(typed(k)), typed(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (type(value).__name__, [typed(item) for item in value])
    if isinstance(value, set | frozenset):
        return (type(value).__name__, sorted(map(repr, map(typed, value))))
    if isinstance(value, BaseModel):
        return (type(value).__name__, typed(dict(value)))
    return (type(value).__name__, value)


def test_every_stored_type_comes_back_the_same_through_a_fresh_saver(saver, reopen):
    payload = every_stored_type()
    graph = StateGraph("types", key_strategies={"log": AppendStrategy(), "merged": MergeStrategy()})
    graph.add_node("first", lambda s: {"replaced": payload, "log": [payload], "merged": payload})
    graph.add_node("then", lambda s: {"log": [(2, "b"), payload], "merged": {"late": (3, "c")}})
    graph.add_edge(START, "first").add_edge("first", "then").add_edge("then", END)
    config = RunnableConfig(thread_id="types", metadata={"payload": payload, "pair": (1, "a")})
    graph.compile(CompileConfig(saver=saver)).invoke({"given": (0, "z")}, config)

    newest, *_ = reopen().list("types")
    expected = {
        "given": (0, "z"),
        "replaced": payload,
        "log": [payload, (2, "b"), payload],
        "merged": {**payload, "late": (3, "c")},
    }
    assert typed(newest.values) == typed(expected)
    assert typed(newest.metadata["payload"]) == typed(payload)
    assert typed(newest.metadata["pair"]) == typed((1, "a"))


# a tool's result with a lone surrogate, through an agent


@pytest.mark.parametrize("thread", ["files", "files-\udcff"])
def test_an_agent_whose_tool_returns_a_lone_surrogate_finishes_with_the_exact_string(
    saver, reopen, thread
):
    name = "photo-\udcff.jpg"  # os.listdir() of a file whose name is not UTF-8

    @tool
    def list_files() -> str:
        """List the files."""
        return f"{name}\nnotes.txt"

    model = ScriptedChatModel(
        [AssistantMessage(tool_calls=[ToolCall("c1", "list_files", {})]), "Two files."]
    )
    agent = ReactAgent("lister", model, tools=[list_files], saver=saver)
    config = RunnableConfig(thread_id=thread)

    assert agent.call("What files are there?", config).text == "Two files."
    (response,) = [m for m in reopen().get(thread).values["messages"] if m.role == "tool"]
    assert isinstance(response, ToolResponseMessage) and not response.is_error
    assert response.content == f"{name}\nnotes.txt"
    assert model.requests[1].messages[-1].content == response.content


# a history walk decodes what several checkpoints share once


def test_a_history_walk_decodes_a_blob_shared_by_several_checkpoints_once(saver, monkeypatch):
    big = {"rows": [f"row {i}" for i in range(20_000)]}  # ~200 kB stored, written once
    g = StateGraph("history", key_strategies={"log": AppendStrategy()})
    g.add_node("step", lambda s: {"log": [len(s["log"])]})
    g.add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: "step" if len(s["log"]) < 20 else END)
    app = g.compile(CompileConfig(saver=saver))
    config = RunnableConfig(thread_id="long")
    app.invoke({"big": big, "log": []}, config)

    decoded_big = []
    real_loads = codec.loads

    def counting_loads(data):
        value = real_loads(data)
        if isinstance(value, dict) and "rows" in value:
            decoded_big.append(value)
        return value

    monkeypatch.setattr(codec, "loads", counting_loads)
    history = list(app.get_state_history(config))

    assert len(history) == 21 and len(decoded_big) == 1
    assert all(snapshot.values["big"] is history[0].values["big"] for snapshot in history)
    assert [len(snapshot.values["log"]) for snapshot in history] == list(range(20, -1, -1))
    assert history[0].values["big"] == big
