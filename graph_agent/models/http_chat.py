"""``HTTPChatModel``: what every chat-model client over httpx shares, whatever its wire format.

One lazily created, reused ``httpx.Client`` (and one ``httpx.AsyncClient`` per event loop),
retries (:mod:`graph_agent.models.retry`), SSE streaming, and the errors of
:mod:`graph_agent.models.errors`. The request logic (attempts, fallbacks, decoding) is written
once, as generators that yield effects; a sync and an async driver carry them out (as the graph
engine's flow and drivers do). A subclass names the endpoint, the authentication headers, and
how a request body is built and an answer or a stream is read: :class:`OpenAIChatModel
<graph_agent.models.openai.OpenAIChatModel>` for ``/chat/completions``, :class:`AnthropicChatModel
<graph_agent.models.anthropic.AnthropicChatModel>` for Anthropic's ``/v1/messages``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
import ssl
import threading
import weakref
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Generator,
    Iterator,
    Mapping,
    Sequence,
)
from types import TracebackType
from typing import Any, ClassVar, Protocol, Self, TypeVar

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
from graph_agent.models.errors import (
    ModelConnectionError,
    ModelError,
    ModelRateLimitError,
    ModelResponseError,
    ModelServerError,
    ModelStreamCutError,
    ModelTimeoutError,
)
from graph_agent.models.openai_format import status_error
from graph_agent.models.retry import RetryPolicy, is_retryable_status, retry_after_seconds

__all__ = [
    "MAX_REQUESTS_IN_FLIGHT",
    "Endpoint",
    "HTTPChatModel",
    "StreamDecoding",
    "resolve_endpoint",
]

logger = logging.getLogger("graph_agent.models")

_USER_AGENT = "graph-agent/0.1"
# Keys shorter than this are placeholders (local servers take any key, e.g. "x"), not secrets;
# masking them would garble every message that happens to contain those letters.
_MIN_SECRET_LENGTH = 8

_Failure = tuple[ModelError, float | None]
_E = TypeVar("_E", bound=ModelError)


@functools.cache
def _shared_ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle costs ~0.1 s; every client (one per model and event loop) shares it.
    return httpx.create_ssl_context()


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


class HTTPChatModel:
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

    def _redact(self, text: str) -> str:
        secret = self._api_key.get_secret_value()
        if len(secret) < _MIN_SECRET_LENGTH:
            return text
        return text.replace(secret, "***")

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

    def _json(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except RecursionError:
            raise ModelResponseError(
                f"the body of its HTTP {response.status_code} answer is JSON nested too deeply "
                f"to read ({len(response.content)} bytes)",
                status_code=response.status_code,
            ) from None
        except ValueError:
            kind = response.headers.get("content-type", "no content-type")
            raise ModelResponseError(
                f"the body of its HTTP {response.status_code} answer is not JSON ({kind}): "
                f"{response.text[:200]!r}",
                status_code=response.status_code,
            ) from None

    def _unusable(self, error: _E) -> _E:
        """``error``, raised while reading an answer, naming this model and without the key.

        The wire format's errors quote what the server sent, and a server (or a proxy) may echo
        the key back in an error object, an error event or a body that is not JSON.
        """
        return type(error)(self._redact(f"{self._where}: {error}"), status_code=error.status_code)

    def _not_a_stream(self, exc: SSEError) -> ModelResponseError:
        return ModelResponseError(
            self._redact(f"{self._where} did not answer with an event stream: {exc}")
        )

    def _undecodable(self, exc: httpx.DecodingError) -> ModelResponseError:
        return ModelResponseError(
            self._redact(
                f"{self._where} sent a body that does not match its Content-Encoding ({exc}): "
                "the server, or a proxy in between, compressed it wrongly; passing "
                "headers={'Accept-Encoding': 'identity'} asks for an uncompressed body"
            )
        )

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

    def _failure(
        self,
        attempt: int,
        *,
        exc: httpx.TransportError | None = None,
        response: httpx.Response | None = None,
        error: ModelError | None = None,
        started: bool = False,
        cut: bool = False,
        answered: httpx.Response | None = None,
    ) -> _Failure:
        """The error of a failed attempt, and the wait before the next one (``None``: give up).

        ``started``: a stream had already yielded part of the answer, so there is no retry
        (decided here, before any delay is computed or a retry is announced). ``cut``: ``exc``
        broke an event stream the server had begun. ``answered``: the last error response an
        earlier attempt of this call got; when the last attempt then cannot connect, the call
        fails with that answer (the server was reached, and its message says what is wrong),
        noting the failed connection, rather than as a server that cannot be reached.
        """
        if response is not None:
            retry_after = retry_after_seconds(response.headers)
            too_long = retry_after is not None and retry_after > self.retry.max_retry_after
            retryable = is_retryable_status(response.status_code)
            delay = (
                self.retry.delay_before_retry(attempt, retry_after)
                if retryable and not too_long
                else None
            )
            error = self._status_error(
                response,
                attempts=attempt if retryable and not too_long else 1,
                note=(
                    f"; the server asked to retry after {retry_after:g} s, longer than the "
                    f"{self.retry.max_retry_after:g} s this client waits"
                    if too_long
                    else ""
                ),
            )
        elif exc is not None:
            delay = None if started else self.retry.delay_before_retry(attempt, None)
            error = self._transport_error(exc, attempt, started=started, cut=cut)
            if delay is None and answered is not None and type(error) is ModelConnectionError:
                error = self._status_error(
                    answered,
                    attempts=attempt,
                    note=f"; the last attempt's connection then failed: {_detail(exc)}",
                )
                error.__cause__ = exc
        else:
            assert error is not None
            delay = None if started else self.retry.delay_before_retry(attempt, None)
            if started or (delay is None and attempt > 1):
                note = _STARTED_NOTE if started else f" (gave up after {attempt} attempts)"
                error = type(error)(f"{error}{note}", status_code=error.status_code)
        if started:
            self._logger.debug(
                "%s: attempt %d failed (%s) after part of the answer was streamed; not retried",
                self._where,
                attempt,
                _short_reason(error),
            )
        elif delay is not None:
            self._logger.warning(
                "%s: attempt %d of %d failed (%s); retrying in %.2f s",
                self._where,
                attempt,
                self.retry.max_retries + 1,
                _short_reason(error),
                delay,
            )
        return error, delay

    def _status_error(self, response: httpx.Response, *, attempts: int, note: str) -> ModelError:
        """The error of an HTTP error ``response``, with the server's own message."""
        return status_error(
            response.status_code,
            response.reason_phrase,
            response.text,
            where=self._where,
            key_configured=bool(self._api_key.get_secret_value()),
            attempts=attempts,
            retry_after=retry_after_seconds(response.headers),
            redact=self._redact,
            note=note,
            not_found_hint=self._not_found_hint,
        )

    def _transport_error(
        self, exc: httpx.TransportError, attempt: int, *, started: bool = False, cut: bool = False
    ) -> ModelConnectionError:
        if started:
            tries = _STARTED_NOTE
        else:
            tries = f" (gave up after {attempt} attempts)" if attempt > 1 else ""
        if isinstance(exc, httpx.TimeoutException):
            kind = type(exc).__name__
            error: ModelConnectionError = ModelTimeoutError(
                self._redact(
                    f"{self._where} did not answer in time ({kind}, timeout {self.timeout}){tries}"
                )
            )
        elif cut:
            error = ModelStreamCutError(
                self._redact(
                    f"{self._where}: the connection broke mid-stream: {_detail(exc)}{tries}"
                )
            )
        else:
            error = ModelConnectionError(
                self._redact(f"{self._where}: connection failed: {_detail(exc)}{tries}")
            )
        error.__cause__ = exc
        return error


