"""An agent's model and tool calls as its run's listeners see them (``graph/listeners.py``;
the events are those of ``models/events.py``): ``before_model_call``/``on_model_call`` around
each request to the model (each attempt of an interceptor's retry or fallback is one), and
``before_tool_call``/``on_tool_call`` around each tool call that runs.

When nobody listens, each helper just makes the call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from graph_agent.graph.listeners import Dispatch, ListenerEvent
from graph_agent.graph.task import TaskContext
from graph_agent.messages import AssistantMessage, ToolCall, ToolResponseMessage
from graph_agent.models.base import ModelRequest
from graph_agent.models.events import ModelCallEvent, ToolCallEvent

_T = TypeVar("_T")
_MAX_WRAPPERS = 8
"""How many wrappers :func:`named_model` looks through (a chain, never a loop)."""
_E = TypeVar("_E", bound=ListenerEvent)


def model_name(model: Any) -> str:
    """How events and spans name a model: its ``model`` attribute (the name the API knows),
    else its class's name; of the model a wrapper passes requests to (see :func:`named_model`).
    """
    model = named_model(model)
    name = getattr(model, "model", None)
    return name if isinstance(name, str) and name else type(model).__name__


def named_model(model: Any) -> Any:
    """The model events name for ``model``: the one a wrapper hands each request to (its
    ``wrapped`` attribute, as the CLI's ``UnstreamedModel`` and ``RecordingChatModel`` have),
    so a trace shows the real model, not the wrapper."""
    for _ in range(_MAX_WRAPPERS):
        inner = getattr(model, "wrapped", None)
        if inner is None or inner is model:
            break
        model = inner
    return model


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
    provider = getattr(named_model(model), "provider", None)
    return ModelCallEvent(
        **_where(task),
        model=model_name(model),
        provider=provider if isinstance(provider, str) else None,
        request=request,
        streaming=streaming,
    )


def _begun(task: TaskContext | None, make: Callable[[TaskContext], _E], hook: str) -> _E | None:
    """The event of a call starting, told to the listeners; ``None`` when nobody listens."""
    dispatch = _dispatch(task)
    if dispatch is None:
        return None
    assert task is not None
    event = make(task)
    dispatch.emit(hook, event)
    return event


def _ended(task: TaskContext | None, event: ListenerEvent, value: Any, error: Any = None) -> None:
    """Tell the listeners the call of ``event`` ended with ``value`` (or raised ``error``)."""
    dispatch = _dispatch(task)
    assert dispatch is not None
    event.finish()
    if isinstance(event, ModelCallEvent):
        event.reply, event.error = value, error
        event.usage = getattr(value, "usage", None)
        dispatch.emit("on_model_call", event)
    else:
        assert isinstance(event, ToolCallEvent)
        event.result, event.error = value, error
        dispatch.emit("on_tool_call", event)


def watched_model_call(
    task: TaskContext | None,
    model: Any,
    request: ModelRequest,
    streaming: bool,
    call: Callable[[], AssistantMessage],
) -> AssistantMessage:
    """``call()``, the request to ``model``, reported to the run's listeners."""
    event = _begun(task, lambda t: _model_event(t, model, request, streaming), "before_model_call")
    return call() if event is None else _watched(task, event, call)


async def awatched_model_call(
    task: TaskContext | None,
    model: Any,
    request: ModelRequest,
    streaming: bool,
    call: Callable[[], Awaitable[AssistantMessage]],
) -> AssistantMessage:
    """:func:`watched_model_call` for an awaited call."""
    event = _begun(task, lambda t: _model_event(t, model, request, streaming), "before_model_call")
    return await (call() if event is None else _awatched(task, event, call))


def watched_tool_call(
    task: TaskContext | None, call: ToolCall, run: Callable[[], ToolResponseMessage]
) -> ToolResponseMessage:
    """``run()``, the tool call ``call``, reported to the run's listeners."""
    event = _begun(task, lambda t: ToolCallEvent(**_where(t), call=call), "before_tool_call")
    return run() if event is None else _watched(task, event, run)


async def awatched_tool_call(
    task: TaskContext | None, call: ToolCall, run: Callable[[], Awaitable[ToolResponseMessage]]
) -> ToolResponseMessage:
    """:func:`watched_tool_call` for an awaited call."""
    event = _begun(task, lambda t: ToolCallEvent(**_where(t), call=call), "before_tool_call")
    return await (run() if event is None else _awatched(task, event, run))


def _watched(task: TaskContext | None, event: ListenerEvent, call: Callable[[], _T]) -> _T:
    try:
        value = call()
    except BaseException as exc:
        _ended(task, event, None, exc)
        raise
    _ended(task, event, value)
    return value


async def _awatched(
    task: TaskContext | None, event: ListenerEvent, call: Callable[[], Awaitable[_T]]
) -> _T:
    try:
        value = await call()
    except BaseException as exc:
        _ended(task, event, None, exc)
        raise
    _ended(task, event, value)
    return value
