"""The OpenAI chat-completions wire format: request bodies, responses, stream chunks, errors.

Pure functions and one small stateful stream decoder, no I/O: :mod:`graph_agent.models.openai`
sends what these build. The format is the one OpenAI documents, with tolerance for what
OpenAI-compatible servers (DashScope, DeepSeek, vLLM, Ollama, llama.cpp) do differently:

- assistant messages are sent with ``content: ""``, never ``null`` (llama.cpp answers 500);
- ``tool_choice`` is sent as given, ``"required"`` too (OpenAI honours it); llama.cpp-based
  servers may answer it with HTTP 500 (empty, or an error naming ``tool_choice``), which the
  client meets by falling back to ``"auto"`` (see :func:`rejects_required_tool_choice`);
- ``tools``, ``tool_choice`` and ``parallel_tool_calls`` are only sent when there are tools;
- streamed tool-call pieces that repeat the call's id and name are not concatenated;
- streamed pieces without an ``index`` are placed by their id;
- a model that calls tools although none were offered has those calls dropped;
- reasoning comes as ``reasoning_content`` (DeepSeek, Qwen) or ``reasoning`` (vLLM).

Content parts go out as OpenAI documents them (DashScope's compatible mode takes the same):
``{"type": "text", "text"}``, ``{"type": "image_url", "image_url": {"url"}}`` (an http(s) URL,
or ``data:<media type>;base64,<data>``; ``detail`` when set), ``{"type": "input_audio",
"input_audio": {"data", "format"}}`` and ``{"type": "file", "file": {"file_data" (a data URL)
| "file_id", "filename"}}``. The format takes parts other than text only in user messages:
an assistant message or a tool result holding images, audio or files (a ``return_direct``
tool's image, a screenshot) is sent as its text with a placeholder per part
(``[image: image/png, 12 KB]``) while the parts follow, after the step's tool results, in a
user message that names the call ("Your previous answer holds:" for an assistant message; a
part an earlier message already showed is not sent twice). A ``FilePart`` by ``url`` has no
OpenAI form and is refused before sending.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from graph_agent.messages import (
    AssistantMessage,
    AssistantMessageChunk,
    AudioPart,
    BaseMessage,
    ContentPart,
    FilePart,
    ImagePart,
    MessageContent,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolResponseMessage,
    Usage,
    UserMessage,
    content_text,
)
from graph_agent.models.base import ModelRequest, ToolDefinition, parse_tool_arguments
from graph_agent.models.errors import (
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelContextLengthError,
    ModelError,
    ModelNotFoundError,
    ModelRateLimitError,
    ModelResponseError,
    ModelServerError,
)
from graph_agent.models.retry import is_retryable_status

logger = logging.getLogger("graph_agent.models.openai")

_RESERVED_OPTIONS = ("messages", "tools", "stream")
_SHOWN_LEAD = "Your previous answer holds:"
_MAX_SHOWN = 500
_T = TypeVar("_T")
_KIND_NAMES: dict[type, str] = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "a whole number",
}


def message_to_openai(message: BaseMessage) -> dict[str, Any]:
    """One message in the chat-completions format.

    Example:
        >>> message_to_openai(ToolResponseMessage(tool_call_id="c1", name="add", content="3"))
        {'role': 'tool', 'tool_call_id': 'c1', 'content': '3'}
    """
    match message:
        case SystemMessage():
            return {"role": "system", "content": message.content}
        case UserMessage():
            return {"role": "user", "content": content_to_openai(message.content)}
        case AssistantMessage():
            wire: dict[str, Any] = {
                "role": "assistant",
                "content": _text_with_placeholders(message.content),
            }
            if message.tool_calls:
                wire["tool_calls"] = [_tool_call_to_openai(call) for call in message.tool_calls]
            return wire
        case ToolResponseMessage():
            return {
                "role": "tool",
                "tool_call_id": message.tool_call_id,
                "content": _text_with_placeholders(message.content),
            }
    raise TypeError(f"cannot send {type(message).__name__} to a chat model: {message!r:.200}")


def messages_to_openai(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """The conversation in the chat-completions format: each message by
    :func:`message_to_openai`, and the images, audio and files of tool results and of
    assistant messages (a ``return_direct`` tool's image) in a user message after the step's
    results (tool and assistant messages carry text only). A part of an assistant message
    that an earlier message already showed (the tool result a ``return_direct`` answer
    repeats) is not sent again: its placeholder stands for it.

    Example:
        >>> screenshot = ImagePart(url="https://x.test/shot.png")
        >>> result = ToolResponseMessage(tool_call_id="c1", name="shoot", content=[screenshot])
        >>> [wire["role"] for wire in messages_to_openai([result])]
        ['tool', 'user']
    """
    wire: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []  # parts of the tool results since the last other message
    seen: set[ContentPart] = set()  # the parts shown so far
    for message in messages:
        if held and not isinstance(message, ToolResponseMessage):
            wire.append({"role": "user", "content": held})
            held = []
        wire.append(message_to_openai(message))
        parts = [p for p in _parts(message.content) if not isinstance(p, TextPart)]
        if isinstance(message, AssistantMessage):
            parts = [p for p in parts if p not in seen]
        if parts and isinstance(message, ToolResponseMessage | AssistantMessage):
            lead = (
                f"The result of tool call {message.tool_call_id} ({message.name}) holds:"
                if isinstance(message, ToolResponseMessage)
                else _SHOWN_LEAD
            )
            held.append({"type": "text", "text": lead})
            held.extend(_part_to_openai(part) for part in parts)
        seen.update(parts)
    if held:
        wire.append({"role": "user", "content": held})
    return wire


def content_to_openai(content: MessageContent) -> str | list[dict[str, Any]]:
    """A message's content in the chat-completions format: a string stays one, parts become
    the list of OpenAI content parts.

    Example:
        >>> image = ImagePart(data="iVBORw0KGgo=", media_type="image/png")
        >>> text, picture = content_to_openai([TextPart("What is it?"), image])
        >>> text
        {'type': 'text', 'text': 'What is it?'}
        >>> picture
        {'type': 'image_url', 'image_url': {'url': 'data:image/png;base64,iVBORw0KGgo='}}
    """
    if isinstance(content, str):
        return content
    return [_part_to_openai(part) for part in content]


def _parts(content: MessageContent) -> list[ContentPart]:
    return [TextPart(content)] if isinstance(content, str) else content


def _text_with_placeholders(content: MessageContent) -> str:
    """A message's text, each image, audio or file part shown as its placeholder."""
    return content_text(content, placeholders=not _only_text(content))


def _only_text(content: MessageContent) -> bool:
    return isinstance(content, str) or all(isinstance(part, TextPart) for part in content)


def _part_to_openai(part: ContentPart) -> dict[str, Any]:
    match part:
        case TextPart():
            return {"type": "text", "text": part.text}
        case ImagePart():
            image: dict[str, Any] = {"url": part.url or _data_url(part.media_type, part.data)}
            if part.detail is not None:
                image["detail"] = part.detail
            return {"type": "image_url", "image_url": image}
        case AudioPart():
            return {
                "type": "input_audio",
                "input_audio": {"data": part.data, "format": part.format},
            }
        case FilePart():
            return {"type": "file", "file": _file_to_openai(part)}
    raise TypeError(f"cannot send {type(part).__name__} to a chat model: {part!r:.200}")


def _file_to_openai(part: FilePart) -> dict[str, Any]:
    if part.url is not None:
        raise ModelBadRequestError(
            f"FilePart(url={part.url!r:.80}) cannot be sent in the OpenAI chat format, which "
            "takes a file as base64 data or as the id of an uploaded file; pass "
            "FilePart(data=..., media_type=...) or FilePart(file_id=...)"
        )
    file: dict[str, Any] = (
        {"file_id": part.file_id}
        if part.file_id is not None
        else {"file_data": _data_url(part.media_type, part.data)}
    )
    if part.filename is not None:
        file["filename"] = part.filename
    return file


def _data_url(media_type: str | None, data: str | None) -> str:
    return f"data:{media_type};base64,{data}"


def _tool_call_to_openai(call: ToolCall) -> dict[str, Any]:
    # Malformed arguments go back as "{}": servers that parse the history (llama.cpp) would
    # reject the raw text, and the tool's error result already tells the model what went wrong.
    return {
        "id": call.id,
        "type": "function",
        "function": {
            "name": call.name,
            "arguments": json.dumps(call.arguments, ensure_ascii=False),
        },
    }


def tool_to_openai(tool: ToolDefinition) -> dict[str, Any]:
    """One tool definition in the chat-completions format."""
    function: dict[str, Any] = {"name": tool.name}
    if tool.description:
        function["description"] = tool.description
    function["parameters"] = tool.parameters
    return {"type": "function", "function": function}


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, str) and choice not in ("auto", "none", "required"):
        return {"type": "function", "function": {"name": choice}}
    return choice


