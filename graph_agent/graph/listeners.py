"""Lifecycle listeners: what a run, its nodes, and an agent's model and tool calls tell the
code watching them (tracing, metrics, logs, a UI).

A :class:`Listener` overrides the methods it wants; each gets one event object carrying the
thread id, run id, checkpoint namespace (``ns``), node and step: a :class:`RunEvent` or a
:class:`NodeEvent`, or, from an agent, a :class:`~graph_agent.models.events.ModelCallEvent`
or :class:`~graph_agent.models.events.ToolCallEvent` (those live with the models: the engine
dispatches every event alike and knows nothing of models or tools). The object a
``before_*``/``on_run_start`` method got is the one the matching end method gets, filled in
(``duration``, the result or the error), so a listener can keep what it started by the
event's identity. Both are called in the thread (and context) that runs the node or the call,
so a listener may make something current for the code in between.

Listeners are given with ``CompileConfig(listeners=...)`` or ``ReactAgent(listeners=...)``,
or for every graph with :func:`add_listener` (what
``graph_agent.observability.instrument()`` does); a graph running inside another (a
subgraph, an agent node or an agent called as a tool) reports to its caller's listeners too.
A listener that raises is logged (once per listener, on the ``graph_agent`` logger) and
never changes the run. With no listener, the engine does nothing of this per step.

Example:
    >>> from graph_agent import StateGraph, START, END, CompileConfig
    >>> class Steps(Listener):
    ...     def __init__(self):
    ...         self.seen = []
    ...     def after_node(self, event):
    ...         self.seen.append((event.node, event.step))
    >>> steps = Steps()
    >>> g = StateGraph("inc")
    >>> _ = g.add_node("inc", lambda state: {"x": state["x"] + 1})
    >>> _ = g.add_edge(START, "inc").add_edge("inc", END)
    >>> _ = g.compile(CompileConfig(listeners=[steps])).invoke({"x": 1})
    >>> steps.seen
    [('inc', 0)]
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from graph_agent.graph import log_context
from graph_agent.graph.lazy import lazy_names

logger = logging.getLogger("graph_agent")
log_context.install()  # the library's records carry the run's ids (idempotent)

RunStatus = Literal["running", "finished", "interrupted", "error", "cancelled"]


@dataclass(slots=True, kw_only=True, eq=False)
class ListenerEvent:
    """What every event carries.

    Attributes:
        thread_id: The run's thread (``None`` for a run without one).
        run_id: The run's id: the ``run_id`` of ``RunnableConfig.metadata`` when it has one
            (``graph-agent serve`` sets it), else one made for the call.
        ns: The checkpoint namespace of the graph running (``""`` at the top; a subgraph's
            or an agent tool's ``node:task`` path with a saver).
        node: The node running (``None`` for a run's own events).
        step: The superstep (for a run's start, the last one the thread had run).
        graph: The name of the graph (or agent) running.
        started: When it began, in nanoseconds since the epoch (``time.time_ns()``).
        duration: Seconds it took, once it ended (``None`` before).
    """

    thread_id: str | None
    run_id: str
    ns: str
    node: str | None
    step: int
    graph: str
    started: int = field(default_factory=time.time_ns)
    duration: float | None = None

    def finish(self) -> None:
        """Set :attr:`duration` from :attr:`started` to now."""
        self.duration = (time.time_ns() - self.started) / 1e9


@dataclass(slots=True, kw_only=True, eq=False)
class RunEvent(ListenerEvent):
    """One call of a graph (``invoke``, ``stream`` and their async twins): ``on_run_start``,
    then ``on_run_end`` with its ``status``.

    Attributes:
        parent_run_id: The run of the graph this one runs inside, if any.
        parent_task_id: The task (node execution) of that run it runs inside.
        metadata: The call's ``RunnableConfig.metadata``.
        resumed: The call answers interrupts or carries on a paused or failed thread.
        resumed_from: What listeners stored (in :attr:`carrier`) with the run that paused
            the thread this one resumes (read from its checkpoint), else ``None``.
        carrier: What listeners want stored with this run's checkpoints (strings only), for a
            later run resuming it to find in its ``resumed_from`` (a trace context, say).
        status: ``"running"``, then how it ended.
        error: What the run raised (status ``"error"`` or ``"cancelled"``).
        interrupts: The interrupts it paused on (status ``"interrupted"``).
    """

    parent_run_id: str | None = None
    parent_task_id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    resumed: bool = False
    resumed_from: Mapping[str, str] | None = None
    carrier: dict[str, str] = field(default_factory=dict)
    status: RunStatus = "running"
    error: BaseException | None = None
    interrupts: tuple[Any, ...] = ()


@dataclass(slots=True, kw_only=True, eq=False)
class NodeEvent(ListenerEvent):
    """One execution of a node (a task): ``before_node``, then one of ``after_node``,
    ``on_node_error`` or ``on_interrupt``.

    Attributes:
        task: The task's context (``TaskContext``); ``task_id`` is its id (stable across a
            resume or a crash).
        attempt: How many attempts it took (above 1 for a node its ``RetryPolicy`` retried).
        result: What the node returned (``after_node``).
        error: What it raised (``on_node_error``).
        interrupts: The interrupts it paused on (``on_interrupt``).
    """

    task: Any
    attempt: int = 1
    result: Any = None
    error: BaseException | None = None
    interrupts: tuple[Any, ...] = ()

    @property
    def task_id(self) -> str:
        """The task's id (made when first asked: a run without a saver needs none)."""
        return str(self.task.id)


class Listener:
    """Watches runs: override the methods you need (each is optional). See the module
    docstring for when each is called."""

    def on_run_start(self, event: RunEvent) -> None:
        """A call of a graph starts (after loading the thread's checkpoint)."""

    def on_run_end(self, event: RunEvent) -> None:
        """The call ended: ``event.status`` says how."""

    def before_node(self, event: NodeEvent) -> None:
        """A node starts, in the thread that runs it."""

    def after_node(self, event: NodeEvent) -> None:
        """A node returned ``event.result``."""

    def on_node_error(self, event: NodeEvent) -> None:
        """A node raised ``event.error``."""

    def on_interrupt(self, event: NodeEvent) -> None:
        """A node paused on ``event.interrupts``."""

    def before_model_call(self, event: Any) -> None:
        """An agent sends a request to its model (``event``: a ``ModelCallEvent`` of
        :mod:`graph_agent.models.events`)."""

    def on_model_call(self, event: Any) -> None:
        """The model answered (``event.reply``, ``event.usage``) or failed (``event.error``)."""

    def before_tool_call(self, event: Any) -> None:
        """An agent calls a tool (``event``: a ``ToolCallEvent`` of
        :mod:`graph_agent.models.events`)."""

    def on_tool_call(self, event: Any) -> None:
        """The tool call ended (``event.result``, or ``event.error``)."""


HOOKS = (
    "on_run_start",
    "on_run_end",
    "before_node",
    "after_node",
    "on_node_error",
    "on_interrupt",
    "before_model_call",
    "on_model_call",
    "before_tool_call",
    "on_tool_call",
)


NODE_HOOKS = ("before_node", "after_node", "on_node_error", "on_interrupt")


class Dispatch:
    """The listeners of a call, and for each hook the methods that do something."""

    __slots__ = ("_hooks", "listeners", "observed_specs", "watches_nodes")

    def __init__(self, listeners: tuple[Any, ...]) -> None:
        self.listeners = listeners
        self._hooks: dict[str, tuple[tuple[Any, Callable[[Any], None]], ...]] = {
            hook: tuple(
                (listener, method)
                for listener in listeners
                if (method := _overridden(listener, hook)) is not None
            )
            for hook in HOOKS
        }
        self.watches_nodes = any(self._hooks[hook] for hook in NODE_HOOKS)
        """Some listener wants node events: the call's nodes are wrapped to report them."""
        self.observed_specs: dict[int, tuple[Any, Any]] = {}
        """By graph spec: it with its nodes wrapped to report (``_observed.py``), made once."""

    def emit(self, hook: str, event: ListenerEvent) -> None:
        """Call ``hook`` of every listener with ``event``; one that raises is logged."""
        for listener, method in self._hooks[hook]:
            try:
                method(event)
            except Exception:
                _report_failure(listener, hook)


def _overridden(listener: Any, hook: str) -> Callable[[Any], None] | None:
    """The listener's ``hook`` method, unless it is :class:`Listener`'s (which does nothing)."""
    method = getattr(listener, hook, None)
    if not callable(method):
        return None
    if getattr(type(listener), hook, None) is getattr(Listener, hook):
        return None
    return method  # type: ignore[no-any-return]


_failed: weakref.WeakSet[Any] = weakref.WeakSet()
_failed_ids: set[int] = set()  # listeners that cannot be weakly referenced
_failed_lock = threading.Lock()


def _report_failure(listener: Any, hook: str) -> None:
    """Log a listener's error: in full the first time, then only at debug level."""
    with _failed_lock:
        try:
            first = listener not in _failed
            _failed.add(listener)
        except TypeError:
            first = id(listener) not in _failed_ids
            _failed_ids.add(id(listener))
    if first:
        logger.exception(
            "listener %s raised in %s; the run goes on (its further errors are logged at "
            "debug level)",
            type(listener).__name__,
            hook,
        )
    else:
        logger.debug("listener %s raised in %s", type(listener).__name__, hook, exc_info=True)


_global: tuple[Any, ...] = ()
_global_lock = threading.Lock()
_dispatches: dict[tuple[int, ...], Dispatch] = {}
"""One Dispatch per set of listeners (by their ids; it keeps them alive, so ids stay theirs)."""
_MAX_DISPATCHES = 256


def add_listener(listener: Any) -> None:
    """Report every graph's runs to ``listener`` from now on (in this process)."""
    global _global
    with _global_lock:
        if not any(known is listener for known in _global):
            _global = (*_global, listener)


def remove_listener(listener: Any) -> None:
    """Undo :func:`add_listener` (nothing if it was not added)."""
    global _global
    with _global_lock:
        _global = tuple(known for known in _global if known is not listener)


def dispatch_for(own: tuple[Any, ...], inherited: Dispatch | None) -> Dispatch | None:
    """The listeners of a call: the caller's (a graph running inside another), the graph's
    own and the global ones, each once; ``None`` when there are none (the usual case)."""
    if inherited is None:
        if not own and not _global:
            return None
        listeners: Iterable[Any] = (*_global, *own)
    elif not own:
        return inherited
    else:
        listeners = (*inherited.listeners, *own)
    unique: dict[int, Any] = {}
    for listener in listeners:
        unique.setdefault(id(listener), listener)
    key = tuple(unique)
    dispatch = _dispatches.get(key)
    if dispatch is None:
        if len(_dispatches) >= _MAX_DISPATCHES:  # listeners made per call: keep none alive
            _dispatches.clear()
        dispatch = _dispatches.setdefault(key, Dispatch(tuple(unique.values())))
    return dispatch


_MOVED = {
    "ModelCallEvent": "graph_agent.models.events",
    "ToolCallEvent": "graph_agent.models.events",
}
"""Events that lived here and moved out of the engine (issue 34), by the module they live in:
the old import path still gives them, loading that module on first use (the engine itself
never does)."""


__getattr__ = lazy_names(__name__, _MOVED)
