"""``tool_choice`` is sent as given; llama.cpp's HTTP 500 on ``"required"`` is survived.

OpenAI honours ``tool_choice: "required"`` (the model must call a tool); a llama.cpp-based
server answers it with HTTP 500, with an empty body or (llama-cpp-python, newer llama.cpp) an
error whose message names ``tool_choice``. The client sends it, and on exactly that refusal
sends the request once more with ``"auto"`` (no backoff, no retry consumed), warns, and once
the server has accepted ``"auto"``, sends ``"auto"`` for ``"required"`` from then on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from graph_agent.messages import AssistantMessage, ToolCall, UserMessage
from graph_agent.models import ModelServerError, OpenAIChatModel, fold_chunks
from graph_agent.tools import tool

from .conftest import Driver
from .openai_fake_server import (
    API_KEY,
    FakeOpenAIServer,
    chunk,
    completion,
    reply_error,
    reply_json,
    reply_raw,
    reply_sse,
    tool_call,
    tool_delta,
)

ModelFactory = Callable[..., OpenAIChatModel]
QUESTION = [UserMessage("Weather in Rome?")]
REQUIRED = {"tool_choice": "required"}
CALL = ToolCall("c1", "get_weather", {"city": "Rome"})


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"Sunny in {city}"


def tool_call_reply(how: str) -> Any:
    """The fake server's answer: one call of get_weather, as plain JSON or as a stream."""
    if how == "generate":
        calls = [tool_call("c1", "get_weather", {"city": "Rome"})]
        return reply_json(completion(None, tool_calls=calls, finish_reason="tool_calls"))
    piece = tool_delta(0, call_id="c1", name="get_weather", arguments='{"city": "Rome"}')
    return reply_sse([chunk({"tool_calls": [piece]}), chunk({}, finish_reason="tool_calls")])


def ask(
    calls: Driver, how: str, model: OpenAIChatModel, options: dict[str, Any] | None = None
) -> AssistantMessage:
    if how == "generate":
        return calls.generate(model, QUESTION, [get_weather], options)
    return fold_chunks(calls.stream(model, QUESTION, [get_weather], options))


def sent_choices(server: FakeOpenAIServer) -> list[Any]:
    return [body.get("tool_choice") for body in server.bodies]


def fallback_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno >= logging.WARNING
        and 'refused tool_choice="required"' in record.getMessage()
    ]


