"""``response_format`` on AnthropicChatModel: the schema as one answer tool the request makes
the model call, whose input comes back as the answer's JSON text, streamed or whole, sync or
async, against the local Messages server (which refuses what the real API refuses)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, RootModel

from graph_agent.messages import (
    AssistantMessage,
    SystemMessage,
    ThinkingBlock,
    ToolCall,
    UserMessage,
)
from graph_agent.models import fold_chunks
from graph_agent.tools import tool

from .anthropic_fake_server import (
    FakeAnthropicServer,
    message,
    message_events,
    reply_events,
    text,
    thinking,
    tool_use,
)
from .conftest import AnthropicFactory, Driver
from .openai_fake_server import RecordedRequest, dynamic, reply_json

HI = [UserMessage("Weather in Rome?")]


class Weather(BaseModel):
    """The weather in a city."""

    city: str
    celsius: int


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"Sunny in {city}"


WEATHER = {"city": "Rome", "celsius": 21}
ANSWER_TEXT = '{"city":"Rome","celsius":21}'


def as_asked(whole: dict[str, Any]) -> Any:
    """``whole`` as a stream when the request asks for one, else as one JSON body."""

    def choose(request: RecordedRequest) -> Any:
        if request.body.get("stream"):
            return reply_events(message_events(whole, piece=3))
        return reply_json(whole)

    return dynamic(choose)


def answer(calls: Driver, model: Any, how: str, **arguments: Any) -> AssistantMessage:
    """The model's answer through ``generate`` or folded from ``stream``."""
    if how == "generate":
        return calls.generate(model, HI, **arguments)
    return fold_chunks(calls.stream(model, HI, **arguments))


WAYS = pytest.mark.parametrize("how", ["generate", "stream"])


@WAYS
def test_a_response_format_becomes_one_forced_tool_whose_input_is_the_answer_text(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver, how: str
) -> None:
    anthropic.enqueue(as_asked(message(tool_use("t1", "Weather", WEATHER), stop_reason="tool_use")))
    reply = answer(calls, make_anthropic(), how, options={"response_format": Weather})

    assert reply.text == ANSWER_TEXT
    assert Weather.model_validate_json(reply.text) == Weather(city="Rome", celsius=21)
    assert reply.tool_calls == [] and reply.finish_reason == "stop"
    body = anthropic.bodies[0]
    assert "response_format" not in body
    assert body["tool_choice"] == {"type": "tool", "name": "Weather"}
    (offered,) = body["tools"]
    assert offered["name"] == "Weather"
    assert offered["input_schema"] == Weather.model_json_schema()
    assert offered["description"].startswith("The weather in a city.")


def test_a_streamed_structured_answer_folds_to_what_generate_returns(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver
) -> None:
    whole = message(
        text("Sure."),
        tool_use("t1", "Weather", {"city": "Zürich", "celsius": -3}),
        stop_reason="tool_use",
    )
    anthropic.enqueue(as_asked(whole), as_asked(whole))
    model = make_anthropic()
    options = {"response_format": Weather}
    chunks = calls.stream(model, HI, options=options)
    generated = calls.generate(model, HI, options=options)

    streamed = fold_chunks(chunks)
    assert streamed.text == generated.text == '{"city":"Zürich","celsius":-3}'
    assert (streamed.finish_reason, streamed.usage) == (generated.finish_reason, generated.usage)
    # the text before the call is held back, then dropped; the JSON comes in the last chunk
    assert [c.text for c in chunks if c.text] == ['{"city":"Zürich","celsius":-3}']
    assert chunks[-1].finish_reason == "stop"


def test_openais_json_schema_format_names_the_answer_tool(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    anthropic.enqueue(reply_json(message(tool_use("t1", "city_facts", {"population": 3}))))
    schema = {"type": "object", "properties": {"population": {"type": "integer"}}}
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "city facts", "description": "Facts.", "schema": schema},
    }
    reply = make_anthropic().generate(HI, options={"response_format": response_format})

    assert json.loads(reply.text) == {"population": 3}
    (offered,) = anthropic.bodies[0]["tools"]
    assert offered["name"] == "city_facts"  # the API's tool names take no spaces
    assert offered["input_schema"] == schema


