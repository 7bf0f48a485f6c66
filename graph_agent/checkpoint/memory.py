"""``MemorySaver``: checkpoints in process memory, the default for agents and tests.

Values and metadata are serialized exactly as the durable savers store them, so a value that
could not be saved to SQLite fails here too, and no stored checkpoint ever aliases live state.
The rest of a checkpoint's header (ids, step, next nodes, versions, barriers, time) is strings,
numbers and a datetime: it is kept as it is, in tuples of its own, which takes about half the
time of encoding it.

What is stored per checkpoint is plain tuples of strings, bytes, numbers and datetimes, at most
two levels deep (but for barriers, which few graphs have), so that the garbage collector stops
tracking them before they leave its young generations, and a process holding many threads'
checkpoints does not pay for them in every full collection. (Only exact tuples are untracked,
never a NamedTuple instance; a collection looks at a tuple before the tuples inside it, so each
collection of its generation untracks one more level of nesting, and a tuple nested deeper
would wait for a full collection. Before Python 3.14, full collections also untrack dicts
holding only such tuples.)
"""

from __future__ import annotations

import builtins
import functools
import heapq
import threading
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from graph_agent.checkpoint.base import (
    Checkpoint,
    CheckpointSaver,
    check_keep_last,
    compare_and_set,
    copy_target_taken,
    nothing_to_copy,
)
from graph_agent.checkpoint.codec import (
    DecodedBlobs,
    Link,
    LoadedLists,
    blobs_to_store,
    decode_header,
    decode_write,
    encode_blob,
    encode_header,
    encode_write,
    follows,
    load_values,
    needed_versions,
    rebuild_value,
)
from graph_agent.checkpoint.serde import dumps, loads
from graph_agent.checkpoint.thread_search import ThreadHeads, ThreadInfo
from graph_agent.graph.cache import CachedValue
from graph_agent.graph.saver import COPY_TASK, IDS_THREAD, Blob

if TYPE_CHECKING:
    from graph_agent.checkpoint.retention import Decide, Outcome

_StoredBlob = tuple[str, str | None, bytes]  # (kind, base, data): a plain tuple, see above
_Barriers = tuple[tuple[str, tuple[str, ...]], ...]  # (key, sources), rare: may nest deeper
_Names = tuple[str, ...]
_Stored = tuple[str, str | None, int, _Names, _Names, _Names, _Barriers, bytes, datetime]  # _Header


class _Header(NamedTuple):
    """A stored checkpoint without its values, every field immutable.

    Stored as a plain tuple in this order (see the module docstring); read as this class."""

    id: str
    parent_id: str | None
    step: int
    next: tuple[str, ...]
    keys: tuple[str, ...]  # the state keys, and the checkpoint id holding each one's blob:
    versions: tuple[str, ...]  # two tuples of strings, half a dict's memory
    barriers: _Barriers  # a dict would stay tracked
    metadata: bytes  # serialized: it may hold any of the caller's values
    created_at: datetime


class _Space:
    """What one thread keeps in one namespace."""

    __slots__ = ("blobs", "head", "headers", "writes")

    def __init__(self) -> None:
        self.headers: dict[str, _Stored] = {}  # checkpoint id -> header, as a plain tuple
        self.head: str | None = None  # the newest checkpoint id
        self.blobs: dict[str, dict[str, _StoredBlob]] = {}  # key -> version -> blob
        self.writes: dict[str, dict[tuple[str, str], bytes]] = {}  # checkpoint id -> writes

    def copy(self) -> _Space:
        """A space of its own with the same contents (which are immutable: shared)."""
        copied = _Space()
        copied.headers = dict(self.headers)
        copied.head = self.head
        copied.blobs = {key: dict(by_version) for key, by_version in self.blobs.items()}
        copied.writes = {checkpoint: dict(writes) for checkpoint, writes in self.writes.items()}
        return copied


