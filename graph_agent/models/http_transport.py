"""The HTTP chat models' async transport: up to :data:`MAX_REQUESTS_IN_FLIGHT` one-connection
pools per event loop, each lent to one request until its response is closed, the TLS context
every client shares, and the closer that shuts a loop's client down with its loop."""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Callable

import httpx

__all__ = ["MAX_REQUESTS_IN_FLIGHT"]


@functools.cache
def _shared_ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle costs ~0.1 s; every client (one per model and event loop) shares it.
    return httpx.create_ssl_context()


MAX_REQUESTS_IN_FLIGHT = 256
"""Requests a model sends at once on one event loop (each on a connection of its own); more
wait their turn. Requests through a proxy taken from the environment bypass this count: httpx
gives them a pool of their own, limited to as many connections."""
_ASYNC_LIMITS = httpx.Limits(
    max_connections=MAX_REQUESTS_IN_FLIGHT, max_keepalive_connections=MAX_REQUESTS_IN_FLIGHT
)


class _OneConnectionPools(httpx.AsyncBaseTransport):
    """An async transport of up to ``size`` one-connection pools, each lent to one request
    until its response is closed; more requests wait on a semaphore.

    httpcore's pool spends time in its connections times its queued requests at every request
    and response (it probes each idle connection's socket), so 1,000 concurrent runs through one
    pool of 64 connections spent most of their time there. A pool of one connection does that
    work once. The most recently returned pool is lent first, so its connection is still warm.
    """

    def __init__(self, size: int) -> None:
        self._free = asyncio.Semaphore(size)
        self._idle: list[httpx.AsyncHTTPTransport] = []
        self._all: list[httpx.AsyncHTTPTransport] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await self._free.acquire()
        if self._idle:
            pool = self._idle.pop()
        else:
            pool = httpx.AsyncHTTPTransport(verify=_shared_ssl_context(), limits=_ONE_CONNECTION)
            self._all.append(pool)
        try:
            response = await pool.handle_async_request(request)
        except BaseException:
            self._give_back(pool)
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _GivenBackOnClose(
            response.stream, functools.partial(self._give_back, pool)
        )
        return response

    def _give_back(self, pool: httpx.AsyncHTTPTransport) -> None:
        self._idle.append(pool)
        self._free.release()

    async def aclose(self) -> None:
        pools, self._all, self._idle = self._all, [], []
        for pool in pools:
            await pool.aclose()


_ONE_CONNECTION = httpx.Limits(max_connections=1, max_keepalive_connections=1)


class _GivenBackOnClose(httpx.AsyncByteStream):
    """A response body that calls ``give_back`` once it is closed."""

    def __init__(self, stream: httpx.AsyncByteStream, give_back: Callable[[], None]) -> None:
        self._stream = stream
        self._give_back: Callable[[], None] | None = give_back

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._stream:
            yield part

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            if self._give_back is not None:
                give_back, self._give_back = self._give_back, None
                give_back()


async def _close_at_loop_shutdown(
    client: httpx.AsyncClient, forget: Callable[[], None]
) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        forget()
        await client.aclose()
