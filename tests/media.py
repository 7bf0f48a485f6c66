"""Small media files, as bytes and as base64 text, for the tests of content parts."""

from __future__ import annotations

import base64

PNG_BYTES = b"\x89PNG\r\n\x1a\n" + bytes(12 * 1024 - 8)
"""12 KB that begin like a PNG file: shown as ``[image: image/png, 12 KB]``."""
PNG = base64.b64encode(PNG_BYTES).decode()
WAV = base64.b64encode(b"RIFF" + bytes(100)).decode()
"""104 bytes of audio."""
PDF = base64.b64encode(b"%PDF-1.4 tiny").decode()
"""13 bytes of a PDF."""
