"""A call as its listeners see it (``listeners.py``): its start and end, and each node's.

:func:`flow_call` runs a call's flow (``_flow.py``): as is when nobody listens (nothing here
costs anything then), else through :func:`_watched_call`, which tells the listeners of the
run's start (:class:`Watch`, once the checkpoint it starts from is loaded) and end, and runs
the graph with its nodes wrapped to report their start and end (made once per graph and set of
listeners); a call asked for its task events also goes through ``_task_events.told_call``.
Node events are emitted in the thread (and context) running the node, around the
node's own code, so a listener may make something current for that code (an OpenTelemetry
span, say).
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
from collections.abc import Callable, Generator, Mapping
from typing import Any, Protocol

from graph_agent.graph._effects import RunSettings
from graph_agent.graph._engine import GraphSpec, NodeSpec, RunState
from graph_agent.graph._task_events import told_call
from graph_agent.graph.errors import GraphCancelledError, GraphInterrupted, ParentCommand
from graph_agent.graph.listeners import Dispatch, NodeEvent, RunEvent, RunStatus, dispatch_for
from graph_agent.graph.saver import Checkpoint
from graph_agent.graph.state import OverAllState
from graph_agent.graph.task import CallContext, TaskContext, WatchedCallContext, _current_task
from graph_agent.graph.types import Command, RunnableConfig


class _Flow(Protocol):
    """What this module reads and sets of a call's flow (``_flow._Flow``)."""

    run: RunSettings
    spec: GraphSpec
    config: RunnableConfig
    storage: Any
    run_id: str | None
    run_state: RunState
    watch: Watch | None

    def call(self, input: Any) -> Generator[Any, Any, OverAllState]: ...


RUN_CONTEXT_KEY = "run_context"
"""The checkpoint metadata key under which a watched run keeps what its listeners asked to
keep (``RunEvent.carrier``), for a run resuming it to read."""

_run_ids = itertools.count()


def flow_call(
    flow: _Flow, input: Any, task_events: frozenset[str] = frozenset()
) -> Generator[Any, Any, OverAllState]:
    """``flow.call(input)``, told to the call's listeners when it has any: those of the graph,
    the global ones, and those of the graph it runs inside (the task running it); with
    ``task_events``, its tasks and checkpoints told to its stream too (``_task_events.py``)."""
    caller = _current_task.get()
    dispatch = dispatch_for(flow.run.listeners, caller._call.listeners if caller else None)
    call = flow.call(input) if dispatch is None else _watched_call(flow, input, dispatch, caller)
    return told_call(flow, call, task_events) if task_events else call


class Watch:
    """A call its listeners watch: its :class:`RunEvent`, told of its start once."""

    __slots__ = ("dispatch", "event", "started")

    def __init__(self, dispatch: Dispatch, event: RunEvent) -> None:
        self.dispatch = dispatch
        self.event = event
        self.started = False

    def start(self, flow: _Flow, saved: Checkpoint | None) -> None:
        """Tell the listeners the call starts (``saved``: the checkpoint it loaded, if any);
        what they want kept (``carrier``) goes into every checkpoint the call stores."""
        if self.started:
            return
        self.started = True
        event = self.event
        given = flow.config.metadata.get("run_id")
        event.run_id = str(given) if given is not None else flow.run_id or _new_run_id()
        if saved is not None:
            event.step = saved.step
            kept = saved.metadata.get(RUN_CONTEXT_KEY) if event.resumed else None
            event.resumed_from = kept if isinstance(kept, Mapping) else None
        self.dispatch.emit("on_run_start", event)
        # strings only: a listener that put anything else there must not break the checkpoint
        carrier = {k: v for k, v in event.carrier.items() if type(k) is str and type(v) is str}
        if carrier:
            storage = flow.storage
            storage.metadata = {**storage.metadata, RUN_CONTEXT_KEY: carrier}

    def call_context(self, flow: _Flow, shared: CallContext) -> WatchedCallContext:
        """What the call's tasks share, with the listeners (the call has started by now)."""
        self.start(flow, None)
        return WatchedCallContext.of(shared, self.dispatch, self.event)

    def end(
        self,
        flow: _Flow,
        status: RunStatus,
        error: BaseException | None = None,
        interrupts: tuple[Any, ...] = (),
    ) -> None:
        self.start(flow, None)  # one that failed before it started: both ends are told
        event = self.event
        event.finish()
        event.status, event.error, event.interrupts = status, error, interrupts
        event.step = flow.run_state.step
        self.dispatch.emit("on_run_end", event)


def _new_run_id() -> str:
    return f"run-w{next(_run_ids)}"


