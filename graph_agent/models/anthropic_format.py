"""The Anthropic Messages wire format: request bodies, answers, stream events, stream errors.

Pure functions and one small stateful stream decoder, no I/O:
:mod:`graph_agent.models.anthropic` sends what these build. How our messages map onto it:

- system messages become the top-level ``system`` text (joined by blank lines, wherever they
  stand in the conversation);
- tool results become ``tool_result`` blocks of a user turn; consecutive messages of one role
  (tool results, then a user message) are merged into one turn, as the API wants all the
  results of a turn's ``tool_use`` blocks in the next user message;
- an assistant message becomes its thinking blocks (sent back unchanged, signature included),
  its text and its ``tool_use`` blocks; an empty one (no text, calls or thinking) is left out;
- assistant turns take no images or documents (the API refuses them there): an assistant
  message of parts (a ``return_direct`` tool's image) is sent as its text with a placeholder
  per part (``[image: image/png, 12 KB]``), and its images and documents follow, after the
  turn's tool results, in the next user turn, led by "Your previous answer holds:", as
  OpenAI's format does with a tool result's images; an image an earlier message already
  showed (the tool result a ``return_direct`` answer repeats) is not sent twice, and audio,
  which the API takes nowhere, stays a placeholder;
- ``response_format`` becomes a tool the model is made to call, whose input comes back as the
  answer's text (see :mod:`graph_agent.models.anthropic_structured`);
- ``stop_reason`` becomes the finish reason the other models give: ``end_turn`` and
  ``stop_sequence`` → ``"stop"``, ``tool_use`` → ``"tool_calls"``, ``max_tokens`` →
  ``"length"``, ``refusal`` → ``"content_filter"``; any other is kept as sent;
- usage: ``prompt_tokens`` counts the input tokens, cached ones included.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from graph_agent.messages import (
    AssistantMessage,
    AssistantMessageChunk,
    BaseMessage,
    ContentPart,
    FilePart,
    ImagePart,
    MessageContent,
    SystemMessage,
    TextPart,
    ThinkingBlock,
    ToolCall,
    ToolCallDelta,
    ToolResponseMessage,
    Usage,
    UserMessage,
    content_text,
)
from graph_agent.models.anthropic_structured import offer_structured_output, structured_output
from graph_agent.models.base import ModelRequest, ToolDefinition, parse_tool_arguments
from graph_agent.models.errors import (
    ModelError,
    ModelRateLimitError,
    ModelResponseError,
    ModelServerError,
)
from graph_agent.models.openai_format import (
    _drop_unoffered_calls,
    _expect,
    _message_of,
    _optional,
    _shorten,
    event_payload,
)

__all__ = [
    "StreamDecoder",
    "build_request_body",
    "finish_reason",
    "messages_to_anthropic",
    "parse_message",
    "parse_usage",
    "tool_to_anthropic",
    "user_content",
]

logger = logging.getLogger("graph_agent.models.anthropic")

_WIRE = ("Anthropic Messages", "an Anthropic Messages API (https://api.anthropic.com)")
_RESERVED_OPTIONS = ("messages", "tools", "stream", "system")
_FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}
_THINKING_SEPARATOR = "\n\n"
_SHOWN_LEAD = "Your previous answer holds:"
_T = TypeVar("_T")

Block = dict[str, Any]


def user_content(content: MessageContent) -> str | list[Block]:
    """The ``content`` of a user turn (or of a ``tool_result`` block) for a message's content.

    A string is sent as it is; parts become the API's blocks: text, ``image`` and ``document``
    (a PDF or a text file) with a ``base64`` or ``url`` source, or a ``file`` source for a
    ``file_id``. The API takes no audio: an :class:`AudioPart` is a ``ValueError``.

    Example:
        >>> user_content("What is 2 + 2?")
        'What is 2 + 2?'
        >>> user_content([TextPart("What is this?"), ImagePart(url="https://x.org/a.png")])
        [{'type': 'text', 'text': 'What is this?'}, {'type': 'image', 'source': {'type': 'url', \
'url': 'https://x.org/a.png'}}]
    """
    if isinstance(content, str):
        return content
    return [_part_to_anthropic(part) for part in content]


def _source(data: str | None, media_type: str | None, url: str | None) -> Block:
    if data is not None:
        return {"type": "base64", "media_type": media_type, "data": data}
    return {"type": "url", "url": url}


def _part_to_anthropic(part: ContentPart) -> Block:
    match part:
        case TextPart():
            return {"type": "text", "text": part.text}
        case ImagePart():
            return {"type": "image", "source": _source(part.data, part.media_type, part.url)}
        case FilePart() if part.file_id is not None:
            return {"type": "document", "source": {"type": "file", "file_id": part.file_id}}
        case FilePart():
            block: Block = {
                "type": "document",
                "source": _source(part.data, part.media_type, part.url),
            }
            if part.filename:
                block["title"] = part.filename
            return block
    raise ValueError(
        f"the Anthropic Messages API takes no {part.type} content: {part.placeholder}; "
        "send text, images or documents"
    )


def _blocks(content: str | list[Block]) -> list[Block]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return content


def _thinking_to_anthropic(block: ThinkingBlock) -> Block:
    if block.type == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.data}
    return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}


def _assistant_blocks(message: AssistantMessage) -> list[Block]:
    # Thinking first, as the model wrote it; then the text, then the calls. Malformed arguments
    # go back as {}: the tool's error result already tells the model what went wrong.
    blocks = [_thinking_to_anthropic(block) for block in message.thinking_blocks]
    # Parts (a return_direct tool's image, a history edited into parts) go as text, each image
    # or file as its placeholder: assistant turns take text, thinking and tool_use blocks only.
    content = message.content
    only_text = isinstance(content, str) or all(isinstance(p, TextPart) for p in content)
    blocks.extend(_blocks(content_text(content, placeholders=not only_text)))
    blocks.extend(
        {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        for call in message.tool_calls
    )
    return blocks


def _media(content: MessageContent) -> list[ContentPart]:
    """The images and documents of a message's content."""
    if isinstance(content, str):
        return []
    return [part for part in content if isinstance(part, ImagePart | FilePart)]


