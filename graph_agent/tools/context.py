"""What a tool call is given and gives back: :class:`ToolContext` (injected into a parameter of
that type), the errors a call raises for the model to read (:class:`ToolArgumentsError`,
:class:`ToolTimeoutError`), and how a return value becomes a result's content
(:func:`result_to_text`, :func:`result_to_content`)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pydantic_core

from graph_agent.graph.errors import GraphAgentError, ParentCommand
from graph_agent.graph.task import current_task
from graph_agent.graph.types import Command
from graph_agent.messages import AudioPart, FilePart, ImagePart, MessageContent, TextPart


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolContext:
    """What a tool learns about the call it serves, injected into a parameter of this type.

    The parameter is matched by its annotation (``ctx: ToolContext``, ``ToolContext | None``),
    never by its name, and it is left out of the schema the model sees.

    Attributes:
        call_id: The id of the model's tool call.
        idempotency_key: Stable across re-runs of the same call (thread id + assistant message id
            + call id): pass it to external systems so a retried call is not applied twice.
        state: The agent's state (a read-only mapping) when the call was made.
        config: The run's ``RunnableConfig``; ``config.context`` holds per-run values.
        cancelled: A ``threading.Event`` set when the caller stops waiting (the call timed
            out): a long tool can check ``ctx.cancelled.is_set()`` and give up. An agent run
            as a tool (``agent_tool``) stops at its next step when it is set.
        attempt: 0 for the first attempt of the call, ``n`` for its ``n``-th retry
            (``ToolRetryInterceptor`` gives each attempt a fresh context, with its own
            ``cancelled`` event; ``idempotency_key`` stays the same).
        store: The run's long-term memory (``config.store``: a ``graph_agent.store``
            store), or None when the graph or agent has none.

    Example:
        >>> from graph_agent.tools import tool
        >>> @tool
        ... def whoami(ctx: ToolContext) -> str:
        ...     '''Tell the model which call this is.'''
        ...     return ctx.call_id
        >>> whoami.invoke({}, ToolContext(call_id="c7"))
        'c7'
    """

    call_id: str = ""
    idempotency_key: str = ""
    state: Mapping[str, Any] | None = None
    config: Any = None
    cancelled: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)
    attempt: int = 0

    @property
    def store(self) -> Any:
        """The run's long-term memory store (``config.store``), or None without one."""
        return getattr(self.config, "store", None)


class ToolArgumentsError(GraphAgentError, ValueError):
    """The model's arguments do not fit the tool; the message is written for the model to act on."""

    def __init__(self, message: str, *, tool_name: str) -> None:
        super().__init__(message)
        self.tool_name = tool_name


class ToolTimeoutError(GraphAgentError, TimeoutError):
    """A tool call took longer than its timeout (a sync tool keeps running on its thread)."""

    def __init__(self, message: str, *, tool_name: str, timeout: float) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.timeout = timeout


def result_to_text(value: Any) -> str:
    """Turn a tool's return value into the text the model reads.

    A ``str`` is kept as is; anything else (pydantic models, dataclasses, dicts, lists, numbers,
    ``None``) becomes compact JSON; what JSON cannot express falls back to ``str(value)``.
    A ``Command(graph=Command.PARENT, ...)`` is a handoff, not a result: it stops the agent and
    routes the graph the agent runs in (raised as
    :class:`~graph_agent.graph.errors.ParentCommand`).

    Example:
        >>> result_to_text({"temp": 21}), result_to_text("ok"), result_to_text(None)
        ('{"temp":21}', 'ok', 'null')
    """
    if isinstance(value, str):
        return value
    if isinstance(value, Command) and value.graph == Command.PARENT:
        task = current_task()  # the tool node, to name it should no parent graph exist
        if task is None:
            raise ParentCommand(value)
        raise ParentCommand(value, node=task.node, step=task.step)
    return pydantic_core.to_json(value, fallback=str).decode()


_PARTS = (TextPart, ImagePart, AudioPart, FilePart)


def result_to_content(value: Any) -> MessageContent:
    """What a tool's return value becomes as the content of its result: a content part
    (``ImagePart``, ...) or a list of them stays parts, so a model that sees images gets the
    screenshot a tool took; anything else is :func:`result_to_text`.

    Example:
        >>> result_to_content(ImagePart(url="https://x.test/a.png"))[0].url
        'https://x.test/a.png'
        >>> result_to_content({"temp": 21})
        '{"temp":21}'
    """
    if isinstance(value, _PARTS):
        return [value]
    if isinstance(value, list | tuple) and value and all(isinstance(v, _PARTS) for v in value):
        return list(value)
    return result_to_text(value)
