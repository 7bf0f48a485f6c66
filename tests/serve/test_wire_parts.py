"""Content parts on the server's wire: a client's content blocks (OpenAI shapes, LangChain's
standard and 0.3 blocks) become parts, and parts go out as LangChain standard blocks."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from graph_agent.agent import ReactAgent
from graph_agent.messages import (
    AudioPart,
    FilePart,
    ImagePart,
    TextPart,
    ToolResponseMessage,
    UserMessage,
    content_text,
)
from graph_agent.models import ScriptedChatModel
from graph_agent.serve.wire import WireError, message_from_json, message_json
from graph_agent.serve.wire_parts import part_from_json, part_json
from tests.media import PDF, PNG, WAV
from tests.serve.conftest import Server

PICTURE = ImagePart(data=PNG, media_type="image/png")


@pytest.mark.parametrize(
    ("block", "part"),
    [
        ({"type": "text", "text": "hi"}, TextPart("hi")),
        (
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            PICTURE,
        ),
        (
            {"type": "image_url", "image_url": "https://x.test/a.png"},
            ImagePart(url="https://x.test/a.png"),
        ),
        ({"type": "image", "base64": PNG, "mime_type": "image/png"}, PICTURE),
        (
            {"type": "image", "source_type": "base64", "data": PNG, "mime_type": "image/png"},
            PICTURE,
        ),
        ({"type": "image", "url": "https://x.test/a.png"}, ImagePart(url="https://x.test/a.png")),
        (
            {"type": "input_audio", "input_audio": {"data": WAV, "format": "mp3"}},
            AudioPart(WAV, "audio/mpeg"),
        ),
        ({"type": "audio", "base64": WAV, "mime_type": "audio/wav"}, AudioPart(WAV, "audio/wav")),
        (
            {
                "type": "file",
                "file": {"file_data": f"data:application/pdf;base64,{PDF}", "filename": "a.pdf"},
            },
            FilePart(data=PDF, media_type="application/pdf", filename="a.pdf"),
        ),
        ({"type": "file", "file": {"file_id": "file-1"}}, FilePart(file_id="file-1")),
        (
            {"type": "file", "url": "https://x.test/a.pdf", "mime_type": "application/pdf"},
            FilePart(url="https://x.test/a.pdf", media_type="application/pdf"),
        ),
    ],
)
def test_a_client_block_becomes_its_part(block: dict[str, object], part: object) -> None:
    assert part_from_json(block) == part


@pytest.mark.parametrize(
    "part",
    [
        TextPart("hi"),
        PICTURE,
        ImagePart(url="https://x.test/a.png", detail="low"),
        AudioPart(WAV, "audio/wav"),
        FilePart(data=PDF, media_type="application/pdf", filename="a.pdf"),
        FilePart(url="https://x.test/a.pdf"),
        FilePart(file_id="file-1"),
    ],
)
def test_parts_go_out_as_standard_blocks_and_come_back_equal(part: object) -> None:
    block = part_json(part)  # type: ignore[arg-type]
    assert block["type"] in ("text", "image", "audio", "file")
    assert part_from_json(block) == part


def test_messages_with_parts_round_trip_through_the_wire() -> None:
    question = UserMessage([TextPart("What is it?"), PICTURE], id="m1")
    body = message_json(question)
    assert body["type"] == "human"
    assert body["content"] == [
        {"type": "text", "text": "What is it?"},
        {"type": "image", "base64": PNG, "mime_type": "image/png"},
    ]
    assert message_from_json(body) == question
    result = ToolResponseMessage(tool_call_id="c1", name="shot", content=[PICTURE], id="m2")
    assert message_from_json(message_json(result)) == result


def test_text_only_blocks_are_joined_into_plain_text_as_before() -> None:
    message = message_from_json({"type": "human", "content": [{"type": "text", "text": "a"}, "b"]})
    assert message.content == "ab"


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ([{"type": "video", "url": "x"}], "unknown content block type 'video'"),
        ([{"type": "image_url"}], "lacks a field its type needs"),
        ([{"type": "image", "base64": "!!", "mime_type": "image/png"}], "must be base64"),
        ([7], "a content block is an object with a type"),
    ],
)
def test_a_bad_block_is_a_wire_error_naming_it(content: list[object], says: str) -> None:
    with pytest.raises(WireError, match=says):
        message_from_json({"type": "human", "content": content})


def test_a_system_message_with_an_image_is_refused() -> None:
    with pytest.raises(WireError, match="system message holds text only"):
        message_from_json({"type": "system", "content": [part_json(PICTURE)]})


def describe(request: object) -> str:
    messages = request.messages  # type: ignore[attr-defined]
    return "I got: " + content_text(messages[-1].content, placeholders=True)


def test_an_image_sent_to_a_served_agent_reaches_its_model(tmp_path: Path) -> None:
    agent = ReactAgent("eyes", ScriptedChatModel([describe]))
    with Server(tmp_path / "serve.db", targets=[agent]) as server:
        blocks = [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        ]
        response = httpx.post(
            f"{server.url}/runs/wait",
            json={
                "assistant_id": "eyes",
                "input": {"messages": [{"type": "human", "content": blocks}]},
            },
            timeout=30,
        )
    assert response.status_code == 200, response.text
    messages = response.json()["messages"]
    assert messages[0]["content"][1] == {"type": "image", "base64": PNG, "mime_type": "image/png"}
    assert messages[-1]["content"] == "I got: What is this? [image: image/png, 12 KB]"
