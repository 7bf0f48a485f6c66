"""What the engine needs of a checkpoint saver, and what it hands one: the :class:`Saver`
protocol, :class:`Checkpoint`, :class:`Blob`, :class:`PendingWrite`, :class:`Lease`, and
checkpoint ids.

The engine depends on this module only, never on ``graph_agent.checkpoint``: the savers there
(and any third-party one) implement :class:`Saver`, most simply by subclassing
:class:`~graph_agent.checkpoint.base.CheckpointSaver`, and import from here. The dependency
runs one way, ``checkpoint`` → ``graph``.

A checkpoint is written after every superstep. It stores only the keys that changed since its
parent (:class:`Blob`): an append key stores the items appended since then (a part), other keys
their new value; how an append key is stored (a part, parts merged, or a full copy) is its
strategy's storage contract (:mod:`graph_agent.graph._append_chain`). ``versions`` maps each key
to the id of the checkpoint holding its latest blob; a load follows the key's parts back to its
last full copy, and ``prune`` rewrites the oldest kept checkpoint's keys whole so the chains
behind it can go.

Pending writes belong to a checkpoint and a task: a node's writes in a superstep with several
nodes, interrupts raised, resume values given, and sub-task records. They make a half-finished
superstep resumable: finished nodes are not run again.
"""

from __future__ import annotations

import builtins
import os
import reprlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple, Protocol, TypeVar

from graph_agent.graph.values import Interrupt

_F = TypeVar("_F", bound=Callable[..., Any])


