"""A greenlet per stream (:class:`InlineStream`, :func:`wait_delivering`): a stream's lone sync
node runs on the caller's thread, and each chunk it emits reaches the caller at once. A worker
thread would do the same with two thread wake-ups a step instead of two greenlet switches (W5:
about 1.8 times the µs per streamed event). greenlet is imported by the first stream, not with
the package."""

from __future__ import annotations

import concurrent.futures
import contextlib
import queue
import threading
import time
from collections.abc import Callable, Collection
from concurrent.futures import Future
from contextvars import copy_context
from typing import TYPE_CHECKING, Any

from graph_agent.graph.task import _current_task

if TYPE_CHECKING:
    import greenlet


FINISHED = ()
"""What :class:`InlineStream` returns for a finished call (an empty tuple: no item is one)."""


class InlineStream:
    """Runs sync calls on the caller's thread, in a greenlet, so that each item a call
    :meth:`deliver` s switches back to the caller and is handed over the moment it is made.

    One greenlet serves every call of the stream, then waits, parked, for the next stream on
    its thread (making and ending one costs about as much as a ten-step call's switches). Each
    call runs in a copy of the caller's context, as an inline call would. A greenlet belongs to
    its thread: :meth:`carry_on` only on the one that started the call (:meth:`on_its_thread`).
    """

    __slots__ = (
        "_busy",
        "_caller",
        "_getcurrent",
        "_greenlet",
        "_module",
        "_thread",
        "_waker",
        "buffered",
        "result",
    )

    def __init__(self) -> None:
        import greenlet

        self._module = greenlet
        self._getcurrent = greenlet.getcurrent
        self._greenlet: greenlet.greenlet | None = None
        self._thread = 0
        self._caller: greenlet.greenlet | None = None
        self._busy = False  # a call is running (or paused at an item) in the greenlet
        self.buffered: list[Any] = []
        self._waker: queue.SimpleQueue[None] | None = None  # made by the first wait()
        self.result: Any = None  # what the call that just ended returned (take it: = None)

    def start(self, thread: int, fn: Callable[..., object], /, *args: Any) -> Any:
        """Call ``fn(*args)`` (on ``thread``, the caller's) until it delivers its first item
        (returned) or is done (:data:`FINISHED`; items it delivered from threads of its own
        wait in :attr:`buffered`). An exception ``fn`` raises is raised here."""
        worker = self._greenlet
        if worker is None or self._thread != thread or worker.dead:
            worker = self._greenlet = _parked_greenlet() or self._module.greenlet(_serve)
            self._thread = thread
        caller = self._caller = self._getcurrent()
        if worker.parent is not caller:
            worker.parent = caller  # where an exception the call does not catch goes
        worker.gr_context = copy_context()
        self._busy = True
        return worker.switch(self, fn, args)

    def on_its_thread(self) -> bool:
        """Whether this is the thread the greenlet runs on."""
        return threading.get_ident() == self._thread

    def carry_on(self) -> Any:
        """Carry on after an item was handed over: the next item, or :data:`FINISHED`."""
        self._caller = self._getcurrent()
        assert self._greenlet is not None
        return self._greenlet.switch()

    def take_buffered(self) -> list[Any]:
        """The items the last call delivered from threads of its own and that no :meth:`wait`
        handed over (they follow the call's end)."""
        buffered, self.buffered = self.buffered, []
        return buffered

    def deliver(self, item: Any) -> None:
        """Hand ``item`` to the caller: now, from the call's greenlet; from a thread the call
        started, while the call waits (:meth:`wait`) or after it."""
        if self._getcurrent() is self._greenlet and self._caller is not None:
            self._caller.switch(item)
        else:
            self.buffered.append(item)
            waker = self._waker
            if waker is not None:
                waker.put(None)

    def wait(
        self, futures: Collection[Future[Any]], timeout: float | None, return_when: str
    ) -> tuple[set[Future[Any]], set[Future[Any]]]:
        """``concurrent.futures.wait`` for the call in this greenlet, handing over what its
        threads deliver meanwhile (see :func:`wait_delivering`)."""
        if self._getcurrent() is not self._greenlet or self._caller is None:
            return concurrent.futures.wait(futures, timeout, return_when)
        waker = self._waker
        if waker is None:
            waker = self._waker = queue.SimpleQueue()
        for future in futures:
            future.add_done_callback(lambda _: waker.put(None))
        deadline = None if timeout is None else time.monotonic() + timeout
        every = return_when == concurrent.futures.ALL_COMPLETED
        while True:
            buffered = self.buffered
            while buffered:  # oldest first; threads may append meanwhile
                self._caller.switch(buffered.pop(0))
            done = {future for future in futures if future.done()}
            if done and (not every or len(done) == len(futures)):
                return done, set(futures) - done
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return done, set(futures) - done
            with contextlib.suppress(queue.Empty):
                waker.get(timeout=remaining)

    def close(self) -> None:
        """Park the greenlet for the next stream, or end it (mid-call, when the caller stopped
        reading the stream: the call's ``finally`` blocks run)."""
        worker, self._greenlet = self._greenlet, None
        if worker is None or worker.dead or self._thread != threading.get_ident():
            return
        if not self._busy and _park(worker):
            return
        worker.parent = self._getcurrent()
        worker.throw(self._module.GreenletExit)


def _serve(host: InlineStream, fn: Callable[..., object], args: tuple[Any, ...]) -> None:
    """A stream greenlet's body: make each call switched in, leave what it returned with the
    host, then switch back with nothing (:data:`FINISHED`). Between calls, parked or not, it
    holds no call, host, arguments or result."""
    while True:
        host.result = fn(*args)
        host._busy = False
        caller = host._caller
        assert caller is not None
        del host, fn, args
        host, fn, args = caller.switch()


_MAX_PARKED = 4
_parked = threading.local()


def _parked_greenlet() -> greenlet.greenlet | None:
    """An idle stream greenlet this thread parked, if any."""
    idle: list[greenlet.greenlet] | None = getattr(_parked, "idle", None)
    while idle:
        worker = idle.pop()
        if not worker.dead:
            return worker
    return None


def _park(worker: greenlet.greenlet) -> bool:
    """Keep an idle stream greenlet for this thread's next stream (a few at most)."""
    idle: list[greenlet.greenlet] | None = getattr(_parked, "idle", None)
    if idle is None:
        idle = _parked.idle = []
    if len(idle) >= _MAX_PARKED:
        return False
    worker.gr_context = None  # the finished call's context variables go with it
    idle.append(worker)
    return True


def wait_delivering(
    futures: Collection[Future[Any]],
    timeout: float | None = None,
    return_when: str = concurrent.futures.FIRST_COMPLETED,
) -> tuple[set[Future[Any]], set[Future[Any]]]:
    """``concurrent.futures.wait`` for a node waiting on threads it started (a tool node's
    tools): while it waits, the chunks those threads emit reach a ``stream()`` caller as they
    come, instead of after the node. Anywhere else it is ``concurrent.futures.wait``."""
    task = _current_task.get()
    emit = task._emit if task is not None else None
    host = getattr(emit, "__self__", None)
    if isinstance(host, InlineStream):
        return host.wait(futures, timeout, return_when)
    return concurrent.futures.wait(futures, timeout, return_when)
