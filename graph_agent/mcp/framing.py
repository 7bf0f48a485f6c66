"""A server's messages read with a cap on their size, in time linear in what arrives.

An MCP server's answers come one after another on one stream: lines on stdio, events of an
event stream over HTTP. A message over the cap is dropped as it arrives: only its size and its
first and last bytes are kept, enough to tell which request it answers, and that request is
answered with an error instead (:func:`too_large`). The messages behind it go on at once, so a
server that sends a huge result leaves its connection usable.

Example:
    >>> lines = Lines(limit=8)
    >>> [line if isinstance(line, bytes) else line.size for line in lines.feed(b"short\\n")]
    [b'short']
    >>> dropped = lines.feed(b'{"jsonrpc":"2.0","id":7,"result":"' + b"x" * 50 + b'"}\\n')[0]
    >>> dropped.size, dropped.request_id()
    (86, 7)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from mcp.shared.dispatcher import coerce_request_id
from mcp.types import INTERNAL_ERROR, ErrorData, JSONRPCError, RequestId

__all__ = [
    "DEFAULT_MAX_RESULT_BYTES",
    "Dropped",
    "EventStream",
    "Lines",
    "answer_key",
    "encoded",
    "too_large",
]

DEFAULT_MAX_RESULT_BYTES = 4 * 1024 * 1024
"""The largest message a server may send (4 MiB, as ``graph-agent serve`` takes a request body
of): far more than a model reads of a tool's result (an agent cuts text at 20,000 characters),
room for a few images."""

_KEPT = 256
"""Bytes kept from each end of a dropped message: where its top-level ``id`` is."""

_SCALAR = rb'(?:"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null)'
_MEMBER = rb'"[^"\\]*"\s*:\s*' + _SCALAR
_LEADING = re.compile(rb"\s*\{((?:\s*" + _MEMBER + rb"\s*,)*)")
_TRAILING = re.compile(rb"((?:,\s*" + _MEMBER + rb"\s*)+)\}\s*$")
_PAIR = re.compile(rb'"([^"\\]*)"\s*:\s*(' + _SCALAR + rb")")


@dataclass(kw_only=True, slots=True)
class Dropped:
    """A message over the cap: how many bytes it had, and its first and last bytes."""

    size: int
    head: bytes
    tail: bytes

    def request_id(self) -> RequestId | None:
        """The id of the request the message answers (see :func:`answered_id`)."""
        return answered_id(self.head, self.tail)

    def grow(self, piece: bytes) -> None:
        """Count ``piece``, the next bytes of the message, keeping only the last of them."""
        self.size += len(piece)
        self.tail = (self.tail + piece[-_KEPT:])[-_KEPT:]


def answered_id(head: bytes, tail: bytes) -> RequestId | None:
    """The id of the request a JSON-RPC message answers, from its top-level members that hold
    plain values at either end (``{"jsonrpc":"2.0","id":7,"result":...}`` as Python's SDK
    writes it, ``{"result":...,"jsonrpc":"2.0","id":7}`` as the TypeScript SDK does).

    ``None`` when they do not tell, or when the message has a ``method``: a request or
    notification of the server's, whose id is not one of ours.
    """
    members: dict[bytes, bytes] = {}
    leading = _LEADING.match(head)
    if leading is not None:
        members.update(_PAIR.findall(leading.group(1)))
    trailing = _TRAILING.search(tail)
    if trailing is not None:
        members.update(_PAIR.findall(trailing.group(1)))
    if b"method" in members or b"id" not in members:
        return None
    try:
        found = json.loads(members[b"id"])
    except ValueError:
        return None
    return found if isinstance(found, str) or type(found) is int else None


def answer_key(request_id: RequestId) -> RequestId:
    """The id as answers are matched to requests (``"7"`` and ``7`` are one, as in the SDK)."""
    return coerce_request_id(request_id)


def too_large(request_id: RequestId, limit: int) -> JSONRPCError:
    """The error that answers a request whose answer was dropped for being over ``limit``."""
    return JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=ErrorData(
            code=INTERNAL_ERROR,
            message=f"the answer was over {limit:,} bytes (max_result_bytes): it was dropped",
        ),
    )


class Lines:
    """Splits a byte stream into lines (ending in ``\\n``, which is left out): a line of at most
    ``limit`` bytes is given whole, a longer one as :class:`Dropped` once it ends. Memory stays
    within ``limit`` and time linear in the bytes fed, however long a line."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._dropped: Dropped | None = None

    def feed(self, data: bytes) -> list[bytes | Dropped]:
        """The lines that ``data`` ends (the rest is kept for the next call)."""
        ended: list[bytes | Dropped] = []
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            self._add(data[start:end])
            ended.append(self._take())
            start = end + 1
        self._add(data[start:])
        return ended

    def rest(self) -> bytes | Dropped | None:
        """The unfinished last line, when the stream ended without a newline after it."""
        if not self._parts and self._dropped is None:
            return None
        return self._take()

    def _add(self, piece: bytes) -> None:
        if not piece:
            return
        if self._dropped is not None:
            self._dropped.grow(piece)
            return
        self._size += len(piece)
        if self._size <= self.limit:
            self._parts.append(piece)
            return
        held = b"".join(self._parts)
        self._dropped = Dropped(size=len(held), head=(held + piece[:_KEPT])[:_KEPT], tail=b"")
        self._dropped.grow(piece)
        self._parts, self._size = [], 0

    def _take(self) -> bytes | Dropped:
        line: bytes | Dropped
        if self._dropped is not None:
            line, self._dropped = self._dropped, None
        else:
            line = b"".join(self._parts)
            self._parts, self._size = [], 0
        return line