def rejects_required_tool_choice(body: Mapping[str, Any], status_code: int, text: str) -> bool:
    """Whether a failed request looks refused for carrying ``tool_choice: "required"``.

    That is how llama.cpp-based servers refuse it: HTTP 500, with an empty body (older
    llama.cpp) or with an error whose message names ``tool_choice`` (llama.cpp's
    ``{"error": {"code": 500, "message": ..., "type": "server_error"}}``, llama-cpp-python's
    ``internal_server_error``, or plain text). Any other 500 is an ordinary server error
    (retried as such).

    Example:
        >>> rejects_required_tool_choice({"tool_choice": "required"}, 500, "")
        True
        >>> error = '{"error": {"code": 500, "message": "Unsupported tool_choice: required"}}'
        >>> rejects_required_tool_choice({"tool_choice": "required"}, 500, error)
        True
        >>> rejects_required_tool_choice({"tool_choice": "required"}, 500, '{"error": "busy"}')
        False
    """
    if body.get("tool_choice") != "required" or status_code != 500:
        return False
    if not text.strip():
        return True
    message, _ = server_message(text)
    return _NAMES_TOOL_CHOICE.search(message) is not None


def _response_format(value: Any) -> Any:
    if isinstance(value, type) and issubclass(value, BaseModel):
        return {
            "type": "json_schema",
            "json_schema": {"name": value.__name__, "schema": value.model_json_schema()},
        }
    return value


