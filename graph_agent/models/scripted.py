"""``ScriptedChatModel``: a chat model that answers from a script, for tests, examples and demos."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import TypeAlias

from graph_agent.messages import (
    AssistantMessage,
    new_message_id,
)
from graph_agent.models.base import LocalChatModel, ModelRequest
from graph_agent.models.errors import ModelError

__all__ = ["ScriptedChatModel", "ScriptedResponse"]

ScriptedResponse: TypeAlias = (
    AssistantMessage | str | BaseException | Callable[[ModelRequest], AssistantMessage | str]
)
"""One scripted answer: a message, its text, an exception to raise, or a function of the
request returning a message or text."""


def as_reply(item: AssistantMessage | str) -> AssistantMessage:
    """A fresh copy of a canned answer: a new id, so each reply is a distinct message."""
    if isinstance(item, str):
        return AssistantMessage(content=item)
    if isinstance(item, AssistantMessage):
        return item.model_copy(update={"id": new_message_id()})
    raise TypeError(f"a scripted response must be an AssistantMessage or a str, got {item!r:.100}")


class ScriptedChatModel(LocalChatModel):
    """Replays a fixed list of answers, one per call, and records every request.

    Each reply is a copy of the scripted item with a fresh id. ``stream`` yields the same reply
    word by word (then one chunk per tool call and a final chunk with the finish reason), so the
    folded stream equals the whole reply. Running out of answers raises :class:`ModelError`.

    Args:
        responses: In call order; each an :class:`AssistantMessage`, a string (a text answer),
            an exception (raised by that call) or a callable of the :class:`ModelRequest`
            returning a message or a string.

    Attributes:
        requests: Every :class:`ModelRequest` received, in order (also failed calls).

    Example:
        >>> from graph_agent.messages import AssistantMessage, ToolCall, UserMessage
        >>> model = ScriptedChatModel([
        ...     AssistantMessage(tool_calls=[ToolCall("c1", "add", {"a": 1, "b": 2})]),
        ...     lambda request: f"The answer is {request.messages[-1].content}.",
        ... ])
        >>> model.generate([UserMessage("1 + 2?")]).tool_calls[0].name
        'add'
        >>> "".join(chunk.text for chunk in model.stream([UserMessage("3")]))
        'The answer is 3.'
        >>> [r.messages[-1].content for r in model.requests]
        ['1 + 2?', '3']
    """

    def __init__(self, responses: Iterable[ScriptedResponse]) -> None:
        self._responses: deque[ScriptedResponse] = deque(responses)
        self._scripted = len(self._responses)
        self._lock = threading.Lock()
        self.requests: list[ModelRequest] = []

    def __repr__(self) -> str:
        return f"ScriptedChatModel(remaining={self.remaining}, calls={len(self.requests)})"

    @property
    def remaining(self) -> int:
        """How many scripted answers are left."""
        return len(self._responses)

    def _reply(self, request: ModelRequest) -> AssistantMessage:
        with self._lock:
            self.requests.append(request)
            if not self._responses:
                raise ModelError(
                    f"ScriptedChatModel has no answer for call {len(self.requests)}: it was "
                    f"scripted with {self._scripted}; add more responses"
                )
            item = self._responses.popleft()
        if isinstance(item, BaseException):
            raise item
        if callable(item):
            item = item(request)
        return as_reply(item)
