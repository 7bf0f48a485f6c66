"""AnthropicChatModel against a real local HTTP server speaking the Messages API: requests,
answers, tool use, streaming (text, tool input JSON, thinking), thinking blocks sent back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from graph_agent import tool
from graph_agent.messages import (
    AssistantMessage,
    SystemMessage,
    ThinkingBlock,
    ToolCall,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from graph_agent.models import AnthropicChatModel, fold_chunks

from .anthropic_fake_server import (
    API_KEY,
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

HI = [SystemMessage("Be brief."), UserMessage("What is 2 + 2?")]


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def whole_or_streamed(whole: dict[str, Any]) -> Any:
    """The same answer as one JSON message, or streamed when the request asks for a stream."""

    def choose(request: RecordedRequest) -> Any:
        if request.body.get("stream"):
            return reply_events(message_events(whole))
        return reply_json(whole)

    return dynamic(choose)


def test_a_plain_answer_comes_back_with_its_usage_and_finish_reason(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver
) -> None:
    usage = {
        "input_tokens": 12,
        "cache_read_input_tokens": 8,
        "cache_creation_input_tokens": 5,
        "output_tokens": 3,
    }
    anthropic.enqueue(reply_json(message(text("4"), usage=usage)))
    reply = calls.generate(make_anthropic(), HI)

    assert reply.text == "4"
    assert reply.finish_reason == "stop"
    assert reply.usage == Usage(
        prompt_tokens=25,  # the input tokens, cache reads and writes included
        completion_tokens=3,
        total_tokens=28,
        cache_read_tokens=8,
        cache_creation_tokens=5,
    )
    assert reply.tool_calls == [] and reply.thinking_blocks == [] and reply.reasoning is None


def test_the_request_goes_to_v1_messages_with_the_key_version_and_a_top_level_system(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver
) -> None:
    anthropic.enqueue(reply_json(message(text("4"))))
    calls.generate(make_anthropic(max_tokens=300, options={"temperature": 0}), HI)

    (request,) = anthropic.requests
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == API_KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "Authorization" not in request.headers
    assert request.body == {
        "model": "claude-test",
        "max_tokens": 300,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "What is 2 + 2?"}],
        "temperature": 0,
    }


@pytest.mark.parametrize(
    ("root", "path"),
    [("", "/v1/messages"), ("/v1", "/v1/messages"), ("/proxy/v1/messages", "/proxy/v1/messages")],
)
def test_the_endpoint_follows_the_base_url_with_or_without_v1(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, root: str, path: str
) -> None:
    anthropic.enqueue(reply_json(message(text("4"))))
    make_anthropic(base_url=anthropic.base_url + root).generate(HI)
    assert anthropic.requests[0].path == path


def test_a_tool_call_comes_back_with_its_id_and_arguments_and_tools_go_as_input_schema(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver
) -> None:
    anthropic.enqueue(
        reply_json(
            message(
                text("Adding."),
                tool_use("toolu_1", "add", {"a": 2, "b": 2}),
                stop_reason="tool_use",
            )
        )
    )
    reply = calls.generate(make_anthropic(), HI, tools=[add], options={"tool_choice": "required"})

    assert reply.text == "Adding."
    assert reply.tool_calls == [ToolCall("toolu_1", "add", {"a": 2, "b": 2})]
    assert reply.finish_reason == "tool_calls"
    body = anthropic.bodies[0]
    assert body["tools"] == [
        {"name": "add", "description": add.description, "input_schema": add.parameters}
    ]
    assert body["tool_choice"] == {"type": "any"}


@pytest.mark.parametrize(
    ("options", "wire"),
    [
        ({"tool_choice": "auto"}, {"type": "auto"}),
        ({"tool_choice": "none"}, {"type": "none"}),
        ({"tool_choice": "add"}, {"type": "tool", "name": "add"}),
        ({"parallel_tool_calls": False}, {"type": "auto", "disable_parallel_tool_use": True}),
        ({"tool_choice": "none", "parallel_tool_calls": False}, {"type": "none"}),
    ],
)
def test_tool_choice_is_sent_in_the_messages_api_form(
    anthropic: FakeAnthropicServer,
    make_anthropic: AnthropicFactory,
    options: dict[str, Any],
    wire: dict[str, Any],
) -> None:
    anthropic.enqueue(reply_json(message(text("ok"))))
    make_anthropic().generate(HI, tools=[add], options=options)
    assert anthropic.bodies[0]["tool_choice"] == wire


def test_consecutive_tool_results_go_as_one_user_turn_of_tool_result_blocks(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    anthropic.enqueue(reply_json(message(text("3 and 7."))))
    conversation = [
        UserMessage("Add 1+2 and 3+4."),
        AssistantMessage(
            tool_calls=[ToolCall("toolu_1", "add", {"a": 1, "b": 2}), ToolCall("toolu_2", "add")]
        ),
        ToolResponseMessage(tool_call_id="toolu_1", name="add", content="3"),
        ToolResponseMessage(tool_call_id="toolu_2", name="add", content="bad", is_error=True),
        UserMessage("Quickly, please."),
    ]
    reply = make_anthropic().generate(conversation, tools=[add])

    assert reply.text == "3 and 7."  # the strict server accepted the turns
    assert anthropic.bodies[0]["messages"] == [
        {"role": "user", "content": "Add 1+2 and 3+4."},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1, "b": 2}},
                {"type": "tool_use", "id": "toolu_2", "name": "add", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "3"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "bad",
                    "is_error": True,
                },
                {"type": "text", "text": "Quickly, please."},
            ],
        },
    ]


def test_a_call_without_tools_after_tool_use_names_the_called_tools_and_forbids_them(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    anthropic.enqueue(reply_json(message(text("In short: 3."))))
    conversation = [
        UserMessage("Add 1+2."),
        AssistantMessage(tool_calls=[ToolCall("toolu_1", "add", {"a": 1, "b": 2})]),
        ToolResponseMessage(tool_call_id="toolu_1", name="add", content="3"),
        UserMessage("Sum it up."),
    ]
    reply = make_anthropic().generate(conversation)  # no tools: a summarising last call

    assert reply.text == "In short: 3."  # the strict server wants tools with tool blocks
    body = anthropic.bodies[0]
    assert body["tools"] == [{"name": "add", "input_schema": {"type": "object"}}]
    assert body["tool_choice"] == {"type": "none"}


def test_streamed_text_arrives_in_pieces_and_folds_into_the_whole_answer(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver
) -> None:
    whole = message(text("Two plus two is four."), usage={"input_tokens": 9, "output_tokens": 6})
    anthropic.enqueue(reply_events(message_events(whole)), reply_json(whole))
    model = make_anthropic()
    chunks = calls.stream(model, HI)
    generated = calls.generate(model, HI)

    assert [c.text for c in chunks if c.text] == ["Two ", "plus", " two", " is ", "four", "."]
    assert len({c.id for c in chunks}) == 1
    assert chunks[-1].finish_reason == "stop" and chunks[-1].usage == generated.usage
    assert fold_chunks(chunks).model_dump(exclude={"id"}) == generated.model_dump(exclude={"id"})
    assert anthropic.bodies[0]["stream"] is True and "stream" not in anthropic.bodies[1]


def test_streamed_tool_input_json_deltas_build_the_tool_call(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver
) -> None:
    whole = message(
        text("Adding."),
        tool_use("toolu_1", "add", {"a": 20, "b": 22}),
        tool_use("toolu_2", "add", {"a": 1, "b": 1}),
        stop_reason="tool_use",
    )
    anthropic.enqueue(reply_events(message_events(whole, piece=3)))
    chunks = calls.stream(make_anthropic(), HI, tools=[add])

    deltas = [d for c in chunks for d in c.tool_call_deltas]
    assert [(d.index, d.id, d.name) for d in deltas if d.id] == [
        (0, "toolu_1", "add"),
        (1, "toolu_2", "add"),
    ]
    assert len([d for d in deltas if d.index == 0 and d.arguments]) > 2  # JSON in pieces
    reply = fold_chunks(chunks)
    assert reply.tool_calls == [
        ToolCall("toolu_1", "add", {"a": 20, "b": 22}),
        ToolCall("toolu_2", "add", {"a": 1, "b": 1}),
    ]
    assert reply.finish_reason == "tool_calls"


def test_streamed_thinking_arrives_as_reasoning_and_the_signed_block_comes_whole(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver
) -> None:
    whole = message(
        thinking("Two and two make four.", "sig-A"),
        thinking("Say it briefly.", "sig-B"),
        text("4"),
    )
    anthropic.enqueue(reply_events(message_events(whole)), reply_json(whole))
    model = make_anthropic(thinking=1024, max_tokens=2048)
    chunks = calls.stream(model, HI)
    generated = calls.generate(model, HI)

    reasoning = [c.reasoning for c in chunks if c.reasoning]
    assert len(reasoning) > 2
    blocks = [b for c in chunks for b in c.thinking_blocks]
    assert blocks == [
        ThinkingBlock(thinking="Two and two make four.", signature="sig-A"),
        ThinkingBlock(thinking="Say it briefly.", signature="sig-B"),
    ]
    folded = fold_chunks(chunks)
    assert folded.reasoning == "Two and two make four.\n\nSay it briefly."
    assert folded.model_dump(exclude={"id"}) == generated.model_dump(exclude={"id"})
    assert anthropic.bodies[0]["thinking"] == {"type": "enabled", "budget_tokens": 1024}


def test_thinking_blocks_are_sent_back_unchanged_before_the_tool_use(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver
) -> None:
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}
    asks = message(
        thinking("I should add.", "sig-1"),
        redacted,
        tool_use("toolu_1", "add", {"a": 2, "b": 2}),
        stop_reason="tool_use",
    )
    anthropic.enqueue(reply_json(asks), reply_json(message(text("4"))))
    model = make_anthropic(thinking={"type": "enabled", "budget_tokens": 1500})
    first = calls.generate(model, HI, tools=[add])
    assert first.thinking_blocks == [
        ThinkingBlock(thinking="I should add.", signature="sig-1"),
        ThinkingBlock(type="redacted_thinking", data="EmwKAhgBEgy3va3pzix"),
    ]
    result = ToolResponseMessage(tool_call_id="toolu_1", name="add", content="4")
    second = calls.generate(model, [*HI, first, result], tools=[add])

    assert second.text == "4"  # the strict server found the thinking blocks in place
    assert anthropic.bodies[1]["messages"][1]["content"] == asks["content"]


def test_a_stream_that_sends_the_whole_input_at_the_start_still_gives_the_arguments(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    events = [
        {"type": "message_start", "message": message(usage={"input_tokens": 3})},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": tool_use("toolu_9", "add", {"a": 1, "b": 2}),
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 4},
        },
        {"type": "message_stop"},
    ]
    anthropic.enqueue(reply_events(events))
    reply = fold_chunks(make_anthropic().stream(HI, tools=[add]))
    assert reply.tool_calls == [ToolCall("toolu_9", "add", {"a": 1, "b": 2})]
    assert reply.usage == Usage(prompt_tokens=3, completion_tokens=4, total_tokens=7)


def test_the_key_comes_from_the_environment_only_for_the_default_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env-0000")
    assert AnthropicChatModel("m")._api_key.get_secret_value() == "sk-ant-from-env-0000"
    other = AnthropicChatModel("m", base_url="http://127.0.0.1:9")
    assert other._api_key.get_secret_value() == ""
    assert repr(other) == "AnthropicChatModel(model='m', base_url='http://127.0.0.1:9')"


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"thinking": 4096, "max_tokens": 4096}, "below max_tokens=4096"),
        ({"thinking": "high"}, "thinking must be a token budget"),
        ({"max_tokens": 0}, "max_tokens must be"),
        ({"base_url": "api.anthropic.com"}, "must start with http:// or https://"),
    ],
)
def test_bad_settings_are_refused_with_a_clear_error(
    arguments: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ValueError, match=fragment):
        AnthropicChatModel("m", api_key="k", **arguments)


def test_options_the_messages_api_has_no_place_for_are_refused_before_sending(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    model = make_anthropic()
    with pytest.raises(ValueError, match="response_format must be a pydantic model class"):
        model.generate(HI, options={"response_format": "json"})
    with pytest.raises(ValueError, match="SystemMessage"):
        model.generate(HI, options={"system": "x"})
    assert anthropic.requests == []


def test_stop_becomes_stop_sequences_and_a_call_can_change_max_tokens_and_thinking(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    anthropic.enqueue(reply_json(message(text("ok"))))
    make_anthropic(thinking=1024, max_tokens=2048).generate(
        HI, options={"stop": "END", "max_tokens": 99, "thinking": None}
    )
    body = anthropic.bodies[0]
    assert body["stop_sequences"] == ["END"] and body["max_tokens"] == 99
    assert "thinking" not in body


def test_thinking_blocks_round_trip_through_a_checkpoint() -> None:
    from graph_agent.checkpoint import serde

    reply = AssistantMessage(
        tool_calls=[ToolCall("toolu_1", "add", {"a": 1})],
        reasoning="Add them.",
        thinking_blocks=[
            ThinkingBlock(thinking="Add them.", signature="sig"),
            ThinkingBlock(type="redacted_thinking", data="opaque"),
        ],
    )
    loaded = serde.loads(serde.dumps({"messages": [reply]}))
    assert loaded == {"messages": [reply]}
    assert loaded["messages"][0].thinking_blocks[1].data == "opaque"
    assert json.loads(reply.model_dump_json())["thinking_blocks"][0]["signature"] == "sig"


def test_image_and_document_parts_reach_the_server_as_messages_api_blocks(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver
) -> None:
    from graph_agent.messages import FilePart, ImagePart, TextPart
    from tests.media import PDF, PNG

    anthropic.enqueue(reply_json(message(text("A chart and a report."))))
    question = UserMessage(
        [
            TextPart("What are these?"),
            ImagePart(data=PNG, media_type="image/png"),
            ImagePart(url="https://example.org/chart.png"),
            FilePart(data=PDF, media_type="application/pdf", filename="report.pdf"),
        ]
    )
    reply = calls.generate(make_anthropic(), [question])

    assert reply.text == "A chart and a report."
    assert anthropic.bodies[0]["messages"][0]["content"] == [
        {"type": "text", "text": "What are these?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "image", "source": {"type": "url", "url": "https://example.org/chart.png"}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
            "title": "report.pdf",
        },
    ]


def test_an_audio_part_is_refused_before_sending_as_the_api_takes_none(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    from graph_agent.messages import AudioPart
    from tests.media import WAV

    with pytest.raises(ValueError, match="takes no audio content"):
        make_anthropic().generate([UserMessage([AudioPart(data=WAV, media_type="audio/wav")])])
    assert anthropic.requests == []
