"""What OpenAIChatModel makes of answers: plain JSON and SSE streams, through sync and async."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from graph_agent.messages import ToolCall, Usage, UserMessage
from graph_agent.models import ModelResponseError, OpenAIChatModel, fold_chunks
from graph_agent.tools import tool

from .conftest import Driver
from .openai_fake_server import (
    FakeOpenAIServer,
    chunk,
    completion,
    reply_json,
    reply_raw,
    reply_sse,
    split,
    tool_call,
    tool_delta,
)

ModelFactory = Callable[..., OpenAIChatModel]
QUESTION = [UserMessage("Weather in Rome and Oslo?")]
USAGE = {"prompt_tokens": 12, "completion_tokens": 8, "total_tokens": 20}


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"Sunny in {city}"


def interleaved_tool_call_stream() -> list[dict[str, object]]:
    """Text first, then two parallel calls whose argument pieces alternate, then usage."""
    rome = split(json.dumps({"city": "Rome"}), 3)
    oslo = split(json.dumps({"city": "Oslo"}), 2)
    events: list[dict[str, object]] = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Let me "}),
        chunk({"content": "check."}),
        chunk({"tool_calls": [tool_delta(0, call_id="c1", name="get_weather", arguments="")]}),
        chunk({"tool_calls": [tool_delta(1, call_id="c2", name="get_weather", arguments="")]}),
    ]
    for step in range(max(len(rome), len(oslo))):
        if step < len(rome):
            events.append(chunk({"tool_calls": [tool_delta(0, arguments=rome[step])]}))
        if step < len(oslo):
            events.append(chunk({"tool_calls": [tool_delta(1, arguments=oslo[step])]}))
    events.append(chunk({}, finish_reason="tool_calls"))
    events.append(chunk(no_choices=True, usage=USAGE))
    return events


def test_a_json_answer_becomes_an_assistant_message_with_usage(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_json(completion("Sunny.", usage=USAGE)))
    reply = calls.generate(make_model(), QUESTION)
    assert reply.text == "Sunny."
    assert reply.tool_calls == []
    assert reply.finish_reason == "stop"
    assert reply.usage == Usage(prompt_tokens=12, completion_tokens=8, total_tokens=20)
    assert reply.reasoning is None


def test_the_cached_reasoning_and_audio_tokens_in_the_usage_are_kept(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    usage = {
        **USAGE,
        "prompt_tokens_details": {"cached_tokens": 10, "audio_tokens": 1},
        "completion_tokens_details": {"reasoning_tokens": 5, "audio_tokens": 2},
    }
    server.enqueue(reply_json(completion("Sunny.", usage=usage)))
    reply = calls.generate(make_model(), QUESTION)
    assert reply.usage == Usage(
        prompt_tokens=12,
        completion_tokens=8,
        total_tokens=20,
        cache_read_tokens=10,
        prompt_audio_tokens=1,
        reasoning_tokens=5,
        completion_audio_tokens=2,
    )


def test_tool_calls_in_a_json_answer_are_decoded(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(
        reply_json(
            completion(
                None,
                tool_calls=[
                    tool_call("c1", "get_weather", {"city": "Rome"}),
                    tool_call("c2", "get_weather", {"city": "Oslo"}),
                ],
                finish_reason="tool_calls",
            )
        )
    )
    reply = calls.generate(make_model(), QUESTION, tools=[get_weather])
    assert reply.text == ""
    assert reply.finish_reason == "tool_calls"
    assert reply.tool_calls == [
        ToolCall("c1", "get_weather", {"city": "Rome"}),
        ToolCall("c2", "get_weather", {"city": "Oslo"}),
    ]


def test_malformed_tool_arguments_are_kept_raw_and_marked_not_raised(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    broken = '{"city": "Rome"'
    server.enqueue(
        reply_json(completion(None, tool_calls=[tool_call("c1", "get_weather", broken)]))
    )
    (call,) = calls.generate(make_model(), QUESTION, tools=[get_weather]).tool_calls
    assert call.arguments == {}
    assert call.raw_arguments == broken
    assert call.has_malformed_arguments


def test_reasoning_content_is_kept_apart_from_the_answer(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_json(completion("42", reasoning="6 times 7")))
    reply = calls.generate(make_model(), QUESTION)
    assert (reply.text, reply.reasoning) == ("42", "6 times 7")


def test_streamed_text_arrives_in_chunks_that_fold_into_the_answer(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(
        reply_sse(
            [chunk({"role": "assistant", "content": ""})]
            + [chunk({"content": piece}) for piece in ["Sun", "ny ", "in ", "Rome."]]
            + [chunk({}, finish_reason="stop"), chunk(no_choices=True, usage=USAGE)]
        )
    )
    chunks = calls.stream(make_model(), QUESTION)
    assert [c.text for c in chunks if c.text] == ["Sun", "ny ", "in ", "Rome."]
    reply = fold_chunks(chunks)
    assert reply.text == "Sunny in Rome."
    assert reply.finish_reason == "stop"
    assert reply.usage == Usage(**USAGE)


def test_tool_call_arguments_split_across_many_chunks_are_joined(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    arguments = json.dumps({"city": "Rio de Janeiro", "days": 3})
    pieces = split(arguments, 1)
    events = [chunk({"tool_calls": [tool_delta(0, call_id="c1", name="get_weather")]})]
    events += [chunk({"tool_calls": [tool_delta(0, arguments=piece)]}) for piece in pieces]
    events += [chunk({}, finish_reason="tool_calls")]
    server.enqueue(reply_sse(events))
    reply = fold_chunks(calls.stream(make_model(), QUESTION, tools=[get_weather]))
    assert reply.tool_calls == [
        ToolCall("c1", "get_weather", {"city": "Rio de Janeiro", "days": 3})
    ]


def test_two_parallel_tool_calls_interleaved_in_a_stream_are_kept_apart(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_sse(interleaved_tool_call_stream()))
    reply = fold_chunks(calls.stream(make_model(), QUESTION, tools=[get_weather]))
    assert reply.tool_calls == [
        ToolCall("c1", "get_weather", {"city": "Rome"}),
        ToolCall("c2", "get_weather", {"city": "Oslo"}),
    ]


def test_text_streamed_before_tool_calls_is_kept(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_sse(interleaved_tool_call_stream()))
    reply = fold_chunks(calls.stream(make_model(), QUESTION, tools=[get_weather]))
    assert reply.text == "Let me check."
    assert len(reply.tool_calls) == 2


def test_usage_from_the_final_chunk_without_choices_is_kept(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_sse(interleaved_tool_call_stream()))
    chunks = calls.stream(make_model(), QUESTION, tools=[get_weather])
    assert chunks[-1].usage == Usage(**USAGE)
    assert fold_chunks(chunks).usage == Usage(**USAGE)


def test_the_streamed_answer_equals_the_non_streamed_one(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    whole = completion(
        "Let me check.",
        tool_calls=[
            tool_call("c1", "get_weather", {"city": "Rome"}),
            tool_call("c2", "get_weather", {"city": "Oslo"}),
        ],
        finish_reason="tool_calls",
        usage=USAGE,
    )
    server.enqueue(reply_json(whole), reply_sse(interleaved_tool_call_stream()))
    model = make_model()
    generated = calls.generate(model, QUESTION, tools=[get_weather])
    streamed = fold_chunks(calls.stream(model, QUESTION, tools=[get_weather]))
    assert streamed.model_dump(exclude={"id"}) == generated.model_dump(exclude={"id"})


def test_all_chunks_of_one_stream_share_the_id_of_the_folded_message(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_sse(interleaved_tool_call_stream()))
    chunks = calls.stream(make_model(), QUESTION, tools=[get_weather])
    assert len({c.id for c in chunks}) == 1
    assert fold_chunks(chunks).id == chunks[0].id


def test_chunks_without_anything_new_are_not_yielded(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    events = [
        chunk({"role": "assistant"}),
        chunk({"content": "hi"}),
        chunk({}, finish_reason="stop"),
    ]
    server.enqueue(reply_sse(events))
    chunks = calls.stream(make_model(), QUESTION)
    assert [(c.text, c.finish_reason) for c in chunks] == [("hi", None), ("", "stop")]


def test_a_stream_request_answered_with_plain_json_still_yields_the_answer(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_json(completion("Plain answer.", usage=USAGE)))
    reply = fold_chunks(calls.stream(make_model(), QUESTION))
    assert (reply.text, reply.finish_reason, reply.usage) == (
        "Plain answer.",
        "stop",
        Usage(**USAGE),
    )


def test_reasoning_deltas_are_streamed_apart_from_the_text(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    events = [
        chunk({"reasoning_content": "6 times "}),
        chunk({"reasoning": "7"}),
        chunk({"content": "42"}),
        chunk({}, finish_reason="stop"),
    ]
    server.enqueue(reply_sse(events))
    chunks = calls.stream(make_model(), QUESTION)
    assert [c.reasoning for c in chunks[:2]] == ["6 times ", "7"]
    reply = fold_chunks(chunks)
    assert (reply.text, reply.reasoning) == ("42", "6 times 7")


def test_a_success_without_choices_is_a_response_error(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_json({"error": {"message": "model overloaded"}}))
    with pytest.raises(ModelResponseError, match="model overloaded"):
        calls.generate(make_model(), QUESTION)


def test_a_success_that_is_not_json_is_a_response_error(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_raw(200, b"<html>captive portal</html>", content_type="text/html"))
    with pytest.raises(ModelResponseError, match="not JSON"):
        calls.generate(make_model(), QUESTION)


def test_a_stream_answered_with_an_unexpected_content_type_is_a_response_error(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_raw(200, b"<html>captive portal</html>", content_type="text/html"))
    with pytest.raises(ModelResponseError, match="event stream"):
        calls.stream(make_model(), QUESTION)


def test_an_error_event_inside_a_stream_raises_instead_of_ending_quietly(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    events = [chunk({"content": "Hel"}), {"error": {"message": "upstream died"}}]
    server.enqueue(reply_sse(events))
    chunks, error = calls.stream_until_error(make_model(), QUESTION)
    assert [c.text for c in chunks] == ["Hel"]
    assert isinstance(error, ModelResponseError)
    assert "upstream died" in str(error)
    assert len(server.requests) == 1


def _choice(choice: dict[str, object]) -> dict[str, object]:
    return {"choices": [choice]}


WRONG_SHAPED_COMPLETIONS = {
    "message is a string": (
        _choice({"message": "hello", "finish_reason": "stop"}),
        "choices[0].message should be an object",
    ),
    "tool_calls is an object": (
        _choice({"message": {"tool_calls": {"id": "c1"}}}),
        "tool_calls should be a list",
    ),
    "tool_calls holds null": (
        _choice({"message": {"content": "", "tool_calls": [None]}}),
        "tool_calls[0] should be an object, got null",
    ),
    "function is a string": (
        _choice({"message": {"tool_calls": [{"id": "c1", "function": "get_weather"}]}}),
        "tool_calls[0].function should be an object",
    ),
    "a tool call's id is a number": (
        _choice({"message": {"tool_calls": [{"id": 7, "function": {"name": "get_weather"}}]}}),
        "tool_calls[0].id should be a string, got 7",
    ),
    "finish_reason is a number": (
        _choice({"message": {"content": "hi"}, "finish_reason": 1}),
        "choices[0].finish_reason should be a string, got 1",
    ),
}


@pytest.mark.parametrize("case", WRONG_SHAPED_COMPLETIONS)
def test_a_completion_of_the_wrong_shape_is_a_response_error_naming_the_field(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver, case: str
) -> None:
    body, problem = WRONG_SHAPED_COMPLETIONS[case]
    server.enqueue(reply_json(body))
    with pytest.raises(ModelResponseError) as caught:
        calls.generate(make_model(), QUESTION, [get_weather])
    assert problem in str(caught.value)
    assert "model 'fake-model' at http://127.0.0.1" in str(caught.value)
    assert "check that base_url" in str(caught.value)


WRONG_SHAPED_CHUNKS = {
    "choices is an object": ({"choices": {"delta": {}}}, "choices should be a list"),
    "a choice is a string": ({"choices": ["hi"]}, "choices[0] should be an object"),
    "delta is a list": ({"choices": [{"delta": ["x"]}]}, "choices[0].delta should be an object"),
    "a tool-call piece is a string": (
        chunk({"tool_calls": ["get_weather"]}),
        "tool_calls[0] should be an object",
    ),
    "function is a string": (
        chunk({"tool_calls": [{"index": 0, "function": "get_weather"}]}),
        "tool_calls[0].function should be an object",
    ),
    "a function name is a list": (
        chunk({"tool_calls": [{"index": 0, "function": {"name": ["get_weather"]}}]}),
        "tool_calls[0].function.name should be a string",
    ),
    "finish_reason is a number": (
        chunk({"content": "hi"}, finish_reason=1),  # type: ignore[arg-type]
        "choices[0].finish_reason should be a string, got 1",
    ),
}


@pytest.mark.parametrize("case", WRONG_SHAPED_CHUNKS)
def test_a_stream_chunk_of_the_wrong_shape_is_a_response_error_naming_the_field(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver, case: str
) -> None:
    event, problem = WRONG_SHAPED_CHUNKS[case]
    server.enqueue(reply_sse([event]))
    chunks, error = calls.stream_until_error(make_model(), QUESTION, [get_weather])
    assert chunks == []
    assert isinstance(error, ModelResponseError)
    assert problem in str(error)
    assert "model 'fake-model' at http://127.0.0.1" in str(error)
    assert len(server.requests) == 1


def test_an_emoji_streamed_as_two_escaped_halves_arrives_whole(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(
        reply_sse(
            [
                chunk({"content": "smile \ud83d"}),  # sent as the JSON escape "\ud83d"
                chunk({"content": "\ude00"}),
                chunk({}, finish_reason="stop"),
            ]
        )
    )

    chunks = calls.stream(make_model(), QUESTION)

    assert fold_chunks(chunks).text == "smile \U0001f600"