def _shown_parts(message: AssistantMessage, seen: set[ContentPart]) -> list[Block]:
    """The images and documents of an assistant message that no earlier message showed, for
    the user turn after it (audio, which the API takes nowhere, stays a placeholder only)."""
    parts = [part for part in _media(message.content) if part not in seen]
    if not parts:
        return []
    return [_text_block(_SHOWN_LEAD), *(_part_to_anthropic(part) for part in parts)]


def _text_block(text: str) -> Block:
    return {"type": "text", "text": text}


def _tool_result(message: ToolResponseMessage) -> Block:
    block: Block = {"type": "tool_result", "tool_use_id": message.tool_call_id}
    if message.content:
        block["content"] = user_content(message.content)
    if message.is_error:
        block["is_error"] = True
    return block


def messages_to_anthropic(messages: Sequence[BaseMessage]) -> tuple[str, list[Block]]:
    """The ``system`` text and the ``messages`` of a request for a conversation.

    Example:
        >>> from graph_agent.messages import ToolCall
        >>> system, turns = messages_to_anthropic([
        ...     SystemMessage("Be brief."),
        ...     UserMessage("Add 1 and 2, and 3 and 4."),
        ...     AssistantMessage(tool_calls=[ToolCall("c1", "add", {"a": 1, "b": 2}),
        ...                                  ToolCall("c2", "add", {"a": 3, "b": 4})]),
        ...     ToolResponseMessage(tool_call_id="c1", content="3"),
        ...     ToolResponseMessage(tool_call_id="c2", content="7"),
        ... ])
        >>> system, [turn["role"] for turn in turns]
        ('Be brief.', ['user', 'assistant', 'user'])
        >>> [block["tool_use_id"] for block in turns[2]["content"]]
        ['c1', 'c2']
    """
    system: list[str] = []
    turns: list[Block] = []
    shown: list[Block] = []  # images of assistant messages, after their tool results
    seen: set[ContentPart] = set()  # the images and documents shown so far
    for message in messages:
        content: str | list[Block]
        if shown and not isinstance(message, ToolResponseMessage):
            _add_turn(turns, "user", shown)
            shown = []
        match message:
            case SystemMessage():
                system.append(message.text)
                continue
            case UserMessage():
                role, content = "user", user_content(message.content)
            case AssistantMessage():
                role, content = "assistant", _assistant_blocks(message)
                shown = _shown_parts(message, seen)
                if not content:
                    continue
            case ToolResponseMessage():
                role, content = "user", [_tool_result(message)]
            case _:
                raise TypeError(
                    f"cannot send {type(message).__name__} to an Anthropic model: {message!r:.200}"
                )
        seen.update(_media(message.content))
        _add_turn(turns, role, content)
    if shown:
        _add_turn(turns, "user", shown)
    return _THINKING_SEPARATOR.join(text for text in system if text), turns


