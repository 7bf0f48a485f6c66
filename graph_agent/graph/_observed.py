"""A call's nodes as its listeners see them: each wrapped to report its start and its end.

Only a call with listeners runs these wrappers (made once per graph and set of listeners):
without, the flow runs the graph's own nodes and nothing here costs anything. The events are
emitted in the thread (and context) running the node, around the node's own code, so a
listener may make something current for that code (an OpenTelemetry span, say).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from graph_agent.graph._engine import GraphSpec, NodeSpec
from graph_agent.graph.errors import GraphInterrupted, ParentCommand
from graph_agent.graph.listeners import Dispatch, NodeEvent
from graph_agent.graph.task import TaskContext, _current_task


def observed_nodes(spec: GraphSpec, dispatch: Dispatch) -> Mapping[str, NodeSpec]:
    """``spec``'s nodes, each reporting to ``dispatch`` (made once per graph and dispatch)."""
    made = dispatch.observed_nodes.get(id(spec))
    if made is not None and made[0] is spec:
        return made[1]
    nodes = {name: _observed(node, dispatch) for name, node in spec.nodes.items()}
    dispatch.observed_nodes[id(spec)] = (spec, nodes)
    return nodes


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
        task_id=task.id,
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