def test_a_response_format_among_the_models_own_options_is_read_back_too(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    anthropic.enqueue(reply_json(message(tool_use("t1", "Weather", WEATHER))))
    reply = make_anthropic(options={"response_format": Weather}).generate(HI)
    assert reply.text == ANSWER_TEXT and reply.tool_calls == []


@WAYS
def test_with_other_tools_the_model_must_call_one_of_them_or_answer(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver, how: str
) -> None:
    anthropic.enqueue(
        as_asked(message(tool_use("t1", "get_weather", {"city": "Rome"}), stop_reason="tool_use"))
    )
    reply = answer(
        calls, make_anthropic(), how, tools=[get_weather], options={"response_format": Weather}
    )

    assert reply.tool_calls == [ToolCall("t1", "get_weather", {"city": "Rome"})]
    assert reply.finish_reason == "tool_calls"
    body = anthropic.bodies[0]
    assert body["tool_choice"] == {"type": "any"}
    assert [t["name"] for t in body["tools"]] == ["get_weather", "Weather"]


@WAYS
def test_an_answer_given_while_calling_other_tools_is_dropped_and_the_calls_renumbered(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver, how: str
) -> None:
    whole = message(
        tool_use("t1", "Weather", WEATHER),
        tool_use("t2", "get_weather", {"city": "Rome"}),
        stop_reason="tool_use",
    )
    anthropic.enqueue(as_asked(whole))
    model = make_anthropic()
    if how == "stream":
        chunks = calls.stream(model, HI, [get_weather], {"response_format": Weather})
        assert {d.index for c in chunks for d in c.tool_call_deltas} == {0}
        reply = fold_chunks(chunks)
    else:
        reply = calls.generate(model, HI, [get_weather], {"response_format": Weather})

    assert reply.tool_calls == [ToolCall("t2", "get_weather", {"city": "Rome"})]
    assert reply.text == "" and reply.finish_reason == "tool_calls"


@WAYS
def test_with_thinking_the_request_asks_in_words_as_the_api_refuses_a_forced_tool(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver, how: str
) -> None:
    whole = message(
        thinking("Rome in spring: mild.", "sig-1"),
        tool_use("t1", "Weather", WEATHER),
        stop_reason="tool_use",
    )
    anthropic.enqueue(as_asked(whole))
    model = make_anthropic(thinking=1024, max_tokens=2048)
    reply = answer(calls, model, how, options={"response_format": Weather})

    assert reply.text == ANSWER_TEXT and reply.tool_calls == []
    assert reply.thinking_blocks == [
        ThinkingBlock(thinking="Rome in spring: mild.", signature="sig-1")
    ]
    body = anthropic.bodies[0]
    assert body["tool_choice"] == {"type": "auto"}
    assert body["system"].endswith(
        "Give your final answer by calling the Weather tool, its input being the answer, not as text."
    )


def test_with_thinking_and_other_tools_the_choice_is_auto_and_the_system_text_kept(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    anthropic.enqueue(
        reply_json(
            message(
                thinking("Check.", "s"),
                tool_use("t1", "get_weather", {"city": "Rome"}),
                stop_reason="tool_use",
            )
        )
    )
    model = make_anthropic(thinking=1024, max_tokens=2048)
    history = [SystemMessage("Be brief."), *HI]
    reply = model.generate(
        history, [get_weather], {"response_format": Weather, "parallel_tool_calls": False}
    )

    assert reply.tool_calls[0].name == "get_weather"
    body = anthropic.bodies[0]
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert body["system"].startswith("Be brief.\n\nGive your final answer by calling the Weather")


@WAYS
def test_with_thinking_an_answer_in_plain_text_is_returned_as_written(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver, how: str
) -> None:
    anthropic.enqueue(as_asked(message(thinking("Hm.", "s"), text('{"city": "Rome"}'))))
    model = make_anthropic(thinking=1024, max_tokens=2048)
    reply = answer(calls, model, how, options={"response_format": Weather})
    assert reply.text == '{"city": "Rome"}' and reply.finish_reason == "stop"


def test_the_local_server_refuses_a_forced_tool_with_thinking_as_the_api_does(
    anthropic: FakeAnthropicServer,
) -> None:
    body = {
        "model": "claude-test",
        "max_tokens": 2048,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "Weather", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "tool", "name": "Weather"},
    }
    refused = httpx.post(f"{anthropic.base_url}/v1/messages", json=body, timeout=5)
    assert refused.status_code == 400
    assert "Thinking may not be enabled when tool_choice forces tool use" in refused.text
    body["tool_choice"] = {"type": "any"}
    assert httpx.post(f"{anthropic.base_url}/v1/messages", json=body, timeout=5).status_code == 400
    body["response_format"] = {"type": "json_object"}
    body["tool_choice"] = {"type": "auto"}
    refused = httpx.post(f"{anthropic.base_url}/v1/messages", json=body, timeout=5)
    assert "response_format: Extra inputs are not permitted" in refused.text


def test_a_callers_tool_choice_naming_a_tool_is_kept_and_none_forces_the_answer(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    anthropic.enqueue(
        reply_json(
            message(tool_use("t1", "get_weather", {"city": "Rome"}), stop_reason="tool_use")
        ),
        reply_json(message(tool_use("t2", "Weather", WEATHER), stop_reason="tool_use")),
    )
    model = make_anthropic()
    forced = model.generate(
        HI, [get_weather], {"response_format": Weather, "tool_choice": "get_weather"}
    )
    assert forced.tool_calls[0].name == "get_weather"
    final = model.generate(HI, [get_weather], {"response_format": Weather, "tool_choice": "none"})
    assert final.text == ANSWER_TEXT

    first, second = anthropic.bodies
    assert first["tool_choice"] == {"type": "tool", "name": "get_weather"}
    assert second["tool_choice"] == {"type": "tool", "name": "Weather"}


NAMING_THE_ANSWER_TOOL = pytest.mark.parametrize(
    "choice", ["Weather", {"type": "function", "function": {"name": "Weather"}}]
)


@NAMING_THE_ANSWER_TOOL
def test_a_callers_tool_choice_naming_the_answer_tool_forces_it_among_other_tools(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, choice: Any
) -> None:
    anthropic.enqueue(
        reply_json(message(tool_use("t1", "Weather", WEATHER), stop_reason="tool_use"))
    )
    options = {"response_format": Weather, "tool_choice": choice, "parallel_tool_calls": False}
    reply = make_anthropic().generate(HI, [get_weather], options)

    assert reply.text == ANSWER_TEXT and reply.tool_calls == []
    body = anthropic.bodies[0]
    assert body["tool_choice"] == {
        "type": "tool",
        "name": "Weather",
        "disable_parallel_tool_use": True,
    }
    assert [offered["name"] for offered in body["tools"]] == ["get_weather", "Weather"]
    assert "system" not in body


@NAMING_THE_ANSWER_TOOL
def test_with_thinking_a_choice_naming_the_answer_tool_asks_for_it_in_words(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, choice: Any
) -> None:
    whole = message(
        thinking("Mild.", "s"), tool_use("t1", "Weather", WEATHER), stop_reason="tool_use"
    )
    anthropic.enqueue(reply_json(whole))
    model = make_anthropic(thinking=1024, max_tokens=2048)
    reply = model.generate(HI, [get_weather], {"response_format": Weather, "tool_choice": choice})

    assert reply.text == ANSWER_TEXT and reply.tool_calls == []
    body = anthropic.bodies[0]
    assert body["tool_choice"] == {"type": "auto"}  # the local server refuses a forced one
    assert body["system"].endswith(
        "Give your final answer by calling the Weather tool, its input being the answer, not as text."
    )


@WAYS
def test_with_thinking_and_none_calls_of_the_other_tools_are_dropped_from_the_answer(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver, how: str
) -> None:
    whole = message(
        thinking("Look it up.", "s"),
        text('{"city":"Rome","celsius":21}'),
        tool_use("t1", "get_weather", {"city": "Rome"}),
        stop_reason="tool_use",
    )
    anthropic.enqueue(as_asked(whole))
    model = make_anthropic(thinking=1024, max_tokens=2048)
    options = {"response_format": Weather, "tool_choice": "none"}
    reply = answer(calls, model, how, tools=[get_weather], options=options)

    assert reply.tool_calls == [] and reply.finish_reason == "stop"
    assert reply.text == ANSWER_TEXT
    assert anthropic.bodies[0]["tool_choice"] == {"type": "auto"}


@WAYS
def test_a_call_to_a_tool_never_offered_is_dropped_from_a_structured_answer(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver, how: str
) -> None:
    anthropic.enqueue(
        as_asked(
            message(
                text("Let me look."),
                tool_use("t1", "search", {"q": "Rome"}),
                stop_reason="tool_use",
            )
        )
    )
    reply = answer(calls, make_anthropic(), how, options={"response_format": Weather})
    assert reply.tool_calls == [] and reply.finish_reason == "stop"
    assert reply.text == "Let me look."


def test_a_schema_named_like_a_tool_or_not_an_object_is_refused_before_sending(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    model = make_anthropic()
    with pytest.raises(ValueError, match="a tool is named 'get_weather'"):
        clash = {
            "type": "json_schema",
            "json_schema": {"name": "get_weather", "schema": {"type": "object"}},
        }
        model.generate(HI, [get_weather], {"response_format": clash})
    with pytest.raises(ValueError, match="always a JSON object"):
        model.generate(HI, options={"response_format": RootModel[list[int]]})
    assert anthropic.requests == []


def test_a_history_holding_a_structured_answer_goes_back_as_text(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    anthropic.enqueue(
        reply_json(message(tool_use("t1", "Weather", WEATHER), stop_reason="tool_use")),
        reply_json(message(text("Mild."))),
    )
    model = make_anthropic()
    first = model.generate(HI, options={"response_format": Weather})
    model.generate([*HI, first, UserMessage("And in words?")])
    assert anthropic.bodies[1]["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": ANSWER_TEXT}],
    }
