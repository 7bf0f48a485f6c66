"""Structured output (``response_format``) on Anthropic's Messages API, as one answer tool.

The Messages API has no ``response_format``. As LangChain's ``ChatAnthropic.with_structured_output``
does by default, the schema becomes the ``input_schema`` of one more tool (named after the
schema: a pydantic model's class name, or a ``json_schema`` format's ``name``), the request
makes the model call it, and the call's input comes back as the answer's text: the JSON object
alone, so a caller reading ``reply.text`` as JSON (``LLMToolSelectorInterceptor``,
``LlmRoutingAgent``, ``ReactAgent(output_schema=...)``) gets the object, streamed or not. The
answer tool's call is never a tool call of the answer.

How the request makes the model call it (``tool_choice``):

- without other tools: ``{"type": "tool", "name": <the answer tool>}``;
- with other tools (an agent's): ``{"type": "any"}``: the model calls one of its tools, or
  gives the answer, as OpenAI's ``response_format`` with tools lets it (a caller's ``"auto"``
  too: an answer in plain text would not be structured). A caller's ``tool_choice`` naming
  one of its tools is kept; ``"none"``, or a ``tool_choice`` naming the answer tool itself
  (``"Weather"``, ``{"type": "function", "function": {"name": "Weather"}}``), forces the
  answer tool (the other tools stay listed; after ``"none"``, calls of them are dropped from
  the answer, which matters with thinking on, below);
- with extended thinking on (``thinking`` of type ``enabled`` or ``adaptive``) the API refuses
  any ``tool_choice`` that forces a tool ("Thinking may not be enabled when tool_choice forces
  tool use"; only ``auto`` and ``none`` go with thinking). The request then sends ``auto``
  and adds a sentence to the system text asking for the answer through the tool. The model
  may still answer in plain text: that text is the answer, as the model wrote it, for the
  caller's validation to judge (``ReactAgent`` feeds an invalid answer back once). We chose
  this over raising, so that a thinking model keeps working with the agent's structured
  output; LangChain likewise drops the forced choice when thinking is on, with a warning.

How the answer is read: the answer tool's input becomes the text (compact JSON, the same
whether streamed or not); text the model wrote around the call is dropped, and so is the
finish reason ``tool_calls`` (``stop`` instead). When the model calls other tools in the same
turn, those calls are the answer and the answer tool's call is dropped: it cannot have seen
their results (``ReactAgent`` does the same with its ``final_answer`` tool). A stream of a
structured request holds its text back until the end, when it is known whether the answer
tool was called; thinking and the other tools' calls stream as they come.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from graph_agent.messages import AssistantMessage, AssistantMessageChunk, ToolCall, ToolCallDelta
from graph_agent.models.base import parse_tool_arguments
from graph_agent.models.http_chat import StreamDecoding
from graph_agent.models.openai_format import _drop_unoffered_calls

__all__ = [
    "StructuredOutput",
    "StructuredStreamDecoder",
    "offer_structured_output",
    "other_tools_callable",
    "structured_answer",
    "structured_output",
]

logger = logging.getLogger("graph_agent.models.anthropic")

_TOOL_NAME = re.compile(r"[^a-zA-Z0-9_-]")
_MAX_NAME = 64  # tool names match ^[a-zA-Z0-9_-]{1,64}$
_DESCRIPTION = "Give your answer by calling this tool: its input is the answer."

Block = dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class StructuredOutput:
    """The answer tool of a ``response_format``: a :class:`~graph_agent.models.base.ToolDefinition`
    whose ``parameters`` are the format's JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]


def structured_output(response_format: Any) -> StructuredOutput | None:
    """The answer tool for ``response_format``, or ``None`` when it asks for plain text.

    It takes what :class:`~graph_agent.models.openai.OpenAIChatModel` takes: a pydantic model
    class, ``{"type": "json_schema", "json_schema": {"name", "schema", "description"?}}``,
    ``{"type": "json_object"}`` (any object) or ``{"type": "text"}`` (plain text).

    Raises:
        ValueError: Another value, or a schema whose values are not JSON objects (a tool's
            input is always one).

    Example:
        >>> class Weather(BaseModel):
        ...     '''The weather in a city.'''
        ...     city: str
        >>> output = structured_output(Weather)
        >>> output.name, output.parameters["required"]
        ('Weather', ['city'])
        >>> print(output.description)
        The weather in a city.
        <BLANKLINE>
        Give your answer by calling this tool: its input is the answer.
    """
    if response_format is None:
        return None
    if isinstance(response_format, type) and issubclass(response_format, BaseModel):
        schema = response_format.model_json_schema()
        return _output(response_format.__name__, schema.get("description"), schema)
    if isinstance(response_format, Mapping):
        kind = response_format.get("type")
        if kind == "text":
            return None
        if kind == "json_object":
            return _output("json_object", None, {"type": "object"})
        spec = response_format.get("json_schema")
        if kind == "json_schema" and isinstance(spec, Mapping):
            given = spec.get("schema")
            if isinstance(given, Mapping):
                return _output(str(spec.get("name") or ""), spec.get("description"), given)
    raise ValueError(
        f"response_format must be a pydantic model class, {{'type': 'json_schema', "
        f"'json_schema': {{'name': ..., 'schema': {{...}}}}}}, {{'type': 'json_object'}} or "
        f"{{'type': 'text'}}, got {response_format!r:.200}"
    )