_SSE_HEADERS = {"Accept": "text/event-stream"}
# What a driver throws into the flow: a failed connection, or a body it could not decompress.
_IO_ERRORS = (httpx.TransportError, httpx.DecodingError)

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


_STARTED_NOTE = " (not retried: part of the answer had already been streamed)"


async def _close_at_loop_shutdown(
    client: httpx.AsyncClient, forget: Callable[[], None]
) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        forget()
        await client.aclose()


def _forget_async_client(
    model_ref: weakref.ref[HTTPChatModel],
    loop: asyncio.AbstractEventLoop,
    client: httpx.AsyncClient,
) -> None:
    # Through a weak reference: a model no one uses any more need not wait for its loops.
    model = model_ref()
    if model is not None:
        model._forget_async_client(loop, client)


@dataclasses.dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a client sends its requests, and with which key (see :func:`resolve_endpoint`)."""

    base_url: str
    api_key: str | None
    source: str
    """What named ``base_url``: ``"base_url"``, or the environment variable it came from."""


def resolve_endpoint(
    base_url: str | None,
    api_key: str | None,
    *,
    default_url: str,
    url_variable: str,
    key_variable: str,
) -> Endpoint:
    """The URL and key of a provider's client: ``base_url``, else ``$url_variable``, else
    ``default_url``; ``api_key``, else ``$key_variable`` but only when the URL is that default
    (``$url_variable`` or ``default_url``), so a provider's key never goes to another server.

    Example:
        >>> resolve_endpoint("http://127.0.0.1:8080/", None, default_url="https://api.x.com",
        ...                  url_variable="X_BASE_URL", key_variable="X_API_KEY")
        Endpoint(base_url='http://127.0.0.1:8080', api_key=None, source='base_url')
    """
    default = os.environ.get(url_variable) or default_url
    resolved = (base_url or default).rstrip("/")
    if api_key is None and resolved == default.rstrip("/"):
        api_key = os.environ.get(key_variable) or None
    return Endpoint(resolved, api_key, "base_url" if base_url else url_variable)


def _parse_base_url(base_url: str, *, source: str, example: str) -> httpx.URL:
    """``base_url`` as a URL, or a ``ValueError`` naming ``source`` and what is wrong.

    The URL itself is not repeated: it may carry credentials (user:pass@, ?key=).
    """
    fix = f"set {source} to the API root, e.g. {example!r}"
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL as exc:
        raise ValueError(f"{source} is not a valid URL ({exc}); {fix}") from None
    if url.scheme not in ("http", "https"):
        raise ValueError(f"{source} must start with http:// or https://; {fix}")
    if not url.host:
        raise ValueError(f"{source} names no host; {fix}")
    return url


def _is_json(response: httpx.Response) -> bool:
    return "json" in response.headers.get("content-type", "")


def _detail(exc: httpx.TransportError) -> str:
    return str(exc) or type(exc).__name__


def _short_reason(error: ModelError) -> str:
    if error.status_code is not None:
        return f"HTTP {error.status_code}"
    return type(error).__name__