def _add_turn(turns: list[Block], role: str, content: str | list[Block]) -> None:
    """Append a turn, or merge it into the last one when that has the same role."""
    if turns and turns[-1]["role"] == role:
        previous = turns[-1]
        previous["content"] = _blocks(previous["content"]) + _blocks(content)
    else:
        turns.append({"role": role, "content": content})


def tool_to_anthropic(tool: ToolDefinition) -> Block:
    """One tool definition in the Messages format.

    Example:
        >>> from graph_agent.tools import tool
        >>> @tool
        ... def add(a: int, b: int) -> int:
        ...     "Add two numbers."
        ...     return a + b
        >>> wire = tool_to_anthropic(add)
        >>> wire["name"], wire["description"], sorted(wire["input_schema"]["properties"])
        ('add', 'Add two numbers.', ['a', 'b'])
    """
    wire: Block = {"name": tool.name}
    if tool.description:
        wire["description"] = tool.description
    wire["input_schema"] = tool.parameters
    return wire


def _tool_choice(choice: Any, parallel_tool_calls: Any) -> Block | None:
    """``tool_choice`` as the Messages API takes it, from our names (OpenAI's) or its own."""
    wire: Block | None
    if choice is None:
        wire = None
    elif isinstance(choice, Mapping):
        function = choice.get("function")
        if choice.get("type") == "function" and isinstance(function, Mapping):
            wire = {"type": "tool", "name": function.get("name")}  # OpenAI's form
        else:
            wire = dict(choice)
    elif choice == "auto":
        wire = {"type": "auto"}
    elif choice in ("required", "any"):
        wire = {"type": "any"}
    elif choice == "none":
        wire = {"type": "none"}
    elif isinstance(choice, str):
        wire = {"type": "tool", "name": choice}
    else:
        raise ValueError(
            f"tool_choice must be 'auto', 'required', 'none', a tool's name or a dict, "
            f"got {choice!r}"
        )
    if parallel_tool_calls is False and (wire or {}).get("type") != "none":
        # the API takes disable_parallel_tool_use with auto, any and tool, not with none
        wire = {"type": "auto", **(wire or {}), "disable_parallel_tool_use": True}
    return wire


def _thinking(value: Any) -> Block | None:
    if value is None or value is False:
        return None
    if isinstance(value, bool) or not isinstance(value, int | Mapping):
        raise ValueError(
            f"thinking must be a token budget (e.g. 2048) or the API's thinking object, "
            f"got {value!r}"
        )
    if isinstance(value, int):
        return {"type": "enabled", "budget_tokens": value}
    return dict(value)


