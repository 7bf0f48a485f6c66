"""Real servers are not the spec: each quirk is reproduced by the fake server and survived."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from graph_agent.messages import AssistantMessage, ToolCall, ToolResponseMessage, UserMessage
from graph_agent.models import OpenAIChatModel, fold_chunks
from graph_agent.tools import tool

from .conftest import Driver
from .openai_fake_server import (
    FakeOpenAIServer,
    chunk,
    completion,
    reply_json,
    reply_sse,
    split,
    tool_call,
    tool_delta,
)

ModelFactory = Callable[..., OpenAIChatModel]
QUESTION = [UserMessage("Weather in Rome?")]


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"Sunny in {city}"


def llama_cpp_tool_call_stream() -> list[dict[str, object]]:
    """Like llama.cpp: every tool-call piece repeats the call's id and function name."""
    pieces = split(json.dumps({"city": "Rome"}), 4)
    events: list[dict[str, object]] = [
        chunk({"tool_calls": [tool_delta(0, call_id="call_x", name="get_weather", arguments=p)]})
        for p in pieces
    ]
    events.append(chunk({}, finish_reason="tool_calls"))
    return events


def test_the_fake_server_answers_null_assistant_content_with_500_like_llama_cpp(
    server: FakeOpenAIServer,
) -> None:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": None}],
    }
    assert httpx.post(server.base_url + "/chat/completions", json=body).status_code == 500


def test_the_fake_server_answers_tool_choice_required_with_an_empty_500_like_llama_cpp(
    server: FakeOpenAIServer,
) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    body = {"model": "m", "messages": [], "tools": tools, "tool_choice": "required"}
    response = httpx.post(server.base_url + "/chat/completions", json=body)
    assert (response.status_code, response.content) == (500, b"")


def test_tool_call_pieces_that_repeat_id_and_name_are_not_concatenated(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_sse(llama_cpp_tool_call_stream()))
    reply = fold_chunks(calls.stream(make_model(), QUESTION, tools=[get_weather]))
    assert reply.tool_calls == [ToolCall("call_x", "get_weather", {"city": "Rome"})]


def test_a_stream_that_ends_without_done_after_its_finish_reason_is_complete(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_sse(llama_cpp_tool_call_stream(), done=False))
    reply = fold_chunks(calls.stream(make_model(), QUESTION, tools=[get_weather]))
    assert reply.tool_calls[0].arguments == {"city": "Rome"}
    assert reply.finish_reason == "tool_calls"


def test_a_tool_calling_turn_is_sent_back_with_empty_content_and_a_strict_server_accepts_it(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_sse(llama_cpp_tool_call_stream()), reply_json(completion("Sunny.")))
    model = make_model()
    turn = fold_chunks(calls.stream(model, QUESTION, tools=[get_weather]))
    result = ToolResponseMessage(tool_call_id="call_x", name="get_weather", content="Sunny")
    assert calls.generate(model, [*QUESTION, turn, result], tools=[get_weather]).text == "Sunny."
    assert server.bodies[-1]["messages"][1]["content"] == ""


def test_the_fake_server_can_accept_tool_choice_required_like_openai(
    server: FakeOpenAIServer,
) -> None:
    # How the client survives the empty 500: tests/models/test_openai_tool_choice.py
    server.accepts_tool_choice_required = True
    server.enqueue(reply_json(completion("ok")))
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    body = {"model": "m", "messages": [], "tools": tools, "tool_choice": "required"}
    assert httpx.post(server.base_url + "/chat/completions", json=body).status_code == 200


