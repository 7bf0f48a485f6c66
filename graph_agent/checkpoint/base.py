"""The base class of the savers: :class:`CheckpointSaver` implements the engine's
:class:`~graph_agent.graph.saver.Saver` protocol around the storage methods a saver defines,
with one run per thread (leases) and async twins.

What a checkpoint is, and how it is stored, is told in :mod:`graph_agent.graph.saver` (its
types are re-exported here).
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from graph_agent.graph.cache import CachedValue
from graph_agent.graph.errors import ThreadBusyError
from graph_agent.graph.saver import (
    Blob,
    Checkpoint,
    Lease,
    PendingWrite,
    Saver,
    acquires_inline,
    new_checkpoint,
    new_checkpoint_id,
    now,
)

if TYPE_CHECKING:
    from datetime import datetime

    from graph_agent.checkpoint.retention import Decide, Outcome, RetentionPolicy, SweepResult
    from graph_agent.checkpoint.thread_search import ThreadHeads, ThreadInfo

__all__ = [
    "Blob",
    "Checkpoint",
    "CheckpointSaver",
    "Lease",
    "PendingWrite",
    "Saver",
    "new_checkpoint",
    "new_checkpoint_id",
    "now",
]

_T = TypeVar("_T")


async def _to_thread(fn: Callable[..., _T], /, *args: Any) -> _T:
    """``fn(*args)`` on the package's worker pool (``graph.concurrency.to_thread``), which is
    imported by the first async call, not with the package."""
    from graph_agent.graph.concurrency import to_thread

    return await to_thread(fn, *args)


class CheckpointSaver:
    """Where checkpoints live. Subclasses implement the storage methods; the async twins run
    the sync ones in a worker thread unless overridden.

    Threads are opaque strings: never part of a file path or of SQL text. ``put`` compares and
    sets: a checkpoint whose parent is not the thread's newest checkpoint is refused with
    :class:`ThreadBusyError`, unless its metadata says it is an explicit ``fork``.
    """

    def __init__(self) -> None:
        self._leases: dict[tuple[str, str], str] = {}
        self._lease_lock = threading.Lock()
        self._lost_leases: dict[str, str] = {}
        """Owners of leases this saver holds but found taken or lapsed, and how: the run stops
        at its next write (:meth:`check_lease`)."""
        self._memory_cache: dict[tuple[str, str], tuple[bytes, float | None]] = {}
        self._cache_lock = threading.Lock()
        """The node cache of a saver that keeps it in memory (see :meth:`_cache_read`)."""
        self._rows_gone: set[str] = set()
        """Leases (their owners) whose stored row a saver's ``put_releasing`` deleted with the
        run's last checkpoint: released in this process only (:meth:`_row_gone`)."""

    # storage: subclasses implement these
    def put(self, checkpoint: Checkpoint) -> None:
        """Store a checkpoint (and its blobs) atomically."""
        raise NotImplementedError

    def put_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        writes: Sequence[tuple[str, Any]],
    ) -> None:
        """Store pending writes of a task; writing the same (task, channel) again replaces."""
        raise NotImplementedError

    def get(
        self, thread_id: str, checkpoint_id: str | None = None, checkpoint_ns: str = ""
    ) -> Checkpoint | None:
        """A checkpoint with ``values`` and ``pending_writes`` filled; the newest when no id."""
        raise NotImplementedError

    def list(
        self,
        thread_id: str,
        limit: int | None = None,
        before: str | None = None,
        checkpoint_ns: str = "",
    ) -> Iterator[Checkpoint]:
        """Checkpoints of a thread, newest first, with ``values`` filled."""
        raise NotImplementedError

    def delete_thread(self, thread_id: str) -> None:
        """Forget everything stored for a thread (all namespaces)."""
        raise NotImplementedError

    def prune(self, thread_id: str, keep_last: int) -> int:
        """Keep the newest ``keep_last`` checkpoints of each namespace; returns how many went.

        The kept checkpoints still load exactly: blobs they need are rewritten whole first.
        """
        raise NotImplementedError

    def copy_thread(self, src_thread_id: str, dst_thread_id: str) -> None:
        """Copy a thread: every checkpoint of every namespace, with the same ids, metadata and
        pending writes, and the blobs they load from, in one transaction.

        The copy stands alone: pruning or deleting the source leaves it readable, and runs on
        either thread go on apart. A run in progress on the source goes on there alone; the
        copy holds what the source had committed when it was taken.

        A copy taken while the source was paused or stopped in the middle of a step goes on
        as the source would: each copied checkpoint with pending writes gets one more (see
        :data:`graph_agent.graph.saver.IDS_THREAD`) naming the thread their ids were made
        for, so the same ``Command(resume=...)`` answers the copy's interrupts and nodes that
        had finished are not run again. That step's tasks keep the source's task ids (and tool
        calls their idempotency keys); every later step has ids of the copy's own.

        Raises:
            ValueError: ``src_thread_id`` has no checkpoints, or ``dst_thread_id`` already has
                some (a copy never merges two histories: delete the target first to replace it).
        """
        raise NotImplementedError

    def threads(self) -> builtins.list[str]:
        """Every thread id with at least one checkpoint."""
        raise NotImplementedError

    def search_threads(
        self, metadata: Mapping[str, Any] | None = None, limit: int = 10, offset: int = 0
    ) -> builtins.list[ThreadInfo]:
        """Threads whose newest checkpoint's metadata matches ``metadata``, most recently
        updated first (LangGraph's ``saver.list(None, filter=...)``, one record per thread).

        Args:
            metadata: Keys the metadata must have, each with a matching value (JSON equality;
                a dict matches a dict holding its entries, as PostgreSQL's ``@>``); None or
                ``{}``: every thread. A checkpoint's metadata is its run's
                ``RunnableConfig.metadata`` plus ``source``, ``step`` and ``writers``.
            limit: At most this many threads.
            offset: Skip this many matching threads first (pagination).

        Example:
            >>> saver.search_threads({"user": "ada"}, limit=20)  # doctest: +SKIP
            [ThreadInfo(thread_id='t1', checkpoint_id='...', metadata={'user': 'ada', ...}, ...)]

        Raises:
            ValueError: ``metadata`` is not a dict with string keys, or ``limit``/``offset``
                is not an int >= 0.
        """
        from graph_agent.checkpoint.thread_search import check_search, search_page

        limit, offset = check_search(metadata, limit, offset)
        return search_page(self._thread_heads, self._scan_thread_heads, metadata, limit, offset)

    def _thread_heads(self, limit: int, offset: int) -> Sequence[ThreadHeads]:
        """What :meth:`search_threads` reads: threads with a top-level checkpoint, newest
        checkpoint first (ties by thread id), from ``offset`` on, at most ``limit``."""
        raise NotImplementedError

    def _scan_thread_heads(self, batch: int) -> Iterator[ThreadHeads]:
        """What :meth:`search_threads` reads for a filter: every thread :meth:`_thread_heads`
        gives, in its order, read as consumed, ``batch`` or more at a time (by default with
        a growing :meth:`_thread_heads` page at a time)."""
        from graph_agent.checkpoint.thread_search import read_in_batches

        return read_in_batches(self._thread_heads, batch)

    def stored_bytes(self, thread_id: str) -> int:
        """Bytes of checkpoint data stored for a thread (headers, blobs, pending writes)."""
        raise NotImplementedError

    # retention (graph_agent.checkpoint.retention)
    def sweep(self, policy: RetentionPolicy, now: datetime | None = None) -> SweepResult:
        """Delete or prune the threads ``policy`` says have had their time, as of ``now``
        (default: the current time), a batch of threads at a time, each in one transaction,
        skipping threads a run holds; returns what went.

        Example:
            >>> from graph_agent.checkpoint import RetentionPolicy
            >>> policy = RetentionPolicy(thread_ttl=60 * 24, strategy="keep_latest")
            >>> saver.sweep(policy).threads_pruned  # doctest: +SKIP
            3

        Raises:
            ValueError: ``now`` is a naive datetime.
        """
        from graph_agent.checkpoint.retention import sweep
        from graph_agent.graph import saver as clock  # its now(): a seam tests may pin

        return sweep(self, policy, now if now is not None else clock.now())

    async def asweep(self, policy: RetentionPolicy, now: datetime | None = None) -> SweepResult:
        return await _to_thread(self.sweep, policy, now)

    def _retention_page(
        self, after: Any, limit: int
    ) -> tuple[builtins.list[tuple[str, datetime | None]], Any]:
        """Up to ``limit`` threads after the cursor ``after`` (None: from the first), in a
        fixed order, each with its last activity (its newest top-level checkpoint's time, else
        its newest one's), and the cursor of the next page (None: this was the last)."""
        raise NotImplementedError

    def _retain_thread(self, thread_id: str, decide: Decide) -> tuple[Outcome, int]:
        """In one transaction: unless a run holds the thread (``"busy"``), read its last
        activity, ask ``decide`` and delete the thread (0) or keep its N newest checkpoints
        per namespace (N); returns the outcome and how many checkpoints went."""
        raise NotImplementedError

    # the node cache (graph_agent.graph.cache.NodeCache), beside the checkpoints
    def cache_get(self, namespace: str, key: str, now: float) -> CachedValue | None:
        """A node's cached result (``add_node(..., cache=...)``), unless missing or expired."""
        data = self._cache_read(namespace, key, now)
        if data is None:
            return None
        from graph_agent.checkpoint import serde

        return CachedValue(serde.loads(data))

    def cache_put(self, namespace: str, key: str, value: Any, expires_at: float | None) -> None:
        """Keep a node's result, serialized as a checkpoint keeps state (a value the
        serializer cannot store fails here, naming its key path)."""
        from graph_agent.checkpoint import serde

        self._cache_write(namespace, key, serde.dumps(value, root="cached update"), expires_at)

    async def acache_get(self, namespace: str, key: str, now: float) -> CachedValue | None:
        return await _to_thread(self.cache_get, namespace, key, now)

    async def acache_put(
        self, namespace: str, key: str, value: Any, expires_at: float | None
    ) -> None:
        await _to_thread(self.cache_put, namespace, key, value, expires_at)

    def cache_clear(self, namespace: str | None = None) -> None:
        """Drop the cached results of one node (``"graph:node"``), or all of them."""
        self._cache_delete(namespace)

    # the node cache's storage: in this process's memory unless a saver stores it elsewhere
    def _cache_read(self, namespace: str, key: str, now: float) -> bytes | None:
        with self._cache_lock:
            entry = self._memory_cache.get((namespace, key))
            if entry is None or (entry[1] is not None and entry[1] <= now):
                return None
            return entry[0]

    def _cache_write(self, namespace: str, key: str, data: bytes, expires_at: float | None) -> None:
        with self._cache_lock:
            self._memory_cache[(namespace, key)] = (data, expires_at)

    def _cache_delete(self, namespace: str | None) -> None:
        with self._cache_lock:
            for entry in [k for k in self._memory_cache if namespace in (None, k[0])]:
                del self._memory_cache[entry]

    # async twins
    async def aput(self, checkpoint: Checkpoint) -> None:
        await _to_thread(self.put, checkpoint)

    async def aput_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        writes: Sequence[tuple[str, Any]],
    ) -> None:
        await _to_thread(self.put_writes, thread_id, checkpoint_ns, checkpoint_id, task_id, writes)

    async def aget(
        self, thread_id: str, checkpoint_id: str | None = None, checkpoint_ns: str = ""
    ) -> Checkpoint | None:
        return await _to_thread(self.get, thread_id, checkpoint_id, checkpoint_ns)

    async def acopy_thread(self, src_thread_id: str, dst_thread_id: str) -> None:
        await _to_thread(self.copy_thread, src_thread_id, dst_thread_id)

    async def asearch_threads(
        self, metadata: Mapping[str, Any] | None = None, limit: int = 10, offset: int = 0
    ) -> builtins.list[ThreadInfo]:
        return await _to_thread(self.search_threads, metadata, limit, offset)

    async def alist(
        self,
        thread_id: str,
        limit: int | None = None,
        before: str | None = None,
        checkpoint_ns: str = "",
    ) -> builtins.list[Checkpoint]:
        return await _to_thread(lambda: list(self.list(thread_id, limit, before, checkpoint_ns)))

    # one run per thread
    def acquire(self, thread_id: str, checkpoint_ns: str = "") -> Lease:
        """Take the thread for one run, or raise :class:`ThreadBusyError`."""
        key = (thread_id, checkpoint_ns)
        owner = new_checkpoint_id()
        with self._lease_lock:
            if key in self._leases:
                raise ThreadBusyError(
                    f"thread {_show(thread_id)} is busy: another run is in progress on it; wait "
                    "for it to finish (or pause) and call again, or use another thread_id"
                )
            self._leases[key] = owner
        return Lease(thread_id, checkpoint_ns, owner)

    def release(self, lease: Lease) -> None:
        """Give the thread back. Releasing a lease twice is harmless."""
        key = (lease.thread_id, lease.checkpoint_ns)
        with self._lease_lock:
            if self._leases.get(key) == lease.owner:
                del self._leases[key]
            self._lost_leases.pop(lease.owner, None)

    def _row_gone(self, lease: Lease) -> bool:
        """Whether ``lease``'s stored row went with the run's last checkpoint (a saver's
        ``put_releasing`` adds its owner to ``_rows_gone``): its release has nothing to
        delete. Told once."""
        if self._rows_gone and lease.owner in self._rows_gone:
            self._rows_gone.discard(lease.owner)
            return True
        return False

    def check_lease(self, thread_id: str, checkpoint_ns: str = "") -> None:
        """Raise :class:`ThreadBusyError` if this saver held the thread's lease and lost it.

        A run's lease can be lost while the run goes on: its PostgreSQL lease session was cut
        off and another process took the thread meanwhile, or its lease expired and was taken
        (a lease that binds by expiry only). From then on another run may be working on the
        thread. :class:`~graph_agent.checkpoint.postgres.PostgresSaver` calls this before every
        write, so such a run stops at its next step boundary (a SQLite lease, which binds
        while its process lives, is lost only by expiring: its next commit notices). A node
        about to cause a side effect (charge a card) may call it too::

            task = config.task
            task.saver.check_lease(task.thread_id, task.checkpoint_ns)

        No round trip in the usual case: it reads what the saver's lease heartbeat found.
        """
        if self._lost_leases:
            owner = self._leases.get((thread_id, checkpoint_ns))
            if owner is not None and owner in self._lost_leases:
                raise lease_lost(thread_id, self._lost_leases[owner])

    @acquires_inline
    async def aacquire(self, thread_id: str, checkpoint_ns: str = "") -> Lease:
        return self.acquire(thread_id, checkpoint_ns)

    async def arelease(self, lease: Lease) -> None:
        self.release(lease)


