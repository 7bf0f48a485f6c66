"""Checkpoints and the interface every saver implements.

A checkpoint is written after every superstep. It stores only the keys that changed since its
parent (:class:`~graph_agent.graph.engine.Blob`): an append key stores the items appended since
then (a delta), other keys their new value; an append key is stored whole when it is first
written, whenever items were replaced or removed, and once it has tripled since its last full
copy (after 64 deltas or more: ``Loop.take_blobs``). So a thread's storage grows linearly with
its steps, and a load reads a bounded chain of deltas. ``versions`` maps each key to the id of
the checkpoint holding its latest blob; a load follows the key's deltas back to its last full
copy (one query in SQL savers), and ``prune`` rewrites the oldest kept checkpoint's keys whole
so the chains behind it can go.

Pending writes belong to a checkpoint and a task: a node's writes in a superstep with several
nodes, interrupts raised, resume values given, and sub-task records. They make a half-finished
superstep resumable: finished nodes are not run again.
"""

from __future__ import annotations

import builtins
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from graph_agent.graph.engine import Blob
from graph_agent.graph.errors import ThreadBusyError

_T = TypeVar("_T")


async def _to_thread(fn: Callable[..., _T], /, *args: Any) -> _T:
    """``asyncio.to_thread``; asyncio is imported by the first async call, not with the package."""
    import asyncio

    return await asyncio.to_thread(fn, *args)


_last_id = 0
_id_lock = threading.Lock()


def new_checkpoint_id(after: str | None = None) -> str:
    """A fresh checkpoint id: unique, sorting in creation order, and after ``after`` (the
    parent's id) even when the wall clock stepped back since it was made. A seam tests may pin.

    An id is the time in microseconds (14 hex digits), then this process's tag: no two ids of
    a process share a microsecond, and processes differ by their tags.
    """
    global _last_id
    _id_lock.acquire()  # (not ``with``: nothing here raises, and it is made once per step)
    try:
        micros = time.time_ns() // 1000
        if micros <= _last_id:
            micros = _last_id + 1
        _last_id = micros
    finally:
        _id_lock.release()
    checkpoint_id = _id_format % micros
    if after is not None and checkpoint_id <= after:  # the clock is behind the parent's
        with _id_lock:
            micros = _last_id = max(_last_id, _id_micros(after)) + 1
        checkpoint_id = _id_format % micros
    return checkpoint_id


def _id_format_of_process() -> str:
    """How this process formats ids: the micros, then its tag (its pid's low 16 bits and 24
    random bits, so that processes with the same pid, as in two containers, still differ)."""
    return f"%014x-{os.getpid() & 0xFFFF:04x}{os.urandom(3).hex()}"


def _after_fork_in_child() -> None:
    """A forked process: its own tag, and a fresh lock (another thread of the parent may have
    held the old one at the fork, and would never release it here)."""
    global _id_format, _id_lock
    _id_format = _id_format_of_process()
    _id_lock = threading.Lock()


_id_format = _id_format_of_process()
os.register_at_fork(after_in_child=_after_fork_in_child)


def _id_micros(checkpoint_id: str) -> int:
    try:
        return int(checkpoint_id.split("-", 1)[0], 16)
    except ValueError:
        return 0


