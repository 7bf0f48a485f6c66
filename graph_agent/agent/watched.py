"""An agent's model and tool calls as its run's listeners see them
(``graph/listeners.py``): ``before_model_call``/``on_model_call`` around each request to the
model (each attempt of an interceptor's retry or fallback is one), and
``before_tool_call``/``on_tool_call`` around each tool call that runs.

When nobody listens, each helper just makes the call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from graph_agent.graph.listeners import Dispatch, ListenerEvent, ModelCallEvent, ToolCallEvent
from graph_agent.graph.task import TaskContext
from graph_agent.messages import AssistantMessage, ToolCall, ToolResponseMessage
from graph_agent.models.base import ModelRequest

_T = TypeVar("_T")


def model_name(model: Any) -> str:
    """How events and spans name a model: its ``model`` attribute (the name the API knows),
    else its class's name."""
    name = getattr(model, "model", None)
    return name if isinstance(name, str) and name else type(model).__name__


def _dispatch(task: TaskContext | None) -> Dispatch | None:
    return task._call.listeners if task is not None else None


def _where(task: TaskContext) -> dict[str, Any]:
    run = task._call.run_event
    return {
        "thread_id": task.thread_id,
        "run_id": run.run_id if run is not None else "",
        "ns": task.checkpoint_ns,
        "node": task.node,
        "step": task.step,
        "graph": task.agent,
    }


def _model_event(
    task: TaskContext, model: Any, request: ModelRequest, streaming: bool
) -> ModelCallEvent:
    provider = getattr(model, "provider", None)
    return ModelCallEvent(
        **_where(task),
        model=model_name(model),
        provider=provider if isinstance(provider, str) else None,
        request=request,
        streaming=streaming,
    )


def _replied(dispatch: Dispatch, event: ModelCallEvent, reply: Any) -> None:
    event.finish()
    event.reply = reply
    event.usage = getattr(reply, "usage", None)
    dispatch.emit("on_model_call", event)


def _failed(dispatch: Dispatch, hook: str, event: ListenerEvent, error: BaseException) -> None:
    event.finish()
    event.error = error  # type: ignore[attr-defined]  # a model or tool call's event
    dispatch.emit(hook, event)


def watched_model_call(
    task: TaskContext | None,
    model: Any,
    request: ModelRequest,
    streaming: bool,
    call: Callable[[], AssistantMessage],
) -> AssistantMessage:
    """``call()``, the request to ``model``, reported to the run's listeners."""
    dispatch = _dispatch(task)
    if dispatch is None:
        return call()
    assert task is not None
    event = _model_event(task, model, request, streaming)
    dispatch.emit("before_model_call", event)
    try:
        reply = call()
    except BaseException as exc:
        _failed(dispatch, "on_model_call", event, exc)
        raise
    _replied(dispatch, event, reply)
    return reply


async def awatched_model_call(
    task: TaskContext | None,
    model: Any,
    request: ModelRequest,
    streaming: bool,
    call: Callable[[], Awaitable[AssistantMessage]],
) -> AssistantMessage:
    """:func:`watched_model_call` for an awaited call."""
    dispatch = _dispatch(task)
    if dispatch is None:
        return await call()
    assert task is not None
    event = _model_event(task, model, request, streaming)
    dispatch.emit("before_model_call", event)
    try:
        reply = await call()
    except BaseException as exc:
        _failed(dispatch, "on_model_call", event, exc)
        raise
    _replied(dispatch, event, reply)
    return reply


def watched_tool_call(
    task: TaskContext | None, call: ToolCall, run: Callable[[], ToolResponseMessage]
) -> ToolResponseMessage:
    """``run()``, the tool call ``call``, reported to the run's listeners."""
    dispatch = _dispatch(task)
    if dispatch is None:
        return run()
    assert task is not None
    event = ToolCallEvent(**_where(task), call=call)
    dispatch.emit("before_tool_call", event)
    try:
        result = run()
    except BaseException as exc:
        _failed(dispatch, "on_tool_call", event, exc)
        raise
    event.finish()
    event.result = result
    dispatch.emit("on_tool_call", event)
    return result


async def awatched_tool_call(
    task: TaskContext | None, call: ToolCall, run: Callable[[], Awaitable[ToolResponseMessage]]
) -> ToolResponseMessage:
    """:func:`watched_tool_call` for an awaited call."""
    dispatch = _dispatch(task)
    if dispatch is None:
        return await run()
    assert task is not None
    event = ToolCallEvent(**_where(task), call=call)
    dispatch.emit("before_tool_call", event)
    try:
        result = await run()
    except BaseException as exc:
        _failed(dispatch, "on_tool_call", event, exc)
        raise
    event.finish()
    event.result = result
    dispatch.emit("on_tool_call", event)
    return result
