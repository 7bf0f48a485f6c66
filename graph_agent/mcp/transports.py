"""How a session reaches its server (stdio, streamable HTTP, SSE), watched on the way.

A tool call that finds its connection lost may or may not have run on the server: sending it
again could run a side effect twice. What the client can know for certain is that a call
never got out, and that is what this module records, for each sending of a tool call
(:class:`CallAttempt`) on each session (:class:`Wire`):

- the session never handed the request to the transport (it knew the connection was closed,
  or the transport had stopped taking messages);
- over HTTP, no byte of the request was written: the POST found no connection (the server
  is down), or was never made. httpcore's ``trace`` extension tells when a request's headers
  start to go out; a request that got that far may have run.

Over stdio a request handed to the transport may have been read by the server: it counts as
sent. The toolset sends a call again only when it certainly never got out
(:attr:`CallAttempt.may_have_run` is false).

Every transport also caps what one message from the server may hold (``limit`` bytes, see
:mod:`graph_agent.mcp.framing`): stdio through its own reader (:mod:`graph_agent.mcp.stdio`),
HTTP by capping each response's body as it is read (an event stream event by event). An answer
over the cap is dropped, its request answered with an error instead, and the request's id noted
on the :class:`Wire` (:attr:`CallAttempt.dropped`), so the toolset can say why the call failed.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCError, JSONRPCRequest, RequestId

from graph_agent.mcp.config import ServerSpec, StdioServer
from graph_agent.mcp.framing import Dropped, EventStream, answer_key, encoded, too_large
from graph_agent.mcp.stdio import stdio_transport

__all__ = ["SSE_EVENT_BYTES", "CallAttempt", "Wire", "message_limit", "new_client", "sending"]

_logger = logging.getLogger(__name__)

_TOOL_CALL = "tools/call"
_WRITING_STARTED = ".send_request_headers.started"

_SSE_READ_SECONDS = 3600.0
"""How long an SSE session's event stream may stay silent before the client drops it (the SDK's
default is 5 minutes): a server that sends no keep-alive between calls would otherwise be cut
while idle. (A dropped stream is reopened on the next call; a call has its own timeout.)"""

SSE_EVENT_BYTES = 1024 * 1024
"""The most bytes one event of the SSE transport may have: the SDK's own limit, which its
``sse_client`` does not let a caller raise (a larger message would end the connection)."""

_attempt: ContextVar[CallAttempt | None] = ContextVar("graph_agent_mcp_attempt", default=None)


@dataclass(kw_only=True, slots=True)
class Wire:
    """What one session's transport did: whether its server's output ended, and over HTTP,
    which tool call requests (by JSON-RPC id) started to be written."""

    over_http: bool
    ended: bool = False
    written: set[Any] = field(default_factory=set)
    dropped: dict[Any, int] = field(default_factory=dict)
    """The requests whose answers were dropped for being over the cap (by
    :func:`~graph_agent.mcp.framing.answer_key`), with the bytes seen of each."""


@dataclass(kw_only=True, slots=True)
class CallAttempt:
    """One sending of a tool call, as far as the client saw it go."""

    wire: Wire | None = None
    request_id: Any = None
    handed_over: bool = False

    @property
    def dropped(self) -> bool:
        """Whether the server's answer was dropped for being over the cap (the call then failed
        with the error that replaced it)."""
        if self.wire is None or self.request_id is None:
            return False
        return answer_key(self.request_id) in self.wire.dropped

    @property
    def may_have_run(self) -> bool:
        """Whether the request may have reached the server (``False``: it certainly did not)."""
        if not self.handed_over or self.wire is None:
            return False
        return not self.wire.over_http or self.request_id in self.wire.written

    def forget(self) -> None:
        """Drop the request from the wire's record once the call's outcome is known (read
        :attr:`may_have_run` before): the record would otherwise grow by an id per call."""
        if self.wire is not None:
            self.wire.written.discard(self.request_id)
            if self.request_id is not None:
                self.wire.dropped.pop(answer_key(self.request_id), None)


@contextlib.contextmanager
def sending(attempt: CallAttempt) -> Iterator[None]:
    """Record in ``attempt`` how the tool call sent inside the block goes out."""
    token = _attempt.set(attempt)
    try:
        yield
    finally:
        _attempt.reset(token)


def message_limit(spec: ServerSpec, limit: int) -> int:
    """The most bytes one message from ``spec`` may have, given the cap ``limit``: the SSE
    transport carries no more than :data:`SSE_EVENT_BYTES`."""
    if isinstance(spec, StdioServer) or spec.transport != "sse":
        return limit
    return min(limit, SSE_EVENT_BYTES)


def new_client(spec: ServerSpec, wire: Wire, *, limit: int) -> Client:
    """A client (not yet entered) for the server ``spec``, reporting to ``wire``; a message
    from the server over ``limit`` bytes (see :func:`message_limit`) is dropped."""
    limit = message_limit(spec, limit)
    if isinstance(spec, StdioServer):
        return Client(_watched(stdio_transport(spec, limit=limit, dropped=wire.dropped), wire))
    headers = dict(spec.headers or {})
    factory = _http_client_factory(wire, limit)
    if spec.transport == "sse":
        return Client(
            _watched(
                sse_client(
                    spec.url,
                    headers=headers,
                    sse_read_timeout=_SSE_READ_SECONDS,
                    httpx_client_factory=factory,
                ),
                wire,
            )
        )
    http_client = factory(headers=headers)
    transport = streamable_http_client(spec.url, http_client=http_client, max_sse_event_size=limit)
    return Client(_watched(_closing_client(http_client, transport), wire))


@contextlib.asynccontextmanager
async def _watched(transport: Any, wire: Wire) -> AsyncIterator[tuple[Any, Any]]:
    async with transport as (read_stream, write_stream):
        yield _WatchedRead(read_stream, wire), _WatchedWrite(write_stream, wire)


@contextlib.asynccontextmanager
async def _closing_client(http_client: httpx2.AsyncClient, transport: Any) -> AsyncIterator[Any]:
    """The HTTP transport, with the HTTP client it was given closed after it."""
    async with http_client, transport as streams:
        yield streams


class _WatchedWrite:
    """The transport's write stream: notes in the sending :class:`CallAttempt` whether its
    tool call request was handed over."""

    def __init__(self, inner: Any, wire: Wire) -> None:
        self._inner = inner
        self._wire = wire

    async def send(self, item: SessionMessage, /) -> None:
        attempt = _attempt.get()
        message = item.message
        if attempt is None or not (
            isinstance(message, JSONRPCRequest) and message.method == _TOOL_CALL
        ):
            await self._inner.send(item)
            return
        attempt.wire, attempt.request_id, attempt.handed_over = self._wire, message.id, True
        try:
            await self._inner.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            attempt.handed_over = False  # the transport had stopped taking messages
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedWrite:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class _WatchedRead:
    """The transport's read stream: marks the wire ended when the server's output ends."""

    def __init__(self, inner: Any, wire: Wire) -> None:
        self._inner = inner
        self._wire = wire

    @property
    def last_context(self) -> Any:  # the sender's context, which the SDK's dispatcher reads
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._wire.ended = True
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedRead:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _http_client_factory(wire: Wire, limit: int) -> Callable[..., httpx2.AsyncClient]:
    """The SDK's HTTP client, whose requests note on ``wire`` when a tool call starts to be
    written (through the ``trace`` extension, so proxies and the pool work as usual), and
    whose responses' bodies are capped at ``limit`` bytes a message."""

    def make(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        client = create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)
        client.event_hooks = {"request": [_tracing(wire)], "response": [_capping(wire, limit)]}
        return client

    return make