def build_request_body(
    model: str,
    request: ModelRequest,
    defaults: Mapping[str, Any],
    *,
    max_tokens: int,
    thinking: int | Mapping[str, Any] | None,
    stream: bool,
) -> dict[str, Any]:
    """The JSON body of a ``POST /v1/messages`` for ``request``.

    ``defaults`` are the model's options; the request's options override them, and an option
    set to ``None`` is left out. Options may also set ``max_tokens`` and ``thinking`` (a budget
    or the API's object; ``None``: off) for one call. ``tool_choice`` takes ``"auto"``,
    ``"required"`` (the API's ``"any"``), ``"none"``, a tool's name or the API's object;
    ``parallel_tool_calls=False`` and ``stop`` (a string or a list) become the API's
    ``disable_parallel_tool_use`` and ``stop_sequences``.

    ``response_format`` (a pydantic model class or OpenAI's ``json_schema`` format) becomes
    a tool the model is made to call, see :mod:`graph_agent.models.anthropic_structured`.

    Raises:
        ValueError: An option that must be passed otherwise, or one of a form the API cannot
            take.

    Example:
        >>> body = build_request_body(
        ...     "claude-sonnet-4-5", ModelRequest(messages=[SystemMessage("Be brief."),
        ...     UserMessage("hi")]), {}, max_tokens=1024, thinking=None, stream=False)
        >>> body
        {'model': 'claude-sonnet-4-5', 'max_tokens': 1024, 'messages': [{'role': 'user', \
'content': 'hi'}], 'system': 'Be brief.'}
    """
    options = {**defaults, **request.options}
    for key in _RESERVED_OPTIONS:
        if key in options:
            where = "a SystemMessage" if key == "system" else f"the {key} argument"
            raise ValueError(f"options may not set {key!r}: pass it as {where} of the model call")
    output = structured_output(options.pop("response_format", None))
    system, messages = messages_to_anthropic(request.messages)
    body: dict[str, Any] = {
        "model": options.pop("model", None) or model,
        "max_tokens": options.pop("max_tokens", None) or max_tokens,
        "messages": messages,
    }
    if system:
        body["system"] = system
    thinking_block = _thinking(options.pop("thinking", thinking))
    if thinking_block is not None:
        body["thinking"] = thinking_block
    parallel_tool_calls = options.pop("parallel_tool_calls", None)
    choice = _tool_choice(options.pop("tool_choice", None), parallel_tool_calls)
    tools = [tool_to_anthropic(tool) for tool in request.tools]
    if output is not None:
        offer_structured_output(body, output, tools, choice)
    elif tools:
        body["tools"] = tools
        if choice is not None:
            body["tool_choice"] = choice
    elif names := _called_tool_names(messages):
        # The API refuses tool_use blocks in a request without tools ("Requests which include
        # tool_use or tool_result blocks must define tools"): a call offering none (an agent's
        # last, summarising call) names the ones called, and forbids calling them.
        body["tools"] = [{"name": name, "input_schema": {"type": "object"}} for name in names]
        body["tool_choice"] = {"type": "none"}
    stop = options.pop("stop", None)
    if stop is not None:
        body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    if stream:
        body["stream"] = True
    body.update((key, value) for key, value in options.items() if value is not None)
    return body


def _called_tool_names(turns: Sequence[Block]) -> list[str]:
    names = {
        block["name"]: None
        for turn in turns
        if turn["role"] == "assistant"
        for block in turn["content"]
        if block["type"] == "tool_use"
    }
    return list(names)


def finish_reason(stop_reason: str | None) -> str | None:
    """The finish reason (as the other models name it) of an Anthropic ``stop_reason``.

    Example:
        >>> finish_reason("end_turn"), finish_reason("tool_use"), finish_reason("pause_turn")
        ('stop', 'tool_calls', 'pause_turn')
    """
    if stop_reason is None:
        return None
    return _FINISH_REASONS.get(stop_reason, stop_reason)


def _count(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def parse_usage(data: Any) -> Usage | None:
    """Token usage from an ``usage`` object: input (with cache reads and writes, also kept
    apart) and output.

    Example:
        >>> parse_usage({"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 5})
        Usage(prompt_tokens=100, completion_tokens=5, total_tokens=105, cache_read_tokens=90)
    """
    if not isinstance(data, Mapping):
        return None
    cache_read = _count(data, "cache_read_input_tokens")
    cache_creation = _count(data, "cache_creation_input_tokens")
    prompt = _count(data, "input_tokens") + cache_read + cache_creation
    completion = _count(data, "output_tokens")
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        cache_read_tokens=cache_read,
        cache_creation_tokens=cache_creation,
    )