@pytest.fixture(params=["generate", "stream"])
def how(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_a_server_that_honours_required_gets_it_and_the_forced_call_comes_back(
    server: FakeOpenAIServer,
    make_model: ModelFactory,
    calls: Driver,
    how: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.accepts_tool_choice_required = True  # as OpenAI does
    server.enqueue(tool_call_reply(how))
    with caplog.at_level(logging.WARNING, logger="graph_agent.models.openai"):
        reply = ask(calls, how, make_model(), REQUIRED)
    assert reply.tool_calls == [CALL]
    assert sent_choices(server) == ["required"]
    assert caplog.records == []


def test_an_empty_500_on_required_is_sent_again_at_once_with_auto_and_warned_about(
    server: FakeOpenAIServer,
    make_model: ModelFactory,
    calls: Driver,
    how: str,
    sleeps: list[float],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.enqueue(tool_call_reply(how))  # the default server 500s on "required", like llama.cpp
    with caplog.at_level(logging.DEBUG, logger="graph_agent.models.openai"):
        reply = ask(calls, how, make_model(), REQUIRED)
    assert reply.tool_calls == [CALL]
    assert sent_choices(server) == ["required", "auto"]
    assert sleeps == []
    (warning,) = fallback_warnings(caplog)
    assert 'tool_choice="required"' in warning
    assert '"auto"' in warning
    assert "fake-model" in warning
    assert all(API_KEY not in record.getMessage() for record in caplog.records)


def test_after_the_fallback_worked_the_same_model_sends_auto_directly(
    server: FakeOpenAIServer,
    make_model: ModelFactory,
    calls: Driver,
    how: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = make_model()
    server.enqueue(tool_call_reply(how), tool_call_reply(how), tool_call_reply(how))
    with caplog.at_level(logging.WARNING, logger="graph_agent.models.openai"):
        ask(calls, how, model, REQUIRED)
        assert ask(calls, how, model, REQUIRED).tool_calls == [CALL]
        ask(calls, how, model, {"tool_choice": "none"})  # other choices are still sent as given
    assert sent_choices(server) == ["required", "auto", "auto", "none"]
    assert len(fallback_warnings(caplog)) == 1


def test_the_memory_belongs_to_one_model_instance(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.enqueue(reply_json(completion("a")), reply_json(completion("b")))
    make_model().generate(QUESTION, [get_weather], REQUIRED)
    make_model().generate(QUESTION, [get_weather], REQUIRED)
    assert sent_choices(server) == ["required", "auto", "required", "auto"]


def test_the_fallback_is_no_retry_and_works_with_max_retries_zero(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver, sleeps: list[float]
) -> None:
    server.enqueue(reply_json(completion("ok")))
    assert calls.generate(make_model(max_retries=0), QUESTION, [get_weather], REQUIRED).text == "ok"
    assert sent_choices(server) == ["required", "auto"]
    assert sleeps == []


def test_the_auto_request_keeps_the_whole_retry_budget(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver, sleeps: list[float]
) -> None:
    server.enqueue(reply_error(503, "loading model"), reply_json(completion("ok")))
    assert calls.generate(make_model(max_retries=1), QUESTION, [get_weather], REQUIRED).text == "ok"
    assert sent_choices(server) == ["required", "auto", "auto"]
    assert len(sleeps) == 1


def test_the_fallback_happens_once_and_a_failed_one_is_not_remembered(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver, sleeps: list[float]
) -> None:
    model = make_model(max_retries=2)
    server.enqueue(*[reply_raw(500)] * 3)  # "auto" gets empty 500s too: the server is down
    with pytest.raises(ModelServerError, match="after 3 attempts"):
        calls.generate(model, QUESTION, [get_weather], REQUIRED)
    assert sent_choices(server) == ["required", "auto", "auto", "auto"]
    assert len(sleeps) == 2
    server.enqueue(reply_json(completion("back")))
    assert calls.generate(model, QUESTION, [get_weather], REQUIRED).text == "back"
    assert sent_choices(server)[4:] == ["required", "auto"]


def test_a_500_on_required_that_says_something_is_an_ordinary_retry(
    server: FakeOpenAIServer,
    make_model: ModelFactory,
    calls: Driver,
    how: str,
    sleeps: list[float],
) -> None:
    server.accepts_tool_choice_required = True
    server.enqueue(reply_error(500, "overloaded"), tool_call_reply(how))
    assert ask(calls, how, make_model(), REQUIRED).tool_calls == [CALL]
    assert sent_choices(server) == ["required", "required"]
    assert len(sleeps) == 1


@pytest.mark.parametrize("choice", [None, "auto", "get_weather"])
def test_an_empty_500_without_required_is_an_ordinary_retry(
    server: FakeOpenAIServer,
    make_model: ModelFactory,
    sleeps: list[float],
    choice: str | None,
) -> None:
    server.enqueue(reply_raw(500), reply_json(completion("ok")))
    assert make_model().generate(QUESTION, [get_weather], {"tool_choice": choice}).text == "ok"
    assert server.bodies[0] == server.bodies[1]
    assert len(sleeps) == 1


REFUSALS_THAT_NAME_TOOL_CHOICE = {
    "llama.cpp JSON": reply_json(
        {
            "error": {
                "code": 500,
                "message": "Unsupported tool_choice: required",
                "type": "server_error",
            }
        },
        status=500,
    ),
    "llama-cpp-python JSON": reply_json(
        {
            "error": {
                "message": "tool_choice 'required' is not supported by this chat format",
                "type": "internal_server_error",
                "param": None,
                "code": None,
            }
        },
        status=500,
    ),
    "plain text": reply_raw(500, b"Unsupported param: tool_choice"),
}


@pytest.mark.parametrize("refusal", REFUSALS_THAT_NAME_TOOL_CHOICE)
def test_a_500_on_required_whose_message_names_tool_choice_is_sent_again_at_once_with_auto(
    server: FakeOpenAIServer,
    make_model: ModelFactory,
    calls: Driver,
    how: str,
    sleeps: list[float],
    caplog: pytest.LogCaptureFixture,
    refusal: str,
) -> None:
    server.accepts_tool_choice_required = True  # the scripted refusal answers "required"
    server.enqueue(REFUSALS_THAT_NAME_TOOL_CHOICE[refusal], tool_call_reply(how))
    with caplog.at_level(logging.WARNING, logger="graph_agent.models.openai"):
        reply = ask(calls, how, make_model(), REQUIRED)
    assert reply.tool_calls == [CALL]
    assert sent_choices(server) == ["required", "auto"]
    assert sleeps == []
    (warning,) = fallback_warnings(caplog)
    assert "HTTP 500" in warning
    assert "tool_choice" in warning.split("HTTP 500", 1)[1]  # the server's own message


def test_a_500_on_required_naming_tool_choice_is_remembered_like_an_empty_one(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.accepts_tool_choice_required = True
    model = make_model()
    server.enqueue(
        REFUSALS_THAT_NAME_TOOL_CHOICE["llama-cpp-python JSON"],
        reply_json(completion("a")),
        reply_json(completion("b")),
    )
    model.generate(QUESTION, [get_weather], REQUIRED)
    model.generate(QUESTION, [get_weather], REQUIRED)
    assert sent_choices(server) == ["required", "auto", "auto"]


def test_a_500_naming_tool_choice_without_required_sent_is_an_ordinary_retry(
    server: FakeOpenAIServer, make_model: ModelFactory, sleeps: list[float]
) -> None:
    server.enqueue(REFUSALS_THAT_NAME_TOOL_CHOICE["llama.cpp JSON"], reply_json(completion("ok")))
    assert make_model().generate(QUESTION, [get_weather], {"tool_choice": "auto"}).text == "ok"
    assert sent_choices(server) == ["auto", "auto"]
    assert len(sleeps) == 1
