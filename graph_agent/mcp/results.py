"""What the model reads of an MCP tool's result: its text, its structured content as JSON when
it has no text, and a short placeholder for each image, audio clip or binary resource.

A tool result here is text (``ToolResponseMessage.content``). When tool results can carry
typed content parts (images for a vision model), :func:`result_text`'s placeholders are where
those parts go; until then the model learns that an image came, its type and size.

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

__all__ = ["result_text"]


def result_text(result: CallToolResult) -> str:
    """The text of ``result`` for the model: its content blocks, one per line (what the server
    wrote for a model to read); its structured content as compact JSON when no text block
    carries the result (a server may send structured content alone)."""
    parts = [block_text(block) for block in result.content]
    structured = result.structured_content
    if structured is not None and not any(isinstance(b, TextContent) for b in result.content):
        parts.insert(0, pydantic_core.to_json(structured).decode())
    return "\n".join(parts)


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
