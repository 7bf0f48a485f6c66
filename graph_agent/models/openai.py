"""``OpenAIChatModel``: the OpenAI-compatible ``/chat/completions`` client over httpx.

It covers OpenAI, DashScope/Qwen (compatible mode), DeepSeek, vLLM, Ollama and llama.cpp. The
wire format lives in :mod:`graph_agent.models.openai_format`, the retry rules in
:mod:`graph_agent.models.retry`; this module does the I/O: one lazily created, reused
``httpx.Client`` (and one ``httpx.AsyncClient`` per event loop), retries, and SSE streaming.
The request logic (attempts, fallbacks, decoding) is written once, as generators that yield
effects; a sync and an async driver carry them out (as the graph engine's flow and drivers do).
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
from typing import Any, Self

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
    ModelResponseError,
    ModelStreamCutError,
    ModelTimeoutError,
)
from graph_agent.models.openai_format import (
    StreamDecoder,
    build_request_body,
    parse_completion,
    rejects_required_tool_choice,
    server_message,
    status_error,
)
from graph_agent.models.retry import RetryPolicy, is_retryable_status, retry_after_seconds

__all__ = ["OpenAIChatModel"]

logger = logging.getLogger("graph_agent.models.openai")

OPENAI_BASE_URL = "https://api.openai.com/v1"
DASHSCOPE_BASE_URL = "https://dashscope.aliyuncs.com/compatible-mode/v1"
_USER_AGENT = "graph-agent/0.1"
# Keys shorter than this are placeholders (local servers take any key, e.g. "x"), not secrets;
# masking them would garble every message that happens to contain those letters.
_MIN_SECRET_LENGTH = 8

_Failure = tuple[ModelError, float | None]


@functools.cache
def _shared_ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle costs ~0.1 s; every client (one per model and event loop) shares it.
    return httpx.create_ssl_context()


class OpenAIChatModel:
    """A chat model served over the OpenAI chat-completions API.

    Args:
        model: The model name, e.g. ``"gpt-4o-mini"``, ``"qwen-plus"``, ``"llama3"``.
        base_url: The API root (``.../v1``). Defaults to ``OPENAI_BASE_URL``, else OpenAI's.
            Requests go to its path plus ``/chat/completions``; a query (Azure's
            ``?api-version=...``) is kept. A URL that is not ``http(s)://host...`` is a
            ``ValueError``.
        api_key: Sent as a bearer token. Defaults to ``OPENAI_API_KEY``, but only when
            ``base_url`` is that default too, so your OpenAI key never goes to another server.
            Local servers (Ollama, vLLM, llama.cpp) need none.
        timeout: Seconds for connecting, sending and each wait for the next bytes (so a slow but
            steady stream does not time out), or an ``httpx.Timeout``.
        max_retries: Extra attempts on 408/409/429/5xx and connection errors.
        options: Extra request fields sent with every call, e.g. ``{"temperature": 0}``;
            a call's own ``options`` override them, and ``None`` values are left out.
        headers: Extra HTTP headers sent with every call.
        retry: Backoff settings; its ``max_retries`` is replaced by ``max_retries``.

    The API key is kept out of ``repr``, logs and error messages (a key shorter than 8
    characters is a placeholder, not a secret, and is not masked).

    ``tool_choice`` is sent as given, ``"required"`` included. A server that refuses
    ``"required"`` the way llama.cpp-based servers do (HTTP 500, with an empty body or an error
    naming ``tool_choice``) gets the request once more with ``"auto"`` at once, with a warning;
    that extra request does not count as a retry. Once such a server has accepted ``"auto"``,
    this model sends ``"auto"`` for ``"required"``.

    Example:
        >>> from graph_agent.models import OpenAIChatModel
        >>> model = OpenAIChatModel("llama3", base_url="http://127.0.0.1:11434/v1")
        >>> model
        OpenAIChatModel(model='llama3', base_url='http://127.0.0.1:11434/v1')
        >>> # reply = model.generate([UserMessage("hi")], tools=[get_weather])
        >>> # for chunk in model.stream([UserMessage("hi")]): print(chunk.text, end="")
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = 60.0,
        max_retries: int = 2,
        options: Mapping[str, Any] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {max_retries}")
        default_base_url = os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL
        resolved_base_url = (base_url or default_base_url).rstrip("/")
        if api_key is None and resolved_base_url == default_base_url.rstrip("/"):
            api_key = os.environ.get("OPENAI_API_KEY") or None
        self.model = model
        self.base_url = resolved_base_url
        self.options: dict[str, Any] = dict(options or {})
        self.timeout = timeout
        self.retry = dataclasses.replace(retry or RetryPolicy(), max_retries=max_retries)
        self._api_key = SecretStr(api_key or "")
        base = _parse_base_url(
            resolved_base_url, source="base_url" if base_url else "OPENAI_BASE_URL"
        )
        # The endpoint keeps the query (Azure's ?api-version=...) after the path.
        path = base.path.rstrip("/")
        if not path.endswith("/chat/completions"):
            path += "/chat/completions"
        # user:pass@ becomes the client's basic auth (as httpx would do from the URL), so the
        # request URL, which httpx logs, carries no password.
        self._url_auth = httpx.BasicAuth(base.username, base.password) if base.userinfo else None
        self._url = base.copy_with(path=path, userinfo=b"")
        # Shown in repr, errors and logs without credentials a URL might carry (user:pass@, ?key=).
        self._display_url = str(base.copy_with(userinfo=b"", query=None))
        self._display_endpoint = str(self._url.copy_with(query=None))
        self._where = f"model {model!r} at {self._display_url}"
        self._extra_headers = {"User-Agent": _USER_AGENT, **dict(headers or {})}
        # Set once the server refused tool_choice="required" and accepted "auto" instead.
        self._required_tool_choice_refused = False
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None
        # Not weak-keyed: the closer holds its loop (through the loop's async generator
        # finalizer), so a weak key would never die. Entries leave when their loop shuts down.
        self._async_clients: dict[
            asyncio.AbstractEventLoop, tuple[httpx.AsyncClient, AsyncGenerator[None, None]]
        ] = {}

    @classmethod
    def dashscope(
        cls,
        model: str = "qwen-plus",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        **kwargs: Any,
    ) -> OpenAIChatModel:
        """Qwen on Alibaba Cloud DashScope, in OpenAI-compatible mode.

        The key defaults to ``DASHSCOPE_API_KEY``; the URL to ``DASHSCOPE_BASE_URL`` or the
        mainland endpoint (use ``https://dashscope-intl.aliyuncs.com/compatible-mode/v1``
        outside China).

        Example:
            >>> OpenAIChatModel.dashscope(model="qwen-max", api_key="k").base_url
            'https://dashscope.aliyuncs.com/compatible-mode/v1'
        """
        return cls(
            model,
            base_url=base_url or os.environ.get("DASHSCOPE_BASE_URL") or DASHSCOPE_BASE_URL,
            api_key=api_key if api_key is not None else os.environ.get("DASHSCOPE_API_KEY"),
            **kwargs,
        )

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.model!r}, base_url={self._display_url!r})"

    def _headers(self) -> dict[str, str]:
        # Built when a client is made, so the key lives only in the SecretStr and the client.
        headers = dict(self._extra_headers)
        if secret := self._api_key.get_secret_value():
            headers["Authorization"] = f"Bearer {secret}"
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
        flow = self._generate_flow(self._body(request, stream=False), bool(request.tools))
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
        flow = self._generate_flow(self._body(request, stream=False), bool(request.tools))
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
        flow = self._stream_flow(self._body(request, stream=True), bool(request.tools))
        return self._drive(flow, [])

    def astream(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[AssistantMessageChunk]:
        """Async :meth:`stream`."""
        request = ModelRequest.build(messages, tools, options)
        flow = self._stream_flow(self._body(request, stream=True), bool(request.tools))
        return self._adrive(flow, [])

    # The request logic, written once: generators yielding effects (_Post, _NEXT_EVENT, _Wait)
    # for a driver to carry out, and chunks for it to pass on; I/O errors are thrown back in.

    def _generate_flow(self, body: dict[str, Any], tools_offered: bool) -> _Flow:
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
                        return parse_completion(self._json(response), tools_offered=tools_offered)
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

    def _stream_flow(self, body: dict[str, Any], tools_offered: bool) -> _Flow:
        message_id = new_message_id()
        attempt = 0
        fell_back = False
        answered: httpx.Response | None = None  # the last error response an attempt got
        while True:
            attempt += 1
            self._log_attempt(body, attempt)
            decoder = StreamDecoder(message_id=message_id, tools_offered=tools_offered)
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
                        whole = parse_completion(self._json(response), tools_offered=tools_offered)
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

    def _body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        body = build_request_body(self.model, request, self.options, stream=stream)
        if self._required_tool_choice_refused and body.get("tool_choice") == "required":
            logger.debug('%s: sends tool_choice="auto" for "required" (refused)', self._where)
            body["tool_choice"] = "auto"
        return body

    def _fallback_body(
        self, body: dict[str, Any], response: httpx.Response
    ) -> dict[str, Any] | None:
        """The request to send instead when ``response`` refused ``tool_choice="required"``
        the llama.cpp way (HTTP 500, empty or naming tool_choice); ``None`` for every other
        failure."""
        if not rejects_required_tool_choice(body, response.status_code, response.text):
            return None
        message, _ = server_message(response.text)
        logger.warning(
            "%s",
            self._redact(
                f'{self._where} refused tool_choice="required" with HTTP 500 ({message}), as '
                'llama.cpp-based servers do; sending the request again with tool_choice="auto", '
                "so the model may answer without calling a tool"
            ),
        )
        return {**body, "tool_choice": "auto"}

    def _accepted(self, *, fell_back: bool) -> None:
        """Note a successful response; after a fallback, "auto" replaces "required" from now on."""
        if fell_back and not self._required_tool_choice_refused:
            self._required_tool_choice_refused = True
            logger.info(
                '%s accepted tool_choice="auto" after refusing "required"; this model sends '
                '"auto" for "required" from now on',
                self._where,
            )

    def _redact(self, text: str) -> str:
        secret = self._api_key.get_secret_value()
        if len(secret) < _MIN_SECRET_LENGTH:
            return text
        return text.replace(secret, "***")

    def _log_attempt(self, body: dict[str, Any], attempt: int) -> None:
        logger.debug(
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

    def _unusable(self, error: ModelResponseError) -> ModelResponseError:
        """``error``, raised while reading an answer, naming this model and without the key.

        The wire format's errors quote what the server sent, and a server (or a proxy) may echo
        the key back in an error object, an error event or a body that is not JSON.
        """
        return ModelResponseError(
            self._redact(f"{self._where}: {error}"), status_code=error.status_code
        )

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

    def _check_complete(self, decoder: StreamDecoder) -> None:
        """Raise :class:`ModelStreamCutError` unless the stream sent a finish reason.

        Every complete answer ends with one; ``[DONE]`` alone proves nothing (llama-cpp-python
        sends it after the chunks it had when another request cuts its stream), and llama.cpp
        may end a finished stream without ``[DONE]``. A partial answer, or an empty one, must
        not pass for a whole one (LESSONS #29).
        """
        if decoder.finish_reason is not None:
            return
        how = (
            "[DONE] came without a finish_reason; llama-cpp-python's server ends a stream so "
            "when another request arrives"
            if decoder.done
            else "no finish_reason and no [DONE]"
        )
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
            logger.debug(
                "%s: attempt %d failed (%s) after part of the answer was streamed; not retried",
                self._where,
                attempt,
                _short_reason(error),
            )
        elif delay is not None:
            logger.warning(
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
    model_ref: weakref.ref[OpenAIChatModel],
    loop: asyncio.AbstractEventLoop,
    client: httpx.AsyncClient,
) -> None:
    # Through a weak reference: a model no one uses any more need not wait for its loops.
    model = model_ref()
    if model is not None:
        model._forget_async_client(loop, client)


def _parse_base_url(base_url: str, *, source: str) -> httpx.URL:
    """``base_url`` as a URL, or a ``ValueError`` naming ``source`` and what is wrong.

    The URL itself is not repeated: it may carry credentials (user:pass@, ?key=).
    """
    fix = f"set {source} to the API root, e.g. 'http://localhost:11434/v1'"
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
