"""The chat model interface, the editable request, and folding streamed chunks into a message.

Everything here is model-independent: :class:`ChatModel` is what the agent calls,
:class:`ModelRequest` is what interceptors see and edit, and :func:`fold_chunks` turns a
stream of :class:`AssistantMessageChunk` into the same :class:`AssistantMessage` that the
non-streaming call returns.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, runtime_checkable

from graph_agent.messages import (
    AssistantMessage,
    AssistantMessageChunk,
    BaseMessage,
    ThinkingBlock,
    ToolCall,
    ToolCallDelta,
    Usage,
    new_message_id,
)

__all__ = [
    "ChatModel",
    "ChunkAccumulator",
    "LocalChatModel",
    "ModelRequest",
    "ToolDefinition",
    "ToolLike",
    "as_tool_definitions",
    "fold_chunks",
    "message_to_chunks",
    "parse_tool_arguments",
]


@runtime_checkable
class ToolDefinition(Protocol):
    """What a model needs to know about a tool: :class:`graph_agent.tools.Tool` is one."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> dict[str, Any]: ...


ToolLike: TypeAlias = ToolDefinition | Callable[..., Any]
"""A tool definition, or a plain function (made into a :class:`~graph_agent.tools.Tool`)."""


def as_tool_definitions(tools: Iterable[ToolLike] | None) -> list[ToolDefinition]:
    """Tool definitions for ``tools``; plain functions go through ``Tool.from_function``."""
    from graph_agent.tools import Tool

    result: list[ToolDefinition] = []
    for item in tools or ():
        if isinstance(item, ToolDefinition):
            result.append(item)
        elif callable(item):
            result.append(Tool.from_function(item))
        else:
            raise TypeError(f"not a tool: {item!r}; pass @tool functions or Tool objects")
    return result