def _capping(wire: Wire, limit: int) -> Callable[[httpx2.Response], Awaitable[None]]:
    async def cap_body(response: httpx2.Response) -> None:
        stream = response.stream
        if not isinstance(stream, httpx2.AsyncByteStream):
            return  # only an async client's bodies are read here (the SDK's client is one)
        content_type = response.headers.get("content-type", "").partition(";")[0].strip()
        if content_type.lower() == "text/event-stream":
            response.stream = _CappedEvents(stream, limit, wire)
        else:
            response.stream = _CappedBody(stream, limit, wire, response.request)

    return cap_body


class AnswerTooLarge(httpx2.StreamError):
    """A response over the cap that answers no request to be told of it (the SDK then fails
    what it was reading, as for any broken stream)."""


class _CappedBody(httpx2.AsyncByteStream):
    """A response body given on whole once read, when at most ``limit`` bytes; a longer one
    (a POSTed request's answer) is replaced by the JSON-RPC error that answers the request."""

    def __init__(
        self, inner: httpx2.AsyncByteStream, limit: int, wire: Wire, request: httpx2.Request
    ) -> None:
        self._inner = inner
        self._limit = limit
        self._wire = wire
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        held: list[bytes] = []
        size = 0
        async for chunk in self._inner:
            size += len(chunk)
            if size > self._limit:  # the rest is never read: the connection is closed
                yield self._instead(size)
                return
            held.append(chunk)
        for chunk in held:
            yield chunk

    def _instead(self, size: int) -> bytes:
        request_id = _posted_id(self._request)
        if request_id is None:
            raise AnswerTooLarge(
                f"the MCP server's response to {self._request.method} {self._request.url} was "
                f"over {self._limit:,} bytes (max_result_bytes)"
            )
        self._wire.dropped[answer_key(request_id)] = size
        return encoded(too_large(request_id, self._limit))

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedEvents(httpx2.AsyncByteStream):
    """An event stream given on event by event (see :class:`~graph_agent.mcp.framing.
    EventStream`): an event over ``limit`` bytes that answers a request is replaced by the
    JSON-RPC error that answers it; one that answers none it names is left out."""

    def __init__(self, inner: httpx2.AsyncByteStream, limit: int, wire: Wire) -> None:
        self._inner = inner
        self._wire = wire
        self._events = EventStream(limit, self._instead)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            passed = self._events.feed(chunk)
            if passed:
                yield passed
        rest = self._events.rest()
        if rest:
            yield rest

    def _instead(self, dropped: Dropped) -> JSONRPCError | None:
        request_id = dropped.request_id()
        if request_id is None:
            _logger.warning(
                "an MCP server sent an event of %s bytes, over the cap of %s "
                "(max_result_bytes), that answers no request it names: dropped",
                f"{dropped.size:,}",
                f"{self._events.limit:,}",
            )
            return None
        self._wire.dropped[answer_key(request_id)] = dropped.size
        return too_large(request_id, self._events.limit)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _posted_id(request: httpx2.Request) -> RequestId | None:
    """The id of the JSON-RPC request a POST carries (``None``: not one)."""
    if request.method != "POST":
        return None
    try:
        message = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return None
    found = message.get("id") if isinstance(message, dict) else None
    return found if isinstance(found, str) or type(found) is int else None


def _tracing(wire: Wire) -> Callable[[httpx2.Request], Awaitable[None]]:
    async def trace_tool_calls(request: httpx2.Request) -> None:
        request_id = _tool_call_id(request)
        if request_id is None:
            return
        outer = request.extensions.get("trace")

        async def trace(event: str, info: dict[str, Any]) -> None:
            if event.endswith(_WRITING_STARTED):
                wire.written.add(request_id)
            if outer is not None:
                await outer(event, info)

        request.extensions["trace"] = trace

    return trace_tool_calls


def _tool_call_id(request: httpx2.Request) -> Any:
    """The JSON-RPC id of the tool call a POST carries, or ``None`` for any other request."""
    if request.method != "POST":
        return None
    try:
        body = request.content
    except httpx2.RequestNotRead:
        return None
    if _TOOL_CALL.encode() not in body:
        return None
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if isinstance(message, dict) and message.get("method") == _TOOL_CALL:
        return message.get("id")
    return None
