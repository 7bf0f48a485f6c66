"""What a running node can reach: its :class:`TaskContext`, ``interrupt()`` and ``emit_chunk()``;
and what a call's input may be decided from: the thread it lands on (:class:`FromThread`).

The running task is kept in a context variable, so these work from sync nodes (inline or on a
worker thread) and from async nodes alike.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

try:  # hashlib would also load OpenSSL (3 MB) for this built-in hash
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - another Python implementation
    from hashlib import blake2b

from graph_agent.graph.errors import GraphInterrupted, GraphRuntimeError
from graph_agent.graph.values import Interrupt

if TYPE_CHECKING:
    from graph_agent.graph.state import OverAllState

_current_task: ContextVar[TaskContext | None] = ContextVar("graph_agent_task", default=None)
_current_scope: ContextVar[InterruptScope | None] = ContextVar("graph_agent_scope", default=None)
_NO_RECORDS: dict[str, Any] = {}  # shared and never written: a task's records start empty

RECORD_PREFIX = "__record__:"


def derive_id(*parts: object) -> str:
    """A short stable id from its parts (task ids, interrupt ids); any string may be a part
    (a thread id holding a lone surrogate too: ``surrogatepass`` leaves other text as UTF-8)."""
    text = "\x1f".join(str(part) for part in parts)
    return blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def task_id_for(
    thread_id: str | None,
    checkpoint_id: str | None,
    node: str,
    index: int = 0,
    input_key: str | None = None,
) -> str:
    """The id of the task running ``node`` in the superstep after ``checkpoint_id``; ``index``
    tells apart several tasks of one node in one step (the first, 0, adds nothing): a Send
    task's is its place among the step's Sends to ``node`` plus one, and ``input_key`` its
    input's :func:`send_key`."""
    if input_key is not None:
        return derive_id("task", thread_id, checkpoint_id, node, index, input_key)
    if index:
        return derive_id("task", thread_id, checkpoint_id, node, index)
    return derive_id("task", thread_id, checkpoint_id, node)


def send_key(value: Any) -> str:
    """A short digest of a Send's input, the same for the input as given and as a checkpoint
    gives it back (so a Send task keeps its id across a crash): the input as canonical JSON,
    models by their JSON dump, a value JSON cannot hold by its type's name alone."""
    try:
        text = json.dumps(value, sort_keys=True, default=_plain, separators=(",", ":"))
    except (TypeError, ValueError):  # keys of several types, or a cycle: by position alone
        text = ""
    return blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def _plain(value: Any) -> Any:
    """What :func:`send_key` reads of a value JSON does not know."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, set | frozenset):
        return sorted(map(repr, value))
    if isinstance(value, bytes | bytearray):
        return value.hex()
    isoformat = getattr(value, "isoformat", None)
    if callable(isoformat):
        return isoformat()
    if isinstance(value, tuple) or hasattr(value, "__iter__"):
        return list(value)
    return f"<{type(value).__module__}.{type(value).__qualname__}>"


@dataclass(frozen=True, slots=True, kw_only=True)
class CallContext:
    """What every task of one call shares (made once per call, not once per task)."""

    agent: str
    thread_id: str | None = None
    run_id: str | None = None
    saver: Any = None
    checkpoint_ns: str = ""
    stream_subgraphs: bool = False
    step_limit: int | None = None
    """The first step the call may not run (it would raise ``GraphRecursionError``)."""
    persist_record: Callable[[TaskContext, str, Any], None] | None = None
    apersist_record: Callable[[TaskContext, str, Any], Awaitable[None]] | None = None
    # a WatchedCallContext's fields; as class attributes here, a call nobody listens to pays
    # nothing for them
    listeners: ClassVar[Any] = None
    run_event: ClassVar[Any] = None

    @property
    def durable(self) -> bool:
        return self.saver is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchedCallContext(CallContext):
    """What the tasks of a call its listeners watch share."""

    listeners: Any = None  # type: ignore[misc]  # the base's is a class attribute: None
    """The call's listeners (a ``listeners.Dispatch``)."""
    run_event: Any = None  # type: ignore[misc]
    """The call's ``listeners.RunEvent`` (its run id and so on)."""

    @classmethod
    def of(cls, call: CallContext, listeners: Any, run_event: Any) -> WatchedCallContext:
        """``call``, watched by ``listeners``."""
        shared = {name: getattr(call, name) for name in _CALL_FIELDS}
        if shared["run_id"] is None:  # with a saver: the run's id, for logs
            shared["run_id"] = run_event.run_id
        return cls(**shared, listeners=listeners, run_event=run_event)