def build_request_body(
    model: str, request: ModelRequest, defaults: Mapping[str, Any], *, stream: bool
) -> dict[str, Any]:
    """The JSON body of a ``POST /chat/completions`` for ``request``.

    ``defaults`` are the model's options; the request's options override them, and an option
    set to ``None`` is left out. ``tool_choice`` may also be a tool's name, and
    ``response_format`` a pydantic model class (sent as a ``json_schema`` format).

    Example:
        >>> body = build_request_body(
        ...     "qwen-plus", ModelRequest(messages=[UserMessage("hi")]), {"temperature": 0},
        ...     stream=False)
        >>> body
        {'model': 'qwen-plus', 'messages': [{'role': 'user', 'content': 'hi'}], 'temperature': 0}
    """
    options = {**defaults, **request.options}
    for key in _RESERVED_OPTIONS:
        if key in options:
            raise ValueError(
                f"options may not set {key!r}: pass it as the {key} argument of the model call"
            )
    body: dict[str, Any] = {
        "model": options.pop("model", None) or model,
        "messages": messages_to_openai(request.messages),
    }
    tool_choice = options.pop("tool_choice", None)
    parallel_tool_calls = options.pop("parallel_tool_calls", None)
    if request.tools:
        body["tools"] = [tool_to_openai(tool) for tool in request.tools]
        choice = _tool_choice(tool_choice)
        if choice is not None:
            body["tool_choice"] = choice
        if parallel_tool_calls is not None:
            body["parallel_tool_calls"] = parallel_tool_calls
    response_format = options.pop("response_format", None)
    if response_format is not None:
        body["response_format"] = _response_format(response_format)
    stream_options = options.pop("stream_options", {"include_usage": True})
    if stream:
        body["stream"] = True
        if stream_options is not None:
            body["stream_options"] = stream_options
    body.update((key, value) for key, value in options.items() if value is not None)
    return body