class MemorySaver(CheckpointSaver):
    """Keeps checkpoints in a dict; gone when the process ends.

    Each thread's checkpoints are kept apart (per namespace), so what one thread costs to
    store, load, prune or delete does not grow with the other threads.

    Example:
        >>> from graph_agent import MemorySaver, CompileConfig
        >>> config = CompileConfig(saver=MemorySaver())
    """

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.RLock()
        self._threads: dict[str, dict[str, _Space]] = {}  # thread -> namespace -> storage
        self._loaded = LoadedLists()

    def put(self, checkpoint: Checkpoint) -> None:
        thread, ns, checkpoint_id = checkpoint.thread_id, checkpoint.checkpoint_ns, checkpoint.id
        header = _header(checkpoint)
        blobs = []  # encoded before anything is stored: a value that fails stores nothing
        for key, blob in checkpoint.blobs.items():
            blobs.append((key, (blob.kind, blob.base, encode_blob(key, blob))))
        with self._lock:
            space = self._space(thread, ns)
            head = space.head
            if checkpoint.parent_id == head and checkpoint._engine_built:  # the usual step
                versions = space.blobs
                for key, stored in blobs:
                    by_version = versions.get(key)
                    if by_version is None:
                        by_version = versions[key] = {}
                    by_version[checkpoint_id] = stored
            else:
                compare_and_set(checkpoint, head)  # raises, unless it is an explicit fork
                self._store_blobs(space, checkpoint)
            space.headers[checkpoint_id] = header
            if head is None or checkpoint_id > head:
                space.head = checkpoint_id

    def put_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        writes: Sequence[tuple[str, Any]],
    ) -> None:
        encoded = {(task_id, channel): encode_write(channel, value) for channel, value in writes}
        with self._lock:
            space = self._space(thread_id, checkpoint_ns)
            space.writes.setdefault(checkpoint_id, {}).update(encoded)

    def get(
        self, thread_id: str, checkpoint_id: str | None = None, checkpoint_ns: str = ""
    ) -> Checkpoint | None:
        with self._lock:
            space = self._threads.get(thread_id, {}).get(checkpoint_ns)
            if space is None or space.head is None:
                return None
            header = space.headers.get(checkpoint_id or space.head)
            if header is None:
                return None
            return self._load(space, thread_id, checkpoint_ns, header)

    def list(
        self,
        thread_id: str,
        limit: int | None = None,
        before: str | None = None,
        checkpoint_ns: str = "",
    ) -> Iterator[Checkpoint]:
        with self._lock:
            space = self._space_of(thread_id, checkpoint_ns)
            if space is None:
                return
            headers = dict(space.headers)
        ids = sorted((i for i in headers if before is None or i < before), reverse=True)
        decoded = DecodedBlobs()
        for checkpoint_id in ids[:limit] if limit is not None else ids:
            with self._lock:
                # pruned or deleted since the listing began: skipped, as a new list() would
                if (
                    checkpoint_id not in space.headers
                    or self._space_of(thread_id, checkpoint_ns) is not space
                ):
                    continue
                header = headers[checkpoint_id]
                checkpoint = self._load(space, thread_id, checkpoint_ns, header, decoded)
            yield checkpoint  # never while holding the lock: the caller may pause here

    def delete_thread(self, thread_id: str) -> None:
        with self._lock:
            self._threads.pop(thread_id, None)

    def copy_thread(self, src_thread_id: str, dst_thread_id: str) -> None:
        with self._lock:
            spaces = self._threads.get(src_thread_id, {})
            copied = {ns: space.copy() for ns, space in spaces.items() if space.headers}
            if not copied:
                raise nothing_to_copy(src_thread_id)
            # a copied checkpoint with pending writes names the thread their ids were derived
            # for (one it names already, from an earlier copy, stays)
            ids_thread = encode_write(IDS_THREAD, src_thread_id)
            for space in copied.values():
                for writes in space.writes.values():
                    if writes:
                        writes.setdefault((COPY_TASK, IDS_THREAD), ids_thread)
            if any(space.headers for space in self._threads.get(dst_thread_id, {}).values()):
                raise copy_target_taken(dst_thread_id)
            self._threads[dst_thread_id] = copied

    def prune(self, thread_id: str, keep_last: int) -> int:
        check_keep_last(keep_last)
        removed = 0
        with self._lock:
            for ns, space in self._threads.get(thread_id, {}).items():
                headers = space.headers
                ids = sorted(headers)
                dropped = ids[: max(0, len(ids) - keep_last)]
                if not dropped:
                    continue
                if len(dropped) < len(ids):
                    self._materialize(space, thread_id, ns, headers[ids[len(dropped)]])
                for checkpoint_id in dropped:
                    del headers[checkpoint_id]
                    space.writes.pop(checkpoint_id, None)
                if not headers:
                    space.head = None
                removed += len(dropped)
                needed = self._needed_blobs(space)
                for key, by_version in list(space.blobs.items()):
                    for version in [v for v in by_version if (key, v) not in needed]:
                        del by_version[version]
                    if not by_version:
                        del space.blobs[key]
        return removed

    def _retention_page(
        self, after: Any, limit: int
    ) -> tuple[builtins.list[tuple[str, datetime | None]], Any]:
        with self._lock:
            ids = heapq.nsmallest(
                limit + 1, (t for t in self._threads if after is None or t > after)
            )
            page = [(thread, self._last_activity(thread)) for thread in ids[:limit]]
        return page, (ids[limit - 1] if len(ids) > limit else None)

    def _last_activity(self, thread: str) -> datetime | None:
        """When the thread's newest top-level checkpoint was made (else its newest one's);
        under the lock."""
        spaces = self._threads.get(thread, {})
        top = spaces.get("")
        if top is not None and top.head is not None:
            return top.headers[top.head][8]
        made = [s.headers[s.head][8] for s in spaces.values() if s.head is not None]
        return max(made, default=None)

    def _retain_thread(self, thread_id: str, decide: Decide) -> tuple[Outcome, int]:
        with self._lease_lock, self._lock:  # (acquire takes the first, put the second)
            if any(held == thread_id for held, _ in self._leases):
                return "busy", 0
            keep = decide(self._last_activity(thread_id))
            if keep is None:
                return "kept", 0
            if keep == 0:
                spaces = self._threads.pop(thread_id, {})
                return "deleted", sum(len(space.headers) for space in spaces.values())
            removed = self.prune(thread_id, keep)
        return ("pruned" if removed else "kept"), removed

    def threads(self) -> builtins.list[str]:
        with self._lock:
            return sorted(
                thread
                for thread, spaces in self._threads.items()
                if any(space.headers for space in spaces.values())
            )

    def _thread_heads(self, limit: int, offset: int) -> builtins.list[ThreadHeads]:
        with self._lock:
            return [self._heads(*each) for each in self._thread_order()[offset : offset + limit]]

    def _scan_thread_heads(self, batch: int) -> Iterator[ThreadHeads]:
        """The threads ordered once, then their heads a growing batch at a time, each batch
        under the lock (the filter runs between them)."""
        with self._lock:
            order = self._thread_order()
        start = 0
        while start < len(order):
            chunk, start, batch = order[start : start + batch], start + batch, 2 * batch
            with self._lock:
                heads = [
                    self._heads(thread, space)
                    for thread, space in chunk
                    if space.head is not None and self._threads.get(thread, {}).get("") is space
                ]
            yield from heads

    def _thread_order(self) -> builtins.list[tuple[str, _Space]]:
        """Threads with a top-level checkpoint and their top-level spaces, newest head first
        (ties by thread id); under the lock."""
        found = [
            (thread, space)
            for thread, by_ns in self._threads.items()
            if (space := by_ns.get("")) is not None and space.head is not None
        ]
        found.sort(key=lambda each: each[0])
        found.sort(key=lambda each: each[1].head or "", reverse=True)  # (stable: ties by id)
        return found

    def _heads(self, thread: str, space: _Space) -> ThreadHeads:
        """A thread's newest header, and its oldest when asked for; under the lock."""
        assert space.head is not None
        newest = _checkpoint(space.headers[space.head], thread)
        return ThreadHeads(thread, newest, functools.partial(self._oldest, space, newest))

    def _oldest(self, space: _Space, newest: Checkpoint) -> Checkpoint:
        with self._lock:
            oldest = min(space.headers, default=newest.id)
            if oldest == newest.id:
                return newest
            return _checkpoint(space.headers[oldest], newest.thread_id)

    def stored_bytes(self, thread_id: str) -> int:
        total = 0
        headers: builtins.list[_Stored] = []
        with self._lock:
            for space in self._threads.get(thread_id, {}).values():
                headers.extend(space.headers.values())
                total += sum(
                    len(data)
                    for by_version in space.blobs.values()
                    for _, _, data in by_version.values()
                )
                total += sum(
                    len(data) for writes in space.writes.values() for data in writes.values()
                )
        # headers are counted as a durable saver stores them (encoded outside the lock)
        return total + sum(len(encode_header(_checkpoint(header))) for header in headers)

    # async twins: nothing blocks here, so no worker thread is needed
    async def aput(self, checkpoint: Checkpoint) -> None:
        self.put(checkpoint)

    async def aput_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        writes: Sequence[tuple[str, Any]],
    ) -> None:
        self.put_writes(thread_id, checkpoint_ns, checkpoint_id, task_id, writes)

    async def aget(
        self, thread_id: str, checkpoint_id: str | None = None, checkpoint_ns: str = ""
    ) -> Checkpoint | None:
        return self.get(thread_id, checkpoint_id, checkpoint_ns)

    async def acopy_thread(self, src_thread_id: str, dst_thread_id: str) -> None:
        self.copy_thread(src_thread_id, dst_thread_id)

    async def asearch_threads(
        self, metadata: Mapping[str, Any] | None = None, limit: int = 10, offset: int = 0
    ) -> builtins.list[ThreadInfo]:
        return self.search_threads(metadata, limit, offset)

    async def alist(
        self,
        thread_id: str,
        limit: int | None = None,
        before: str | None = None,
        checkpoint_ns: str = "",
    ) -> builtins.list[Checkpoint]:
        return list(self.list(thread_id, limit, before, checkpoint_ns))

    async def acache_get(self, namespace: str, key: str, now: float) -> CachedValue | None:
        return self.cache_get(namespace, key, now)

    async def acache_put(
        self, namespace: str, key: str, value: Any, expires_at: float | None
    ) -> None:
        self.cache_put(namespace, key, value, expires_at)

    # storage and loading
    def _space(self, thread: str, ns: str) -> _Space:
        spaces = self._threads.get(thread)
        if spaces is None:
            spaces = self._threads[thread] = {}
        space = spaces.get(ns)
        if space is None:
            space = spaces[ns] = _Space()
        return space

    def _space_of(self, thread: str, ns: str) -> _Space | None:
        return self._threads.get(thread, {}).get(ns)

    @staticmethod
    def _store_blobs(space: _Space, checkpoint: Checkpoint) -> None:
        """Store the blobs of a checkpoint other than the engine's next step: its own, and
        those it names that ``space`` lacks (see :func:`blobs_to_store`); all encoded first,
        so that a value that fails stores nothing."""
        by_key = space.blobs

        def is_stored(key: str, version: str) -> bool:
            return version in by_key.get(key, {})

        encoded = [
            (key, version, (blob.kind, blob.base, encode_blob(key, blob)))
            for key, version, blob in blobs_to_store(checkpoint, is_stored)
        ]
        for key, version, stored in encoded:
            by_key.setdefault(key, {})[version] = stored

    def _load(
        self,
        space: _Space,
        thread: str,
        ns: str,
        header: _Stored,
        decoded: DecodedBlobs | None = None,
    ) -> Checkpoint:
        checkpoint = _checkpoint(header, thread, ns)
        chain_of = functools.partial(self._chain, space)
        load_values(checkpoint, chain_of, decoded, self._loaded if decoded is None else None)
        writes = space.writes.get(checkpoint.id, {})
        checkpoint.pending_writes = tuple(
            decode_write(checkpoint, task_id, channel, data)
            for (task_id, channel), data in writes.items()
        )
        return checkpoint

    @staticmethod
    def _chain(space: _Space, key: str, version: str) -> builtins.list[Link]:
        """The blobs that rebuild ``key`` at ``version``, newest first (see
        :func:`load_values`: ending with a full one unless the chain is damaged)."""
        chain: builtins.list[Link] = []
        by_version = space.blobs.get(key, {})
        current: str | None = version
        while current is not None and (stored := by_version.get(current)) is not None:
            kind, base, data = stored
            chain.append((current, kind, base, data))
            current = follows(kind, base, current)
        return chain

    def _materialize(self, space: _Space, thread: str, ns: str, header: _Stored) -> None:
        """Store every key of this checkpoint whole, so the deltas behind it can go."""
        stored = _Header._make(header)
        for key, version in zip(stored.keys, stored.versions, strict=True):
            chain = self._chain(space, key, version)
            if len(chain) == 1 and chain[0][1] == "full":
                continue
            value = rebuild_value(key, version, chain, thread, ns)
            data = encode_blob(key, Blob("full", value))
            space.blobs[key][version] = ("full", None, data)

    @staticmethod
    def _needed_blobs(space: _Space) -> set[tuple[str, str]]:
        """The (key, version) of every blob a kept checkpoint of ``space`` loads from."""
        wanted: builtins.list[tuple[str, str]] = []
        for header in space.headers.values():
            stored = _Header._make(header)
            wanted.extend(zip(stored.keys, stored.versions, strict=True))

        def link_of(key: str, version: str) -> tuple[str, str | None] | None:
            stored = space.blobs.get(key, {}).get(version)
            return None if stored is None else (stored[0], stored[1])

        return needed_versions(wanted, link_of)


