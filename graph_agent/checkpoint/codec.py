"""How savers turn checkpoints into bytes and back; shared so every saver stores the same thing.

A checkpoint is stored as a *header* (everything but the values) plus one *blob* per key that
changed. Thread id and namespace are not in the header: the saver keys its rows by them.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from graph_agent.checkpoint.base import Checkpoint, PendingWrite, _show
from graph_agent.checkpoint.serde import dumps, loads, register
from graph_agent.checkpoint.thread_search import ThreadHeads
from graph_agent.graph.errors import SerializationError
from graph_agent.graph.saver import ENGINE_CHANNELS, Blob, write_problem
from graph_agent.graph.types import Interrupt

register(Interrupt, 31)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_FIRST_MICROS = (datetime.min.replace(tzinfo=UTC) - _EPOCH) // _MICROSECOND
_LAST_MICROS = (datetime.max.replace(tzinfo=UTC) - _EPOCH) // _MICROSECOND
"""The stored times (UTC microseconds since the epoch) a datetime can hold."""


def encode_header(checkpoint: Checkpoint) -> bytes:
    """The checkpoint without its values, as bytes.

    Written once per superstep, so it sticks to what msgpack packs natively: ``next`` and
    barrier sources as lists, a UTC ``created_at`` as integer microseconds since the epoch.
    """
    created_at: Any = checkpoint.created_at
    if created_at.tzinfo is UTC:
        created_at = (created_at - _EPOCH) // _MICROSECOND
    barriers = checkpoint.barriers
    header = {
        "id": checkpoint.id,
        "parent_id": checkpoint.parent_id,
        "step": checkpoint.step,
        "next": list(checkpoint.next),
        "versions": checkpoint.versions,
        "barriers": {k: list(v) for k, v in barriers.items()} if barriers else {},
        "metadata": checkpoint.metadata,
        "created_at": created_at,
    }
    return dumps(header, root="checkpoint")


def decode_header(data: bytes, thread_id: str = "", checkpoint_ns: str = "") -> Checkpoint:
    """A checkpoint from its header bytes; ``values`` and ``pending_writes`` stay empty.

    Raises:
        SerializationError: the bytes are not a header :func:`encode_header` wrote (a field
            is missing or has the wrong type): never a checkpoint with hollow fields.
    """
    header = loads(data)
    if not isinstance(header, dict) or "id" not in header:
        raise SerializationError("stored checkpoint header is not a checkpoint record")
    problem = _header_problem(header)
    if problem is not None:
        shown = header["id"] if isinstance(header["id"], str) else "?"
        place = f" of {_place(thread_id, checkpoint_ns)}" if thread_id else ""
        raise SerializationError(f"stored checkpoint header {shown!r}{place} is damaged: {problem}")
    return Checkpoint(
        id=header["id"],
        thread_id=thread_id,
        checkpoint_ns=checkpoint_ns,
        parent_id=header["parent_id"],
        step=header["step"],
        next=tuple(header["next"]),
        versions=dict(header["versions"]),
        barriers={k: tuple(v) for k, v in header["barriers"].items()},
        metadata=dict(header["metadata"]),
        created_at=_created_at(header["created_at"]),
    )


def decode_thread_heads(thread_id: str, newest: bytes, oldest: bytes) -> ThreadHeads:
    """A thread's newest and oldest checkpoint headers, decoded (once, when they are one)."""
    first = decode_header(newest, thread_id)
    return ThreadHeads(
        thread_id, first, first if oldest == newest else decode_header(oldest, thread_id)
    )