@dataclass(kw_only=True)
class ModelRequest:
    """One call to a chat model: what interceptors receive and may edit before it is sent.

    Attributes:
        messages: The conversation, oldest first. The list is the request's own: add, drop or
            replace messages freely; the messages in it are the agent's history itself, so
            change one with ``message.model_copy(update=...)`` put in its place, never in
            place (editing ``tool_calls[i].arguments`` in place would change the history).
        tools: The tools the model may call (empty: none).
        options: Extra request fields such as ``temperature``, ``tool_choice`` or
            ``response_format``, merged over the model's own defaults.

    Example:
        >>> from graph_agent.messages import UserMessage
        >>> request = ModelRequest(messages=[UserMessage("hi")], options={"temperature": 0})
        >>> request.messages.append(UserMessage("and hello"))
        >>> len(request.messages), request.tools
        (2, [])
    """

    messages: list[BaseMessage]
    tools: list[ToolDefinition] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        messages: Sequence[BaseMessage],
        tools: Iterable[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> ModelRequest:
        """A request from the arguments of :meth:`ChatModel.generate` (copied, so editable)."""
        return cls(
            messages=list(messages), tools=as_tool_definitions(tools), options=dict(options or {})
        )


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: one answer per call, whole or streamed, sync or async.

    ``stream`` yields chunks whose :func:`fold_chunks` equals what ``generate`` would return for
    the same answer. Errors are :class:`~graph_agent.models.errors.ModelError` subclasses.

    Example:
        >>> from graph_agent.messages import UserMessage
        >>> from graph_agent.models import ScriptedChatModel
        >>> model: ChatModel = ScriptedChatModel(["Hello there!"])
        >>> model.generate([UserMessage("hi")]).text
        'Hello there!'
    """

    def generate(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AssistantMessage:
        """Answer ``messages``, offering ``tools``; ``options`` are extra request fields."""
        ...

    def stream(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> Iterator[AssistantMessageChunk]:
        """Answer piece by piece; all chunks share the final message's id."""
        ...

    async def agenerate(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AssistantMessage:
        """Async :meth:`generate`."""
        ...

    def astream(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[AssistantMessageChunk]:
        """Async :meth:`stream` (an async generator)."""
        ...


def parse_tool_arguments(raw: str | Mapping[str, Any] | None) -> tuple[dict[str, Any], str | None]:
    """Decode a model's tool arguments: ``(arguments, None)``, or ``({}, raw)`` when malformed.

    Empty text and ``null`` mean no arguments. A JSON string holding a JSON object (double
    encoding, seen from small models) is decoded once more. Anything that is not, in the end,
    a JSON object counts as malformed and is returned raw.

    Example:
        >>> parse_tool_arguments('{"city": "Paris"}'), parse_tool_arguments('{"city": ')
        (({'city': 'Paris'}, None), ({}, '{"city": '))
    """
    if raw is None:
        return {}, None
    if isinstance(raw, Mapping):
        return dict(raw), None
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
        if isinstance(value, str):
            value = json.loads(value)
    except (json.JSONDecodeError, RecursionError):  # bad, or nested too deep to read
        return {}, raw
    if value is None:
        return {}, None
    if isinstance(value, dict):
        return value, None
    return {}, raw


class LocalChatModel:
    """Base of the models that answer in-process (scripted, replayed, the demo's).

    A subclass implements :meth:`_reply`; ``generate``/``stream`` and their async twins come
    from it, so every local model streams exactly what it would return. ``chunk_delay``
    spaces the streamed chunks (seconds), so a terminal shows them arrive.
    """

    provider: str | None = None  # its traces' gen_ai.provider.name: none, it runs here
    chunk_delay: float = 0.0

    def _reply(self, request: ModelRequest) -> AssistantMessage:
        raise NotImplementedError

    def generate(
        self,
        messages: Sequence[BaseMessage],
        tools: Iterable[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AssistantMessage:
        """The model's answer."""
        return self._reply(ModelRequest.build(messages, tools, options))

    def stream(
        self,
        messages: Sequence[BaseMessage],
        tools: Iterable[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> Iterator[AssistantMessageChunk]:
        """The model's answer in chunks (the answer is taken when iteration starts)."""
        for chunk in message_to_chunks(self.generate(messages, tools, options)):
            if self.chunk_delay and chunk.text:
                time.sleep(self.chunk_delay)
            yield chunk

    async def agenerate(
        self,
        messages: Sequence[BaseMessage],
        tools: Iterable[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AssistantMessage:
        """Async :meth:`generate`."""
        return self.generate(messages, tools, options)

    async def astream(
        self,
        messages: Sequence[BaseMessage],
        tools: Iterable[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[AssistantMessageChunk]:
        """Async :meth:`stream`."""
        import asyncio

        for chunk in message_to_chunks(self.generate(messages, tools, options)):
            if self.chunk_delay and chunk.text:
                await asyncio.sleep(self.chunk_delay)
            yield chunk


@dataclass
class _PartialToolCall:
    index: int
    id: str = ""
    name: str = ""
    argument_parts: list[str] = field(default_factory=list)


class ChunkAccumulator:
    """Collects streamed chunks; :meth:`message` is the answer so far (or in full, at the end).

    Tool-call pieces are joined by their ``index``: argument fragments are concatenated. The
    first ``id`` is the call's; a name repeated on every piece (as some servers do) is taken
    once, a name that continues the one so far replaces it, and any other name piece is appended
    (a name split over chunks). A piece at the index of a call with another id *and* a name
    starts a new call (servers that number every parallel call 0); another id without a name is
    still the same call (servers that put a fresh id on every argument piece).

    Example:
        >>> acc = ChunkAccumulator()
        >>> for c in [AssistantMessageChunk("Hel"), AssistantMessageChunk("lo")]:
        ...     acc.add(c)
        >>> acc.message().text
        'Hello'
    """

    def __init__(self) -> None:
        self._id: str | None = None
        self._content: list[str] = []
        self._reasoning: list[str] | None = None
        self._thinking_blocks: list[ThinkingBlock] = []
        self._calls: list[_PartialToolCall] = []
        self._latest_by_index: dict[int, _PartialToolCall] = {}
        self._finish_reason: str | None = None
        self._usage: Usage | None = None

    def add(self, chunk: AssistantMessageChunk) -> None:
        """Take one chunk into the answer."""
        if self._id is None:
            self._id = chunk.id
        if chunk.content:
            self._content.append(chunk.content)
        if chunk.reasoning:
            self._reasoning = [*(self._reasoning or []), chunk.reasoning]
        self._thinking_blocks.extend(chunk.thinking_blocks)
        for delta in chunk.tool_call_deltas:
            self._add_delta(delta)
        if chunk.finish_reason is not None:
            self._finish_reason = chunk.finish_reason
        if chunk.usage is not None:
            self._usage = chunk.usage

    def _add_delta(self, delta: ToolCallDelta) -> None:
        call = self._latest_by_index.get(delta.index)
        if call is None or (delta.name and delta.id and call.id and delta.id != call.id):
            call = _PartialToolCall(index=delta.index)
            self._calls.append(call)
            self._latest_by_index[delta.index] = call
        if delta.id and not call.id:
            call.id = delta.id
        if delta.name:
            # The same name again, or the whole name so far and more: it replaces the name;
            # otherwise it is the next piece of a name split over chunks.
            if delta.name.startswith(call.name):
                call.name = delta.name
            else:
                call.name += delta.name
        if delta.arguments:
            call.argument_parts.append(delta.arguments)

    @property
    def finish_reason(self) -> str | None:
        """The finish reason seen so far (``None`` until the server sent one)."""
        return self._finish_reason

    def message(self) -> AssistantMessage:
        """The :class:`AssistantMessage` made of the chunks added so far."""
        tool_calls = []
        for call in self._calls:
            joined = join_surrogate_pairs("".join(call.argument_parts))
            arguments, raw = parse_tool_arguments(joined)
            tool_calls.append(
                ToolCall(id=call.id, name=call.name, arguments=arguments, raw_arguments=raw)
            )
        reasoning = self._reasoning
        return AssistantMessage(
            id=self._id if self._id is not None else new_message_id(),
            content=join_surrogate_pairs("".join(self._content)),
            tool_calls=tool_calls,
            finish_reason=self._finish_reason,
            usage=self._usage,
            reasoning=join_surrogate_pairs("".join(reasoning)) if reasoning is not None else None,
            thinking_blocks=self._thinking_blocks,
        )


_SURROGATE = re.compile("[\ud800-\udfff]")


def join_surrogate_pairs(text: str) -> str:
    """``text`` with each UTF-16 surrogate pair made the character it encodes.

    A server that streams an emoji as two JSON escapes in two events (``"\\ud83d"``, then
    ``"\\ude00"``) leaves two halves once the chunks are joined; a lone half with no partner
    is kept as it is.

    Example:
        >>> join_surrogate_pairs("\\ud83d" + "\\ude00") == "\\U0001f600"
        True
    """
    if _SURROGATE.search(text) is None:  # the usual text: nothing to do
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def fold_chunks(chunks: Iterable[AssistantMessageChunk]) -> AssistantMessage:
    """Fold a stream's chunks into its final :class:`AssistantMessage`.

    Example:
        >>> from graph_agent.messages import ToolCallDelta
        >>> chunks = [
        ...     AssistantMessageChunk("Let me check. "),
        ...     AssistantMessageChunk(tool_call_deltas=[
        ...         ToolCallDelta(index=0, id="c1", name="get_weather", arguments='{"ci')]),
        ...     AssistantMessageChunk(tool_call_deltas=[
        ...         ToolCallDelta(index=0, id="c1", name="get_weather", arguments='ty": "Rome"}')]),
        ...     AssistantMessageChunk(finish_reason="tool_calls"),
        ... ]
        >>> reply = fold_chunks(chunks)
        >>> reply.text, reply.tool_calls[0].name, reply.tool_calls[0].arguments
        ('Let me check. ', 'get_weather', {'city': 'Rome'})
    """
    accumulator = ChunkAccumulator()
    for chunk in chunks:
        accumulator.add(chunk)
    return accumulator.message()


_PIECES = re.compile(r"\S+\s*|\s+")


def message_to_chunks(message: AssistantMessage) -> Iterator[AssistantMessageChunk]:
    """Stream a finished message: its reasoning (with its thinking blocks), its text word by
    word, one piece per tool call, then the finish reason and usage. ``fold_chunks`` of the
    result equals ``message`` (for a message of parts, chunks carry its text parts: images do
    not stream).

    Example:
        >>> [c.text for c in message_to_chunks(AssistantMessage("Hi there"))]
        ['Hi ', 'there', '']
    """
    message_id = message.id
    if message.reasoning or message.thinking_blocks:
        yield AssistantMessageChunk(
            id=message_id,
            reasoning=message.reasoning or "",
            thinking_blocks=message.thinking_blocks,
        )
    for piece in _PIECES.findall(message.text):
        yield AssistantMessageChunk(piece, id=message_id)
    for index, call in enumerate(message.tool_calls):
        arguments = (
            call.raw_arguments
            if call.raw_arguments is not None
            else json.dumps(call.arguments, ensure_ascii=False)
        )
        delta = ToolCallDelta(index=index, id=call.id, name=call.name, arguments=arguments)
        yield AssistantMessageChunk(id=message_id, tool_call_deltas=[delta])
    yield AssistantMessageChunk(
        id=message_id, finish_reason=message.finish_reason, usage=message.usage
    )
