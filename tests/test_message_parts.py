"""Content parts: what a message with images, audio or files holds, how it validates, and that
it is stored and loaded exactly."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from graph_agent.checkpoint.serde import Serializer, dumps, loads
from graph_agent.graph.errors import SerializationError
from graph_agent.messages import (
    AssistantMessage,
    AudioPart,
    FilePart,
    ImagePart,
    SystemMessage,
    TextPart,
    ToolResponseMessage,
    UserMessage,
    content_text,
    message_from_dict,
)
from tests.media import PDF, PNG, WAV


def picture() -> ImagePart:
    return ImagePart(data=PNG, media_type="image/png")


def test_a_user_message_holds_text_and_image_parts_and_its_text_is_the_text_parts() -> None:
    message = UserMessage([TextPart("What is "), picture(), TextPart("this?")])
    assert message.text == "What is this?"
    assert [part.type for part in message.content] == ["text", "image", "text"]


def test_plain_string_content_still_works_everywhere() -> None:
    assert UserMessage("hi").content == UserMessage("hi").text == "hi"
    assert AssistantMessage("ok").text == "ok"
    assert ToolResponseMessage(tool_call_id="c1", content="3").text == "3"


def test_assistant_and_tool_messages_take_parts_too() -> None:
    answer = AssistantMessage([TextPart("Here:"), picture()])
    result = ToolResponseMessage(tool_call_id="c1", name="shoot", content=[picture()])
    assert answer.text == "Here:" and result.text == ""
    assert isinstance(result.content[0], ImagePart)


def test_a_system_message_holds_text_only() -> None:
    with pytest.raises(ValidationError):
        SystemMessage([TextPart("Be brief.")])  # type: ignore[arg-type]


def test_placeholders_name_the_media_type_and_size() -> None:
    assert picture().placeholder == "[image: image/png, 12 KB]"
    assert ImagePart(url="https://x.test/cat.png").placeholder == "[image: https://x.test/cat.png]"
    assert AudioPart(WAV, "audio/wav").placeholder == "[audio: audio/wav, 104 B]"
    pdf = FilePart(data=PDF, media_type="application/pdf", filename="a.pdf")
    assert pdf.placeholder == "[file: a.pdf, application/pdf, 13 B]"
    assert FilePart(file_id="file-1").placeholder == "[file: id file-1]"
    message = UserMessage([TextPart("Look:"), picture()])
    assert content_text(message.content, placeholders=True) == "Look: [image: image/png, 12 KB]"


def test_a_data_url_given_as_url_becomes_data_and_media_type() -> None:
    image = ImagePart(url=f"data:image/png;base64,{PNG}")
    assert (image.url, image.data, image.media_type) == (None, PNG, "image/png")
    document = FilePart(url=f"data:application/pdf;base64,{PDF}", filename="a.pdf")
    assert (document.data, document.media_type) == (PDF, "application/pdf")


def test_audio_formats_are_the_short_names_openai_wants() -> None:
    assert AudioPart(WAV, "audio/wav").format == "wav"
    assert AudioPart(WAV, "audio/x-wav").format == "wav"
    assert AudioPart(WAV, "audio/mpeg").format == "mp3"
    assert AudioPart(WAV, "audio/flac").format == "flac"


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: ImagePart(), "either url=... (an http(s) URL) or data=..."),
        (lambda: ImagePart(url="https://x.test/a.png", data=PNG), "not both"),
        (lambda: ImagePart(data=PNG), "needs a media_type"),
        (lambda: ImagePart(data="not base64!", media_type="image/png"), "must be base64"),
        (lambda: ImagePart(data=PNG, media_type="application/pdf"), "must be image/"),
        (lambda: ImagePart(data=PNG, media_type="png"), "is not a media type"),
        (lambda: ImagePart(url="data:image/png,raw"), "data:<media type>;base64"),
        (lambda: AudioPart(WAV, "image/png"), "must be audio/"),
        (lambda: AudioPart("abc", "audio/wav"), "must be base64"),
        (lambda: FilePart(), "exactly one of data=..."),
        (lambda: FilePart(data=PDF, file_id="file-1"), "got data, file_id"),
        (lambda: FilePart(data=PDF), "needs a media_type"),
    ],
)
def test_bad_parts_are_refused_saying_what_to_pass(make, says: str) -> None:
    with pytest.raises(ValidationError, match=says.replace("(", r"\(").replace(")", r"\)")):
        make()


def test_messages_with_parts_round_trip_through_their_dicts() -> None:
    message = UserMessage(
        [TextPart("Read these"), picture(), AudioPart(WAV, "audio/wav"), FilePart(file_id="f1")]
    )
    assert message_from_dict(message.model_dump()) == message


def test_messages_with_parts_round_trip_through_the_serializer() -> None:
    history = [
        UserMessage([TextPart("What is it?"), picture()]),
        ToolResponseMessage(
            tool_call_id="c1",
            name="fetch",
            content=[FilePart(data=PDF, media_type="application/pdf", filename="a.pdf")],
        ),
        AssistantMessage([TextPart("Listen:"), AudioPart(WAV, "audio/mpeg")]),
    ]
    loaded = loads(dumps({"messages": history}))["messages"]
    assert loaded == history
    assert [type(part) for part in loaded[0].content] == [TextPart, ImagePart]


def test_the_serializer_size_limit_applies_to_parts() -> None:
    small = Serializer(max_payload_bytes=4096)
    small.register(UserMessage, 17)
    small.register(TextPart, 24)
    small.register(ImagePart, 25)
    with pytest.raises(SerializationError, match="max_payload_bytes=4096"):
        small.dumps({"messages": [UserMessage([picture()])]})
    stored = dumps({"messages": [UserMessage([picture()])]})
    with pytest.raises(SerializationError, match="over max_payload_bytes=4096"):
        small.loads(stored)