_CALL_FIELDS = tuple(f.name for f in fields(CallContext))


class TaskContext:
    """One node execution inside a superstep.

    ``id`` is derived from (thread, checkpoint id, node, index), the index telling apart the
    tasks of one node in one superstep (0 for the node's own task; ``k + 1`` for the task of
    its ``k``-th Send, whose id also derives from the Send's input). It is the same when the
    task runs again after a crash or a resume, so it can serve as an idempotency key (without a
    saver it is unique to the call and step).

    ``record``/``recorded`` keep sub-task results (one tool call, one API request) that survive
    a crash: with a saver, each record is committed as a pending write of the task and handed
    back when it re-runs.
    """

    __slots__ = (
        "_call",
        "_emit",
        "_id",
        "_interrupt_count",
        "_resume",
        "attempts",
        "checkpoint_id",
        "ids_thread",
        "index",
        "node",
        "records",
        "step",
        "usage",
    )

    attempts: int
    """Which attempt of the node is running (1 for the first): set only by a node with a
    ``RetryPolicy`` when it retries, so read it as ``getattr(task, "attempts", 1)``."""

    def __init__(
        self,
        call: CallContext,
        node: str,
        step: int,
        checkpoint_id: str | None = None,
        index: int = 0,
    ) -> None:
        self._call = call
        self.node = node
        self.index = index
        """Which task of ``node`` this is in its step: 0 for the node's own, ``k + 1`` for its
        ``k``-th Send (a :class:`SendTaskContext`)."""
        self.step = step
        self.checkpoint_id = checkpoint_id
        self.ids_thread: str | None = None  # a copied step's: see id_thread
        self.records: dict[str, Any] = _NO_RECORDS
        self.usage: Any = None
        self._resume: dict[str, Any] = _NO_RECORDS
        self._interrupt_count = 0
        self._id: str | None = None
        self._emit: Callable[[TaskContext, Any], None] | None = None

    agent = property(lambda self: self._call.agent, doc="The graph's (or agent's) name.")
    thread_id = property(lambda self: self._call.thread_id, doc="The call's thread.")
    run_id = property(lambda self: self._call.run_id)
    saver = property(lambda self: self._call.saver, doc="The call's saver, if any.")
    checkpoint_ns = property(lambda self: self._call.checkpoint_ns, doc="The call's namespace.")
    stream_subgraphs = property(lambda self: self._call.stream_subgraphs)
    durable = property(lambda self: self._call.saver is not None)

    @property
    def id_thread(self) -> str | None:
        """The thread this task's ids (its own, its interrupts', idempotency keys) derive from:
        the call's, except in the step after a checkpoint ``copy_thread`` copied with pending
        writes, whose ids stay those of the thread they were made in."""
        return self.ids_thread or self._call.thread_id

    @property
    def id(self) -> str:
        if self._id is None:
            call = self._call
            if self.checkpoint_id is None:  # no saver: unique to this call and step
                parts: tuple[object, ...] = (call.thread_id, call.run_id, self.step, self.node)
                self._id = derive_id("task", *parts, *((self.index,) if self.index else ()))
            else:
                self._id = task_id_for(self.id_thread, self.checkpoint_id, self.node)
        return self._id

    @property
    def send_index(self) -> int | None:
        """For a task started by a ``Send``: its place among the step's Sends to this node
        (0 for the first); ``None`` for the node's own task."""
        return self.index - 1 if self.index else None

    @property
    def remaining_steps(self) -> int | None:
        """How many supersteps this call may still run, this one included, before it raises
        ``GraphRecursionError`` (``RunnableConfig.max_steps``): 1 in the last one, so a node
        seeing ``remaining_steps < 2`` can wrap up instead of routing on. ``None`` outside a
        graph's run."""
        limit = self._call.step_limit
        return None if limit is None else limit - self.step

    @property
    def streaming(self) -> bool:
        """True when the caller streams: chunks sent with ``emit_chunk`` reach it live."""
        return self._emit is not None

    def check_lease(self) -> None:
        """Raise :class:`~graph_agent.graph.errors.ThreadBusyError` when this run has lost its
        thread to another run (see ``CheckpointSaver.check_lease``): call it right before a
        side effect that must not happen twice. No round trip: it reads what the saver knows."""
        call = self._call
        if call.saver is not None and call.thread_id is not None:
            call.saver.check_lease(call.thread_id, call.checkpoint_ns)

    def record(self, key: str, value: Any) -> None:
        """Keep ``value`` under ``key`` for this task; committed at once when there is a saver."""
        if self.records is _NO_RECORDS:
            self.records = {}
        self.records[key] = value
        persist = self._call.persist_record
        if persist is not None:
            persist(self, key, value)

    async def arecord(self, key: str, value: Any) -> None:
        """:meth:`record` through the saver's async API (for code on the event loop)."""
        if self.records is _NO_RECORDS:
            self.records = {}
        self.records[key] = value
        persist = self._call.apersist_record
        if persist is not None:
            await persist(self, key, value)

    def recorded(self, key: str, default: Any = None) -> Any:
        """The value recorded under ``key`` by this task (possibly in an earlier attempt)."""
        return self.records.get(key, default)

    def add_usage(self, usage: Any) -> None:
        """Add token usage to what this node reports in its ``NodeOutput.usage``."""
        self.usage = usage if self.usage is None else self.usage + usage

    def __repr__(self) -> str:
        return f"TaskContext(node={self.node!r}, step={self.step})"