def now() -> datetime:
    """The current time for checkpoint timestamps (a seam tests may pin)."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class PendingWrite:
    """One write of a task that finished (or paused) in a superstep not yet checkpointed."""

    task_id: str
    channel: str
    value: Any


@dataclass(kw_only=True, slots=True)
class Checkpoint:
    """The state of one thread after one superstep.

    ``blobs`` holds what this checkpoint itself stores (the keys that changed); ``values`` is
    the whole state, filled in when a checkpoint is loaded. ``barriers`` records which sources
    of each barrier edge have run since its target last ran.
    """

    id: str
    thread_id: str
    checkpoint_ns: str = ""
    parent_id: str | None = None
    step: int = -1
    next: tuple[str, ...] = ()
    versions: dict[str, str] = field(default_factory=dict)
    barriers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    blobs: dict[str, Blob] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime = field(default_factory=now)
    values: dict[str, Any] = field(default_factory=dict)
    pending_writes: tuple[PendingWrite, ...] = ()
    chains: dict[str, tuple[tuple[str, int], ...]] = field(default_factory=dict)
    """Filled on load, for each key rebuilt from appended parts: the version and the number of
    items of each blob it was rebuilt from, its full copy first; the engine decides from it how
    to store the key next (see :mod:`graph_agent.graph.append_chain`)."""
    _engine_built: bool = field(default=False, init=False, repr=False, compare=False)
    """Set by :func:`new_checkpoint` only: the engine built this checkpoint on its parent, so
    every version it names is one of its own blobs or its parent's. ``put`` then stores it as
    it is when that parent is still the newest checkpoint of its thread and namespace (the
    usual step). Any other checkpoint (built by hand, through ``dataclasses.replace``, loaded
    with ``get``) has the versions it names looked up first (see
    :func:`~graph_agent.checkpoint.codec.blobs_to_store`)."""

    def __post_init__(self) -> None:
        """A checkpoint built by hand holds the types its fields declare (a list of node names
        is taken as a tuple), so that every saver stores and refuses the same ones. (The
        engine builds its own with :func:`new_checkpoint`, which skips this.)"""
        if isinstance(self.next, list):
            self.next = tuple(self.next)
        if self.barriers and any(isinstance(v, list) for v in self.barriers.values()):
            self.barriers = {k: tuple(v) for k, v in self.barriers.items()}
        problem = _field_problem(self)
        if problem is not None:
            raise TypeError(f"Checkpoint {self.id!r}: {problem}")


def _field_problem(checkpoint: Checkpoint) -> str | None:
    """What is wrong with the types of a checkpoint's fields, or None."""

    def strings(items: Any) -> bool:
        return all(type(item) is str for item in items)

    if type(checkpoint.id) is not str or type(checkpoint.thread_id) is not str:
        return "id and thread_id must be strings"
    if type(checkpoint.checkpoint_ns) is not str:
        return "checkpoint_ns must be a string"
    if not (checkpoint.parent_id is None or type(checkpoint.parent_id) is str):
        return "parent_id must be a string or None"
    if type(checkpoint.step) is not int:
        return f"step must be an int, got {type(checkpoint.step).__name__}"
    if not (isinstance(checkpoint.next, tuple) and strings(checkpoint.next)):
        return "next must be a tuple of node names (strings)"
    versions = checkpoint.versions
    if not (isinstance(versions, dict) and strings(versions) and strings(versions.values())):
        return "versions must map key names to checkpoint ids (strings)"
    barriers = checkpoint.barriers
    if not (
        isinstance(barriers, dict)
        and strings(barriers)
        and all(isinstance(v, tuple) and strings(v) for v in barriers.values())
    ):
        return "barriers must map barrier names to tuples of node names"
    if not isinstance(checkpoint.blobs, dict) or not isinstance(checkpoint.metadata, dict):
        return "blobs and metadata must be dicts"
    if not isinstance(checkpoint.created_at, datetime):
        return f"created_at must be a datetime, got {type(checkpoint.created_at).__name__}"
    return None


def new_checkpoint(
    checkpoint_id: str,
    thread_id: str,
    checkpoint_ns: str,
    parent_id: str | None,
    step: int,
    next_nodes: tuple[str, ...],
    versions: dict[str, str],
    barriers: dict[str, tuple[str, ...]],
    blobs: dict[str, Blob],
    metadata: dict[str, Any],
) -> Checkpoint:
    """``Checkpoint(...)`` with every field given, for the engine, which makes one per
    superstep: the dataclass ``__init__`` parses keywords and checks each default factory."""
    checkpoint: Checkpoint = object.__new__(Checkpoint)
    checkpoint.id = checkpoint_id
    checkpoint.thread_id = thread_id
    checkpoint.checkpoint_ns = checkpoint_ns
    checkpoint.parent_id = parent_id
    checkpoint.step = step
    checkpoint.next = next_nodes
    checkpoint.versions = versions
    checkpoint.barriers = barriers
    checkpoint.blobs = blobs
    checkpoint.metadata = metadata
    checkpoint.created_at = now()
    checkpoint.values = {}
    checkpoint.pending_writes = ()
    checkpoint.chains = {}
    checkpoint._engine_built = True
    return checkpoint


# new_checkpoint() sets every field: one added to Checkpoint and not there fails at import
if len(Checkpoint.__slots__) != 15:
    raise TypeError("new_checkpoint() must set every field of Checkpoint")


@dataclass(frozen=True, slots=True)
class Lease:
    """Held by the run that owns a thread; released when the run ends or is cancelled."""

    thread_id: str
    checkpoint_ns: str
    owner: str


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
        :data:`graph_agent.graph.pending.IDS_THREAD`) naming the thread their ids were made
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

    def stored_bytes(self, thread_id: str) -> int:
        """Bytes of checkpoint data stored for a thread (headers, blobs, pending writes)."""
        raise NotImplementedError

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