def parse_usage(data: Any) -> Usage | None:
    """Token usage from a response's ``usage`` object (``total_tokens`` computed if missing),
    with the breakdown OpenAI gives in ``prompt_tokens_details`` (cached, audio) and
    ``completion_tokens_details`` (reasoning, audio).

    Example:
        >>> parse_usage({"prompt_tokens": 9, "completion_tokens": 4,
        ...              "completion_tokens_details": {"reasoning_tokens": 3}})
        Usage(prompt_tokens=9, completion_tokens=4, total_tokens=13, reasoning_tokens=3)
    """
    if not isinstance(data, dict):
        return None
    prompt = _count(data, "prompt_tokens")
    completion = _count(data, "completion_tokens")
    total = data.get("total_tokens")
    total = total if isinstance(total, int) else prompt + completion
    prompt_details, completion_details = (
        data.get("prompt_tokens_details"),
        data.get("completion_tokens_details"),
    )
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total,
        cache_read_tokens=_count(prompt_details, "cached_tokens"),
        prompt_audio_tokens=_count(prompt_details, "audio_tokens"),
        reasoning_tokens=_count(completion_details, "reasoning_tokens"),
        completion_audio_tokens=_count(completion_details, "audio_tokens"),
    )


def _count(data: Any, key: str) -> int:
    """The whole number ``data[key]``, 0 when ``data`` is no object or the count is missing."""
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts
        return "".join(
            part.get("text", "") if isinstance(part, dict) else str(part) for part in value
        )
    return str(value)


def _reasoning(wire: Mapping[str, Any]) -> str:
    for key in ("reasoning_content", "reasoning"):
        value = wire.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _arguments_text(value: Any) -> str | dict[str, Any] | None:
    if value is None or isinstance(value, str | dict):
        return value
    return json.dumps(value)


def _drop_unoffered_calls(count: int, log: logging.Logger = logger) -> None:
    """Log (on ``log``, the provider's logger) that calls to tools never offered are dropped."""
    log.warning(
        "the model called %d tool(s) although no tools were offered; the calls are dropped", count
    )


def parse_completion(data: Any, *, tools_offered: bool) -> AssistantMessage:
    """The :class:`AssistantMessage` of a non-streamed completion (its first choice).

    Raises:
        ModelResponseError: The body is not a completion (no choices, an error object, a field
            of the wrong JSON type, ...).
    """
    if not isinstance(data, dict):
        raise ModelResponseError(f"expected a JSON object, got {_shorten(json.dumps(data))}")
    choices = data.get("choices")
    if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
        detail = _message_of(data.get("error")) if data.get("error") else "no choices"
        raise ModelResponseError(f"the response holds no answer: {_shorten(detail)}")
    choice = choices[0]
    wire = _expect(choice.get("message") or {}, dict, "choices[0].message")
    tool_calls = []
    for number, raw in enumerate(_expect(wire.get("tool_calls") or [], list, "tool_calls")):
        field = f"tool_calls[{number}]"
        call = _expect(raw, dict, field)
        function = _expect(call.get("function") or {}, dict, f"{field}.function")
        call_id = _optional(call.get("id"), str, f"{field}.id")
        name = _optional(function.get("name"), str, f"{field}.function.name")
        arguments, raw_arguments = parse_tool_arguments(_arguments_text(function.get("arguments")))
        tool_calls.append(
            ToolCall(
                id=call_id or "", name=name or "", arguments=arguments, raw_arguments=raw_arguments
            )
        )
    finish_reason = _optional(choice.get("finish_reason"), str, "choices[0].finish_reason")
    if tool_calls and not tools_offered:
        _drop_unoffered_calls(len(tool_calls))
        tool_calls = []
        finish_reason = "stop" if finish_reason == "tool_calls" else finish_reason
    return AssistantMessage(
        content=_text(wire.get("content")),
        tool_calls=tool_calls,
        finish_reason=finish_reason,
        usage=parse_usage(data.get("usage")),
        reasoning=_reasoning(wire) or None,
    )


