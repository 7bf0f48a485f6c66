"""Waits cut at a timeout (:class:`TimedOut`, :func:`at_most`): what tools and nodes with a
timeout build on (``_concurrency.py``: sync calls on the worker pool; ``_off_loop.py``:
coroutines on graph_agent's shared loop). asyncio is imported by the first call."""

from __future__ import annotations

import threading
from collections.abc import Awaitable
from typing import TypeVar

_T = TypeVar("_T")


class TimedOut(Exception):
    """A wait of ``timeout`` seconds for a call ran out (never confused with a TimeoutError the
    call raised itself, such as a socket's). ``loop_blocked``: the call was a coroutine that
    blocked its loop (``time.sleep`` in an ``async def``): it could not be cancelled."""

    def __init__(self, timeout: float, *, loop_blocked: bool = False) -> None:
        blocked = " (its event loop was blocked)" if loop_blocked else ""
        super().__init__(f"did not finish within {timeout:g} s{blocked}")
        self.timeout = timeout
        self.loop_blocked = loop_blocked


BLOCKED_GRACE = 0.5
"""Seconds past a coroutine's timeout after which its loop is taken to be blocked: its own
cancellation would have cut it at the timeout otherwise."""


def _set(cancelled: threading.Event | None) -> None:
    if cancelled is not None:
        cancelled.set()


async def at_most(
    awaitable: Awaitable[_T], timeout: float, *, cancelled: threading.Event | None = None
) -> _T:
    """``awaitable``'s result, cancelled once it has run ``timeout`` seconds, or with the
    caller (its run was cancelled, say): then waited for, as an await is.

    Raises:
        TimedOut: Past ``timeout`` (``cancelled`` is set; a thread it waits on is abandoned).
    """
    import asyncio

    running = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait([running], timeout=timeout)
    except asyncio.CancelledError:  # asyncio.wait leaves what it waits for running
        running.cancel()
        _set(cancelled)
        await asyncio.wait([running])
        raise
    if not done:
        running.cancel()
        _set(cancelled)
        raise TimedOut(timeout)
    return running.result()
