"""``HTTPChatModel``: what every chat-model client over httpx shares, whatever its wire format.

One lazily created, reused ``httpx.Client`` (and one ``httpx.AsyncClient`` per event loop),
retries (:mod:`graph_agent.models.retry`), SSE streaming, and the errors of
:mod:`graph_agent.models.errors`. The request logic (attempts, fallbacks, decoding) is written
once, as generators that yield effects; a sync and an async driver carry them out (as the graph
engine's flow and drivers do). A subclass names the endpoint, the authentication headers, and
how a request body is built and an answer or a stream is read: :class:`OpenAIChatModel
<graph_agent.models.openai.OpenAIChatModel>` for ``/chat/completions``, :class:`AnthropicChatModel
<graph_agent.models.anthropic.AnthropicChatModel>` for Anthropic's ``/v1/messages``.

The async connection pools are in :mod:`~graph_agent.models.http_transport`, the errors of a
failed attempt (and the wait before the next) in :mod:`~graph_agent.models.http_errors`, the
resolution of a base URL and key in :mod:`~graph_agent.models.endpoint`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import threading
import weakref
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Generator,
    Iterator,
    Mapping,
    Sequence,
)
from types import TracebackType
from typing import Any, ClassVar, Protocol, Self

import httpx
from httpx_sse import EventSource, SSEError
from pydantic import SecretStr

from graph_agent.messages import (
    AssistantMessage,
    AssistantMessageChunk,
    BaseMessage,
    new_message_id,
)
from graph_agent.models.base import ModelRequest, ToolLike, message_to_chunks
from graph_agent.models.endpoint import Endpoint, _parse_base_url, resolve_endpoint
from graph_agent.models.errors import (
    ModelRateLimitError,
    ModelResponseError,
    ModelServerError,
    ModelStreamCutError,
)
from graph_agent.models.http_errors import HTTPFailures
from graph_agent.models.http_transport import (
    _ASYNC_LIMITS,
    MAX_REQUESTS_IN_FLIGHT,
    _close_at_loop_shutdown,
    _OneConnectionPools,
    _shared_ssl_context,
)
from graph_agent.models.retry import RetryPolicy

__all__ = [
    "MAX_REQUESTS_IN_FLIGHT",
    "Endpoint",
    "HTTPChatModel",
    "StreamDecoding",
    "resolve_endpoint",
]

logger = logging.getLogger("graph_agent.models")
_USER_AGENT = "graph-agent/0.1"


class StreamDecoding(Protocol):
    """Reads one event stream of a wire format: the data of each server-sent event in turn.

    Attributes:
        done: The stream's own end marker came (``[DONE]``, ``message_stop``): stop reading.
    """

    done: bool

    def feed(self, data: str) -> AssistantMessageChunk | None:
        """The chunk one event's data makes, or ``None`` when it carries nothing new.

        Raises:
            ModelResponseError: The data does not follow the format.
            ModelServerError: The stream reported a server error (retried like HTTP 5xx when
                nothing was streamed yet); ``ModelRateLimitError`` likewise.
        """
        ...

    def incomplete(self) -> str | None:
        """``None`` when the events so far make a whole answer; else what is missing."""
        ...


class HTTPChatModel(HTTPFailures):
    """The base of the chat models served over HTTP: a subclass defines the wire format.

    Args:
        model: The model name sent with every request.
        base_url: The API root, already resolved from the subclass's defaults.
        base_url_source: Where ``base_url`` came from (``"base_url"``, an environment variable),
            named by the error of a URL that is not ``http(s)://host...``.
        api_key: The key, kept out of ``repr``, logs and error messages.
        timeout: Seconds for connecting, sending and each wait for the next bytes, or an
            ``httpx.Timeout``.
        max_retries: Extra attempts on 408/409/429/5xx and connection errors.
        options: Extra request fields sent with every call.
        headers: Extra HTTP headers sent with every call.
        retry: Backoff settings; its ``max_retries`` is replaced by ``max_retries``.

    Subclasses set :attr:`_logger`, :attr:`_example_url` and :attr:`_not_found_hint`, and
    define :meth:`_endpoint_path`, :meth:`_auth_headers`, :meth:`_body`, :meth:`_parse` and
    :meth:`_decoder`.
    """

    provider: str | None = None  # its traces' gen_ai.provider.name (a subclass names it)
    _logger: ClassVar[logging.Logger] = logger
    _example_url: ClassVar[str] = "http://localhost:11434/v1"
    _not_found_hint: ClassVar[str] = "; check the model name and base_url"

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        base_url_source: str,
        api_key: str | None,
        timeout: float | httpx.Timeout,
        max_retries: int,
        options: Mapping[str, Any] | None,
        headers: Mapping[str, str] | None,
        retry: RetryPolicy | None,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {max_retries}")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.options: dict[str, Any] = dict(options or {})
        self.timeout = timeout
        self.retry = dataclasses.replace(retry or RetryPolicy(), max_retries=max_retries)
        self._api_key = SecretStr(api_key or "")
        base = _parse_base_url(self.base_url, source=base_url_source, example=self._example_url)
        # The endpoint keeps the query (Azure's ?api-version=...) after the path.
        path = self._endpoint_path(base.path.rstrip("/"))
        # user:pass@ becomes the client's basic auth (as httpx would do from the URL), so the
        # request URL, which httpx logs, carries no password.
        self._url_auth = httpx.BasicAuth(base.username, base.password) if base.userinfo else None
        self._url = base.copy_with(path=path, userinfo=b"")
        # Shown in repr, errors and logs without credentials a URL might carry (user:pass@, ?key=).
        self._display_url = str(base.copy_with(userinfo=b"", query=None))
        self._display_endpoint = str(self._url.copy_with(query=None))
        self._where = f"model {model!r} at {self._display_url}"
        self._extra_headers = {"User-Agent": _USER_AGENT, **dict(headers or {})}
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None
        # Not weak-keyed: the closer holds its loop (through the loop's async generator
        # finalizer), so a weak key would never die. Entries leave when their loop shuts down.
        self._async_clients: dict[
            asyncio.AbstractEventLoop, tuple[httpx.AsyncClient, AsyncGenerator[None, None]]
        ] = {}

    # What a wire format defines.

    def _endpoint_path(self, base_path: str) -> str:
        """The request path, from the path of ``base_url`` (without a trailing ``/``)."""
        raise NotImplementedError

    def _auth_headers(self, secret: str) -> dict[str, str]:
        """The headers that carry a (non-empty) API key."""
        raise NotImplementedError

    def _body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body of the request."""
        raise NotImplementedError

    def _parse(self, data: Any, *, request: ModelRequest) -> AssistantMessage:
        """The answer to ``request`` of a whole (not streamed) JSON response;
        ``ModelResponseError`` if none."""
        raise NotImplementedError

    def _decoder(self, message_id: str, *, request: ModelRequest) -> StreamDecoding:
        """A reader for one event stream answering ``request``, its chunks carrying
        ``message_id``."""
        raise NotImplementedError

    def _fallback_body(
        self, body: dict[str, Any], response: httpx.Response
    ) -> dict[str, Any] | None:
        """The request to send at once instead, when ``response`` refused ``body`` in a way
        another body avoids; ``None`` (the default) for an ordinary failure."""
        return None

    def _accepted(self, *, fell_back: bool) -> None:
        """Note a successful response (``fell_back``: to a body from :meth:`_fallback_body`)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self._display_url!r})"

    def _headers(self) -> dict[str, str]:
        # Built when a client is made, so the key lives only in the SecretStr and the client.
        headers = dict(self._extra_headers)
        if secret := self._api_key.get_secret_value():
            headers.update(self._auth_headers(secret))
        return headers

    def _sync_client(self) -> httpx.Client:
        with self._lock:
            if self._client is None or self._client.is_closed:
                self._client = httpx.Client(
                    auth=self._url_auth,
                    timeout=self.timeout,
                    headers=self._headers(),
                    verify=_shared_ssl_context(),
                )
            return self._client

    async def _async_client(self) -> httpx.AsyncClient:
        # An AsyncClient's connections belong to the loop that opened them, so each loop gets
        # its own client (asyncio.run per call, notebooks, a private runner loop). A started
        # async generator closes it when the loop shuts down (asyncio.run and asyncio.Runner
        # finalize async generators), so no socket outlives its loop, and drops the entry, so
        # no finished loop stays in memory.
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._async_clients.get(loop)
            if entry is not None and not entry[0].is_closed:
                return entry[0]
            # A loop closed without finalizing its async generators never ran its closer.
            for closed in [other for other in self._async_clients if other.is_closed()]:
                del self._async_clients[closed]
            client = httpx.AsyncClient(
                auth=self._url_auth,
                timeout=self.timeout,
                headers=self._headers(),
                # Proxies taken from the environment get a pool of their own, with these.
                verify=_shared_ssl_context(),
                limits=_ASYNC_LIMITS,
                transport=_OneConnectionPools(MAX_REQUESTS_IN_FLIGHT),
            )
            forget = functools.partial(_forget_async_client, weakref.ref(self), loop, client)
            closer = _close_at_loop_shutdown(client, forget)
            self._async_clients[loop] = (client, closer)
        await closer.__anext__()
        return client

    def _forget_async_client(
        self, loop: asyncio.AbstractEventLoop, client: httpx.AsyncClient
    ) -> None:
        with self._lock:
            entry = self._async_clients.get(loop)
            if entry is not None and entry[0] is client:
                del self._async_clients[loop]

    def close(self) -> None:
        """Close the sync HTTP client (a new one is made if the model is used again)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    async def aclose(self) -> None:
        """Close this event loop's async HTTP client, and the sync one."""
        self.close()
        with self._lock:
            entry = self._async_clients.pop(asyncio.get_running_loop(), None)
        if entry is not None:
            await entry[1].aclose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType
    ) -> None:
        await self.aclose()

    def generate(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AssistantMessage:
        """Send the conversation and return the model's whole answer.

        Raises:
            ModelError: A subclass saying what failed (see :mod:`graph_agent.models.errors`).
        """
        request = ModelRequest.build(messages, tools, options)
        flow = self._generate_flow(self._body(request, stream=False), request)
        answer: list[AssistantMessage] = []
        for _ in self._drive(flow, answer):
            pass  # a whole answer yields no chunks
        return answer[0]

    async def agenerate(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AssistantMessage:
        """Async :meth:`generate`."""
        request = ModelRequest.build(messages, tools, options)
        flow = self._generate_flow(self._body(request, stream=False), request)
        answer: list[AssistantMessage] = []
        async for _ in self._adrive(flow, answer):
            pass
        return answer[0]

    def stream(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> Iterator[AssistantMessageChunk]:
        """Send the conversation and yield the answer as it arrives.

        A failure before the first chunk is retried like :meth:`generate`; once a chunk was
        yielded, a failure raises (a half-received answer is never retried or completed
        silently). A stream is complete when the server sent a finish reason, with or without
        ``[DONE]``; one that ends without a finish reason is cut (:class:`ModelStreamCutError`),
        and is retried from the start only if none of its chunks was yielded yet.
        """
        request = ModelRequest.build(messages, tools, options)
        flow = self._stream_flow(self._body(request, stream=True), request)
        return self._drive(flow, [])

    def astream(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[AssistantMessageChunk]:
        """Async :meth:`stream`."""
        request = ModelRequest.build(messages, tools, options)
        flow = self._stream_flow(self._body(request, stream=True), request)
        return self._adrive(flow, [])

    # The request logic, written once: generators yielding effects (_Post, _NEXT_EVENT, _Wait)
    # for a driver to carry out, and chunks for it to pass on; I/O errors are thrown back in.

    def _generate_flow(self, body: dict[str, Any], request: ModelRequest) -> _Flow:
        attempt = 0
        fell_back = False
        answered: httpx.Response | None = None  # the last error response an attempt got
        while True:
            attempt += 1
            self._log_attempt(body, attempt)
            try:
                response = yield _Post(body, stream=False)
            except httpx.TransportError as exc:
                error, delay = self._failure(attempt, exc=exc, answered=answered)
            except httpx.DecodingError as exc:
                raise self._undecodable(exc) from exc
            else:
                if response.is_success:
                    self._accepted(fell_back=fell_back)
                    try:
                        return self._parse(self._json(response), request=request)
                    except ModelResponseError as exc:
                        raise self._unusable(exc) from None
                if (fallback := self._fallback_body(body, response)) is not None:
                    body, fell_back, attempt = fallback, True, 0
                    continue
                error, delay = self._failure(attempt, response=response)
                answered = response
            if delay is None:
                raise error
            yield _Wait(delay)

    def _stream_flow(self, body: dict[str, Any], request: ModelRequest) -> _Flow:
        message_id = new_message_id()
        attempt = 0
        fell_back = False
        answered: httpx.Response | None = None  # the last error response an attempt got
        while True:
            attempt += 1
            self._log_attempt(body, attempt)
            decoder = self._decoder(message_id, request=request)
            # yielded: part of this answer reached the caller, so it is never retried.
            # streaming: the server answered with an event stream, so a failure now cuts it.
            yielded = streaming = False
            try:
                response = yield _Post(body, stream=True)
                if not response.is_success:
                    if (fallback := self._fallback_body(body, response)) is not None:
                        body, fell_back, attempt = fallback, True, 0
                        continue
                    error, delay = self._failure(attempt, response=response)
                    answered = response
                else:
                    self._accepted(fell_back=fell_back)
                    if _is_json(response):  # a server that ignored "stream": the whole answer
                        whole = self._parse(self._json(response), request=request)
                        yield from message_to_chunks(whole.model_copy(update={"id": message_id}))
                        return None
                    streaming = True
                    while (data := (yield _NEXT_EVENT)) is not None:
                        chunk = decoder.feed(data)
                        if chunk is not None:
                            yielded = True
                            yield chunk
                        if decoder.done:
                            break
                    self._check_complete(decoder)
                    return None
            except SSEError as exc:  # a TransportError subclass: caught first
                raise self._not_a_stream(exc) from None
            except ModelResponseError as exc:  # only the answer's parsing raises one here
                raise self._unusable(exc) from None
            except httpx.DecodingError as exc:
                raise self._undecodable(exc) from exc
            except httpx.TransportError as exc:
                error, delay = self._failure(
                    attempt, exc=exc, started=yielded, cut=streaming, answered=answered
                )
            except ModelStreamCutError as exc:  # from _check_complete
                error, delay = self._failure(attempt, error=exc, started=yielded)
            except (ModelServerError, ModelRateLimitError) as exc:  # an error event
                error, delay = self._failure(attempt, error=self._unusable(exc), started=yielded)
            if delay is None or yielded:
                raise error
            yield _Wait(delay)

    # The drivers: the same loop, calling or awaiting. A streamed response stays open while the
    # flow reads its events, and is closed when the flow moves on (or stops, or is abandoned).

    def _drive(self, flow: _Flow, result: list[Any]) -> Iterator[AssistantMessageChunk]:
        """Run ``flow``, yielding its chunks; its return value goes into ``result``."""
        client = self._sync_client()
        with contextlib.closing(flow), contextlib.ExitStack() as open_response:
            events: Iterator[Any] = iter(())
            reply: Any = None
            error: BaseException | None = None
            while True:
                try:
                    effect = flow.send(reply) if error is None else flow.throw(error)
                except StopIteration as done:
                    result.append(done.value)
                    return
                reply, error = None, None
                if type(effect) is AssistantMessageChunk:
                    yield effect
                elif effect is _NEXT_EVENT:
                    try:
                        reply = next(events).data
                    except StopIteration:
                        reply = None
                    except _IO_ERRORS as exc:  # SSEError too
                        error = exc
                else:
                    open_response.close()
                    if type(effect) is _Wait:
                        self.retry.sleep(effect.seconds)
                        continue
                    assert isinstance(effect, _Post)
                    try:
                        if not effect.stream:
                            reply = client.post(self._url, json=effect.body)
                            continue
                        request = client.stream(
                            "POST", self._url, json=effect.body, headers=_SSE_HEADERS
                        )
                        reply = open_response.enter_context(request)
                        if not reply.is_success or _is_json(reply):
                            reply.read()
                        else:
                            events = EventSource(reply).iter_sse()
                    except _IO_ERRORS as exc:
                        reply, error = None, exc

    async def _adrive(self, flow: _Flow, result: list[Any]) -> AsyncIterator[AssistantMessageChunk]:
        """Async :meth:`_drive`."""
        client = await self._async_client()
        with contextlib.closing(flow):
            async with contextlib.AsyncExitStack() as open_response:
                events: AsyncIterator[Any] = _no_events()
                reply: Any = None
                error: BaseException | None = None
                while True:
                    try:
                        effect = flow.send(reply) if error is None else flow.throw(error)
                    except StopIteration as done:
                        result.append(done.value)
                        return
                    reply, error = None, None
                    if type(effect) is AssistantMessageChunk:
                        yield effect
                    elif effect is _NEXT_EVENT:
                        try:
                            reply = (await anext(events)).data
                        except StopAsyncIteration:
                            reply = None
                        except _IO_ERRORS as exc:  # SSEError too
                            error = exc
                    else:
                        await open_response.aclose()
                        if type(effect) is _Wait:
                            await self.retry.async_sleep(effect.seconds)
                            continue
                        assert isinstance(effect, _Post)
                        try:
                            if not effect.stream:
                                reply = await client.post(self._url, json=effect.body)
                                continue
                            request = client.stream(
                                "POST", self._url, json=effect.body, headers=_SSE_HEADERS
                            )
                            reply = await open_response.enter_async_context(request)
                            if not reply.is_success or _is_json(reply):
                                await reply.aread()
                            else:
                                events = EventSource(reply).aiter_sse()
                        except _IO_ERRORS as exc:
                            reply, error = None, exc

    def _check_complete(self, decoder: StreamDecoding) -> None:
        """Raise :class:`ModelStreamCutError` unless the stream made a whole answer.

        A partial answer, or an empty one, must not pass for a whole one (LESSONS #29); what
        makes a stream whole is the wire format's to say (:meth:`StreamDecoding.incomplete`).
        """
        how = decoder.incomplete()
        if how is None:
            return
        raise ModelStreamCutError(
            f"{self._where}: the stream ended before the answer was finished ({how})"
        )

    def _log_attempt(self, body: dict[str, Any], attempt: int) -> None:
        self._logger.debug(
            "POST %s model=%s messages=%d tools=%d stream=%s attempt=%d",
            self._display_endpoint,
            body.get("model"),
            len(body.get("messages", ())),
            len(body.get("tools", ())),
            bool(body.get("stream")),
            attempt,
        )


_SSE_HEADERS = {"Accept": "text/event-stream"}
# What a driver throws into the flow: a failed connection, or a body it could not decompress.
_IO_ERRORS = (httpx.TransportError, httpx.DecodingError)


@dataclasses.dataclass(frozen=True, slots=True)
class _Post:
    """Effect: send ``body``. The driver sends back the response, its body read unless it is a
    successful event stream (``stream``), or throws in the ``httpx.TransportError`` (or
    ``httpx.DecodingError``) it met."""

    body: dict[str, Any]
    stream: bool


@dataclasses.dataclass(frozen=True, slots=True)
class _Wait:
    """Effect: sleep before the next attempt."""

    seconds: float


_NEXT_EVENT = object()
"""Effect: the data of the open stream's next server-sent event (``None`` at its end); a read
error, a body that is not an event stream (``SSEError``) or one that cannot be decompressed
(``httpx.DecodingError``) is thrown in."""

_Flow = Generator["_Post | _Wait | object | AssistantMessageChunk", Any, Any]


async def _no_events() -> AsyncIterator[Any]:
    return
    yield  # an async generator that yields nothing


def _forget_async_client(
    model_ref: weakref.ref[HTTPChatModel],
    loop: asyncio.AbstractEventLoop,
    client: httpx.AsyncClient,
) -> None:
    # Through a weak reference: a model no one uses any more need not wait for its loops.
    model = model_ref()
    if model is not None:
        model._forget_async_client(loop, client)


def _is_json(response: httpx.Response) -> bool:
    return "json" in response.headers.get("content-type", "")
