"""The API key never shows: not in repr, not in any error text or traceback, not in any log."""

from __future__ import annotations

import logging
import socket
import traceback
from collections.abc import Callable

import pytest

from graph_agent.graph.errors import ModelError
from graph_agent.messages import UserMessage
from graph_agent.models import OpenAIChatModel
from graph_agent.tools import tool

from .conftest import Driver
from .openai_fake_server import (
    API_KEY,
    Behaviour,
    FakeOpenAIServer,
    chunk,
    completion,
    reply_error,
    reply_json,
    reply_raw,
    reply_sse,
    stall,
)

ModelFactory = Callable[..., OpenAIChatModel]
HI = [UserMessage("hi")]
ECHO = f"Incorrect API key provided: {API_KEY}. Authorization: Bearer {API_KEY}"

FAILURES: dict[str, list[Behaviour]] = {
    "401 echoing the key": [reply_error(401, ECHO)],
    "400 echoing the key": [reply_error(400, ECHO)],
    "429 echoing the key, retry too far": [reply_error(429, ECHO, headers={"Retry-After": "999"})],
    "500 echoing the key, retries exhausted": [reply_error(500, ECHO)] * 3,
    "plain-text 200 echoing the key": [reply_raw(200, ECHO.encode())],
    "200 with an error object echoing the key": [reply_json({"error": {"message": ECHO}})],
    "read timeout": [stall(), stall(), stall()],
    "stream cut short": [reply_sse([chunk({"content": "x"})], drop_after=1)],
    "stream with an error event echoing the key": [
        reply_sse([{"error": {"message": ECHO}}], done=False)
    ],
    "stream with an event that is not JSON, echoing the key": [
        reply_sse([f"proxy: bad token {API_KEY}"], done=False)
    ],
    "stream answered by a JSON error object echoing the key": [
        reply_json({"error": {"message": ECHO}})
    ],
}


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"Sunny in {city}"


def everything_about(error: BaseException) -> str:
    """Every text a user could see of an error: str, repr, and the chained traceback."""
    return "\n".join([str(error), repr(error), "".join(traceback.format_exception(error))])


def test_the_repr_of_a_model_does_not_show_the_api_key(make_model: ModelFactory) -> None:
    model = make_model()
    assert API_KEY not in repr(model)
    assert API_KEY not in str(model)
    assert API_KEY not in str(vars(model))


@pytest.mark.parametrize("failure", FAILURES)
def test_no_error_text_or_traceback_shows_the_api_key(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver, failure: str
) -> None:
    server.enqueue(*FAILURES[failure])
    model = make_model(timeout=0.2)
    if failure.startswith("stream"):
        _, error = calls.stream_until_error(model, HI)
    else:
        with pytest.raises(ModelError) as caught:
            calls.generate(model, HI)
        error = caught.value
    assert isinstance(error, ModelError)
    assert API_KEY not in everything_about(error)


def test_an_unreachable_server_error_does_not_show_the_api_key(
    make_model: ModelFactory, calls: Driver
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ModelError) as caught:
        calls.generate(make_model(base_url=f"http://127.0.0.1:{port}/v1"), HI)
    assert API_KEY not in everything_about(caught.value)


