"""Folding streamed chunks into the final AssistantMessage (graph_agent.models.base)."""

from __future__ import annotations

import pytest

from graph_agent.messages import (
    AssistantMessage,
    AssistantMessageChunk,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from graph_agent.models import (
    ChunkAccumulator,
    fold_chunks,
    message_to_chunks,
    parse_tool_arguments,
)


def deltas(*pieces: ToolCallDelta) -> AssistantMessageChunk:
    return AssistantMessageChunk(tool_call_deltas=list(pieces))


def test_folding_text_chunks_joins_their_text() -> None:
    reply = fold_chunks([AssistantMessageChunk("Hel"), AssistantMessageChunk("lo!")])
    assert reply.text == "Hello!"
    assert reply.tool_calls == []


def test_folding_no_chunks_gives_an_empty_message() -> None:
    reply = fold_chunks([])
    assert (reply.text, reply.tool_calls, reply.finish_reason, reply.usage) == ("", [], None, None)


def test_tool_call_arguments_split_over_chunks_are_concatenated() -> None:
    reply = fold_chunks(
        [
            deltas(ToolCallDelta(index=0, id="c1", name="add", arguments='{"a"')),
            deltas(ToolCallDelta(index=0, arguments=": 1, ")),
            deltas(ToolCallDelta(index=0, arguments='"b": 2}')),
        ]
    )
    assert reply.tool_calls == [ToolCall("c1", "add", {"a": 1, "b": 2})]


def test_an_id_and_name_repeated_on_every_piece_are_taken_once() -> None:
    reply = fold_chunks(
        [
            deltas(ToolCallDelta(index=0, id="c1", name="get_weather", arguments='{"city"')),
            deltas(ToolCallDelta(index=0, id="c1", name="get_weather", arguments=': "Rome"}')),
        ]
    )
    assert reply.tool_calls == [ToolCall("c1", "get_weather", {"city": "Rome"})]


def test_interleaved_pieces_of_parallel_calls_are_kept_apart_by_index() -> None:
    reply = fold_chunks(
        [
            deltas(ToolCallDelta(index=0, id="c1", name="f")),
            deltas(ToolCallDelta(index=1, id="c2", name="g")),
            deltas(ToolCallDelta(index=1, arguments='{"y":')),
            deltas(ToolCallDelta(index=0, arguments='{"x":')),
            deltas(
                ToolCallDelta(index=0, arguments=" 1}"), ToolCallDelta(index=1, arguments=" 2}")
            ),
        ]
    )
    assert reply.tool_calls == [ToolCall("c1", "f", {"x": 1}), ToolCall("c2", "g", {"y": 2})]


def test_a_new_id_at_an_index_already_used_starts_another_call() -> None:
    reply = fold_chunks(
        [
            deltas(ToolCallDelta(index=0, id="a", name="f", arguments="{}")),
            deltas(ToolCallDelta(index=0, id="b", name="f", arguments='{"n": 2}')),
        ]
    )
    assert [call.id for call in reply.tool_calls] == ["a", "b"]


def test_a_name_split_over_pieces_is_joined() -> None:
    reply = fold_chunks(
        [
            deltas(ToolCallDelta(index=0, id="c1", name="get_wea")),
            deltas(ToolCallDelta(index=0, name="ther", arguments='{"city": ')),
            deltas(ToolCallDelta(index=0, arguments='"Paris"}')),
        ]
    )
    assert reply.tool_calls == [ToolCall("c1", "get_weather", {"city": "Paris"})]


def test_a_name_sent_whole_so_far_on_each_piece_is_replaced_not_appended() -> None:
    reply = fold_chunks(
        [
            deltas(ToolCallDelta(index=0, id="c1", name="get")),
            deltas(ToolCallDelta(index=0, name="get_weather", arguments="{}")),
        ]
    )
    assert reply.tool_calls == [ToolCall("c1", "get_weather", {})]


def test_a_fresh_id_on_every_nameless_argument_piece_stays_one_call() -> None:
    reply = fold_chunks(
        [
            deltas(ToolCallDelta(index=0, id="c1", name="get_weather")),
            deltas(ToolCallDelta(index=0, id="c2", arguments='{"city": ')),
            deltas(ToolCallDelta(index=0, id="c3", arguments='"Paris"}')),
        ]
    )
    assert reply.tool_calls == [ToolCall("c1", "get_weather", {"city": "Paris"})]


def test_text_before_tool_calls_is_kept() -> None:
    reply = fold_chunks(
        [
            AssistantMessageChunk("Checking. "),
            deltas(ToolCallDelta(index=0, id="c1", name="f", arguments="{}")),
            AssistantMessageChunk(finish_reason="tool_calls"),
        ]
    )
    assert (reply.text, len(reply.tool_calls), reply.finish_reason) == (
        "Checking. ",
        1,
        "tool_calls",
    )


def test_the_last_usage_and_finish_reason_sent_win() -> None:
    first, last = Usage(total_tokens=1), Usage(prompt_tokens=3, completion_tokens=4, total_tokens=7)
    reply = fold_chunks(
        [
            AssistantMessageChunk("a", usage=first, finish_reason="length"),
            AssistantMessageChunk(usage=last, finish_reason="stop"),
        ]
    )
    assert (reply.usage, reply.finish_reason) == (last, "stop")


def test_malformed_streamed_arguments_are_kept_raw_and_marked() -> None:
    reply = fold_chunks([deltas(ToolCallDelta(index=0, id="c1", name="f", arguments='{"x": '))])
    (call,) = reply.tool_calls
    assert (call.arguments, call.raw_arguments, call.has_malformed_arguments) == (
        {},
        '{"x": ',
        True,
    )


def test_the_folded_message_takes_the_id_of_its_chunks() -> None:
    reply = fold_chunks([AssistantMessageChunk("a", id="m1"), AssistantMessageChunk("b", id="m1")])
    assert reply.id == "m1"


def test_an_accumulator_shows_the_answer_so_far() -> None:
    accumulator = ChunkAccumulator()
    accumulator.add(AssistantMessageChunk("Hel"))
    assert accumulator.message().text == "Hel"
    accumulator.add(AssistantMessageChunk("lo", finish_reason="stop"))
    assert (accumulator.message().text, accumulator.finish_reason) == ("Hello", "stop")


MESSAGES = {
    "text": AssistantMessage("Sunny in Rome, 21 degrees.", finish_reason="stop"),
    "empty": AssistantMessage(),
    "tools and text": AssistantMessage(
        "Let me check.",
        tool_calls=[ToolCall("c1", "f", {"x": [1, 2]}), ToolCall("c2", "g", {"s": "ü"})],
        finish_reason="tool_calls",
        usage=Usage(prompt_tokens=1, completion_tokens=2, total_tokens=3),
    ),
    "reasoning": AssistantMessage("42", reasoning="6 x 7", finish_reason="stop"),
    "malformed call": AssistantMessage(tool_calls=[ToolCall("c1", "f", {}, raw_arguments="{oops")]),
    "whitespace": AssistantMessage("  two  spaces\n\nand lines  "),
}


@pytest.mark.parametrize("name", MESSAGES)
def test_folding_the_chunks_of_a_message_gives_the_message_back(name: str) -> None:
    message = MESSAGES[name]
    assert fold_chunks(message_to_chunks(message)) == message


def test_chunks_of_a_message_carry_its_id_and_its_text_word_by_word() -> None:
    message = AssistantMessage("one two three")
    chunks = list(message_to_chunks(message))
    assert {chunk.id for chunk in chunks} == {message.id}
    assert [chunk.text for chunk in chunks] == ["one ", "two ", "three", ""]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a": 1}', ({"a": 1}, None)),
        ("", ({}, None)),
        ("  ", ({}, None)),
        (None, ({}, None)),
        ("null", ({}, None)),
        ({"a": 1}, ({"a": 1}, None)),
        ('"{\\"a\\": 1}"', ({"a": 1}, None)),
        ('{"a": ', ({}, '{"a": ')),
        ("[1, 2]", ({}, "[1, 2]")),
        ('"just text"', ({}, '"just text"')),
    ],
)
def test_tool_arguments_decode_or_stay_raw(raw: object, expected: object) -> None:
    assert parse_tool_arguments(raw) == expected  # type: ignore[arg-type]


def test_an_emoji_split_into_two_surrogate_halves_across_chunks_is_joined():
    halves = [AssistantMessageChunk("smile \ud83d"), AssistantMessageChunk("\ude00!")]
    assert fold_chunks(halves).text == "smile \U0001f600!"


def test_split_surrogate_pairs_are_joined_in_reasoning_and_tool_arguments_too():
    from graph_agent.messages import ToolCallDelta

    chunks = [
        AssistantMessageChunk(reasoning="think \ud83e"),
        AssistantMessageChunk(reasoning="\udd14"),
        AssistantMessageChunk(
            tool_call_deltas=[
                ToolCallDelta(index=0, id="c1", name="say", arguments='{"t": "\ud83d')
            ]
        ),
        AssistantMessageChunk(tool_call_deltas=[ToolCallDelta(index=0, arguments='\ude00"}')]),
    ]
    message = fold_chunks(chunks)
    assert message.reasoning == "think \U0001f914"
    assert message.tool_calls[0].arguments == {"t": "\U0001f600"}


def test_a_lone_surrogate_half_is_kept_as_sent():
    assert fold_chunks([AssistantMessageChunk("cut \ud83d")]).text == "cut \ud83d"