def _header(checkpoint: Checkpoint) -> _Stored:
    """What ``put`` keeps of a checkpoint besides its blobs.

    A header as the engine makes it (a tuple of next nodes, a dict of versions, an int step, a
    UTC datetime) is kept as it is, in containers of its own. Any other shape goes through a
    durable saver's encoding and back, so that what SQLite would refuse (a tzinfo it cannot
    store, a value that is no string) fails here too, naming the field, and what it would
    change comes back changed the same way. (Only the shape is checked per step, not each
    name: a Checkpoint built by hand must hold the types its fields declare.)
    """
    checkpoint_id, parent_id, step = checkpoint.id, checkpoint.parent_id, checkpoint.step
    next_nodes, versions, barriers = checkpoint.next, checkpoint.versions, checkpoint.barriers
    created_at = checkpoint.created_at
    metadata = dumps(checkpoint.metadata, root="checkpoint['metadata']")
    if not (
        type(created_at) is datetime
        and created_at.tzinfo is UTC
        and type(step) is int
        and type(next_nodes) is tuple
        and type(versions) is dict
    ):
        stored = decode_header(encode_header(checkpoint))
        checkpoint_id, parent_id, step = stored.id, stored.parent_id, stored.step
        next_nodes, versions, barriers = stored.next, stored.versions, stored.barriers
        created_at = stored.created_at
    kept = tuple((k, tuple(v)) for k, v in barriers.items()) if barriers else ()
    keys, ids = tuple(versions), tuple(versions.values())
    return (checkpoint_id, parent_id, step, next_nodes, keys, ids, kept, metadata, created_at)


def _checkpoint(stored: _Stored, thread: str = "", ns: str = "") -> Checkpoint:
    """A checkpoint from its stored header; ``values`` and ``pending_writes`` stay empty."""
    header = _Header._make(stored)
    return Checkpoint(
        id=header.id,
        thread_id=thread,
        checkpoint_ns=ns,
        parent_id=header.parent_id,
        step=header.step,
        next=header.next,
        versions=dict(zip(header.keys, header.versions, strict=True)),
        barriers=dict(header.barriers),
        metadata=loads(header.metadata),
        created_at=header.created_at,
    )