class SendTaskContext(TaskContext):
    """The task of a ``Send``: ``index`` is its place among its step's Sends to ``node`` plus
    one, and its id also derives from the Send's input (:func:`send_key`), so it is the same
    when the task runs again after a crash or a resume. (A class of its own, so that plain
    tasks carry no slot for a Send.)"""

    __slots__ = ("send",)

    def __init__(
        self, call: CallContext, send: Any, step: int, checkpoint_id: str | None, index: int
    ) -> None:
        super().__init__(call, send.node, step, checkpoint_id, index)
        self.send = send
        """The ``Send`` that started this task."""

    @property
    def id(self) -> str:
        if self._id is None and self.checkpoint_id is not None:
            key = send_key(self.send.input)
            self._id = task_id_for(self.id_thread, self.checkpoint_id, self.node, self.index, key)
        return super().id


class InterruptScope:
    """A part of the running task that runs beside its siblings (one tool call of the tool node).

    ``interrupt()`` calls inside ``with InterruptScope(key):`` are numbered on their own, and
    their ids derive from ``key``: parallel parts of one task then get ids that do not depend on
    which part reached ``interrupt()`` first, so an answer given by id reaches the part that
    asked, also when the parts run in another order on resume. ``key`` must be stable across
    re-runs of the task (a tool call's id). Nodes of a graph run inside the block (an agent used
    as a tool) number their interrupts as their own tasks, unaffected.
    """

    __slots__ = ("_token", "count", "key", "task")

    def __init__(self, key: str) -> None:
        self.key = key
        self.task = _current_task.get()
        self.count = 0
        self._token: Any = None

    def __enter__(self) -> InterruptScope:
        self._token = _current_scope.set(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        _current_scope.reset(self._token)

    def __repr__(self) -> str:
        return f"InterruptScope(key={self.key!r})"


def scoped_interrupt_id(
    thread_id: str | None, step: int, task_id: str, scope_key: str, index: int
) -> str:
    """The id of the ``index``-th ``interrupt()`` inside ``InterruptScope(scope_key)`` of a
    task (also what ``update_state`` renames such an interrupt to for the task taking over)."""
    return derive_id("interrupt", thread_id, step, task_id, "scope", scope_key, index)


def current_task() -> TaskContext | None:
    """The task running in this context, or ``None`` outside a node."""
    return _current_task.get()


def _require_task(caller: str) -> TaskContext:
    task = _current_task.get()
    if task is None:
        raise RuntimeError(f"{caller} can only be called from inside a running graph node")
    return task


def interrupt(value: Any) -> Any:
    """Pause the run and ask for input; returns the resume value once the run is resumed.

    The node runs again from its top on resume, and this call then returns the value given with
    ``Command(resume=...)``. Needs a checkpoint saver. The interrupt's id derives from the task
    and the number of ``interrupt()`` calls before it in the task, or, inside an
    :class:`InterruptScope` (each tool call of an agent), in that scope.

    Example:
        >>> from graph_agent import END, START, Command, CompileConfig, MemorySaver
        >>> from graph_agent import RunnableConfig, StateGraph
        >>> def review(state):
        ...     answer = interrupt({"draft": state["draft"]})
        ...     return {"approved": answer == "yes"}
        >>> g = StateGraph("review")
        >>> _ = g.add_node("review", review).add_edge(START, "review").add_edge("review", END)
        >>> app = g.compile(CompileConfig(saver=MemorySaver()))
        >>> config = RunnableConfig(thread_id="t1")
        >>> app.invoke({"draft": "Hi"}, config).interrupts[0].value
        {'draft': 'Hi'}
        >>> app.invoke(Command(resume="yes"), config)["approved"]
        True
    """
    task = _require_task("interrupt()")
    if not task.durable:
        raise GraphRuntimeError(
            f"interrupt() in node {task.node!r} needs a checkpoint saver to resume from: "
            "compile with CompileConfig(saver=MemorySaver()) and call with a thread_id"
        )
    scope = _current_scope.get()
    if scope is not None and scope.task is task:
        index = scope.count
        scope.count += 1
        interrupt_id = scoped_interrupt_id(task.id_thread, task.step, task.id, scope.key, index)
        if interrupt_id in task._resume:
            return task._resume[interrupt_id]
        raise GraphInterrupted(
            [Interrupt(interrupt_id, value, task.node)],
            scopes={interrupt_id: (scope.key, index)},
        )
    index = task._interrupt_count
    task._interrupt_count += 1
    interrupt_id = derive_id("interrupt", task.id_thread, task.step, task.id, index)
    if interrupt_id in task._resume:
        return task._resume[interrupt_id]
    raise GraphInterrupted([Interrupt(interrupt_id, value, task.node)])


def emit_chunk(chunk: Any) -> None:
    """Stream a chunk (a str or an ``AssistantMessageChunk``) out of the running node.

    With ``stream()`` it reaches the caller at once as a ``StreamingOutput``; with ``invoke()``
    it is dropped.
    """
    task = _require_task("emit_chunk()")
    if task._emit is not None:
        task._emit(task, chunk)


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadStart:
    """The thread a call lands on, as its run loaded it: under the thread's lease, from the
    checkpoint the call starts from (the one ``config.checkpoint_id`` names, else the newest).

    What :class:`FromThread` decides the input from; the same facts ``get_state`` shows, read
    once, inside the run, so nothing can change between reading and running.

    Attributes:
        values: The checkpoint's state (empty on a new thread).
        next: The nodes the thread stopped before (empty when its last run finished).
        interrupts: The interrupts still waiting for an answer.
        records: For each node in ``next``, what its task recorded with
            :meth:`TaskContext.record` before the run stopped inside it (a node that crashed
            or paused half-way), by record key; a node that recorded nothing is left out.
    """

    values: OverAllState
    next: tuple[str, ...] = ()
    interrupts: tuple[Interrupt, ...] = ()
    records: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ContinueAs:
    """What :class:`FromThread` may decide instead of an input: write ``update`` into the
    thread as if ``node`` had just returned it, in a new checkpoint (``node``'s edges choose
    what runs next), then continue the thread from there, as with input ``None``. This is
    ``update_state(config, update, as_node=node)`` followed by ``invoke(None, config)``, done
    in one run."""

    node: str
    update: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class FromThread:
    """A call's input that depends on the thread it lands on.

    The run calls ``decide(thread)`` once, after it has taken the thread's lease and loaded
    the checkpoint it starts from, with that checkpoint as a :class:`ThreadStart`, and treats
    what it returns as the call's input (a new run, ``None`` to continue, a ``Command`` to
    resume: DESIGN §3), or as a :class:`ContinueAs`. ``decide`` does no I/O; it runs before the
    run writes anything (a fork of an older checkpoint too), so an exception it raises (say,
    an ``InvalidResumeError``) leaves the thread as it was. A graph without a saver decides on
    an empty thread.

    An agent decides this way what to do with tool calls its thread left unanswered (see
    :mod:`graph_agent.agent.recovery`).
    """

    decide: Callable[[ThreadStart], Any]
