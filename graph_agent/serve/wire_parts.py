"""Content parts on LangGraph Server's wire: a message's list content as LangChain's standard
content blocks, and back from the block shapes clients send.

Going out, a part is a LangChain v1 standard block: ``{"type": "text", "text"}``,
``{"type": "image", "url" | "base64" | (+ "mime_type")}``, ``{"type": "audio", "base64",
"mime_type"}``, ``{"type": "file", "url" | "base64" | "file_id", "mime_type", "filename"}``.
Coming in, those are read, and so are the OpenAI chat shapes LangChain messages often hold
(``image_url``, ``input_audio``, ``file``) and LangChain 0.3's ``source_type`` blocks.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Callable, Mapping
from typing import Any

from graph_agent.messages import AudioPart, ContentPart, FilePart, ImagePart, TextPart

_AUDIO_MEDIA_TYPES = {"mp3": "audio/mpeg", "wav": "audio/wav"}


class PartError(ValueError):
    """A content block that is not one of the shapes :func:`part_from_json` reads."""


def part_json(part: ContentPart) -> dict[str, Any]:
    """One part as a LangChain v1 standard content block.

    Example:
        >>> part_json(ImagePart(data="iVBORw0KGgo=", media_type="image/png"))
        {'type': 'image', 'base64': 'iVBORw0KGgo=', 'mime_type': 'image/png'}
    """
    match part:
        case TextPart():
            return {"type": "text", "text": part.text}
        case AudioPart():
            return {"type": "audio", "base64": part.data, "mime_type": part.media_type}
        case ImagePart():
            block = _source(part.url, part.data, None, part.media_type, "image")
            if part.detail is not None:
                block["detail"] = part.detail
            return block
        case FilePart():
            block = _source(part.url, part.data, part.file_id, part.media_type, "file")
            if part.filename is not None:
                block["filename"] = part.filename
            return block
    raise TypeError(f"not a content part: {part!r:.80}")


def _source(
    url: str | None, data: str | None, file_id: str | None, media_type: str | None, kind: str
) -> dict[str, Any]:
    block: dict[str, Any] = {"type": kind}
    if url is not None:
        block["url"] = url
    elif data is not None:
        block["base64"] = data
    else:
        block["file_id"] = file_id
    if media_type is not None:
        block["mime_type"] = media_type
    return block


def part_from_json(block: Any) -> ContentPart:
    """One content block a client sent, as a part.

    Raises:
        PartError: the block is not an object of a known type, or its data is malformed.

    Example:
        >>> part_from_json({"type": "image_url", "image_url": {"url": "https://x.test/a.png"}})
        ImagePart(type='image', url='https://x.test/a.png', data=None, media_type=None, detail=None)
    """
    if isinstance(block, str):
        return TextPart(block)
    if not isinstance(block, Mapping):
        raise PartError(f"a content block is an object with a type, got {block!r:.60}")
    kind = block.get("type")
    try:
        return _PARSERS[kind](block)
    except KeyError:
        if kind in _PARSERS:
            raise PartError(f"content block {_short(block)} lacks a field its type needs") from None
        known = ", ".join(sorted(map(str, _PARSERS)))
        raise PartError(f"unknown content block type {kind!r}; known types: {known}") from None
    except (TypeError, ValueError) as exc:
        raise PartError(f"content block {_short(block)} is malformed: {exc}") from exc


def _short(block: Mapping[str, Any]) -> str:
    return f"{dict(block)!r:.80}"


def _standard(block: Mapping[str, Any]) -> dict[str, Any]:
    """The source fields of a v1 (``base64``) or 0.3 (``source_type``, ``data``) block."""
    fields: dict[str, Any] = {"media_type": block.get("mime_type")}
    source = block.get("source_type")
    if "base64" in block or source == "base64":
        fields["data"] = block["base64"] if "base64" in block else block["data"]
    elif "file_id" in block or source == "id":
        fields["file_id"] = block["file_id"] if "file_id" in block else block["id"]
    else:
        fields["url"] = block["url"]
    return fields


def _image(block: Mapping[str, Any]) -> ImagePart:
    fields = _standard(block)
    if "file_id" in fields:
        raise ValueError("an image by file id is not supported; send its url or base64 data")
    return ImagePart(**fields, detail=block.get("detail"))


def _image_url(block: Mapping[str, Any]) -> ImagePart:
    image = block["image_url"]
    if isinstance(image, str):
        return ImagePart(url=image)
    return ImagePart(url=image["url"], detail=image.get("detail"))


def _audio(block: Mapping[str, Any]) -> AudioPart:
    fields = _standard(block)
    if "data" not in fields:
        raise ValueError("audio is sent as base64 data with its mime_type")
    return AudioPart(fields["data"], fields["media_type"] or "")


def _input_audio(block: Mapping[str, Any]) -> AudioPart:
    audio = block["input_audio"]
    audio_format = str(audio["format"])
    media_type = _AUDIO_MEDIA_TYPES.get(audio_format, f"audio/{audio_format}")
    return AudioPart(audio["data"], media_type)


def _file(block: Mapping[str, Any]) -> FilePart:
    openai = block.get("file")
    if isinstance(openai, Mapping):  # OpenAI's {"type": "file", "file": {...}}
        if "file_id" in openai:
            return FilePart(file_id=openai["file_id"], filename=openai.get("filename"))
        data, filename = openai["file_data"], openai.get("filename")
        if str(data).startswith("data:"):
            return FilePart(url=data, filename=filename)
        media_type = mimetypes.guess_type(filename or "")[0]  # bare base64: from the name
        return FilePart(data=data, media_type=media_type, filename=filename)
    return FilePart(**_standard(block), filename=block.get("filename"))


_PARSERS: dict[Any, Callable[[Mapping[str, Any]], ContentPart]] = {
    "text": lambda block: TextPart(block["text"]),
    "image": _image,
    "image_url": _image_url,
    "audio": _audio,
    "input_audio": _input_audio,
    "file": _file,
}