def _expect_wire(value: Any, kind: type[_T], name: str) -> _T:
    return _expect(value, kind, name, _WIRE)


def _optional_wire(value: Any, kind: type[_T], name: str) -> _T | None:
    return _optional(value, kind, name, _WIRE)


def _tool_call(block: Mapping[str, Any], name: str) -> ToolCall:
    raw_input = block.get("input")
    arguments, raw = parse_tool_arguments(
        raw_input if raw_input is None or isinstance(raw_input, dict) else json.dumps(raw_input)
    )
    return ToolCall(
        id=_optional_wire(block.get("id"), str, f"{name}.id") or "",
        name=_optional_wire(block.get("name"), str, f"{name}.name") or "",
        arguments=arguments,
        raw_arguments=raw,
    )


def _thinking_block(block: Mapping[str, Any], name: str) -> ThinkingBlock:
    if block.get("type") == "redacted_thinking":
        data = _optional_wire(block.get("data"), str, f"{name}.data") or ""
        return ThinkingBlock(type="redacted_thinking", data=data)
    return ThinkingBlock(
        thinking=_optional_wire(block.get("thinking"), str, f"{name}.thinking") or "",
        signature=_optional_wire(block.get("signature"), str, f"{name}.signature") or "",
    )


def _reasoning(blocks: Sequence[ThinkingBlock]) -> str | None:
    texts = [block.thinking for block in blocks if block.type == "thinking"]
    return _THINKING_SEPARATOR.join(texts) if texts else None


def parse_message(data: Any, *, tools_offered: bool) -> AssistantMessage:
    """The :class:`AssistantMessage` of a non-streamed Messages response.

    Raises:
        ModelResponseError: The body is not a message (an error object, a field of the wrong
            JSON type, ...).

    Example:
        >>> reply = parse_message({"type": "message", "role": "assistant", "content": [
        ...     {"type": "thinking", "thinking": "Easy.", "signature": "s1"},
        ...     {"type": "text", "text": "4"}], "stop_reason": "end_turn",
        ...     "usage": {"input_tokens": 12, "output_tokens": 3}}, tools_offered=False)
        >>> reply.text, reply.reasoning, reply.finish_reason, reply.thinking_blocks[0].signature
        ('4', 'Easy.', 'stop', 's1')
    """
    if not isinstance(data, dict):
        raise ModelResponseError(f"expected a JSON object, got {_shorten(json.dumps(data))}")
    if data.get("type") == "error" or ("error" in data and "content" not in data):
        raise ModelResponseError(f"the response is an error: {_message_of(data)}")
    texts: list[str] = []
    tool_calls: list[ToolCall] = []
    thinking: list[ThinkingBlock] = []
    for number, raw in enumerate(_expect_wire(data.get("content"), list, "content")):
        name = f"content[{number}]"
        block = _expect_wire(raw, dict, name)
        kind = block.get("type")
        if kind == "text":
            texts.append(_optional_wire(block.get("text"), str, f"{name}.text") or "")
        elif kind == "tool_use":
            tool_calls.append(_tool_call(block, name))
        elif kind in ("thinking", "redacted_thinking"):
            thinking.append(_thinking_block(block, name))
    stop_reason = finish_reason(_optional_wire(data.get("stop_reason"), str, "stop_reason"))
    if tool_calls and not tools_offered:
        _drop_unoffered_calls(len(tool_calls), logger)
        tool_calls = []
        stop_reason = "stop" if stop_reason == "tool_calls" else stop_reason
    return AssistantMessage(
        content="".join(texts),
        tool_calls=tool_calls,
        finish_reason=stop_reason,
        usage=parse_usage(data.get("usage")),
        reasoning=_reasoning(thinking),
        thinking_blocks=thinking,
    )


