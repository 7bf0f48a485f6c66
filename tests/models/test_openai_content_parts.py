"""Images, audio and files reach an OpenAI-compatible server exactly in the OpenAI chat shape,
streamed and not, through the sync and the async client."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

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
from graph_agent.models import OpenAIChatModel
from graph_agent.models.errors import ModelBadRequestError
from tests.media import PDF, PNG, WAV

from .conftest import Driver
from .openai_fake_server import FakeOpenAIServer, chunk, completion, reply_json, reply_sse

ModelFactory = Callable[..., OpenAIChatModel]

QUESTION = UserMessage(
    [
        TextPart("What is in these?"),
        ImagePart(data=PNG, media_type="image/png"),
        ImagePart(url="https://example.com/cat.jpg", detail="low"),
    ]
)
QUESTION_ON_THE_WIRE = {
    "role": "user",
    "content": [
        {"type": "text", "text": "What is in these?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg", "detail": "low"}},
    ],
}


def test_an_image_part_is_sent_as_an_openai_image_url_part(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_json(completion("A cat.")))
    answer = calls.generate(make_model(), [QUESTION])
    assert answer.text == "A cat."
    assert server.bodies[-1]["messages"] == [QUESTION_ON_THE_WIRE]


def test_a_streamed_call_sends_the_image_part_in_the_same_shape(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(
        reply_sse([chunk({"role": "assistant", "content": "A cat."}), chunk(finish_reason="stop")])
    )
    chunks = calls.stream(make_model(), [QUESTION])
    assert "".join(c.text for c in chunks) == "A cat."
    body = server.bodies[-1]
    assert body["stream"] is True
    assert body["messages"] == [QUESTION_ON_THE_WIRE]


def test_audio_and_file_parts_are_sent_as_input_audio_and_file_parts(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.enqueue(reply_json(completion("ok")))
    message = UserMessage(
        [
            AudioPart(WAV, "audio/wav"),
            AudioPart(WAV, "audio/mpeg"),
            FilePart(data=PDF, media_type="application/pdf", filename="report.pdf"),
            FilePart(file_id="file-abc123"),
        ]
    )
    make_model().generate([message])
    assert server.bodies[-1]["messages"][0]["content"] == [
        {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}},
        {"type": "input_audio", "input_audio": {"data": WAV, "format": "mp3"}},
        {
            "type": "file",
            "file": {"file_data": f"data:application/pdf;base64,{PDF}", "filename": "report.pdf"},
        },
        {"type": "file", "file": {"file_id": "file-abc123"}},
    ]


def test_a_tool_result_with_an_image_goes_as_text_and_the_image_follows_in_a_user_message(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.enqueue(reply_json(completion("It shows a login page.")))
    calls = [ToolCall("c1", "screenshot", {}), ToolCall("c2", "title", {})]
    history = [
        UserMessage("What is on the screen?"),
        AssistantMessage(tool_calls=calls),
        ToolResponseMessage(
            tool_call_id="c1",
            name="screenshot",
            content=[TextPart("Taken."), ImagePart(data=PNG, media_type="image/png")],
        ),
        ToolResponseMessage(tool_call_id="c2", name="title", content="Login"),
    ]
    make_model().generate(history)
    wire = server.bodies[-1]["messages"]
    assert [m["role"] for m in wire] == ["user", "assistant", "tool", "tool", "user"]
    assert wire[2] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "Taken. [image: image/png, 12 KB]",
    }
    assert wire[4] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "The result of tool call c1 (screenshot) holds:"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        ],
    }


def test_an_assistant_message_with_an_image_goes_as_text_and_the_image_follows_for_the_user(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    # OpenAI takes only text (and refusal) parts in assistant messages; the server refuses more
    server.enqueue(reply_json(completion("ok")))
    earlier = AssistantMessage([TextPart("Here it is."), ImagePart(url="https://x.test/a.png")])
    calls.generate(make_model(), [UserMessage("Draw"), earlier, UserMessage("Thanks")])
    assert server.bodies[-1]["messages"][1:] == [
        {"role": "assistant", "content": "Here it is. [image: https://x.test/a.png]"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Your previous answer holds:"},
                {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
            ],
        },
        {"role": "user", "content": "Thanks"},
    ]


def test_an_image_an_earlier_message_showed_is_not_sent_twice(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.enqueue(reply_json(completion("ok")))
    picture = ImagePart(url="https://x.test/a.png")
    history = [
        UserMessage([TextPart("Redraw this"), picture]),
        AssistantMessage([picture]),
        UserMessage("Thanks"),
    ]
    make_model().generate(history)
    assert server.bodies[-1]["messages"][1:] == [
        {"role": "assistant", "content": "[image: https://x.test/a.png]"},
        {"role": "user", "content": "Thanks"},
    ]


def test_the_local_server_refuses_an_image_in_an_assistant_message_as_openai_does(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    picture = {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}
    body = {"model": "m", "messages": [{"role": "assistant", "content": [picture]}]}
    rejection = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=5)
    assert rejection.status_code == 400
    assert "Image URLs are only allowed for messages with role 'user'" in rejection.text


def test_a_file_by_url_is_refused_before_anything_is_sent(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    message = UserMessage([FilePart(url="https://x.test/a.pdf", media_type="application/pdf")])
    with pytest.raises(ModelBadRequestError, match=r"FilePart\(data=\.\.\., media_type=\.\.\.\)"):
        make_model().generate([message])
    assert server.requests == []
