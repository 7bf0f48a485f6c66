"""Hearing a call's cancel signal (``RunnableConfig.cancel``) the moment it is set, so that the
step running then is stopped at once instead of at its end.

A ``threading.Event`` calls nobody back when it is set, but it does release its waiters: the
threads blocked in its ``wait()`` are held in its condition, each as a lock that ``set()``
releases. :class:`CancelWatch` stands there as one more waiter whose ``release()`` wakes the
running step (its driver puts a mark on the step's queue). A call with a cancel signal costs
one append to that list and one removal: no thread, no polling; a call without one, nothing.
An :class:`AnySignal` (an agent called as a tool stops with its caller's run or with its own
call) is heard through each event it holds. A signal of another kind (anything with
``is_set``) cannot be heard so: it is read at each step boundary and when a step's tasks have
ended, which discards their writes all the same.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Callable, Iterator

from graph_agent.graph.types import CancelSignal


class AnySignal:
    """A cancel signal that is set when any of ``signals`` is (``None`` among them is left
    out); a call given it is stopped at once when one of its ``threading.Event`` s is set.

    Example:
        >>> caller, call = threading.Event(), threading.Event()
        >>> either = AnySignal(caller, call, None)
        >>> either.is_set(), call.set(), either.is_set()
        (False, None, True)
    """

    __slots__ = ("signals",)

    def __init__(self, *signals: CancelSignal | None) -> None:
        self.signals = tuple(signal for signal in signals if signal is not None)

    def is_set(self) -> bool:
        return any(signal.is_set() for signal in self.signals)

    def __repr__(self) -> str:
        return f"AnySignal{self.signals!r}"


class CancelWatch:
    """A waiter on one or more ``threading.Event`` s: the ``set()`` of any calls
    :attr:`on_set` (on the setting thread, with the event's lock held: it must only hand the
    news on, e.g. put a mark on a queue). One per call, from its start to its end
    (:meth:`close`); each step that can be stopped points :attr:`on_set` at itself
    (:meth:`listen`)."""

    __slots__ = ("_events", "on_set")

    def __init__(self, events: tuple[threading.Event, ...]) -> None:
        self._events = events
        self.on_set: Callable[[], object] | None = None
        for event in events:
            condition = event._cond  # type: ignore[attr-defined]  # see the module docstring
            with condition:
                condition._waiters.append(self)

    def listen(self, on_set: Callable[[], object]) -> bool:
        """Call ``on_set`` when an event is set (at once when one is set already: then True)."""
        self.on_set = on_set
        for event in self._events:
            if event.is_set():  # set before this step listened: heard now, not lost
                on_set()
                return True
        return False

    def release(self) -> None:
        """What an event's ``set()`` calls (as it releases a waiting thread's lock)."""
        on_set = self.on_set
        if on_set is not None:
            with contextlib.suppress(Exception):  # the canceller's set() must not fail
                on_set()

    def close(self) -> None:
        """Stop waiting (the call ended): the events no longer hold this watch."""
        self.on_set = None
        for event in self._events:
            condition = event._cond  # type: ignore[attr-defined]
            with condition, contextlib.suppress(ValueError):  # set() took it out already
                condition._waiters.remove(self)


def watch_cancel(signal: CancelSignal | None) -> CancelWatch | None:
    """A watch on ``signal`` when it can be heard the moment it is set (a ``threading.Event``
    whose condition holds its waiters as CPython's does, or an :class:`AnySignal` holding
    such events), else ``None``."""
    if isinstance(signal, threading.Event):
        return CancelWatch((signal,)) if _hearable(signal) else None
    events = tuple(_events_in(signal))
    return CancelWatch(events) if events else None


def _hearable(event: threading.Event) -> bool:
    waiters = getattr(getattr(event, "_cond", None), "_waiters", None)
    return isinstance(waiters, collections.deque)


def _events_in(signal: CancelSignal | None) -> Iterator[threading.Event]:
    """The events a watch can hear in ``signal``, nested :class:`AnySignal` s included."""
    if isinstance(signal, AnySignal):
        for inner in signal.signals:
            yield from _events_in(inner)
    elif isinstance(signal, threading.Event) and _hearable(signal):
        yield signal