def _header_problem(header: dict[Any, Any]) -> str | None:
    """What is wrong with a decoded header, or None."""
    missing = _HEADER_FIELDS.difference(header)
    if missing:
        return f"field(s) {', '.join(sorted(missing))} missing"
    if not isinstance(header["id"], str):
        return "id is not a string"
    if not (header["parent_id"] is None or isinstance(header["parent_id"], str)):
        return "parent_id is not a string"
    if type(header["step"]) is not int:
        return "step is not an integer"
    if not (isinstance(header["next"], list) and _strings(header["next"])):
        return "next is not a list of node names"
    versions = header["versions"]
    if not (isinstance(versions, dict) and _strings(versions) and _strings(versions.values())):
        return "versions is not a map of key names to checkpoint ids"
    barriers = header["barriers"]
    if not (
        isinstance(barriers, dict)
        and _strings(barriers)
        and all(isinstance(v, list) and _strings(v) for v in barriers.values())
    ):
        return "barriers is not a map of barrier names to node names"
    if not isinstance(header["metadata"], dict):
        return "metadata is not a map"
    created_at = header["created_at"]
    if type(created_at) is not int and not isinstance(created_at, datetime):
        return "created_at is not a time"
    if type(created_at) is int and not _FIRST_MICROS <= created_at <= _LAST_MICROS:
        return f"created_at is {created_at} microseconds from 1970, beyond any datetime"
    return None


_HEADER_FIELDS = frozenset(
    ("id", "parent_id", "step", "next", "versions", "barriers", "metadata", "created_at")
)


def _strings(items: Iterable[Any]) -> bool:
    return all(isinstance(item, str) for item in items)


def _created_at(stored: Any) -> datetime:
    if isinstance(stored, int):  # UTC microseconds (see encode_header)
        return _EPOCH + timedelta(microseconds=stored)
    if not isinstance(stored, datetime):
        raise SerializationError("stored checkpoint header has no valid created_at")
    return stored


def encode_blob(key: str, blob: Blob) -> bytes:
    """A key's stored value (whole, or the appended tail), failing with the key's name."""
    try:
        return dumps(blob.value)
    except SerializationError:
        pass  # once more, naming the key in the error (not worth building that name per blob)
    try:
        return dumps(blob.value, root=f"state[{key!r}]")
    except SerializationError as exc:
        raise SerializationError(
            f"{exc}. Nothing was saved: the thread stays at its last checkpoint"
        ) from exc


def blobs_to_store(
    checkpoint: Checkpoint, is_stored: Callable[[str, str], bool]
) -> list[tuple[str, str, Blob]]:
    """What ``put`` must store so that ``checkpoint`` loads in its thread and namespace, as
    ``(key, version, blob)``; ``is_stored(key, version)`` tells whether a blob is there already.

    That is its own blobs (at its id), and for each version it names that is not stored there
    (it was stored in another thread or namespace: the checkpoint was loaded there and put
    here) the key's value whole, from the checkpoint's ``values``. An appended part whose base
    is not stored there, or does not sort before the checkpoint's id (a chain only leads back
    to older versions: see :func:`load_values`), becomes the key's whole value the same way.

    Raises:
        SerializationError: a version the checkpoint names is not stored there, and the
            checkpoint holds no value to store for it: it could never load, so nothing is
            stored.
    """
    own_id, values, versions = checkpoint.id, checkpoint.values, checkpoint.versions
    blobs: list[tuple[str, str, Blob]] = []
    for key, blob in checkpoint.blobs.items():
        if blob.kind == "delta" and (
            blob.base is None or not blob.base < own_id or not is_stored(key, blob.base)
        ):
            if key not in values or versions.get(key) != own_id:
                raise _unloadable(checkpoint, key, f"appends to version {blob.base!r}")
            blob = Blob("full", values[key])
        blobs.append((key, own_id, blob))
    for key, version in versions.items():
        if (version == own_id and key in checkpoint.blobs) or is_stored(key, version):
            continue
        if key not in values:
            raise _unloadable(checkpoint, key, f"is at version {version!r}")
        blobs.append((key, version, Blob("full", values[key])))
    return blobs


def _unloadable(checkpoint: Checkpoint, key: str, what: str) -> SerializationError:
    return SerializationError(
        f"checkpoint {checkpoint.id!r} cannot be stored in thread {_show(checkpoint.thread_id)}"
        f" (namespace {checkpoint.checkpoint_ns!r}): its state[{key!r}] {what}, which is not "
        "stored there, and the checkpoint holds no value for it. Put a checkpoint loaded with "
        "get() (its values are stored with it), or copy a whole thread with copy_thread()"
    )


