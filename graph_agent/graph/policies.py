"""Node policies: what ``add_node(..., retry=, timeout=, cache=, error_handler=)`` take, and the
checks that turn a bad policy into a clear :class:`~graph_agent.graph.errors.GraphSetupError`.

A node without policies runs exactly as before (nothing wraps it); a node with any runs
through ``_policy_node.py``: looked up in the cache, then attempted (each attempt cut at the
timeout), retried on the errors ``retry_on`` accepts, and, once no attempt is left, handed to
the error handler.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from graph_agent.graph.errors import GraphSetupError, NodeError, NodeTimeoutError

__all__ = ["CachePolicy", "RetryPolicy", "default_retry_on"]


def default_retry_on(error: BaseException) -> bool:
    """Whether ``error`` looks transient, as a network failure does: what a
    :class:`RetryPolicy` retries unless told otherwise.

    Retried: ``ConnectionError`` and ``TimeoutError`` (socket errors), a node's own
    :class:`~graph_agent.graph.errors.NodeTimeoutError`, a ``NodeError`` of a subgraph or
    agent whose cause is one of these, the chat models' transient errors
    (``ModelConnectionError`` and its timeouts, ``ModelServerError`` for 5xx,
    ``ModelRateLimitError``), and, when the program uses them, httpx's transport errors and
    ``HTTPStatusError`` with a 5xx status, and requests' connection errors, timeouts and 5xx
    ``HTTPError``. Anything else (a ``ValueError``, a 4xx) is a bug or a refusal that another
    attempt would only repeat.
    """
    if isinstance(error, ConnectionError | TimeoutError | NodeTimeoutError):
        return True
    if isinstance(error, NodeError) and isinstance(error.__cause__, Exception):
        return default_retry_on(error.__cause__)  # a subgraph's (or an agent's) node failed
    models = sys.modules.get("graph_agent.models.errors")  # loaded if a chat model raised:
    if models is not None and isinstance(error, models.ModelError):  # the engine never loads it
        return bool(error.transient or (error.status_code or 0) >= 500)
    httpx = sys.modules.get("httpx")  # never imported here: only an error it raised matters
    if httpx is not None:
        if isinstance(error, httpx.TransportError):
            return True
        if isinstance(error, httpx.HTTPStatusError):
            return bool(error.response.status_code >= 500)
    requests = sys.modules.get("requests")
    if requests is not None:
        if isinstance(error, requests.ConnectionError | requests.Timeout):
            return True
        if isinstance(error, requests.HTTPError):
            response = error.response
            return response is not None and bool(response.status_code >= 500)
    return False


RetryOn = type[BaseException] | tuple[type[BaseException], ...] | Callable[[BaseException], bool]


@dataclass(frozen=True)
class RetryPolicy:
    """How a node is attempted again after it raised (``add_node(..., retry=RetryPolicy())``).

    Attempt *n + 1* starts ``min(initial_interval * backoff_factor ** (n - 1), max_interval)``
    seconds after attempt *n* failed; with ``jitter`` a random part of it is taken off (the wait
    is between half and all of it), so that many runs failing together do not retry together.
    Only the errors ``retry_on`` accepts are retried; the others end the node at once.

    A failed attempt leaves no write behind: only the return of the attempt that succeeded
    reaches the state. What it did besides is not undone: chunks it emitted were already
    streamed (each ``StreamingOutput`` says its ``attempts``, so a reader can drop those of an
    earlier attempt), and its ``TaskContext.record`` values are kept (a recorded tool call is
    not made again, as after a crash).

    Args:
        max_attempts: Attempts in all, the first included (1: never retry).
        initial_interval: Seconds before the second attempt.
        backoff_factor: What each wait is multiplied by for the next one.
        max_interval: The longest wait, in seconds.
        jitter: Take a random part (up to half) off each wait.
        retry_on: The exception types to retry, or a predicate ``fn(error) -> bool``; by
            default the transient errors of :func:`default_retry_on`.
        sleep: How a sync node waits (a seam: tests pass a fake clock's sleep).
        async_sleep: How an async node waits.

    Example:
        >>> policy = RetryPolicy(max_attempts=4, initial_interval=1.0, jitter=False)
        >>> [policy.interval(n) for n in (1, 2, 3)]
        [1.0, 2.0, 4.0]
    """

    max_attempts: int = 3
    initial_interval: float = 0.5
    backoff_factor: float = 2.0
    max_interval: float = 128.0
    jitter: bool = True
    retry_on: RetryOn = default_retry_on
    sleep: Callable[[float], Any] = field(default=time.sleep, kw_only=True, repr=False)
    async_sleep: Callable[[float], Awaitable[Any]] = field(
        default=lambda seconds: _asyncio_sleep(seconds), kw_only=True, repr=False
    )

    def __post_init__(self) -> None:
        attempts = self.max_attempts
        if type(attempts) is not int or attempts < 1:
            raise GraphSetupError(
                f"RetryPolicy(max_attempts={attempts!r}): the number of attempts in all, the "
                "first included, an int of at least 1 (1 never retries), e.g. max_attempts=3"
            )
        for name in ("initial_interval", "max_interval"):
            _check_seconds(f"RetryPolicy({name}=...)", getattr(self, name), zero_ok=True)
        factor = self.backoff_factor
        if not _is_number(factor) or not factor >= 1 or math.isinf(factor):
            raise GraphSetupError(
                f"RetryPolicy(backoff_factor={factor!r}): each wait is the last one times this "
                "factor; give a finite number of at least 1 (1: equal waits), e.g. 2.0"
            )
        retry_on = self.retry_on
        if isinstance(retry_on, tuple):
            if not retry_on or not all(_is_error_type(t) for t in retry_on):
                raise GraphSetupError(
                    f"RetryPolicy(retry_on={retry_on!r}): a tuple of exception types, e.g. "
                    "(ConnectionError, TimeoutError)"
                )
        elif not _is_error_type(retry_on) and not callable(retry_on):
            raise GraphSetupError(
                f"RetryPolicy(retry_on={retry_on!r}): an exception type, a tuple of them, or a "
                "predicate fn(error) -> bool"
            )

    def interval(self, attempt: int) -> float:
        """The wait, without jitter, after attempt number ``attempt`` (1 for the first) failed."""
        wait = self.initial_interval * self.backoff_factor ** (attempt - 1)
        return float(min(wait, self.max_interval))

    def delay(self, attempt: int) -> float:
        """The wait after attempt ``attempt`` failed, with jitter when it is on."""
        wait = self.interval(attempt)
        if not self.jitter:
            return wait
        import random  # not with the package: only a retry needs it

        return wait * (1.0 - 0.5 * random.random())

    def retries(self, error: BaseException) -> bool:
        """Whether ``retry_on`` accepts ``error``."""
        retry_on = self.retry_on
        if isinstance(retry_on, type | tuple):
            return isinstance(error, retry_on)
        return bool(retry_on(error))


@dataclass(frozen=True)
class CachePolicy:
    """Keep a node's result and reuse it for the same input (``add_node(..., cache=...)``).

    The cache lives beside the checkpoints: in the graph's saver (memory, SQLite or
    PostgreSQL), so a hit also spans runs, threads and (SQLite, PostgreSQL) processes; a graph
    without a saver keeps its cache in memory. Only a dict update (or ``None``) is kept; a node
    returning a ``Command`` runs every time.

    Args:
        key: ``fn(state) -> str`` naming what the result depends on; by default a hash of the
            node's whole input (its state view, or a Send's input).
        ttl: Seconds a result stays fresh (``None``: for ever).
    """

    key: Callable[[Any], str] | None = None
    ttl: float | None = None

    def __post_init__(self) -> None:
        if self.key is not None and not callable(self.key):
            raise GraphSetupError(
                f"CachePolicy(key={self.key!r}): a function fn(state) -> str, or None for a "
                "hash of the node's input"
            )
        if self.ttl is not None:
            _check_seconds("CachePolicy(ttl=...)", self.ttl, zero_ok=False)


async def _asyncio_sleep(seconds: float) -> None:
    import asyncio  # not with the package: see _concurrency.py

    await asyncio.sleep(seconds)


def check_timeout(node: str, timeout: Any) -> float | None:
    """``add_node(..., timeout=...)`` as seconds, or a :class:`GraphSetupError` naming the fix."""
    if timeout is None:
        return None
    _check_seconds(f"add_node({node!r}, ..., timeout=...)", timeout, zero_ok=False)
    return float(timeout)


def _check_seconds(where: str, value: Any, *, zero_ok: bool) -> None:
    if not _is_number(value) or math.isnan(value) or math.isinf(value) or value < 0:
        raise GraphSetupError(
            f"{where}: {value!r} is no number of seconds; give a finite number of at least 0"
            f"{'' if zero_ok else ' (above 0)'}, e.g. 30"
        )
    if not zero_ok and value == 0:
        raise GraphSetupError(f"{where}: must be above 0 seconds (or None for no limit), e.g. 30")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_error_type(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseException)
