"""What the model reads of each kind of MCP content."""

from __future__ import annotations

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from graph_agent.mcp.results import result_content, result_text
from graph_agent.messages import AudioPart, FilePart, TextPart


def test_text_blocks_are_kept_one_per_line():
    result = CallToolResult(content=[TextContent(text="one"), TextContent(text="two")])

    assert result_text(result) == "one\ntwo"


def test_structured_content_without_text_reads_as_compact_json():
    result = CallToolResult(content=[], structured_content={"total": 6, "unit": "m"})

    assert result_text(result) == '{"total":6,"unit":"m"}'


def test_text_written_for_the_model_wins_over_structured_content():
    result = CallToolResult(content=[TextContent(text="six metres")], structured_content={"n": 6})

    assert result_text(result) == "six metres"


def test_audio_and_binary_resources_are_placeholders_with_their_size():
    result = CallToolResult(
        content=[
            AudioContent(data="AAAA", mime_type="audio/wav"),
            EmbeddedResource(
                resource=BlobResourceContents(uri="file:///a.bin", blob="AAAAAA==", mime_type="x/y")
            ),
            AudioContent(data="not base64!", mime_type="audio/wav"),
        ]
    )

    assert result_text(result).splitlines() == [
        "[audio: audio/wav, 3 bytes]",
        "[resource: file:///a.bin, x/y, 4 bytes]",
        "[audio: audio/wav, 11 characters of malformed base64]",
    ]


def test_a_text_resource_is_shown_with_its_text_and_a_link_by_its_uri():
    result = CallToolResult(
        content=[
            EmbeddedResource(resource=TextResourceContents(uri="file:///n.txt", text="notes")),
            ResourceLink(name="log", uri="file:///log.txt", mime_type="text/plain"),
        ]
    )

    assert result_text(result) == (
        "[resource: file:///n.txt]\nnotes\n[resource link: file:///log.txt, text/plain]"
    )


def test_a_result_with_media_becomes_content_parts_and_one_with_text_only_stays_text():
    media = CallToolResult(
        content=[
            TextContent(text="here:"),
            AudioContent(data="UklGRg==", mime_type="audio/wav"),
            EmbeddedResource(
                resource=BlobResourceContents(
                    uri="file:///docs/a.pdf", blob="JVBERi0=", mime_type="application/pdf"
                )
            ),
            AudioContent(data="UklGRg==", mime_type="text/plain"),  # not audio: stays text
        ]
    )

    assert result_content(media) == [
        TextPart("here:"),
        AudioPart(data="UklGRg==", media_type="audio/wav"),
        FilePart(data="JVBERi0=", media_type="application/pdf", filename="a.pdf"),
        TextPart("[audio: text/plain, 4 bytes]"),
    ]
    assert result_content(CallToolResult(content=[TextContent(text="hi")])) == "hi"
