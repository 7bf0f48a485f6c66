"""Images from the command line: ``graph-agent demo --image PATH`` and ``/image PATH`` in
``graph-agent chat`` attach a picture file to the message sent to the agent."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path

from graph_agent.cli.errors import EXIT_USAGE, CliError
from graph_agent.messages import ImagePart, TextPart, UserMessage

__all__ = ["IMAGE_TYPES", "image_part", "message_with_images"]

IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
"""The picture files an image may be read from, by suffix, and their media types: the formats
OpenAI's and DashScope's vision models take."""


def image_part(path: str) -> ImagePart:
    """The picture file at ``path`` as an image part (base64, media type from its suffix).

    Raises:
        CliError: the file is missing or unreadable, or its suffix is not a picture's.
    """
    file = Path(path).expanduser()
    media_type = IMAGE_TYPES.get(file.suffix.lower())
    if media_type is None:
        known = ", ".join(IMAGE_TYPES)
        raise CliError(
            f"{path} is not an image file this command can send (by its suffix)",
            f"give a file ending in one of {known}",
            EXIT_USAGE,
        )
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise CliError(f"image {path} does not exist", "check the path", EXIT_USAGE) from None
    except OSError as exc:
        raise CliError(
            f"cannot read image {path}: {exc.strerror or exc}", "check the path", EXIT_USAGE
        ) from exc
    if not data:
        raise CliError(f"image {path} is empty", "give a picture file", EXIT_USAGE)
    return ImagePart(data=base64.b64encode(data).decode("ascii"), media_type=media_type)


def message_with_images(text: str, images: Sequence[ImagePart]) -> UserMessage:
    """A user message of ``text`` (left out when empty) followed by ``images``."""
    parts: list[TextPart | ImagePart] = [TextPart(text)] if text else []
    return UserMessage([*parts, *images])
