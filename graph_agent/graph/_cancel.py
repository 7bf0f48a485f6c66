"""Hearing a call's cancel signal (``RunnableConfig.cancel``) the moment it is set, so that the
step running then is stopped at once instead of at its end.

A ``threading.Event`` calls nobody back when it is set, but it does release its waiters: the
threads blocked in its ``wait()`` are held in its condition, each as a lock that ``set()``
releases. :class:`CancelWatch` stands there as one more waiter whose ``release()`` wakes the
running step (its driver puts a mark on the step's queue). A call with a cancel signal costs
one append to that list and one removal: no thread, no polling; a call without one, nothing.
A signal of another kind (anything with ``is_set``) cannot be heard so: it is read at each step
boundary and when a step's tasks have ended, which discards their writes all the same.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Callable

from graph_agent.graph.types import CancelSignal


class CancelWatch:
    """A waiter on a ``threading.Event``: its ``set()`` calls :attr:`on_set` (on the setting
    thread, with the event's lock held: it must only hand the news on, e.g. put a mark on a
    queue). One per call, from its start to its end (:meth:`close`); each step that can be
    stopped points :attr:`on_set` at itself (:meth:`listen`)."""

    __slots__ = ("_event", "on_set")

    def __init__(self, event: threading.Event) -> None:
        self._event = event
        self.on_set: Callable[[], object] | None = None
        condition = event._cond  # type: ignore[attr-defined]  # see the module docstring
        with condition:
            condition._waiters.append(self)

    def listen(self, on_set: Callable[[], object]) -> None:
        """Call ``on_set`` when the event is set (at once when it is set already)."""
        self.on_set = on_set
        if self._event.is_set():  # set before this step listened: heard now, not lost
            on_set()

    def release(self) -> None:
        """What the event's ``set()`` calls (as it releases a waiting thread's lock)."""
        on_set = self.on_set
        if on_set is not None:
            with contextlib.suppress(Exception):  # the canceller's set() must not fail
                on_set()

    def close(self) -> None:
        """Stop waiting (the call ended): the event no longer holds this watch."""
        self.on_set = None
        condition = self._event._cond  # type: ignore[attr-defined]
        with condition, contextlib.suppress(ValueError):  # set() took it out already
            condition._waiters.remove(self)


def watch_cancel(signal: CancelSignal | None) -> CancelWatch | None:
    """A watch on ``signal`` when it can be heard the moment it is set (a ``threading.Event``
    whose condition holds its waiters as CPython's does), else ``None``."""
    if not isinstance(signal, threading.Event):
        return None
    waiters = getattr(getattr(signal, "_cond", None), "_waiters", None)
    if not isinstance(waiters, collections.deque):
        return None
    return CancelWatch(signal)
