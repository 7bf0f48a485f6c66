"""JSON in and out of the server: request bodies read within limits, responses and stream
events written so that whatever was read (or stored) can always be sent back.

- **In.** A body nested deeper than :data:`MAX_DEPTH` is refused as it is read: Python's parser,
  and every function that walks the value afterwards, recurse, and a thousand levels already
  reach the interpreter's recursion limit (a 400 naming the limit, not a 500 from wherever the
  value happened to go next). So are ``NaN``, ``Infinity`` and numbers too large for a
  float, which JSON does not have (LangGraph Server's parser refuses them too) and which no
  response could carry back.
- **Out.** Text holding a lone UTF-16 surrogate (``"\\ud800"``: valid in a JSON string, and kept
  exactly by the checkpoint savers) cannot be encoded as UTF-8. Such text is sent with JSON's
  own escape (``\\ud800``), which every JSON parser reads back to the same string; every other
  character goes out as UTF-8, as before. A non-finite float a value already holds is sent as
  ``null`` (as LangGraph Server's JSON encoder, orjson, does) rather than failing the response.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse as StarletteJSONResponse

__all__ = ["MAX_DEPTH", "BodyError", "JSONResponse", "json_bytes", "json_text", "read_json"]

MAX_DEPTH = 256
"""Most levels of arrays and objects a request body may nest. A client's real bodies stay
within ten or so; the functions that turn a value into the wire's JSON take two of Python's
1000 frames per level, so the limit leaves room for the frames beneath them."""


class BodyError(ValueError):
    """A request body the server cannot take: answered with ``status`` (400) and the message."""

    def __init__(self, detail: str, status: int = 400) -> None:
        super().__init__(detail)
        self.status = status


def read_json(raw: bytes) -> Any:
    """The JSON value of a request body.

    Raises:
        BodyError: the body is not JSON, nests deeper than :data:`MAX_DEPTH` levels, or holds
            ``NaN``, ``Infinity`` or a number out of a float's range.
    """
    try:  # as json.loads reads bytes, with one decoder for every body
        value = _DECODER.decode(raw.decode(json.detect_encoding(raw), "surrogatepass"))
    except BodyError:
        raise
    except RecursionError as exc:  # far too deep: the parser itself gave up
        raise _too_deep(f"more than {MAX_DEPTH}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BodyError(f"the request body is not valid JSON: {exc}") from exc
    except ValueError as exc:  # an integer of more digits than Python converts
        raise BodyError(
            "the request body holds an integer of more than 4300 digits; send it as a string"
        ) from exc
    # deeper than the limit needs more brackets than the limit (nearly every body has fewer)
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH:
        _check_depth(raw)
    return value


_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


def _check_depth(valid: bytes) -> None:
    """Refuse a body (valid JSON: each string is matched once, so this takes linear time)
    whose arrays and objects nest deeper than :data:`MAX_DEPTH`: its brackets outside
    strings are walked, in C-speed steps."""
    brackets = _STRINGS.sub(b"", valid).translate(None, _NOT_BRACKETS)
    deepest = max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)
    if deepest > MAX_DEPTH:
        raise _too_deep(str(deepest))


def _too_deep(levels: str) -> BodyError:
    return BodyError(
        f"the request body nests arrays and objects {levels} levels deep; the limit is "
        f"{MAX_DEPTH}: send flatter data (e.g. a deeply nested part as a JSON string)"
    )


def _refuse_constant(name: str) -> Any:
    raise BodyError(
        f"the request body is not valid JSON: {name} is not a JSON value; send null or a string"
    )


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise BodyError(
            f"the request body holds the number {text:.40}, too large for a float; send it "
            "as a string"
        )
    return number


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)

_UTF8 = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
"""Starlette's JSONResponse settings; one encoder for every response, not one per call."""
_ASCII = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":"))


def json_text(data: Any) -> str:
    """``data`` as compact JSON: always encodable as UTF-8, lone surrogates escaped
    (``\\ud800``), non-finite floats as ``null`` (a node may write a NaN; strict JSON parsers,
    a browser's included, refuse ``NaN``). What a stream event carries (and the records keep),
    and, encoded, every response body (:func:`json_bytes`)."""
    try:
        text = _UTF8.encode(data)
    except ValueError:  # a NaN or infinity a value already held (the door refuses new ones)
        data = _finite(data)
        text = _UTF8.encode(data)
    if text.isascii():  # nearly every body and event, and a constant-time check
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: JSON's escape keeps it exactly
        return _ASCII.encode(data)
    return text


def json_bytes(content: Any) -> bytes:
    """``content`` as a response body: :func:`json_text`, in UTF-8."""
    return json_text(content).encode("utf-8")


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


class JSONResponse(StarletteJSONResponse):
    """Starlette's JSONResponse, writing its body with :func:`json_bytes`: any text the server
    read or stored can be sent back, a lone surrogate included."""

    def render(self, content: Any) -> bytes:
        return json_bytes(content)