def _output(name: str, description: Any, schema: Mapping[str, Any]) -> StructuredOutput:
    if schema.get("type") != "object":
        raise ValueError(
            f"response_format {name!r}: the Anthropic Messages API takes structured output as "
            "a tool's input, which is always a JSON object, but this schema's type is "
            f"{schema.get('type')!r}; wrap the value in a model with one field"
        )
    tool_name = _TOOL_NAME.sub("_", name)[:_MAX_NAME] or "structured_output"
    text = description if isinstance(description, str) and description.strip() else ""
    return StructuredOutput(
        name=tool_name,
        description=f"{text.strip()}\n\n{_DESCRIPTION}" if text else _DESCRIPTION,
        parameters=dict(schema),
    )


def offer_structured_output(
    body: dict[str, Any], output: StructuredOutput, tools: Sequence[Block], choice: Block | None
) -> None:
    """Put the answer tool, the request's ``tools`` (in the Messages format) and the
    ``tool_choice`` that makes the model answer through it into ``body`` (see the module's
    docstring). ``choice`` is the caller's ``tool_choice``, already in the Messages format.

    Raises:
        ValueError: One of ``tools`` has the answer tool's name.

    Example:
        >>> output = StructuredOutput(name="Weather", description="", parameters={})
        >>> body = {"model": "m"}
        >>> offer_structured_output(body, output, [], None)
        >>> body["tool_choice"], [tool["name"] for tool in body["tools"]]
        ({'type': 'tool', 'name': 'Weather'}, ['Weather'])
    """
    if any(tool.get("name") == output.name for tool in tools):
        raise ValueError(
            f"a tool is named {output.name!r}, the name the response_format's schema gives the "
            "tool that carries the structured answer; rename the tool or the schema"
        )
    answer_tool = {
        "name": output.name,
        "description": output.description,
        "input_schema": output.parameters,
    }
    body["tools"] = [*tools, answer_tool]
    kind = (choice or {}).get("type")
    if kind == "tool" and (choice or {}).get("name") != output.name:
        body["tool_choice"] = choice  # the caller forces one of its tools: the answer comes later
        return
    # "none" and a choice naming the answer tool itself ask for the answer now: force it
    answer_now = not tools or kind in ("none", "tool")
    wanted: Block = {"type": "tool", "name": output.name} if answer_now else {"type": "any"}
    if choice is not None and "disable_parallel_tool_use" in choice:
        wanted["disable_parallel_tool_use"] = choice["disable_parallel_tool_use"]
    if not _thinking_on(body):
        body["tool_choice"] = wanted
        return
    body["tool_choice"] = {**wanted, "type": "auto"}
    body["tool_choice"].pop("name", None)
    ask = (
        f"Give your final answer by calling the {output.name} tool, its input being the answer, "
        "not as text."
    )
    body["system"] = f"{body['system']}\n\n{ask}" if body.get("system") else ask


def other_tools_callable(tools: Sequence[Any], choice: Any) -> bool:
    """Whether a structured answer may be calls of ``tools``: some are offered and the caller's
    ``tool_choice`` (ours or the API's form) is not ``"none"``.

    With thinking on, the request sends ``auto`` even for ``"none"`` (the API refuses every
    forced choice), so the model could still call the other tools: reading the answer with
    this drops those calls, as the caller forbade them.

    Example:
        >>> other_tools_callable(["search"], "none"), other_tools_callable(["search"], "auto")
        (False, True)
    """
    kind = choice.get("type") if isinstance(choice, Mapping) else choice
    return bool(tools) and kind != "none"


