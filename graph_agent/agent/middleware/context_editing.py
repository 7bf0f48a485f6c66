"""Context editing: old tool results give way to a placeholder once the context grows too big.

A long tool-using run fills its context with results the model has already read (pages,
listings, logs). :class:`ContextEditingInterceptor` keeps each model request under a token
budget by replacing the content of the oldest tool results with a short placeholder,
keeping the newest ``keep`` results whole. Each cleared result keeps its message, its
``tool_call_id`` and its place, so every call still has its result (servers reject a call
without one) and the model knows a call was made and answered.

Only the request is edited: the thread's history keeps every result, so a later look at the
thread (or a different budget) sees them all. Sizes are estimated as the summarising hook
does (about four characters per token).

Example:
    >>> from graph_agent.agent import ReactAgent
    >>> from graph_agent.models import ScriptedChatModel
    >>> editing = ContextEditingInterceptor(trigger_tokens=50_000, keep=3)
    >>> agent = ReactAgent("reader", ScriptedChatModel(["ok"]), model_interceptors=[editing])
"""

from __future__ import annotations

from collections.abc import Iterable

from graph_agent.agent.builtin_hooks import estimate_tokens
from graph_agent.agent.interceptors import ModelCall, ModelInterceptor
from graph_agent.messages import AssistantMessage, BaseMessage, ToolResponseMessage
from graph_agent.models.base import ModelRequest

CLEARED_PLACEHOLDER = "[tool result cleared to save context; call the tool again if needed]"
"""What a cleared tool result says instead of its content (by default)."""


class ContextEditingInterceptor(ModelInterceptor):
    """Clears the content of old tool results from a request above ``trigger_tokens``.

    When the request's messages are estimated above ``trigger_tokens``, tool results are
    cleared oldest first, until the estimate is at or below the budget or only the newest
    ``keep`` results are left; results of tools in ``exclude_tools`` are never cleared.

    Args:
        trigger_tokens: The budget: a request estimated above it is edited.
        keep: The newest tool results that are never cleared.
        exclude_tools: Tool names whose results are never cleared.
        placeholder: The text a cleared result holds.

    Raises:
        ValueError: ``trigger_tokens`` is below 1 or ``keep`` below 0.
    """

    def __init__(
        self,
        trigger_tokens: int = 100_000,
        keep: int = 3,
        *,
        exclude_tools: Iterable[str] = (),
        placeholder: str = CLEARED_PLACEHOLDER,
    ) -> None:
        if trigger_tokens < 1:
            raise ValueError(
                f"ContextEditingInterceptor: trigger_tokens must be >= 1, got {trigger_tokens}"
            )
        if keep < 0:
            raise ValueError(f"ContextEditingInterceptor: keep must be >= 0, got {keep}")
        self.trigger_tokens = trigger_tokens
        self.keep = keep
        self.exclude_tools = frozenset(exclude_tools)
        self.placeholder = placeholder

    def intercept(self, request: ModelRequest, call_next: ModelCall) -> AssistantMessage:
        request.messages = self.edit(request.messages)
        return call_next(request)

    def edit(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        """``messages`` with old tool results cleared as the budget asks (a new list; the
        messages not cleared are the same objects)."""
        size = estimate_tokens(messages)
        if size <= self.trigger_tokens:
            return messages
        results = [
            index
            for index, message in enumerate(messages)
            if isinstance(message, ToolResponseMessage)
            and message.name not in self.exclude_tools
            and message.text != self.placeholder
        ]
        clearable = results[: max(0, len(results) - self.keep)]
        edited = list(messages)
        for index in clearable:
            if size <= self.trigger_tokens:
                break
            old = edited[index]
            cleared = old.model_copy(update={"content": self.placeholder})
            size -= estimate_tokens([old]) - estimate_tokens([cleared])
            edited[index] = cleared
        return edited

    def __repr__(self) -> str:
        return f"ContextEditingInterceptor(trigger_tokens={self.trigger_tokens}, keep={self.keep})"