class EventStream:
    """Passes an event stream (``text/event-stream``) on event by event, each event whole once
    it ends; an event over ``limit`` bytes is replaced, once it ends, by an event carrying what
    ``replace`` makes of it (``None``: left out).

    Args:
        limit: The most bytes an event may have.
        replace: The message (a JSON-RPC error) to send instead of a dropped event, given its
            size and the first and last bytes of its data.
    """

    def __init__(self, limit: int, replace: Callable[[Dropped], JSONRPCError | None]) -> None:
        self.limit = limit
        self._replace = replace
        self._lines = Lines(limit)
        self._held: list[bytes] = []
        self._size = 0
        self._dropped: Dropped | None = None  # the event being dropped: its size and data

    def feed(self, data: bytes) -> bytes:
        """What to pass on of the stream after ``data``: the events that ended in it."""
        out: list[bytes] = []
        for line in self._lines.feed(data):
            if line not in (b"", b"\r"):
                self._add(line)
                continue
            if self._dropped is not None:
                out.append(self._replacement(self._dropped))
            else:
                out.append(b"".join(self._held) + line + b"\n")
            self._held, self._size, self._dropped = [], 0, None
        return b"".join(out)

    def rest(self) -> bytes:
        """What to pass on when the stream ended in the middle of an event: its bytes as they
        came (an event that never ended is not one), unless it was being dropped."""
        last = self._lines.rest()
        if self._dropped is not None or isinstance(last, Dropped):
            return b""
        return b"".join(self._held) + (last or b"")

    def _add(self, line: bytes | Dropped) -> None:
        size = line.size if isinstance(line, Dropped) else len(line)
        self._size += size + 1
        if self._dropped is None and isinstance(line, bytes) and self._size <= self.limit:
            self._held.append(line + b"\n")
            return
        if self._dropped is None:  # this line takes the event over the limit
            self._dropped = Dropped(size=0, head=b"", tail=b"")
            for earlier in self._held:
                self._keep_data(earlier.rstrip(b"\r\n"))
            self._held = []
        self._keep_data(line)
        self._dropped.size = self._size

    def _keep_data(self, line: bytes | Dropped) -> None:
        """Keep the first bytes of the dropped event's data and the last ones (of its last
        ``data`` line): where the message's top-level members are."""
        assert self._dropped is not None
        start = line.head if isinstance(line, Dropped) else line
        if not start.startswith(b"data:"):
            return
        value = start[6:] if start.startswith(b"data: ") else start[5:]
        if len(self._dropped.head) < _KEPT:
            joined = self._dropped.head + b"\n" + value if self._dropped.head else value
            self._dropped.head = joined[:_KEPT]
        end = line.tail if isinstance(line, Dropped) else value
        self._dropped.tail = end.rstrip(b"\r")[-_KEPT:]

    def _replacement(self, dropped: Dropped) -> bytes:
        message = self._replace(dropped)
        if message is None:
            return b""
        return b"event: message\ndata: " + encoded(message) + b"\n\n"


def encoded(message: JSONRPCError) -> bytes:
    """``message`` as the bytes of its JSON."""
    return message.model_dump_json(by_alias=True, exclude_unset=True).encode()
