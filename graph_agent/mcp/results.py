"""What the model reads of an MCP tool's result: its text, its structured content as JSON when
it has no text, and its images, audio and binary resources as content parts
(:func:`result_content`; a model that cannot take them sees their placeholders), or as a short
placeholder in plain text (:func:`result_text`, for error results).

Example:
    >>> from mcp.types import CallToolResult, ImageContent, TextContent
    >>> result = CallToolResult(content=[
    ...     TextContent(text="the chart:"),
    ...     ImageContent(data="iVBORw0KGgo=", mime_type="image/png"),
    ... ])
    >>> print(result_text(result))
    the chart:
    [image: image/png, 8 bytes]
"""

from __future__ import annotations

import binascii
from base64 import b64decode

import pydantic_core
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)

from graph_agent.messages import (
    AudioPart,
    ContentPart,
    FilePart,
    ImagePart,
    MessageContent,
    TextPart,
)

__all__ = ["block_text", "result_content", "result_text"]


def result_text(result: CallToolResult) -> str:
    """The text of ``result`` for the model: its content blocks, one per line (what the server
    wrote for a model to read); its structured content as compact JSON when no text block
    carries the result (a server may send structured content alone)."""
    parts = [block_text(block) for block in result.content]
    structured = result.structured_content
    if structured is not None and not any(isinstance(b, TextContent) for b in result.content):
        parts.insert(0, pydantic_core.to_json(structured).decode())
    return "\n".join(parts)


def result_content(result: CallToolResult) -> MessageContent:
    """The content of the tool result for ``result``: its text (:func:`result_text`) when it
    holds only text, else a list of parts, an image as an :class:`ImagePart`, audio as an
    :class:`AudioPart`, a binary resource as a :class:`FilePart` (what a part cannot hold, such
    as an image of a type no model takes, stays its placeholder text).

    Example:
        >>> from mcp.types import CallToolResult, ImageContent, TextContent
        >>> result_content(CallToolResult(content=[
        ...     TextContent(text="the chart:"),
        ...     ImageContent(data="iVBORw0KGgo=", mime_type="image/png"),
        ... ]))[1].placeholder
        '[image: image/png, 8 B]'
    """
    if not any(_is_binary(block) for block in result.content):
        return result_text(result)
    parts: list[ContentPart] = []
    structured = result.structured_content
    if structured is not None and not any(isinstance(b, TextContent) for b in result.content):
        parts.append(TextPart(pydantic_core.to_json(structured).decode()))
    for block in result.content:
        try:
            parts.append(_part(block))
        except ValueError:  # refused by the part (a media type it does not take)
            parts.append(TextPart(block_text(block)))
    return parts


def _is_binary(block: ContentBlock) -> bool:
    return isinstance(block, ImageContent | AudioContent) or (
        isinstance(block, EmbeddedResource) and isinstance(block.resource, BlobResourceContents)
    )


def _part(block: ContentBlock) -> ContentPart:
    if isinstance(block, ImageContent):
        return ImagePart(data=block.data, media_type=block.mime_type)
    if isinstance(block, AudioContent):
        return AudioPart(data=block.data, media_type=block.mime_type)
    if isinstance(block, EmbeddedResource) and isinstance(block.resource, BlobResourceContents):
        resource = block.resource
        name = resource.uri.rstrip("/").rsplit("/", 1)[-1] or None
        return FilePart(data=resource.blob, media_type=resource.mime_type, filename=name)
    return TextPart(block_text(block))


def block_text(block: ContentBlock) -> str:
    """One content block as text: text as is, anything else as a bracketed placeholder."""
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent):
        return f"[image: {block.mime_type}, {_decoded_size(block.data)}]"
    if isinstance(block, AudioContent):
        return f"[audio: {block.mime_type}, {_decoded_size(block.data)}]"
    if isinstance(block, ResourceLink):
        kind = f", {block.mime_type}" if block.mime_type else ""
        return f"[resource link: {block.uri}{kind}]"
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        kind = f", {resource.mime_type}" if resource.mime_type else ""
        if isinstance(resource, BlobResourceContents):
            return f"[resource: {resource.uri}{kind}, {_decoded_size(resource.blob)}]"
        return f"[resource: {resource.uri}{kind}]\n{resource.text}"
    return f"[{getattr(block, 'type', type(block).__name__)} content]"


def _decoded_size(data: str) -> str:
    try:
        return f"{len(b64decode(data, validate=True))} bytes"
    except (binascii.Error, ValueError):
        return f"{len(data)} characters of malformed base64"