def test_tool_calls_from_a_model_offered_no_tools_are_dropped(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    unwanted = [tool_call("c1", "get_weather", {"city": "Rome"})]
    server.enqueue(
        reply_json(completion("It is sunny.", tool_calls=unwanted, finish_reason="tool_calls"))
    )
    reply = calls.generate(make_model(), QUESTION)
    assert (reply.text, reply.tool_calls, reply.finish_reason) == ("It is sunny.", [], "stop")


def test_streamed_tool_calls_from_a_model_offered_no_tools_are_dropped(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    events = [chunk({"content": "It is sunny."}), *llama_cpp_tool_call_stream()]
    server.enqueue(reply_sse(events))
    chunks = calls.stream(make_model(), QUESTION)
    assert all(not c.tool_call_deltas for c in chunks)
    reply = fold_chunks(chunks)
    assert (reply.text, reply.tool_calls, reply.finish_reason) == ("It is sunny.", [], "stop")


def test_streamed_tool_call_pieces_without_an_index_are_placed_by_their_id(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    events = [
        chunk({"tool_calls": [tool_delta(None, call_id="a", name="get_weather", arguments="")]}),
        chunk({"tool_calls": [tool_delta(None, call_id="b", name="get_weather", arguments="")]}),
        chunk({"tool_calls": [tool_delta(None, call_id="a", arguments='{"city": "Rome"}')]}),
        chunk({"tool_calls": [tool_delta(None, call_id="b", arguments='{"city": "Oslo"}')]}),
        chunk({}, finish_reason="tool_calls"),
    ]
    server.enqueue(reply_sse(events))
    reply = fold_chunks(calls.stream(make_model(), QUESTION, tools=[get_weather]))
    assert [(c.id, c.arguments["city"]) for c in reply.tool_calls] == [("a", "Rome"), ("b", "Oslo")]


def test_parallel_calls_all_numbered_zero_are_told_apart_by_their_ids(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    events = [
        chunk({"tool_calls": [tool_delta(0, call_id="a", name="get_weather")]}),
        chunk({"tool_calls": [tool_delta(0, arguments='{"city": "Rome"}')]}),
        chunk({"tool_calls": [tool_delta(0, call_id="b", name="get_weather")]}),
        chunk({"tool_calls": [tool_delta(0, arguments='{"city": "Oslo"}')]}),
        chunk({}, finish_reason="tool_calls"),
    ]
    server.enqueue(reply_sse(events))
    reply = fold_chunks(calls.stream(make_model(), QUESTION, tools=[get_weather]))
    assert [(c.id, c.arguments["city"]) for c in reply.tool_calls] == [("a", "Rome"), ("b", "Oslo")]


PARIS_CALL = tool_call("c1", "get_weather", {"city": "Paris"})
ODD_TOOL_CALL_STREAMS = {
    # Gemini's OpenAI-compatible endpoint can split the function name over chunks.
    "a name split over chunks": [
        chunk({"tool_calls": [tool_delta(0, call_id="c1", name="get_wea", arguments="")]}),
        chunk({"tool_calls": [tool_delta(0, name="ther", arguments='{"city": ')]}),
        chunk({"tool_calls": [tool_delta(0, arguments='"Paris"}')]}),
        chunk({}, finish_reason="tool_calls"),
    ],
    # LM Studio can put a fresh id, and an empty name, on every argument piece.
    "a fresh id on every argument piece": [
        chunk({"tool_calls": [tool_delta(0, call_id="c1", name="get_weather", arguments="")]}),
        chunk({"tool_calls": [tool_delta(0, call_id="c2", name="", arguments='{"city": ')]}),
        chunk({"tool_calls": [tool_delta(0, call_id="c3", name="", arguments='"Paris"}')]}),
        chunk({}, finish_reason="tool_calls"),
    ],
}


@pytest.mark.parametrize("shape", ODD_TOOL_CALL_STREAMS)
def test_an_oddly_streamed_tool_call_folds_into_the_non_streamed_answer(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver, shape: str
) -> None:
    server.enqueue(
        reply_sse(ODD_TOOL_CALL_STREAMS[shape]),
        reply_json(completion("", tool_calls=[PARIS_CALL], finish_reason="tool_calls")),
    )
    model = make_model()
    streamed = fold_chunks(calls.stream(model, QUESTION, tools=[get_weather]))
    whole = calls.generate(model, QUESTION, tools=[get_weather])
    assert (
        streamed.tool_calls
        == whole.tool_calls
        == [ToolCall("c1", "get_weather", {"city": "Paris"})]
    )
    assert streamed.finish_reason == whole.finish_reason == "tool_calls"


def test_arguments_sent_as_a_json_object_instead_of_a_string_are_accepted(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Rome"}},
    }
    server.enqueue(reply_json(completion(None, tool_calls=[call])))
    reply = calls.generate(make_model(), QUESTION, tools=[get_weather])
    assert reply.tool_calls == [ToolCall("c1", "get_weather", {"city": "Rome"})]


def test_double_encoded_arguments_are_decoded(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    twice = json.dumps(json.dumps({"city": "Rome"}))
    server.enqueue(reply_json(completion(None, tool_calls=[tool_call("c1", "get_weather", twice)])))
    reply = calls.generate(make_model(), QUESTION, tools=[get_weather])
    assert reply.tool_calls[0].arguments == {"city": "Rome"}


def test_malformed_arguments_in_the_history_are_sent_back_as_an_empty_object(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    bad = ToolCall("c1", "get_weather", {}, raw_arguments='{"city": ')
    history = [
        *QUESTION,
        AssistantMessage(tool_calls=[bad]),
        ToolResponseMessage(
            tool_call_id="c1", name="get_weather", content="bad JSON", is_error=True
        ),
    ]
    server.enqueue(reply_json(completion("Sorry.")))
    assert make_model().generate(history, tools=[get_weather]).text == "Sorry."
    assert server.bodies[-1]["messages"][1]["tool_calls"][0]["function"]["arguments"] == "{}"


def test_missing_total_tokens_are_computed(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    usage = {"prompt_tokens": 5, "completion_tokens": 2}
    server.enqueue(reply_json(completion("ok", usage=usage)))
    reply = make_model().generate(QUESTION)
    assert reply.usage is not None
    assert reply.usage.total_tokens == 7


@pytest.mark.parametrize("sse_type", ["text/event-stream; charset=utf-8", "text/event-stream"])
def test_an_event_stream_content_type_with_parameters_is_accepted(
    server: FakeOpenAIServer, make_model: ModelFactory, sse_type: str
) -> None:
    server.enqueue(
        reply_sse([chunk({"content": "ok"}, finish_reason="stop")], content_type=sse_type)
    )
    assert fold_chunks(make_model().stream(QUESTION)).text == "ok"
