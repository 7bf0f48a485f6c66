"""What OpenAIChatModel sends: request bodies checked field by field against the OpenAI format."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from graph_agent.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from graph_agent.models import OpenAIChatModel
from graph_agent.tools import tool

from .conftest import Driver
from .openai_fake_server import API_KEY, FakeOpenAIServer, completion, reply_json, tool_call

ModelFactory = Callable[..., OpenAIChatModel]
HI = [UserMessage("hi")]


@tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """Current weather for a city.

    Args:
        city: The city name.
        unit: celsius or fahrenheit.
    """
    return f"Sunny in {city}"


def sent_body(server: FakeOpenAIServer, model: OpenAIChatModel, *args: Any, **kwargs: Any) -> Any:
    server.enqueue(reply_json(completion("ok")))
    model.generate(*args, **kwargs)
    return server.bodies[-1]


def test_the_body_names_the_model_and_lists_the_messages(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    body = sent_body(server, make_model(), [SystemMessage("Be brief."), UserMessage("hi")])
    assert body == {
        "model": "fake-model",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
        ],
    }
    assert server.requests[-1].path == "/v1/chat/completions"


def test_assistant_tool_calls_are_sent_with_type_function_and_json_string_arguments(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    history = [
        UserMessage("Weather in Rome and Oslo?"),
        AssistantMessage(
            "Checking.",
            tool_calls=[
                ToolCall("c1", "get_weather", {"city": "Rome"}),
                ToolCall("c2", "get_weather", {"city": "Oslo", "unit": "fahrenheit"}),
            ],
        ),
    ]
    body = sent_body(server, make_model(), history)
    assistant = body["messages"][1]
    assert assistant == {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
            },
            {
                "id": "c2",
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "arguments": '{"city": "Oslo", "unit": "fahrenheit"}',
                },
            },
        ],
    }
    assert isinstance(assistant["tool_calls"][0]["function"]["arguments"], str)


def test_an_assistant_message_without_text_is_sent_with_empty_content_not_null(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    history = [UserMessage("x"), AssistantMessage(tool_calls=[ToolCall("c1", "get_weather", {})])]
    body = sent_body(server, make_model(), history)
    assert body["messages"][1]["content"] == ""


def test_tool_results_carry_the_tool_call_id(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    history = [
        UserMessage("x"),
        AssistantMessage(tool_calls=[ToolCall("c1", "get_weather", {"city": "Rome"})]),
        ToolResponseMessage(tool_call_id="c1", name="get_weather", content="Sunny in Rome"),
    ]
    body = sent_body(server, make_model(), history)
    assert body["messages"][2] == {"role": "tool", "tool_call_id": "c1", "content": "Sunny in Rome"}


def test_tools_are_sent_as_function_definitions_with_their_json_schema(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    body = sent_body(server, make_model(), [UserMessage("x")], tools=[get_weather])
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "city": {"type": "string", "description": "The city name."},
                        "unit": {
                            "type": "string",
                            "default": "celsius",
                            "description": "celsius or fahrenheit.",
                        },
                    },
                    "required": ["city"],
                    "additionalProperties": False,
                },
            },
        }
    ]
    assert "tool_choice" not in body


def test_a_plain_function_passed_as_a_tool_is_described_too(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    body = sent_body(server, make_model(), [UserMessage("x")], tools=[add])
    assert body["tools"][0]["function"]["name"] == "add"
    assert body["tools"][0]["function"]["parameters"]["required"] == ["a", "b"]


def test_without_tools_no_tool_fields_are_sent_even_when_options_set_them(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    model = make_model(options={"tool_choice": "auto", "parallel_tool_calls": False})
    body = sent_body(server, model, [UserMessage("x")], tools=[])
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(body)


def test_options_are_extra_fields_and_a_call_overrides_the_model(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    model = make_model(options={"temperature": 0.2, "max_tokens": 50, "seed": 7})
    body = sent_body(server, model, [UserMessage("x")], options={"temperature": 0, "seed": None})
    assert body["temperature"] == 0
    assert body["max_tokens"] == 50
    assert "seed" not in body


def test_tool_choice_naming_a_tool_is_sent_as_a_function_choice(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    body = sent_body(
        server,
        make_model(),
        [UserMessage("x")],
        tools=[get_weather],
        options={"tool_choice": "get_weather", "parallel_tool_calls": False},
    )
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["parallel_tool_calls"] is False


@pytest.mark.parametrize("choice", ["required", "auto", "none"])
def test_tool_choice_is_sent_as_given_without_a_warning(
    server: FakeOpenAIServer,
    make_model: ModelFactory,
    caplog: pytest.LogCaptureFixture,
    choice: str,
) -> None:
    server.accepts_tool_choice_required = True  # as OpenAI does
    with caplog.at_level(logging.WARNING, logger="graph_agent.models.openai"):
        body = sent_body(
            server,
            make_model(),
            [UserMessage("x")],
            tools=[get_weather],
            options={"tool_choice": choice},
        )
    assert body["tool_choice"] == choice
    assert len(server.requests) == 1
    assert caplog.records == []


def test_response_format_given_as_a_pydantic_model_is_sent_as_a_json_schema(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    class Answer(BaseModel):
        city: str
        temperature: float

    body = sent_body(server, make_model(), [UserMessage("x")], options={"response_format": Answer})
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Answer", "schema": Answer.model_json_schema()},
    }


def test_a_response_format_dict_is_sent_unchanged(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    fmt = {"type": "json_object"}
    body = sent_body(server, make_model(), [UserMessage("x")], options={"response_format": fmt})
    assert body["response_format"] == fmt


def test_a_streaming_request_asks_for_usage_in_the_last_chunk(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.enqueue(reply_json(completion("ok")))
    list(make_model().stream([UserMessage("x")]))
    body = server.bodies[-1]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert server.requests[-1].headers["Accept"] == "text/event-stream"


def test_stream_options_set_to_none_are_left_out(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.enqueue(reply_json(completion("ok")))
    list(make_model(options={"stream_options": None}).stream([UserMessage("x")]))
    assert "stream_options" not in server.bodies[-1]


def test_a_non_streaming_request_has_no_stream_fields(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    body = sent_body(server, make_model(), [UserMessage("x")])
    assert "stream" not in body
    assert "stream_options" not in body


@pytest.mark.parametrize("key", ["messages", "tools", "stream"])
def test_options_may_not_replace_the_messages_tools_or_stream_flag(
    make_model: ModelFactory, key: str
) -> None:
    with pytest.raises(ValueError, match=key):
        make_model().generate([UserMessage("x")], options={key: []})


def test_the_model_option_overrides_the_model_name_for_one_call(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    body = sent_body(server, make_model(), [UserMessage("x")], options={"model": "other"})
    assert body["model"] == "other"


def test_the_api_key_is_sent_as_a_bearer_token(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    sent_body(server, make_model(), [UserMessage("x")])
    headers = server.requests[-1].headers
    assert headers["Authorization"] == f"Bearer {API_KEY}"
    assert headers["Content-Type"] == "application/json"


def test_without_a_key_no_authorization_header_is_sent(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    sent_body(server, make_model(api_key=None), [UserMessage("x")])
    assert "Authorization" not in server.requests[-1].headers


def test_extra_headers_are_sent_with_every_call(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    sent_body(server, make_model(headers={"X-Title": "graph-agent tests"}), [UserMessage("x")])
    assert server.requests[-1].headers["X-Title"] == "graph-agent tests"


def test_the_environment_configures_the_default_endpoint_and_key(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    with OpenAIChatModel(model="fake-model") as model:
        sent_body(server, model, [UserMessage("x")])
    assert server.requests[-1].headers["Authorization"] == "Bearer sk-from-env"


def test_the_openai_key_from_the_environment_is_not_sent_to_another_server(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    with OpenAIChatModel(model="llama3", base_url=server.base_url) as model:
        sent_body(server, model, [UserMessage("x")])
    assert "Authorization" not in server.requests[-1].headers


def test_the_default_endpoint_is_openai() -> None:
    assert OpenAIChatModel(model="gpt-4o-mini").base_url == "https://api.openai.com/v1"


def test_dashscope_uses_its_own_key_and_the_compatible_mode_url(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (
        OpenAIChatModel.dashscope(model="qwen-plus").base_url
        == "https://dashscope.aliyuncs.com/compatible-mode/v1"
    )
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-dashscope")
    monkeypatch.setenv("DASHSCOPE_BASE_URL", server.base_url)
    with OpenAIChatModel.dashscope(model="qwen-plus") as model:
        body = sent_body(server, model, [UserMessage("x")])
    assert body["model"] == "qwen-plus"
    assert server.requests[-1].headers["Authorization"] == "Bearer sk-dashscope"


def test_a_base_url_that_already_ends_in_chat_completions_is_used_as_is(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    model = make_model(base_url=server.base_url + "/chat/completions/")
    sent_body(server, model, [UserMessage("x")])
    assert server.requests[-1].path == "/v1/chat/completions"


@pytest.mark.parametrize("suffix", ["", "/", "/chat/completions"])
def test_a_query_in_the_base_url_follows_the_chat_completions_path(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver, suffix: str
) -> None:
    server.enqueue(reply_json(completion("ok")))
    calls.generate(make_model(base_url=f"{server.base_url}{suffix}?api-version=2024-06-01"), HI)
    assert server.requests[-1].path == "/v1/chat/completions?api-version=2024-06-01"


@pytest.mark.parametrize(
    ("base_url", "problem"),
    [
        ("http://localhost:abc/v1", "is not a valid URL (Invalid port: 'abc')"),
        ("http://user:hunter2@localhost:abc/v1?key=hunter2", "is not a valid URL"),
        ("localhost:11434/v1", "must start with http:// or https://"),
        ("http://", "names no host"),
    ],
)
def test_an_invalid_base_url_is_a_value_error_naming_base_url(base_url: str, problem: str) -> None:
    with pytest.raises(ValueError, match=r"^base_url ") as caught:
        OpenAIChatModel("m", base_url=base_url)
    assert problem in str(caught.value)
    assert "e.g. 'http://localhost:11434/v1'" in str(caught.value)
    assert "hunter2" not in str(caught.value)


def test_an_invalid_openai_base_url_variable_is_named_in_the_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:abc/v1")
    with pytest.raises(ValueError, match=r"^OPENAI_BASE_URL is not a valid URL"):
        OpenAIChatModel("m")


def test_the_sync_client_reuses_one_connection(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    model = make_model()
    for _ in range(3):
        sent_body(server, model, [UserMessage("x")])
    assert len({request.client_port for request in server.requests}) == 1


def test_a_closed_model_opens_a_new_client_when_used_again(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    model = make_model()
    sent_body(server, model, [UserMessage("x")])
    model.close()
    sent_body(server, model, [UserMessage("x")])
    assert len(server.requests) == 2


def test_history_tool_calls_round_trip_through_a_strict_server(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    model = make_model()
    server.enqueue(
        reply_json(
            completion(
                None,
                tool_calls=[tool_call("c1", "get_weather", {"city": "Rome"})],
                finish_reason="tool_calls",
            )
        ),
        reply_json(completion("Sunny in Rome.")),
    )
    question = UserMessage("Weather in Rome?")
    first = model.generate([question], tools=[get_weather])
    result = ToolResponseMessage(tool_call_id="c1", name="get_weather", content="Sunny")
    second = model.generate([question, first, result], tools=[get_weather])
    assert second.text == "Sunny in Rome."
    assert server.bodies[-1]["messages"][1]["content"] == ""