def event_payload(data: str) -> dict[str, Any]:
    """The JSON object a server-sent event's data holds.

    Raises:
        ModelResponseError: The data is not JSON, is nested too deeply to read, or is not an
            object.
    """
    try:
        payload = json.loads(data)
    except json.JSONDecodeError:
        raise ModelResponseError(f"the stream sent invalid JSON: {_shorten(data)}") from None
    except RecursionError:
        raise ModelResponseError(
            f"the stream sent JSON nested too deeply to read: {_shorten(data)}"
        ) from None
    if not isinstance(payload, dict):
        raise ModelResponseError(f"the stream sent a non-object: {_shorten(data)}")
    return payload


class StreamDecoder:
    """Turns the ``data:`` payloads of one SSE stream into :class:`AssistantMessageChunk`s.

    Attributes:
        done: The ``[DONE]`` sentinel arrived.
        finish_reason: The last finish reason the server sent, if any.
    """

    def __init__(self, *, message_id: str, tools_offered: bool) -> None:
        self.message_id = message_id
        self.tools_offered = tools_offered
        self.done = False
        self.finish_reason: str | None = None
        self._dropped_calls: set[int] = set()
        self._index_by_id: dict[str, int] = {}
        self._last_index: int | None = None

    def feed(self, data: str) -> AssistantMessageChunk | None:
        """Decode one event's data; ``None`` when it carries nothing new.

        Raises:
            ModelResponseError: The data is not JSON, is an error object, or has a field of the
                wrong JSON type.
        """
        if data.strip() == "[DONE]":
            self.done = True
            return None
        if not data.strip():
            return None
        payload = event_payload(data)
        if payload.get("error") and not payload.get("choices"):
            raise ModelResponseError(f"the stream reported an error: {_message_of(payload)}")
        content, reasoning, finish_reason = "", "", None
        deltas: list[ToolCallDelta] = []
        choices = _expect(payload.get("choices") or [], list, "choices")
        if choices:
            choice = _expect(choices[0], dict, "choices[0]")
            wire = _expect(
                choice.get("delta") or choice.get("message") or {}, dict, "choices[0].delta"
            )
            content = _text(wire.get("content"))
            reasoning = _reasoning(wire)
            deltas = [
                self._tool_call_delta(raw, number)
                for number, raw in enumerate(
                    _expect(wire.get("tool_calls") or [], list, "tool_calls")
                )
            ]
            finish_reason = _optional(choice.get("finish_reason"), str, "choices[0].finish_reason")
        if deltas and not self.tools_offered:
            new = {d.index for d in deltas} - self._dropped_calls
            if new:
                _drop_unoffered_calls(len(new))
            self._dropped_calls |= new
            deltas = []
        if finish_reason == "tool_calls" and self._dropped_calls:
            finish_reason = "stop"
        if finish_reason is not None:
            self.finish_reason = finish_reason
        usage = parse_usage(payload.get("usage"))
        if not (content or reasoning or deltas or finish_reason or usage):
            return None
        return AssistantMessageChunk(
            id=self.message_id,
            content=content,
            reasoning=reasoning,
            tool_call_deltas=deltas,
            finish_reason=finish_reason,
            usage=usage,
        )

    def incomplete(self) -> str | None:
        """``None`` once the server sent a finish reason; else what the stream lacked.

        Every complete answer ends with one; ``[DONE]`` alone proves nothing (llama-cpp-python
        sends it after the chunks it had when another request cuts its stream), and llama.cpp
        may end a finished stream without ``[DONE]``.
        """
        if self.finish_reason is not None:
            return None
        if self.done:
            return (
                "[DONE] came without a finish_reason; llama-cpp-python's server ends a stream so "
                "when another request arrives"
            )
        return "no finish_reason and no [DONE]"

    def _tool_call_delta(self, piece: Any, number: int) -> ToolCallDelta:
        field = f"tool_calls[{number}]"
        raw = _expect(piece, dict, field)
        function = _expect(raw.get("function") or {}, dict, f"{field}.function")
        call_id = _optional(raw.get("id"), str, f"{field}.id") or None
        name = _optional(function.get("name"), str, f"{field}.function.name") or None
        index = raw.get("index")
        if not isinstance(index, int):
            if call_id is not None and call_id in self._index_by_id:
                index = self._index_by_id[call_id]
            elif call_id is not None:
                index = max(self._index_by_id.values(), default=-1) + 1
            else:
                index = self._last_index if self._last_index is not None else 0
        if call_id is not None:
            self._index_by_id.setdefault(call_id, index)
        self._last_index = index
        arguments = _arguments_text(function.get("arguments"))
        return ToolCallDelta(
            index=index,
            id=call_id,
            name=name,
            arguments=json.dumps(arguments) if isinstance(arguments, dict) else arguments or "",
        )


