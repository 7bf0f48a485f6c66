"""``--no-stream-model``: a chat model asked for whole answers, also while the run is streamed.

Some OpenAI-compatible servers lose tool calls in streamed answers (they send the text, or
nothing, and never the call); asked without streaming, the same server calls the tools. The
agent streams its model whenever its caller streams the run, as the CLI always does to show
progress; :class:`UnstreamedModel` keeps that shape (the answer still arrives as chunks, all
at once) while the server is asked with ``stream: false``, like LangChain's
``disable_streaming``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from graph_agent.messages import AssistantMessage, AssistantMessageChunk, BaseMessage
from graph_agent.models.base import ChatModel, ToolLike, message_to_chunks

__all__ = ["UnstreamedModel"]


class UnstreamedModel:
    """``wrapped`` asked with ``generate`` only: ``stream`` yields its whole answer in chunks.

    Args:
        wrapped: The agent's model.
    """

    def __init__(self, wrapped: ChatModel) -> None:
        self.wrapped = wrapped

    def __repr__(self) -> str:
        return f"UnstreamedModel({self.wrapped!r})"

    def generate(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AssistantMessage:
        """The wrapped model's answer."""
        return self.wrapped.generate(messages, tools, options)

    def stream(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> Iterator[AssistantMessageChunk]:
        """The wrapped model's whole answer (asked when iteration starts), as chunks."""
        yield from message_to_chunks(self.wrapped.generate(messages, tools, options))

    async def agenerate(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AssistantMessage:
        """Async :meth:`generate`."""
        return await self.wrapped.agenerate(messages, tools, options)

    async def astream(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[AssistantMessageChunk]:
        """Async :meth:`stream`."""
        answer = await self.wrapped.agenerate(messages, tools, options)
        for chunk in message_to_chunks(answer):
            yield chunk
