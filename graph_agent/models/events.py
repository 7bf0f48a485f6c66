"""The events of an agent's model and tool calls, as its run's listeners get them
(``before_model_call``/``on_model_call``, ``before_tool_call``/``on_tool_call`` of
:class:`~graph_agent.graph.listeners.Listener`).

They carry what every listener event carries (a
:class:`~graph_agent.graph.listeners.ListenerEvent`: thread id, run id, namespace, node, step,
timing); the engine dispatches them as it does its own run and node events, without knowing
what they hold. ``agent/watched.py`` makes and reports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graph_agent.graph.listeners import ListenerEvent

__all__ = ["ModelCallEvent", "ToolCallEvent"]


@dataclass(slots=True, kw_only=True, eq=False)
class ModelCallEvent(ListenerEvent):
    """One request to an agent's model: ``before_model_call``, then ``on_model_call``.

    Attributes:
        model: The model's name (its ``model`` attribute, else its class name).
        provider: Who serves it (``"openai"``, ...), when the model says (its ``provider``).
        request: The ``ModelRequest`` sent (messages, tools, options).
        streaming: The caller streams the answer.
        reply: The ``AssistantMessage`` that came back.
        usage: Its token usage, when the model reported it.
        error: What the call raised.
    """

    model: str
    provider: str | None = None
    request: Any = None
    streaming: bool = False
    reply: Any = None
    usage: Any = None
    error: BaseException | None = None

    @property
    def latency(self) -> float | None:
        """Seconds the call took (:attr:`duration`)."""
        return self.duration


@dataclass(slots=True, kw_only=True, eq=False)
class ToolCallEvent(ListenerEvent):
    """One tool call of an agent: ``before_tool_call``, then ``on_tool_call``.

    Attributes:
        call: The ``ToolCall`` (id, name, arguments).
        result: The ``ToolResponseMessage`` it ended with (``is_error`` when it failed: a
            tool's error becomes its result).
        error: What the call raised past the tool node (a pause, a cancellation).
    """

    call: Any
    result: Any = None
    error: BaseException | None = None

    @property
    def latency(self) -> float | None:
        """Seconds the call took (:attr:`duration`)."""
        return self.duration
