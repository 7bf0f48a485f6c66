"""JSON nested too deeply to read (100,000 levels) from a model server: a body or a stream event
is a ModelError, tool-call arguments an error result the model reads; never a RecursionError."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from graph_agent import ReactAgent, tool
from graph_agent.messages import ToolResponseMessage, UserMessage
from graph_agent.models import ModelError, ModelResponseError, OpenAIChatModel

from .conftest import Driver
from .openai_fake_server import (
    FakeOpenAIServer,
    chunk,
    completion,
    reply_raw,
    reply_sse,
    tool_call,
)

ModelFactory = Callable[..., OpenAIChatModel]
DEEP = "[" * 100_000 + "]" * 100_000
QUESTION = [UserMessage("hi")]


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return query


def test_a_body_nested_too_deeply_is_a_model_error(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    body = '{"choices": ' + DEEP + "}"
    server.enqueue(reply_raw(200, body.encode(), content_type="application/json"))

    with pytest.raises(ModelResponseError, match="nested too deeply to read"):
        calls.generate(make_model(max_retries=0), QUESTION)


def test_a_stream_event_nested_too_deeply_is_a_model_error(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_sse(['{"choices": ' + DEEP + "}"]))

    with pytest.raises(ModelResponseError, match="nested too deeply to read"):
        calls.stream(make_model(max_retries=0), QUESTION)


def test_an_error_body_nested_too_deeply_is_still_described(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_raw(400, ('{"error": ' + DEEP + "}").encode()))

    with pytest.raises(ModelError, match="answered HTTP 400 Bad Request"):
        calls.generate(make_model(max_retries=0), QUESTION)


def _json_reply(body: object) -> object:
    return reply_raw(200, json.dumps(body).encode(), content_type="application/json")


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "sse"])
def test_tool_arguments_nested_too_deeply_become_an_error_result_and_the_run_goes_on(
    server: FakeOpenAIServer, make_model: ModelFactory, streamed: bool
) -> None:
    arguments = '{"query": ' + DEEP + "}"
    if streamed:
        call = {
            "index": 0,
            "id": "c1",
            "type": "function",
            "function": {"name": "lookup", "arguments": arguments},
        }
        server.enqueue(
            reply_sse([chunk({"tool_calls": [call]}), chunk({}, finish_reason="tool_calls")]),
            reply_sse([chunk({"content": "sorry"}), chunk({}, finish_reason="stop")]),
        )
    else:
        call = tool_call("c1", "lookup", arguments)
        server.enqueue(
            _json_reply(completion(None, tool_calls=[call], finish_reason="tool_calls")),
            _json_reply(completion("sorry")),
        )
    agent = ReactAgent("a", make_model(max_retries=0), tools=[lookup])

    if streamed:
        state = [out for out in agent.stream("look it up") if out.state is not None][-1].state
    else:
        state = agent.invoke("look it up")

    result = next(m for m in state["messages"] if isinstance(m, ToolResponseMessage))
    assert result.is_error and "nested too deeply to read" in result.content
    assert state["messages"][-1].text == "sorry"