def encode_write(channel: str, value: Any) -> bytes:
    """A pending write's value as bytes.

    Raises:
        SerializationError: the value cannot be stored, or it is not of the shape the engine
            reads back from one of its own channels (see :func:`write_problem`).
    """
    if channel in ENGINE_CHANNELS and (problem := write_problem(channel, value)) is not None:
        raise SerializationError(f"cannot store pending write {channel!r}: {problem}")
    return dumps(value, root=f"write[{channel!r}]")


def decode_write(checkpoint: Checkpoint, task_id: str, channel: str, data: bytes) -> PendingWrite:
    """A stored pending write of ``checkpoint``, once its shape is known good.

    Raises:
        SerializationError: the data does not load, or holds a shape the engine cannot read
            back from that channel (a damaged row), naming the write and the thread.
    """
    value = loads(data)
    problem = write_problem(channel, value)
    if problem is not None:
        place = _place(checkpoint.thread_id, checkpoint.checkpoint_ns)
        raise SerializationError(
            f"stored pending write {channel!r} of task {task_id!r} at checkpoint "
            f"{checkpoint.id!r} of {place} is damaged: {problem}. This checkpoint cannot "
            "load: go on from an older one (RunnableConfig(checkpoint_id=...)), or delete the "
            "thread"
        )
    return PendingWrite(task_id, channel, value)


Link = tuple[str, str, str | None, bytes]
"""One stored blob of a key's chain: ``(version, kind, base, data)``."""


def rebuild_value(
    key: str, version: str, chain: list[Link], thread_id: str, checkpoint_ns: str
) -> Any:
    """A key's value at ``version`` from its blob chain (see :func:`load_values`)."""
    return _rebuild(key, chain, version, _place(thread_id, checkpoint_ns))[0]


class DecodedBlobs:
    """The blobs a listing of checkpoints (``get_state_history``) has decoded, by key and
    version, so that a blob several checkpoints share is decoded once per listing: a key
    unchanged for many steps, and the full copy and deltas behind an append key.

    The checkpoints of a listing share such values (the same object): treat what they hold as
    read-only, as the engine does. A listing goes newest first, and a checkpoint loads only
    blobs stored at or before its own id, so :meth:`keep_up_to` drops the blobs no later
    checkpoint of the listing can need. Blobs are told apart by kind too: a prune meanwhile
    rewrites a delta whole, at the same version.
    """

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[tuple[str, str, str], Any] = {}

    def load(self, key: str, link: Link) -> Any:
        """The decoded blob ``link`` of ``key``."""
        version, kind, _, data = link
        found = self._values.get((key, version, kind), _MISSING)
        if found is _MISSING:
            found = self._values[(key, version, kind)] = loads(data)
        return found

    def keep_up_to(self, checkpoint_id: str) -> None:
        """Forget the blobs stored after ``checkpoint_id``: the next checkpoints (older) never
        load them."""
        for stored in [pair for pair in self._values if pair[1] > checkpoint_id]:
            del self._values[stored]


_MISSING = object()


