"""An assistant message holding images (a ``return_direct`` tool's chart) in the history of an
AnthropicChatModel call: the API takes images in user turns only, so the assistant turn goes as
text with placeholders and the images follow in the next user turn, after any tool results."""

from __future__ import annotations

import httpx

from graph_agent.messages import (
    AssistantMessage,
    AudioPart,
    FilePart,
    ImagePart,
    TextPart,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from tests.media import PDF, PNG, WAV

from .anthropic_fake_server import FakeAnthropicServer, message, text
from .conftest import AnthropicFactory, Driver
from .openai_fake_server import reply_json

CHART = ImagePart(data=PNG, media_type="image/png")
CHART_ON_THE_WIRE = {
    "type": "image",
    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
}
LEAD = {"type": "text", "text": "Your previous answer holds:"}


def test_a_thread_whose_answer_holds_an_image_continues_with_the_image_in_the_user_turn(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver
) -> None:
    anthropic.enqueue(reply_json(message(text("An upward trend."))))
    history = [
        UserMessage("Chart the sales."),
        AssistantMessage([TextPart("Your chart:"), CHART], finish_reason="return_direct"),
        UserMessage("What does it show?"),
    ]
    reply = calls.generate(make_anthropic(), history)

    assert reply.text == "An upward trend."
    assert anthropic.bodies[0]["messages"] == [
        {"role": "user", "content": "Chart the sales."},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Your chart: [image: image/png, 12 KB]"}],
        },
        {
            "role": "user",
            "content": [LEAD, CHART_ON_THE_WIRE, {"type": "text", "text": "What does it show?"}],
        },
    ]


def test_the_images_of_an_answer_that_called_tools_follow_its_tool_results(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    anthropic.enqueue(reply_json(message(text("Done."))))
    report = FilePart(data=PDF, media_type="application/pdf", filename="q3.pdf")
    history = [
        UserMessage("Chart it and save it."),
        AssistantMessage([CHART, report], tool_calls=[ToolCall("toolu_1", "save", {})]),
        ToolResponseMessage(tool_call_id="toolu_1", name="save", content="saved"),
    ]
    make_anthropic().generate(history, tools=[save])

    turns = anthropic.bodies[0]["messages"]
    assert turns[1]["content"][0] == {
        "type": "text",
        "text": "[image: image/png, 12 KB] [file: q3.pdf, application/pdf, 13 B]",
    }
    assert [block["type"] for block in turns[2]["content"]] == [
        "tool_result",
        "text",
        "image",
        "document",
    ]
    assert turns[2]["content"][1:3] == [LEAD, CHART_ON_THE_WIRE]


def test_audio_in_an_answer_stays_a_placeholder_as_the_api_takes_no_audio(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    anthropic.enqueue(reply_json(message(text("ok"))))
    history = [
        UserMessage("Say it."),
        AssistantMessage([TextPart("Here:"), AudioPart(WAV, "audio/wav")]),
        UserMessage("Thanks"),
    ]
    make_anthropic().generate(history)

    turns = anthropic.bodies[0]["messages"]
    assert turns[1]["content"] == [{"type": "text", "text": "Here: [audio: audio/wav, 104 B]"}]
    assert turns[2] == {"role": "user", "content": "Thanks"}


def test_an_answer_of_text_parts_goes_as_one_text_block(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    anthropic.enqueue(reply_json(message(text("ok"))))
    history = [
        UserMessage("hi"),
        AssistantMessage([TextPart("Hel"), TextPart("lo")]),
        UserMessage("?"),
    ]
    make_anthropic().generate(history)
    assert anthropic.bodies[0]["messages"][1]["content"] == [{"type": "text", "text": "Hello"}]


def test_the_local_server_refuses_an_image_in_an_assistant_turn_as_the_api_does(
    anthropic: FakeAnthropicServer,
) -> None:
    body = {
        "model": "claude-test",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "Chart."},
            {"role": "assistant", "content": [CHART_ON_THE_WIRE]},
            {"role": "user", "content": "What is it?"},
        ],
    }
    refused = httpx.post(f"{anthropic.base_url}/v1/messages", json=body, timeout=5)
    assert refused.status_code == 400
    assert "'image' blocks are not permitted within assistant turns" in refused.text


def save() -> str:
    """Save the chart."""
    return "saved"


def test_an_image_an_earlier_tool_result_showed_is_not_sent_twice(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    anthropic.enqueue(reply_json(message(text("A rise."))))
    history = [
        UserMessage("Chart the sales."),
        AssistantMessage(tool_calls=[ToolCall("toolu_1", "save", {})]),
        ToolResponseMessage(tool_call_id="toolu_1", name="save", content=[CHART]),
        AssistantMessage([CHART], finish_reason="return_direct"),
        UserMessage("What does it show?"),
    ]
    make_anthropic().generate(history, tools=[save])

    turns = anthropic.bodies[0]["messages"]
    assert turns[2]["content"][0]["content"] == [CHART_ON_THE_WIRE]
    assert turns[3]["content"] == [{"type": "text", "text": "[image: image/png, 12 KB]"}]
    assert turns[4] == {"role": "user", "content": "What does it show?"}