@dataclass
class _OpenBlock:
    """A content block of the stream that has started and not yet stopped."""

    type: str
    tool_index: int | None = None  # a tool_use block's place among the answer's calls
    dropped: bool = False  # a tool_use block of a model offered no tools
    thinking: list[str] = field(default_factory=list)
    signature: list[str] = field(default_factory=list)
    data: str = ""


_STREAM_ERRORS: dict[str, tuple[type[ModelError], int]] = {
    "overloaded_error": (ModelServerError, 529),
    "api_error": (ModelServerError, 500),
    "rate_limit_error": (ModelRateLimitError, 429),
}


def _stream_error(payload: Mapping[str, Any]) -> ModelError:
    """The error an ``error`` event reports: overloaded, server and rate-limit errors are
    transient (retried when nothing was streamed yet); any other is a
    :class:`ModelResponseError`."""
    error = payload.get("error")
    kind = str(error.get("type") or "") if isinstance(error, Mapping) else ""
    text = f"the stream reported an error: {kind + ': ' if kind else ''}{_message_of(payload)}"
    cls, status = _STREAM_ERRORS.get(kind, (ModelResponseError, None))
    return cls(_shorten(text), status_code=status)


class StreamDecoder:
    """Turns the events of one Messages stream into :class:`AssistantMessageChunk`s.

    Text, reasoning (thinking text) and tool input JSON are passed on as they come; a thinking
    block, once it stops, comes whole in a chunk's ``thinking_blocks`` (with its signature);
    the finish reason and usage come in the last chunk, at ``message_stop``, so a stream cut
    before it never passes for a whole answer.

    Attributes:
        done: ``message_stop`` arrived.
        stop_reason: The finish reason of the ``message_delta`` event, if it came.
    """

    def __init__(self, *, message_id: str, tools_offered: bool) -> None:
        self.message_id = message_id
        self.tools_offered = tools_offered
        self.done = False
        self.stop_reason: str | None = None
        self._usage: dict[str, Any] = {}
        self._open: dict[int, _OpenBlock] = {}
        self._tool_calls = 0
        self._dropped_calls = 0
        self._thinking_seen = False

    def feed(self, data: str) -> AssistantMessageChunk | None:
        """Decode one event's data; ``None`` when it carries nothing new.

        Raises:
            ModelResponseError: The data is not JSON, or does not follow the format.
            ModelServerError: An ``overloaded_error`` or ``api_error`` event.
            ModelRateLimitError: A ``rate_limit_error`` event.
        """
        if not data.strip():
            return None
        payload = event_payload(data)
        match payload.get("type"):
            case "message_start":
                message = _expect_wire(payload.get("message") or {}, dict, "message_start.message")
                self._add_usage(message.get("usage"))
            case "content_block_start":
                return self._start(payload)
            case "content_block_delta":
                return self._delta(payload)
            case "content_block_stop":
                return self._stop(payload)
            case "message_delta":
                delta = _expect_wire(payload.get("delta") or {}, dict, "message_delta.delta")
                stop = _optional_wire(delta.get("stop_reason"), str, "message_delta.stop_reason")
                if stop is not None:
                    self.stop_reason = finish_reason(stop)
                self._add_usage(payload.get("usage"))
            case "message_stop":
                self.done = True
                return self._finish()
            case "error":
                raise _stream_error(payload)
        return None  # ping, and events of later API versions

    def incomplete(self) -> str | None:
        """``None`` once ``message_stop`` came; else what the stream lacked."""
        if self.done:
            return None
        if self.stop_reason is not None:
            return f"stop_reason {self.stop_reason!r} came, but no message_stop"
        return "no message_stop"

    def _add_usage(self, usage: Any) -> None:
        # message_start counts the input; message_delta's counts are cumulative and win.
        if isinstance(usage, Mapping):
            self._usage.update((key, value) for key, value in usage.items() if value is not None)

    def _chunk(self, **fields: Any) -> AssistantMessageChunk:
        return AssistantMessageChunk(id=self.message_id, **fields)

    def _index(self, payload: Mapping[str, Any], event: str) -> int:
        return _expect_wire(payload.get("index"), int, f"{event}.index")

    def _start(self, payload: Mapping[str, Any]) -> AssistantMessageChunk | None:
        index = self._index(payload, "content_block_start")
        block = _expect_wire(
            payload.get("content_block"), dict, "content_block_start.content_block"
        )
        kind = str(block.get("type"))
        opened = self._open[index] = _OpenBlock(type=kind)
        if kind == "text":
            text = _optional_wire(block.get("text"), str, "content_block.text") or ""
            return self._chunk(content=text) if text else None
        if kind == "tool_use":
            return self._start_tool_use(opened, block)
        if kind == "thinking":
            opened.thinking.append(
                _optional_wire(block.get("thinking"), str, "content_block.thinking") or ""
            )
            opened.signature.append(
                _optional_wire(block.get("signature"), str, "content_block.signature") or ""
            )
            reasoning = (_THINKING_SEPARATOR if self._thinking_seen else "") + opened.thinking[0]
            self._thinking_seen = True
            return self._chunk(reasoning=reasoning) if reasoning else None
        if kind == "redacted_thinking":
            opened.data = _optional_wire(block.get("data"), str, "content_block.data") or ""
        return None

    def _start_tool_use(
        self, opened: _OpenBlock, block: Mapping[str, Any]
    ) -> AssistantMessageChunk | None:
        if not self.tools_offered:
            opened.dropped = True
            self._dropped_calls += 1
            _drop_unoffered_calls(1, logger)
            return None
        opened.tool_index = self._tool_calls
        self._tool_calls += 1
        call = _tool_call(block, "content_block")
        # The input comes as input_json_delta pieces; a server that sends it whole at the
        # start (not Anthropic's) has it passed on as the first piece.
        arguments = json.dumps(call.arguments) if call.arguments else call.raw_arguments or ""
        delta = ToolCallDelta(
            index=opened.tool_index, id=call.id, name=call.name, arguments=arguments
        )
        return self._chunk(tool_call_deltas=[delta])

    def _delta(self, payload: Mapping[str, Any]) -> AssistantMessageChunk | None:
        index = self._index(payload, "content_block_delta")
        delta = _expect_wire(payload.get("delta"), dict, "content_block_delta.delta")
        opened = self._open.get(index)
        if opened is None:
            raise ModelResponseError(
                f"the stream sent a delta for content block {index}, which never started"
            )
        match delta.get("type"):
            case "text_delta":
                text = _optional_wire(delta.get("text"), str, "text_delta.text") or ""
                return self._chunk(content=text) if text else None
            case "input_json_delta":
                piece = _optional_wire(delta.get("partial_json"), str, "partial_json") or ""
                if opened.dropped or opened.tool_index is None or not piece:
                    return None
                return self._chunk(
                    tool_call_deltas=[ToolCallDelta(index=opened.tool_index, arguments=piece)]
                )
            case "thinking_delta":
                text = _optional_wire(delta.get("thinking"), str, "thinking_delta.thinking") or ""
                opened.thinking.append(text)
                return self._chunk(reasoning=text) if text else None
            case "signature_delta":
                signature = _optional_wire(delta.get("signature"), str, "signature") or ""
                opened.signature.append(signature)
        return None  # citations and the deltas of later API versions

    def _stop(self, payload: Mapping[str, Any]) -> AssistantMessageChunk | None:
        index = self._index(payload, "content_block_stop")
        opened = self._open.pop(index, None)
        if opened is None:
            return None
        if opened.type == "thinking":
            block = ThinkingBlock(
                thinking="".join(opened.thinking), signature="".join(opened.signature)
            )
        elif opened.type == "redacted_thinking":
            block = ThinkingBlock(type="redacted_thinking", data=opened.data)
        else:
            return None
        return self._chunk(thinking_blocks=[block])

    def _finish(self) -> AssistantMessageChunk:
        reason = self.stop_reason
        if reason == "tool_calls" and self._dropped_calls and not self._tool_calls:
            reason = "stop"
        usage = parse_usage(self._usage) if self._usage else None
        return self._chunk(finish_reason=reason, usage=usage)