def lease_lost(thread_id: str, how: str) -> ThreadBusyError:
    return ThreadBusyError(
        f"this run lost its lease on thread {_show(thread_id)} ({how}) and stopped before its "
        "next write, since another run may be working on the thread now. Nothing was written; "
        "the thread stays at its last checkpoint (or where that other run takes it): check "
        "get_state() and call again once it is free"
    )


def compare_and_set(checkpoint: Checkpoint, head: str | None) -> None:
    """Refuse a checkpoint whose parent is not the thread's newest (an accidental fork)."""
    if checkpoint.metadata.get("source") == "fork" or checkpoint.parent_id == head:
        return
    raise ThreadBusyError(
        f"thread {_show(checkpoint.thread_id)} moved on while this run was working (it started "
        f"from checkpoint {checkpoint.parent_id!r}, the newest is now {head!r}); another run "
        "wrote to it. Reload with get_state() and call again"
    )


def nothing_to_copy(src_thread_id: str) -> ValueError:
    return ValueError(
        f"copy_thread: thread {_show(src_thread_id)} has no checkpoints to copy; check the "
        "thread id (saver.threads() lists those with checkpoints)"
    )


def copy_target_taken(dst_thread_id: str) -> ValueError:
    return ValueError(
        f"copy_thread: thread {_show(dst_thread_id)} already has checkpoints, and a copy never "
        "merges two histories; copy into a new thread id, or call "
        f"delete_thread({_show(dst_thread_id)}) first to replace them"
    )


def check_keep_last(keep_last: int) -> None:
    if keep_last < 0:
        raise ValueError(f"prune(keep_last={keep_last}): keep_last must be 0 or more")


def _show(thread_id: str, limit: int = 60) -> str:
    """A thread id fit for an error message: repr'd and cut short."""
    text = repr(thread_id)
    return text if len(text) <= limit else text[: limit - 4] + "...'"