class LoadedLists:
    """The lists that loads of one saver rebuilt (an append key: its full copy and the parts
    after it), by thread, namespace, key and version, so that the next load of that key, one
    or a few parts later, decodes only those parts: a long conversation's call costs what it
    added, not what it holds. A stored version never changes, so an entry's items never go
    stale; its chain may get shorter (a prune stores the key whole nearer), which a load
    notices by the count of its parts, and then rebuilds the list from the rows.

    Each load gets a list of its own, but the items in it are the ones an earlier load
    decoded: treat loaded state as read-only, as the engine does. At most ``max_items`` items
    are kept, the least recently used lists dropped first.
    """

    def __init__(self, max_items: int = 1_000_000) -> None:
        self.max_items = max_items
        self._lists: collections.OrderedDict[tuple[str, str, str, str], _Rebuilt] = (
            collections.OrderedDict()
        )
        self._items = 0
        self._lock = threading.Lock()

    def newest_in(self, thread: str, ns: str, key: str, chain: list[Link]) -> _Found | None:
        """Where ``chain`` (newest first) reaches the newest version kept: its index in the
        chain and what was kept for it; None when it reaches none."""
        lists = self._lists
        with self._lock:
            for index, link in enumerate(chain):
                found = lists.get((thread, ns, key, link[0]))
                if found is not None:
                    lists.move_to_end((thread, ns, key, link[0]))
                    return index, found
        return None

    def keep(self, thread: str, ns: str, key: str, version: str, rebuilt: _Rebuilt) -> None:
        if len(rebuilt[0]) > self.max_items:
            return
        lists = self._lists
        with self._lock:
            earlier = lists.pop((thread, ns, key, version), None)
            if earlier is not None:
                self._items -= len(earlier[0])
            lists[(thread, ns, key, version)] = rebuilt
            self._items += len(rebuilt[0])
            while self._items > self.max_items:
                _, dropped = lists.popitem(last=False)
                self._items -= len(dropped[0])

    def clear(self) -> None:
        with self._lock:
            self._lists.clear()
            self._items = 0


_Rebuilt = tuple[tuple[Any, ...], list[int]]
"""A list kept by :class:`LoadedLists`: its items, and how many items each blob of its chain
holds (its full copy first)."""
_Found = tuple[int, _Rebuilt]


def load_values(
    checkpoint: Checkpoint,
    chain_of: Callable[[str, str], list[Link]],
    decoded: DecodedBlobs | None = None,
    loaded: LoadedLists | None = None,
    data_of: Callable[[str, list[str]], dict[str, bytes]] | None = None,
) -> None:
    """Fill ``checkpoint.values``, each key rebuilt from ``chain_of(key, version)``, and
    ``checkpoint.chains``; with ``decoded`` (a listing's), blobs it has already decoded are
    reused; with ``loaded`` (the saver's), a list an earlier load rebuilt at a version on the
    chain is taken up from there, and the lists rebuilt here are kept. With ``data_of``, the
    links ``chain_of`` returns hold no data yet, and ``data_of(key, versions)`` reads it for
    the blobs that are decoded (a load that goes on from a kept list reads a few of them).

    ``chain_of`` returns the key's blobs from ``version`` back, newest first: each delta's
    base follows it only when it sorts before the delta's own version (a base is the id of an
    older checkpoint), so a chain that loops ends at once; a complete chain ends with a
    ``full`` blob. The checks here turn any other end into a :class:`SerializationError`.
    """
    values, chains = {}, {}
    place = _place(checkpoint.thread_id, checkpoint.checkpoint_ns)
    if decoded is not None:
        decoded.keep_up_to(checkpoint.id)
    thread, ns = checkpoint.thread_id, checkpoint.checkpoint_ns
    for key, version in checkpoint.versions.items():
        chain = chain_of(key, version)
        found = loaded.newest_in(thread, ns, key, chain) if loaded is not None else None
        if found is not None and len(found[1][1]) != len(chain) - found[0]:
            found = None  # kept before a prune stored the key whole nearer: its sizes differ
        if data_of is not None:
            chain = _with_data(key, chain, found[0] if found is not None else len(chain), data_of)
        value, sizes = _rebuild(key, chain, version, place, decoded, found)
        if loaded is not None and type(value) is list:
            loaded.keep(thread, ns, key, version, (tuple(value), sizes))
        values[key] = value
        if len(chain) > 1:
            chains[key] = tuple(zip((link[0] for link in reversed(chain)), sizes, strict=True))
    checkpoint.values = values
    checkpoint.chains = chains