class Blob(NamedTuple):
    """What a checkpoint stores for one key that changed.

    ``full``: the whole value. ``delta``: the items appended to an append key since the blob
    at ``base`` (a version: the id of the checkpoint that stored it). Every item is stored
    once, so a thread's storage grows linearly with its steps; ``prune`` compacts old chains.
    (A named tuple: one is made per changed key per checkpoint, and a tuple is cheap to make.)
    """

    kind: Literal["full", "delta"]
    value: Any
    base: str | None = None


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
    to store the key next (see :mod:`graph_agent.graph._append_chain`)."""
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


# pending writes: the channels the engine stores (their shapes are checked on store and load)
WRITE = "__write__"
INTERRUPT = "__interrupt__"
BREAKPOINT = "__breakpoint__"
RESUME = "__resume__"
NESTED = "__nested__"
SCOPED = "__scoped__"
ERROR = "__error__"
IDS_THREAD = "__ids_thread__"
"""Channel of the one write ``copy_thread`` adds to a copied checkpoint that has pending
writes (under the task id :data:`COPY_TASK`): the thread those writes' task and interrupt ids
were derived for. The step after that checkpoint derives its ids from it, so the copy finds
its finished nodes, records and interrupts where the source left them."""
COPY_TASK = "__copy__"

SENDS_KEY = "__sends__"
"""The key under which a checkpoint stores the Sends its next step runs (``[node, input]``
pairs, a blob like any key's; their nodes come last in its ``next``). No node writes it, and
snapshots leave it out of their values."""


def write_problem(channel: str, value: Any) -> str | None:
    """What is wrong with the shape of a pending write :class:`Pending` reads back, or None.

    Savers check it when storing a write and when loading one, so that a damaged row fails
    there, as a ``SerializationError`` naming it, never deep inside a run with an
    ``AttributeError``. Channels other than the engine's own (records, ``__error__``, a
    caller's) hold any value.
    """
    if channel not in _SHAPES:
        return None
    described, fits = _SHAPES[channel]
    if fits(value):
        return None
    return f"it must be {described}, not {type(value).__name__} {reprlib.repr(value)}"


def _interrupts(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(item, Interrupt) and type(item.id) is str and type(item.node) is str
        for item in value
    )


def _strings(items: Iterable[Any]) -> bool:
    return all(type(item) is str for item in items)


def _finished_write(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("update"), dict)
        and _strings(value["update"])
        and isinstance(value.get("goto"), list)
        and _strings(value["goto"])
        and _sends(value.get("sends", []))
    )


def _sends(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(pair, list | tuple)
        and len(pair) == 2
        and type(pair[0]) is str
        and isinstance(pair[1], dict)
        and _strings(pair[1])
        for pair in value
    )


def _nested(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and type(value.get("node")) is str
        and isinstance(value.get("ids"), list)
        and _strings(value["ids"])
    )


def _scoped(value: Any) -> bool:
    return isinstance(value, dict) and all(
        type(i) is str
        and isinstance(at, list)
        and len(at) == 2
        and type(at[0]) is str
        and type(at[1]) is int
        for i, at in value.items()
    )


def _resume(value: Any) -> bool:
    return isinstance(value, dict) and _strings(value)


_SHAPES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    WRITE: (
        "a map with 'update' (a map of keys), 'goto' (a list of node names) and maybe 'sends' "
        "(a list of [node, input] pairs)",
        _finished_write,
    ),
    INTERRUPT: ("a list of Interrupt (with string id and node)", _interrupts),
    BREAKPOINT: ("a list of Interrupt (with string id and node)", _interrupts),
    RESUME: ("a map of interrupt ids to resume values", _resume),
    NESTED: ("a map with 'node' (a node name) and 'ids' (a list of interrupt ids)", _nested),
    SCOPED: ("a map of interrupt ids to [scope key, index]", _scoped),
}
ENGINE_CHANNELS = frozenset(_SHAPES)
"""The channels whose writes the engine reads back in a shape (see :func:`write_problem`)."""


class Saver(Protocol):
    """The checkpoint saver a compiled graph runs on (``CompileConfig(saver=...)``): what the
    engine calls, typed. :class:`~graph_agent.checkpoint.base.CheckpointSaver` implements it
    (subclass it: it brings leases and the async twins); any object with these methods will do.

    A run takes the thread's lease first (``acquire``), loads (``get``), stores a checkpoint per
    superstep (``put``) and a task's writes as they happen (``put_writes``), checks the lease
    before side effects (``check_lease``), and gives the thread back (``release``). History and
    state reads use ``get`` and ``list``.
    """

    def get(
        self, thread_id: str, checkpoint_id: str | None = None, checkpoint_ns: str = ""
    ) -> Checkpoint | None: ...

    def list(
        self,
        thread_id: str,
        limit: int | None = None,
        before: str | None = None,
        checkpoint_ns: str = "",
    ) -> Iterator[Checkpoint]: ...

    def put(self, checkpoint: Checkpoint) -> None: ...

    def put_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        writes: Sequence[tuple[str, Any]],
    ) -> None: ...

    def acquire(self, thread_id: str, checkpoint_ns: str = "") -> Lease: ...

    def release(self, lease: Lease) -> None: ...

    def check_lease(self, thread_id: str, checkpoint_ns: str = "") -> None: ...

    async def aget(
        self, thread_id: str, checkpoint_id: str | None = None, checkpoint_ns: str = ""
    ) -> Checkpoint | None: ...

    async def alist(
        self,
        thread_id: str,
        limit: int | None = None,
        before: str | None = None,
        checkpoint_ns: str = "",
    ) -> builtins.list[Checkpoint]: ...

    async def aput(self, checkpoint: Checkpoint) -> None: ...

    async def aput_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        writes: Sequence[tuple[str, Any]],
    ) -> None: ...

    async def aacquire(self, thread_id: str, checkpoint_ns: str = "") -> Lease: ...

    async def arelease(self, lease: Lease) -> None: ...


def acquires_inline(method: _F) -> _F:
    """Marks an ``aacquire`` that takes the lease without awaiting anything (nothing to
    cancel midway), so the driver need not shield it: see ``_drive._aacquire_once``."""
    method.__graph_agent_acquires_inline__ = True  # type: ignore[attr-defined]
    return method


def takes_lease_inline(aacquire: Callable[..., Any]) -> bool:
    return getattr(aacquire, "__graph_agent_acquires_inline__", False) is True