def _thinking_on(body: Mapping[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, Mapping) and thinking.get("type") not in (None, "disabled")


def answer_text(arguments: Mapping[str, Any], raw: str | None) -> str:
    """The text of an answer tool's input: compact JSON, or the text as sent when it was not
    a JSON object.

    Example:
        >>> answer_text({"city": "Zürich"}, None), answer_text({}, '{"city": ')
        ('{"city":"Zürich"}', '{"city": ')
    """
    if raw is not None:
        return raw
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def _final_reason(reason: str | None) -> str | None:
    return "stop" if reason == "tool_calls" else reason


def structured_answer(
    message: AssistantMessage, name: str, *, tools_offered: bool
) -> AssistantMessage:
    """The answer of a structured request, from ``message`` as read with every tool call kept:
    the input of the answer tool ``name`` as its text, or the calls of the other tools (those
    dropped when the request offered none).

    Example:
        >>> reply = AssistantMessage("Here:", tool_calls=[ToolCall("t1", "Weather", {"c": 1})],
        ...                          finish_reason="tool_calls")
        >>> answer = structured_answer(reply, "Weather", tools_offered=False)
        >>> answer.text, answer.tool_calls, answer.finish_reason
        ('{"c":1}', [], 'stop')
    """
    answers: list[ToolCall] = []
    others: list[ToolCall] = []
    for call in message.tool_calls:
        (answers if call.name == name else others).append(call)
    if others and not tools_offered:
        _drop_unoffered_calls(len(others), logger)
        others = []
    if others:
        if answers:
            _drop_early_answer()
        return message.model_copy(update={"tool_calls": others})
    reason = _final_reason(message.finish_reason)
    update: dict[str, Any] = {"tool_calls": [], "finish_reason": reason}
    if answers:
        update["content"] = answer_text(answers[0].arguments, answers[0].raw_arguments)
    return message.model_copy(update=update)


def _drop_early_answer() -> None:
    logger.debug("the model gave its structured answer while calling other tools; dropped")


class StructuredStreamDecoder:
    """A :class:`~graph_agent.models.anthropic_format.StreamDecoder` (made with every tool
    call kept) whose chunks become those of :func:`structured_answer`: the answer tool's
    input and the text are held back, and the last chunk carries the answer's text.

    Attributes:
        done: ``message_stop`` arrived.
    """

    def __init__(self, decoder: StreamDecoding, name: str, *, tools_offered: bool) -> None:
        self.done = False
        self._decoder = decoder
        self._name = name
        self._tools_offered = tools_offered
        self._text: list[str] = []
        self._answer: list[str] | None = None  # the answer tool's input, once it is called
        self._answer_index: int | None = None
        self._places: dict[int, int | None] = {}  # a call's index: its index out, None: dropped
        self._calls = 0

    def incomplete(self) -> str | None:
        """``None`` once ``message_stop`` came; else what the stream lacked."""
        return self._decoder.incomplete()

    def feed(self, data: str) -> AssistantMessageChunk | None:
        """Decode one event's data, as :meth:`StreamDecoder.feed`."""
        chunk = self._decoder.feed(data)
        self.done = self._decoder.done
        if chunk is None:
            return None
        self._text.append(chunk.content)
        deltas = [d for d in map(self._delta, chunk.tool_call_deltas) if d is not None]
        if not self.done:
            if not (deltas or chunk.reasoning or chunk.thinking_blocks):
                return None
            return chunk.model_copy(update={"content": "", "tool_call_deltas": deltas})
        content = "".join(self._text)
        reason = chunk.finish_reason
        if self._calls:
            if self._answer is not None:
                _drop_early_answer()
        else:
            reason = _final_reason(reason)
            if self._answer is not None:
                content = answer_text(*parse_tool_arguments("".join(self._answer)))
        return chunk.model_copy(
            update={"content": content, "tool_call_deltas": deltas, "finish_reason": reason}
        )

    def _delta(self, delta: ToolCallDelta) -> ToolCallDelta | None:
        if delta.index not in self._places:  # a call's first piece, which names it
            if delta.name == self._name and self._answer is None:
                self._answer, self._answer_index = [], delta.index
            elif delta.name != self._name and not self._tools_offered:
                _drop_unoffered_calls(1, logger)
            elif delta.name != self._name:
                self._places[delta.index] = self._calls
                self._calls += 1
            self._places.setdefault(delta.index, None)
        if delta.index == self._answer_index and self._answer is not None:
            self._answer.append(delta.arguments)
            return None
        place = self._places[delta.index]
        return None if place is None else delta.model_copy(update={"index": place})