def _watched_call(
    flow: _Flow, input: Any, dispatch: Dispatch, caller: TaskContext | None
) -> Generator[Any, Any, OverAllState]:
    config = flow.config
    parent = caller._call.run_event if caller is not None else None
    event = RunEvent(
        thread_id=config.thread_id,
        run_id="",  # known once it starts: see Watch.start
        ns=config.checkpoint_ns,
        node=None,
        step=-1,
        graph=flow.spec.name,
        parent_run_id=parent.run_id if parent is not None else None,
        parent_task_id=caller.id if caller is not None and parent is not None else None,
        metadata=config.metadata,
        resumed=input is None or isinstance(input, Command),
    )
    watch = flow.watch = Watch(dispatch, event)
    if dispatch.watches_nodes:  # the same graph, its nodes reporting
        flow.spec = observed_spec(flow.spec, dispatch)
    try:
        result = yield from flow.call(input)
    except BaseException as exc:
        if isinstance(exc, GeneratorExit | GraphCancelledError):
            watch.end(flow, "cancelled", exc)
        elif isinstance(exc, ParentCommand):  # a handoff to the graph this one runs in
            watch.end(flow, "finished")
        else:
            watch.end(flow, "error", exc)
        raise
    if result.interrupts:
        watch.end(flow, "interrupted", interrupts=tuple(result.interrupts))
    else:
        watch.end(flow, "finished")
    return result


_MAX_OBSERVED_SPECS = 256
"""Observed graphs a dispatch keeps; past this it forgets them all and builds them again."""


def observed_spec(spec: GraphSpec, dispatch: Dispatch) -> GraphSpec:
    """``spec`` with its nodes reporting to ``dispatch`` (made once per graph and dispatch)."""
    made = dispatch.observed_specs.get(id(spec))
    if made is not None and made[0] is spec:
        known: GraphSpec = made[1]
        return known
    nodes = {name: _observed(node, dispatch) for name, node in spec.nodes.items()}
    observed = dataclasses.replace(spec, nodes=nodes)
    if len(dispatch.observed_specs) >= _MAX_OBSERVED_SPECS:  # graphs made per request: bounded
        dispatch.observed_specs.clear()
    dispatch.observed_specs[id(spec)] = (spec, observed)
    return observed


def _observed(node: NodeSpec, dispatch: Dispatch) -> NodeSpec:
    fn, afn = node.fn, node.afn
    wrapped = _async_face(fn, dispatch) if node.is_async else _sync_face(fn, dispatch)
    return dataclasses.replace(
        node,
        fn=wrapped,
        afn=_async_face(afn, dispatch) if afn is not None else None,
    )


def _sync_face(fn: Callable[..., Any], dispatch: Dispatch) -> Callable[..., Any]:
    def observed(*args: Any) -> Any:
        event = _started(dispatch)
        try:
            result = fn(*args)
        except BaseException as exc:
            _failed(dispatch, event, exc)
            raise
        if type(result) is not dict and inspect.isawaitable(result):
            # awaited later, on the engine's loop: its events are the call's (a sync
            # function handing back a coroutine does its work when that is awaited)
            _ended(dispatch, event, None)
            return result
        _ended(dispatch, event, result)
        return result

    return observed


def _async_face(fn: Callable[..., Any], dispatch: Dispatch) -> Callable[..., Any]:
    async def observed(*args: Any) -> Any:
        event = _started(dispatch)
        try:
            result = fn(*args)
            if inspect.isawaitable(result):
                result = await result
        except BaseException as exc:
            _failed(dispatch, event, exc)
            raise
        _ended(dispatch, event, result)
        return result

    return observed


def node_event(task: TaskContext | None) -> NodeEvent | None:
    """The event of ``task``'s node (``None`` outside a watched run)."""
    if task is None:
        return None
    run = task._call.run_event
    if run is None:
        return None
    return NodeEvent(
        thread_id=run.thread_id,
        run_id=run.run_id,
        ns=run.ns,
        node=task.node,
        step=task.step,
        graph=run.graph,
        task=task,
    )


def _started(dispatch: Dispatch) -> NodeEvent | None:
    event = node_event(_current_task.get())
    if event is not None:
        dispatch.emit("before_node", event)
    return event


def _ended(dispatch: Dispatch, event: NodeEvent | None, result: Any) -> None:
    if event is None:
        return
    event.finish()
    event.attempt = _attempt()
    event.result = result
    dispatch.emit("after_node", event)


def _failed(dispatch: Dispatch, event: NodeEvent | None, error: BaseException) -> None:
    if event is None:
        return
    event.finish()
    event.attempt = _attempt()
    if isinstance(error, GraphInterrupted):
        event.interrupts = tuple(error.interrupts)
        dispatch.emit("on_interrupt", event)
    elif isinstance(error, ParentCommand):  # a handoff: the node ended by routing the parent
        event.result = error.command
        dispatch.emit("after_node", event)
    else:
        event.error = error
        dispatch.emit("on_node_error", event)


def _attempt() -> int:
    task = _current_task.get()
    return getattr(task, "attempts", 1) if task is not None else 1
