"""Interceptors wrap the model call and each tool call; the first registered is outermost.

An interceptor's ``priority`` (default 0) reorders that: lower is further out, equal
priorities keep registration order. Its ``tools`` join the agent's toolset (see
:mod:`graph_agent.agent.contributions`).

An interceptor gets the request (which it may edit) and ``call_next`` (the rest of the chain);
it may retry, fall back, answer by itself, or change what comes back.

Example:
    >>> class Cheaper(ModelInterceptor):
    ...     def intercept(self, request, call_next):
    ...         request.options["temperature"] = 0
    ...         return call_next(request)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

from graph_agent.graph.errors import GraphCancelledError
from graph_agent.graph.task import emit_chunk
from graph_agent.graph.types import RunnableConfig
from graph_agent.messages import (
    AssistantMessage,
    AssistantMessageChunk,
    ToolCall,
    ToolResponseMessage,
)
from graph_agent.models.base import ChatModel, ModelRequest, fold_chunks
from graph_agent.models.errors import (
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelError,
    ModelNotFoundError,
    ModelRateLimitError,
    UnrecordedRequestError,
)
from graph_agent.models.retry import is_retryable_status
from graph_agent.tools import Tool, ToolArgumentsError, ToolContext

logger = logging.getLogger("graph_agent.agent")

ModelCall = Callable[[ModelRequest], AssistantMessage]
ToolCallFn = Callable[["ToolCallRequest"], ToolResponseMessage]


@dataclass(kw_only=True)
class ModelCallState:
    """One model call of the model node, as interceptors may need to know it.

    Attributes:
        streaming: The caller streams: the answer's chunks are shown as they arrive.
        streamed: Chunks of this call already reached the caller. Like the HTTP client, which
            never retries a stream that has started, interceptors must not run the call again
            then (the caller would see the answer twice).
    """

    streaming: bool
    streamed: bool = False


_model_call: ContextVar[ModelCallState | None] = ContextVar("graph_agent_model_call", default=None)


def current_model_call() -> ModelCallState | None:
    """The model call running in this context (``None`` outside the model node).

    It is one object per call of the node's model chain, shared by every interceptor and
    every copy of the :class:`ModelRequest`, so it stays right when a request is replaced.
    """
    return _model_call.get()


def run_model_call(call: ModelCall, request: ModelRequest, *, streaming: bool) -> AssistantMessage:
    """Run ``call(request)`` as one model call (see :func:`current_model_call`)."""
    token = _model_call.set(ModelCallState(streaming=streaming))
    try:
        return call(request)
    finally:
        _model_call.reset(token)


def stream_to_caller(model: ChatModel, request: ModelRequest) -> AssistantMessage:
    """Stream ``model``'s answer to the caller chunk by chunk; return the folded message.

    The running model call is marked ``streamed`` when its first chunk goes out.
    """
    chunks = model.stream(request.messages, request.tools, request.options)
    return fold_chunks(_emitting(chunks, current_model_call()))


async def acall_model(
    model: ChatModel, request: ModelRequest, *, streaming: bool
) -> AssistantMessage:
    """One model call through ``model``'s async API, no interceptors: streamed to the caller
    chunk by chunk when ``streaming`` (as :func:`stream_to_caller`), else ``agenerate``."""
    state = ModelCallState(streaming=streaming)
    token = _model_call.set(state)
    try:
        if not streaming:
            return await model.agenerate(request.messages, request.tools, request.options)
        chunks = []
        async for chunk in model.astream(request.messages, request.tools, request.options):
            state.streamed = True
            emit_chunk(chunk)
            chunks.append(chunk)
        return fold_chunks(chunks)
    finally:
        _model_call.reset(token)


def _emitting(
    chunks: Iterable[AssistantMessageChunk], state: ModelCallState | None
) -> Iterator[AssistantMessageChunk]:
    for chunk in chunks:
        if state is not None:
            state.streamed = True
        emit_chunk(chunk)
        yield chunk


@dataclass(kw_only=True)
class ToolCallRequest:
    """One tool call as tool interceptors see it; replace ``call`` to change the arguments.

    Attributes:
        call: The model's tool call (``call.arguments`` are what the tool receives: a copy,
            so editing it in place changes this call only, never the message in the history).
        tool: The tool of that name, or ``None`` when the agent has no such tool.
        state: The agent's state when the call was made (read-only).
        config: The run's config (``config.context`` holds per-run values).
        context: What a ``ToolContext`` parameter of the tool receives.
    """

    call: ToolCall
    tool: Tool | None
    state: Any
    config: RunnableConfig | None
    context: ToolContext

    def with_arguments(self, arguments: dict[str, Any]) -> ToolCallRequest:
        """A copy of this request whose call carries ``arguments``.

        The model's malformed text (``raw_arguments``) is dropped, so an interceptor can repair
        arguments that were not valid JSON; the tool then receives ``arguments``.
        """
        update = {"arguments": dict(arguments), "raw_arguments": None}
        return replace(self, call=self.call.model_copy(update=update))


class ModelInterceptor:
    """Wraps every model call. Override :meth:`intercept`.

    Attributes:
        priority: Lower sits further out (default 0; equal ones in registration order).
        tools: Tools this interceptor brings to the agent's toolset (only tools: see
            :mod:`graph_agent.agent.contributions`).
    """

    priority: int = 0
    tools: Sequence[Any] = ()

    def intercept(self, request: ModelRequest, call_next: ModelCall) -> AssistantMessage:
        return call_next(request)


class ToolInterceptor:
    """Wraps every tool call. Override :meth:`intercept`.

    Attributes:
        priority: Lower sits further out (default 0; equal ones in registration order).
        tools: Tools this interceptor brings to the agent's toolset (only tools: see
            :mod:`graph_agent.agent.contributions`).
    """

    priority: int = 0
    tools: Sequence[Any] = ()

    def intercept(self, request: ToolCallRequest, call_next: ToolCallFn) -> ToolResponseMessage:
        return call_next(request)


def chain_model(interceptors: Sequence[ModelInterceptor], innermost: ModelCall) -> ModelCall:
    """``innermost`` wrapped by ``interceptors``, the first one outermost."""
    call = innermost
    for interceptor in reversed(interceptors):
        call = _bind_model(interceptor, call)
    return call


def chain_tool(interceptors: Sequence[ToolInterceptor], innermost: ToolCallFn) -> ToolCallFn:
    """``innermost`` wrapped by ``interceptors``, the first one outermost."""
    call = innermost
    for interceptor in reversed(interceptors):
        call = _bind_tool(interceptor, call)
    return call


def _bind_model(interceptor: ModelInterceptor, call_next: ModelCall) -> ModelCall:
    return lambda request: interceptor.intercept(request, call_next)


def _bind_tool(interceptor: ToolInterceptor, call_next: ToolCallFn) -> ToolCallFn:
    return lambda request: interceptor.intercept(request, call_next)


class ModelRetryInterceptor(ModelInterceptor):
    """Retries a failing model call up to ``max_retries`` times, with a short backoff.

    Only failures that another attempt may cure are retried (see :func:`is_transient`, or pass
    ``retry_on``): a wrong API key, an unknown model or a request the server refused fails at
    once. A streamed call that failed after its first chunks reached the caller is not retried
    (the caller would see the answer twice); its error propagates, like the HTTP client's rule
    for a stream that has started.

    A rate limit (:class:`~graph_agent.models.ModelRateLimitError`) that says how long to wait
    (``retry_after``) is retried no sooner than that; when the wait is longer than
    ``max_retry_after`` seconds it is not retried at all (an attempt sooner would be refused
    again), and the error says so in a note.
    """

    def __init__(
        self,
        max_retries: int = 2,
        backoff: float = 0.5,
        *,
        retry_on: Callable[[Exception], bool] | None = None,
        max_retry_after: float = 120.0,
    ) -> None:
        self.max_retries = max_retries
        self.backoff = backoff
        self.retry_on = retry_on or is_transient
        self.max_retry_after = max_retry_after

    def intercept(self, request: ModelRequest, call_next: ModelCall) -> AssistantMessage:
        for attempt in range(self.max_retries + 1):
            try:
                return call_next(request)
            except Exception as exc:
                if attempt == self.max_retries or not self.retry_on(exc):
                    raise
                state = current_model_call()
                if state is not None and state.streamed:
                    exc.add_note(
                        "ModelRetryInterceptor did not retry: the answer's first chunks had "
                        "already been streamed to the caller"
                    )
                    raise
                delay = self.backoff * 2**attempt
                retry_after = exc.retry_after if isinstance(exc, ModelRateLimitError) else None
                if retry_after is not None:
                    if retry_after > self.max_retry_after:
                        exc.add_note(
                            f"ModelRetryInterceptor did not retry: the server asked to wait "
                            f"{retry_after:g} s, longer than its max_retry_after of "
                            f"{self.max_retry_after:g} s"
                        )
                        raise
                    delay = max(delay, retry_after)
                logger.warning(
                    "model call failed (%s: %s); retry %d of %d in %.2f s",
                    type(exc).__name__,
                    exc,
                    attempt + 1,
                    self.max_retries,
                    delay,
                )
                time.sleep(delay)
        raise AssertionError("unreachable")


_PERMANENT = (
    ModelAuthenticationError,
    ModelNotFoundError,
    ModelBadRequestError,
    UnrecordedRequestError,
)


def is_transient(error: Exception) -> bool:
    """Whether another attempt may cure ``error``: ``ModelRetryInterceptor``'s default rule.

    Not a wrong API key, an unknown model, a request the server refused (4xx other than 408,
    409 and 429, a context too long) or a request a replaying model never recorded; yes for
    connection errors, timeouts, rate limits, server errors, malformed answers, and exceptions
    that are not :class:`ModelError` (a custom model's own transport errors).

    Example:
        >>> from graph_agent.models import ModelAuthenticationError, ModelServerError
        >>> is_transient(ModelServerError("overloaded", status_code=503))
        True
        >>> is_transient(ModelAuthenticationError("bad key", status_code=401))
        False
    """
    if not isinstance(error, ModelError):
        return True
    if isinstance(error, _PERMANENT):
        return False
    status = error.status_code
    return status is None or status < 400 or is_retryable_status(status)


class ModelFallbackInterceptor(ModelInterceptor):
    """When the agent's model fails, asks each of ``models`` in turn with the same request.

    When the caller streams and nothing of the failed answer reached it yet, the fallback's
    answer is streamed too; otherwise it is generated whole.
    """

    def __init__(self, *models: ChatModel) -> None:
        if not models:
            raise ValueError("ModelFallbackInterceptor needs at least one fallback model")
        self.models = models

    def intercept(self, request: ModelRequest, call_next: ModelCall) -> AssistantMessage:
        try:
            return call_next(request)
        except Exception as first:
            error: Exception = first
            for model in self.models:
                logger.warning("model call failed (%s); trying fallback %r", error, model)
                state = current_model_call()
                try:
                    if state is not None and state.streaming and not state.streamed:
                        return stream_to_caller(model, request)
                    return model.generate(request.messages, request.tools, request.options)
                except Exception as exc:
                    error = exc
            raise error from first


_ATTEMPT_RECORD = "tool_attempt:"  # a task record: the attempt a retried call is in


class ToolRetryInterceptor(ToolInterceptor):
    """Retries a tool call that raised, up to ``max_retries`` times.

    Each retry gets a fresh :class:`~graph_agent.tools.ToolContext` (a ``cancelled`` event of
    its own, ``attempt`` counting up): a call that timed out was abandoned with its event set,
    and the retry must not start out cancelled. Calls that cannot succeed on another attempt
    fail at once: an unknown tool and arguments that do not fit the tool
    (:class:`~graph_agent.tools.ToolArgumentsError`); a cancelled run is not retried either.
    The attempt under way is recorded in the task, so a call that paused (an agent tool asking
    for approval) resumes in that attempt, not in the one that failed before it.
    """

    def __init__(self, max_retries: int = 2, backoff: float = 0.0) -> None:
        self.max_retries = max_retries
        self.backoff = backoff

    def intercept(self, request: ToolCallRequest, call_next: ToolCallFn) -> ToolResponseMessage:
        task = request.config.task if request.config is not None else None
        key = f"{_ATTEMPT_RECORD}{request.call.id}"
        first = task.recorded(key, 0) if task is not None else 0
        for attempt in range(first, self.max_retries + 1):
            if attempt:
                context = replace(request.context, cancelled=threading.Event(), attempt=attempt)
                request = replace(request, context=context)
                if task is not None and attempt != first:
                    task.record(key, attempt)
            try:
                return call_next(request)
            except (ToolArgumentsError, GraphCancelledError):
                raise
            except Exception:
                if attempt == self.max_retries or request.tool is None:
                    raise
                if self.backoff:
                    time.sleep(self.backoff * 2**attempt)
        raise AssertionError("unreachable")


class ToolEmulatorInterceptor(ToolInterceptor):
    """Answers tool calls from ``fn(request)`` instead of running the tools (tests, dry runs).

    ``fn`` returns the result text (or any value, turned into text), or ``None`` to let the real
    tool run. ``tools`` limits emulation to those tool names.
    """

    def __init__(self, fn: Callable[[ToolCallRequest], Any], tools: Sequence[str] = ()) -> None:
        self.fn = fn
        self.emulated = frozenset(tools)
        """The names of the tools emulated (empty: all); ``tools`` is what interceptors
        contribute to the toolset, none here."""

    def intercept(self, request: ToolCallRequest, call_next: ToolCallFn) -> ToolResponseMessage:
        if self.emulated and request.call.name not in self.emulated:
            return call_next(request)
        result = self.fn(request)
        if result is None:
            return call_next(request)
        if isinstance(result, ToolResponseMessage):
            return result
        from graph_agent.tools import result_to_content

        return ToolResponseMessage(
            tool_call_id=request.call.id, name=request.call.name, content=result_to_content(result)
        )