def test_no_log_line_at_any_level_shows_the_api_key(
    server: FakeOpenAIServer,
    make_model: ModelFactory,
    calls: Driver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.enqueue(
        reply_error(500, ECHO),
        reply_json(completion("ok")),
        reply_error(503, ECHO),
        reply_sse([chunk({"content": "ok"}, finish_reason="stop")]),
        *[reply_error(500, ECHO)] * 3,
        reply_json(completion("ok")),  # after tool_choice="required" got the empty 500
        reply_sse([chunk({"content": "x"})], drop_after=1),
    )
    model = make_model()
    with caplog.at_level(logging.DEBUG):
        calls.generate(model, HI)
        calls.stream(model, HI)
        with pytest.raises(ModelError):
            calls.generate(model, HI)
        calls.generate(model, HI, [get_weather], {"tool_choice": "required"})
        _, error = calls.stream_until_error(model, HI)
    assert isinstance(error, ModelError)
    assert caplog.records, "expected the client and httpx to log something at DEBUG"
    for record in caplog.records:
        shown = f"{record.getMessage()} {record.args!r} {record.exc_text or ''}"
        assert API_KEY not in shown, f"{record.name} logged the key: {shown[:200]}"


def test_credentials_inside_the_base_url_are_not_shown(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    host = server.base_url.removeprefix("http://")
    model = make_model(base_url=f"http://user:hunter2@{host}?key=hunter2")
    server.enqueue(reply_error(400, "bad"))
    with pytest.raises(ModelError) as caught:
        model.generate(HI)
    assert "hunter2" not in repr(model)
    assert "hunter2" not in str(caught.value)


def test_credentials_inside_the_base_url_are_not_logged(
    server: FakeOpenAIServer,
    make_model: ModelFactory,
    calls: Driver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = server.base_url.removeprefix("http://")
    model = make_model(base_url=f"http://user:hunter2@{host}?key=hunter2", api_key=None)
    server.enqueue(
        reply_json(completion("ok")), reply_sse([chunk({"content": "ok"}, finish_reason="stop")])
    )
    with caplog.at_level(logging.DEBUG):
        calls.generate(model, HI)
        calls.stream(model, HI)
    assert any(record.name == "graph_agent.models.openai" for record in caplog.records)
    for record in caplog.records:
        shown = f"{record.getMessage()} {record.args!r}"
        assert "user:hunter2" not in shown, f"{record.name} logged the password: {shown[:200]}"
        if record.name.startswith("graph_agent"):
            assert "hunter2" not in shown, f"{record.name} logged the ?key=: {shown[:200]}"
    # The password still reaches the server, as basic auth (what httpx makes of user:pass@).
    assert {request.headers["Authorization"] for request in server.requests} == {
        "Basic dXNlcjpodW50ZXIy"
    }


@pytest.mark.parametrize("key", ["sk-12345", "hunter2!", API_KEY])
def test_a_key_of_eight_characters_or_more_never_shows(
    server: FakeOpenAIServer,
    make_model: ModelFactory,
    calls: Driver,
    caplog: pytest.LogCaptureFixture,
    key: str,
) -> None:
    echo = f"Incorrect API key provided: {key}"
    server.enqueue(reply_error(500, echo), reply_error(401, echo))
    model = make_model(api_key=key)
    with caplog.at_level(logging.DEBUG), pytest.raises(ModelError) as caught:
        calls.generate(model, HI)
    assert "Incorrect API key provided: ***" in str(caught.value)
    assert key not in everything_about(caught.value)
    assert key not in repr(model)
    for record in caplog.records:
        assert key not in f"{record.getMessage()} {record.args!r} {record.exc_text or ''}"


SHORT_KEY_MESSAGES = {
    "stream cut short": (
        [reply_sse([chunk({"content": "x"})], drop_after=1)],
        "incomplete chunked read",
    ),
    "400 from the server": ([reply_error(400, "unknown key 'top_k'")], "unknown key 'top_k'"),
}


@pytest.mark.parametrize("key", ["k", "x", "1234567"])
@pytest.mark.parametrize("failure", SHORT_KEY_MESSAGES)
def test_a_short_placeholder_key_does_not_garble_messages(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver, key: str, failure: str
) -> None:
    behaviours, intact = SHORT_KEY_MESSAGES[failure]
    server.enqueue(*behaviours)
    model = make_model(api_key=key)
    if failure == "stream cut short":
        _, error = calls.stream_until_error(model, HI)
    else:
        with pytest.raises(ModelError) as caught:
            calls.generate(model, HI)
        error = caught.value
    assert isinstance(error, ModelError)
    assert intact in str(error)
    assert "***" not in str(error)


def test_a_short_key_that_the_server_echoes_is_shown_as_sent(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    # Local servers take any placeholder; it is no secret, and masking it would garble text.
    server.enqueue(reply_error(401, "Incorrect API key provided: 1234567"))
    with pytest.raises(ModelError, match="provided: 1234567"):
        make_model(api_key="1234567").generate(HI)
