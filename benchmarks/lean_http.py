"""A lean HTTP/1.1 client for the serve benchmark: one keep-alive connection on asyncio streams.

``benchmarks.serve`` runs its clients on the same two cores as the servers it measures, so what
a client spends per request is taken from the servers' share. ``httpx.AsyncClient`` costs
about 0.6 ms of CPU per ``POST`` there (its request and response models, header handling,
``httpcore``'s pool and state machine), as much as a third of a fast server's run; this client
writes the request in one buffer and reads the status line, the headers and the body
(``Content-Length`` or chunked, as LangGraph Server's ``runs/wait`` streams it) straight off
the socket, at a few tens of µs. Every server is measured with the same client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any
from urllib.parse import urlsplit

RETRIES = 2
"""A request whose connection drops (``langgraph dev`` drops one now and then at 50 clients) is
sent again on a new connection, twice at most."""


class ConnectionDropped(ConnectionError):
    """The server closed the connection before it answered, every time the request was sent."""


class Connection:
    """One keep-alive HTTP/1.1 connection to ``url``; requests on it go one after another."""

    def __init__(self, url: str, timeout: float = 300) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.timeout = timeout
        self._head = f"Host: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: Any) -> tuple[int, bytes]:
        """``POST`` ``body`` as JSON; the status and the response's body."""
        payload = json.dumps(body).encode()
        request = (
            f"POST {path} HTTP/1.1\r\n{self._head}Content-Length: {len(payload)}\r\n\r\n"
        ).encode() + payload
        for attempt in range(RETRIES + 1):
            try:
                async with asyncio.timeout(self.timeout):  # no task of its own, as wait_for's
                    return await self._exchange(request)
            except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
                await self.aclose()
                if attempt == RETRIES:
                    raise ConnectionDropped(f"{self.host}:{self.port} {path}: {exc!r}") from exc
        raise AssertionError("unreachable")

    async def _exchange(self, request: bytes) -> tuple[int, bytes]:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        reader, writer = self._reader, self._writer
        assert reader is not None
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *lines = head[:-4].split(b"\r\n")
        status = int(status_line.split(b" ", 2)[1])
        length = None
        chunked = close = False
        for line in lines:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                close = b"close" in value.lower()
        if chunked:
            body = await _chunks(reader)
        elif length is not None:
            body = await reader.readexactly(length)
        else:  # read to the end: the connection cannot be kept
            body, close = await reader.read(), True
        if close:
            await self.aclose()
        return status, body

    async def aclose(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()


async def _chunks(reader: asyncio.StreamReader) -> bytes:
    parts = []
    while True:
        size = int((await reader.readline()).split(b";", 1)[0], 16)
        if size == 0:
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):  # trailers
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)  # the chunk's CRLF