def _with_data(
    key: str,
    chain: list[Link],
    needed: int,
    data_of: Callable[[str, list[str]], dict[str, bytes]],
) -> list[Link]:
    """``chain`` with the data of its ``needed`` newest links read (a link whose data is
    missing meanwhile keeps none: its decoding then fails as for a damaged row)."""
    data = data_of(key, [link[0] for link in chain[:needed]]) if needed else {}
    return [(v, kind, base, data.get(v, b"")) for v, kind, base, _ in chain[:needed]] + chain[
        needed:
    ]


def follows(kind: str, base: str | None, version: str) -> str | None:
    """The version a chain goes on to after the blob ``(version, kind, base)``, or None where
    it ends: at a full copy, or at a base that does not sort before ``version`` (a loop)."""
    if kind == "full" or base is None or not base < version:
        return None
    return base


def needed_versions(
    wanted: Iterable[tuple[str, str]], link_of: Callable[[str, str], tuple[str, str | None] | None]
) -> set[tuple[str, str]]:
    """The ``(key, version)`` of every blob the ``wanted`` ``(key, version)`` pairs load from;
    ``link_of(key, version)`` is a stored blob's ``(kind, base)``, or None if it is missing."""
    needed: set[tuple[str, str]] = set()
    for key, version in wanted:
        current: str | None = version
        while current is not None and (key, current) not in needed:
            link = link_of(key, current)
            if link is None:
                break
            needed.add((key, current))
            current = follows(link[0], link[1], current)
    return needed


def _place(thread_id: str, checkpoint_ns: str) -> str:
    where = f"thread {_show(thread_id)}"
    return f"{where} (namespace {checkpoint_ns!r})" if checkpoint_ns else where


def _rebuild(
    key: str,
    chain: list[Link],
    version: str,
    place: str,
    decoded: DecodedBlobs | None = None,
    found: _Found | None = None,
) -> tuple[Any, list[int]]:
    """The value, and how many items each blob of its chain holds, the full copy first
    (empty for a value stored whole); ``found``: a list kept for a version on the chain, to
    go on from."""
    if found is not None:
        index, (kept, kept_sizes) = found
        items, sizes = list(kept), list(kept_sizes)
        newer = chain[:index]
    else:
        if not chain or chain[-1][1] != "full":
            raise _damaged(key, place, _chain_end_problem(chain, version))
        value = _load_blob(key, chain[-1], decoded)
        if len(chain) == 1:
            return value, [len(value)] if type(value) is list else []
        if not isinstance(value, list):
            raise _damaged(key, place, "it has appended parts but its full copy is not a list")
        items, sizes = list(value), [len(value)]
        newer = chain[:-1]
    for link in reversed(newer):
        tail = _load_blob(key, link, decoded)
        if link[1] != "delta" or not isinstance(tail, list):
            raise _damaged(key, place, f"its appended part at version {link[0]!r} is malformed")
        items.extend(tail)
        sizes.append(len(tail))
    return items, sizes


def _load_blob(key: str, link: Link, decoded: DecodedBlobs | None) -> Any:
    return loads(link[3]) if decoded is None else decoded.load(key, link)


def _chain_end_problem(chain: list[Link], version: str) -> str:
    """Why a chain that does not end with a full copy ended where it did."""
    if not chain:
        return f"its blob at version {version!r} is missing"
    last_version, kind, base, _ = chain[-1]
    if kind != "delta":
        return f"its blob at version {last_version!r} is of unknown kind {kind!r}"
    if base is None:
        return f"its appended part at version {last_version!r} names no version it appends to"
    if not base < last_version:
        return (
            f"its chain of appended parts loops: version {last_version!r} appends to "
            f"{base!r}, which is not older"
        )
    return f"version {base!r}, which version {last_version!r} appends to, is missing"


def _damaged(key: str, place: str, problem: str) -> SerializationError:
    return SerializationError(
        f"stored state[{key!r}] of {place} is damaged: {problem}. This checkpoint cannot "
        "load: go on from an older one (RunnableConfig(checkpoint_id=...)), or delete the thread"
    )