_NAMES_TOOL_CHOICE = re.compile(r"tool[_ ]?choice", re.IGNORECASE)

_CONTEXT_LENGTH = re.compile(
    r"context.length|context.window|context.size|maximum context|too many tokens|"
    r"prompt is too long|reduce the length",
    re.IGNORECASE,
)


_CHAT_COMPLETIONS = ("chat-completions", "an OpenAI-compatible API")


def _expect(
    value: Any, kind: type[_T], field: str, wire: tuple[str, str] = _CHAT_COMPLETIONS
) -> _T:
    """``value`` when it has the JSON type ``kind``; else the :class:`ModelResponseError` of an
    answer that does not follow the format (a broken server or proxy, or not such an API).

    ``wire`` names the format and the API whose root ``base_url`` should be.
    """
    if isinstance(value, kind):
        return value
    raise ModelResponseError(
        f"the answer does not follow the {wire[0]} format: {field} should be "
        f"{_KIND_NAMES[kind]}, got {_shorten(json.dumps(value))}; check "
        f"that base_url is the root of {wire[1]}"
    )


def _optional(
    value: Any, kind: type[_T], field: str, wire: tuple[str, str] = _CHAT_COMPLETIONS
) -> _T | None:
    """:func:`_expect` for a field that may be ``null`` or missing."""
    return None if value is None else _expect(value, kind, field, wire)


def _shorten(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def _message_of(error: Any) -> str:
    if isinstance(error, dict):
        for key in ("error", "message", "detail", "msg"):
            if error.get(key):
                return _message_of(error[key])
        return json.dumps(error)
    if isinstance(error, list):
        return "; ".join(_message_of(item) for item in error)
    return str(error)


def _error_code(data: Any) -> str:
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return str(error.get("code") or error.get("type") or "")
    return ""


def server_message(body: str) -> tuple[str, str]:
    """The server's error message and code from an error response body."""
    if not body.strip():
        return "(empty response body)", ""
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, RecursionError):
        return _shorten(body), ""
    return _shorten(_message_of(data)), _error_code(data)


def status_error(
    status_code: int,
    reason: str,
    body: str,
    *,
    where: str,
    key_configured: bool,
    attempts: int,
    retry_after: float | None,
    redact: Callable[[str], str],
    note: str = "",
    not_found_hint: str = (
        "; check the model name, and that base_url is the API root (often ending in /v1)"
    ),
) -> ModelError:
    """The :class:`ModelError` subclass for an error response, with the server's message.

    The body may be any provider's error object (OpenAI's ``{"error": {"message", "code"}}``,
    Anthropic's ``{"type": "error", "error": {"type", "message"}}``) or plain text;
    ``not_found_hint`` ends the message of an HTTP 404.
    """
    message, code = server_message(body)
    text = f"{where} answered HTTP {status_code} {reason}".rstrip() + f": {message}{note}"
    if attempts > 1:
        text += f" (gave up after {attempts} attempts)"
    cls: type[ModelError]
    if status_code in (401, 403):
        cls = ModelAuthenticationError
        text += (
            "; check the API key"
            if key_configured
            else "; no API key was given: pass api_key= or set the provider's API key variable"
        )
    elif status_code == 404:
        cls = ModelNotFoundError
        text += not_found_hint
    elif status_code == 429:
        return ModelRateLimitError(redact(text), status_code=status_code, retry_after=retry_after)
    elif is_retryable_status(status_code):
        cls = ModelServerError
    elif 400 <= status_code < 500:
        is_context = code in ("context_length_exceeded", "string_above_max_length")
        cls = (
            ModelContextLengthError
            if is_context or _CONTEXT_LENGTH.search(message)
            else ModelBadRequestError
        )
    else:
        cls = ModelResponseError
    return cls(redact(text), status_code=status_code)
