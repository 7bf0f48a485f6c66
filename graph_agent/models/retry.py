"""When to retry a model call, and how long to wait first.

Retried: HTTP 408, 409, 429 and 5xx, and connection failures (including timeouts), with
exponential backoff and jitter, or exactly the wait the server asked for in ``retry-after-ms`` /
``Retry-After`` (seconds or an HTTP date). A server asking for more than
``max_retry_after`` seconds (or for an infinite wait) is not waited for: the call fails at once,
saying so. A value that is not a number (``nan``, text) is ignored: the backoff applies.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

__all__ = ["RETRYABLE_STATUS_CODES", "RetryPolicy", "retry_after_seconds"]

RETRYABLE_STATUS_CODES = frozenset({408, 409, 429})


def is_retryable_status(status_code: int) -> bool:
    """Whether an HTTP status is worth another attempt (408, 409, 429, 5xx)."""
    return status_code in RETRYABLE_STATUS_CODES or status_code >= 500


def now() -> datetime:
    """The current UTC time; a module function so tests can pin the clock."""
    return datetime.now(UTC)


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The wait a response asks for, in seconds, or ``None`` when it names none (or nonsense).

    Reads ``retry-after-ms`` (sent by OpenAI) first, then ``Retry-After`` as seconds or as an
    HTTP date. Header names are matched case-insensitively. ``nan`` is nonsense (``None``);
    ``inf`` stays infinite, a wait longer than any ``max_retry_after``.

    Example:
        >>> retry_after_seconds({"Retry-After": "2"})
        2.0
        >>> retry_after_seconds({"retry-after-ms": "250"})
        0.25
    """
    lowered = {name.lower(): value for name, value in headers.items()}
    milliseconds = _number(lowered.get("retry-after-ms"))
    if milliseconds is not None:
        return max(milliseconds / 1000.0, 0.0)
    value = lowered.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is not None:
        return max(seconds, 0.0)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - now()).total_seconds(), 0.0)


def _number(text: str | None) -> float | None:
    # float() accepts "nan" and "inf". NaN compares false with every limit (it would pass the
    # max_retry_after check and crash time.sleep), so it is no number here; inf is kept: a wait
    # longer than any limit, so the call fails at once.
    if text is None:
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    return None if math.isnan(number) else number


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How a model client retries.

    Attributes:
        max_retries: Extra attempts after the first (``0``: never retry).
        initial_delay: Backoff before the first retry, in seconds; doubled for each further one.
        max_delay: Upper bound of a backoff delay.
        jitter: Fraction of a backoff delay taken off at random (0.25: between 75% and 100%).
        max_retry_after: The longest server-requested wait honoured; longer fails at once.
        sleep: How a sync client waits (a seam for tests).
        async_sleep: How an async client waits.

    Example:
        >>> policy = RetryPolicy(max_retries=3, initial_delay=0.5, jitter=0)
        >>> [policy.backoff(n) for n in (1, 2, 3)]
        [0.5, 1.0, 2.0]
    """

    max_retries: int = 2
    initial_delay: float = 0.5
    max_delay: float = 8.0
    jitter: float = 0.25
    max_retry_after: float = 120.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    async_sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, repr=False)

    def backoff(self, retry_number: int) -> float:
        """The backoff before retry number ``retry_number`` (1 for the first retry)."""
        delay = min(self.initial_delay * 2.0 ** (retry_number - 1), self.max_delay)
        return delay * (1.0 - self.jitter * random.random())

    def delay_before_retry(self, attempt: int, retry_after: float | None) -> float | None:
        """Seconds to wait before the attempt after ``attempt`` (1-based), or ``None``: give up.

        ``retry_after`` is what the server asked for, if anything; it is honoured when it is not
        above ``max_retry_after`` (the caller checks that first, to fail with a clear message).
        """
        if attempt > self.max_retries:
            return None
        if retry_after is not None:
            return retry_after
        return self.backoff(attempt)
