"""Coroutines an async caller must be able to cut at a timeout, run off its event loop: an
``async def`` tool may block its loop (``time.sleep`` or sync I/O where it should await), and
on the caller's loop (a server's) it would stall every other run there and could not be cut.
One of the ways :mod:`~graph_agent.graph._concurrency` lists of running code off the caller's
stack (it builds on ``_timeouts.py``); :func:`call_off_loop` is the same for sync callers (an
async tool with a timeout under ``invoke``).

:func:`run_off_loop` runs the coroutine on a shared event loop of its own, on a daemon thread,
in a copy of the caller's context, and waits on the caller's loop, which stays free. The
coroutine is cancelled at its timeout; if its loop is blocked, the caller stops waiting
:data:`BLOCKED_GRACE` seconds later all the same. While the shared loop runs calls it beats
every :data:`BEAT` seconds; a loop that missed its beats for :data:`STALLED` seconds is
blocked, and is retired: later calls go to a new loop (one thread in all while no call blocks),
and the retired loop's thread ends once its calls have, closing what they left open.
Cancelling the caller's wait cancels the coroutine. asyncio is imported by the first call, not
with the package.

What such a coroutine cannot do is use an object bound to the caller's loop (an
``asyncio.Event`` the caller waits on, a client or pool made there):
:func:`bound_to_another_loop` recognises asyncio's refusal, so that the caller can name its
fix (for a tool, ``on_caller_loop=True``). :func:`run_on_caller_loop` is the way back to that
loop from a worker thread the caller awaits."""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from contextvars import Context, copy_context
from typing import TYPE_CHECKING, Any, Final, TypeVar

from graph_agent.graph._inline import wait_delivering
from graph_agent.graph._loops import CLOSE_GRACE_SECONDS
from graph_agent.graph._pool import _Settle, _settle, _settler
from graph_agent.graph._threads import start_thread
from graph_agent.graph._timeouts import BLOCKED_GRACE, TimedOut, _set
from graph_agent.graph.errors import exception_text

if TYPE_CHECKING:
    import asyncio

_T = TypeVar("_T")

BEAT: Final = 0.05
"""Seconds between the beats of a shared loop that is running calls."""

STALLED: Final = 0.25
"""Seconds without a beat after which a shared loop running calls is taken to be blocked."""

_OTHER_LOOP = re.compile(r"(bound|attached) to a different (event )?loop")
"""asyncio's refusal (which anyio's primitives raise too) of an object used on a loop other
than its own: ``<Event ...> is bound to a different event loop`` (Event, Lock, Queue, ...),
``Task ... got Future ... attached to a different loop`` (awaiting another loop's future)."""


class _Call:
    """One coroutine handed to a shared loop: what it needs there, and its task once started.
    Its fields are used on the shared loop's thread only."""

    __slots__ = (
        "cancelled",
        "context",
        "cut",
        "expired",
        "home",
        "make",
        "settle",
        "task",
        "timeout",
    )

    def __init__(
        self,
        make: Callable[[], Coroutine[Any, Any, Any]],
        timeout: float,
        cancelled: threading.Event | None,
        context: Context,
        settle: _Settle,
    ) -> None:
        self.make = make
        self.timeout = timeout
        self.cancelled = cancelled
        self.context = context
        self.settle = settle
        self.task: asyncio.Task[Any] | None = None
        self.cut: asyncio.TimerHandle | None = None
        self.expired = False  # cut at its timeout (else a cancel came from its caller)
        self.home: _SharedLoop | None = None  # the loop it was last handed to

    def cancel(self) -> None:
        """Cancel the task (started already: a loop runs its callbacks in order)."""
        if self.task is not None:
            self.task.cancel()

    def expire(self) -> None:
        """Past its timeout: cancel the task; it ends as :class:`TimedOut`."""
        self.expired = True
        _set(self.cancelled)
        if self.task is not None:
            self.task.cancel()


class _SharedLoop:
    """An event loop on a daemon thread running the calls handed to it, beating while it
    runs any (the attributes it changes are changed on its own thread only)."""

    def __init__(self, number: int) -> None:
        import asyncio

        self.loop = asyncio.new_event_loop()
        self.running = 0
        self.last_beat = time.monotonic()
        self.beating = False
        self.retired = False
        self.stopping = False  # (set on its own thread: stopped once, however retire races)
        self._thread = start_thread(self._serve, name=f"graph-agent-off-loop-{number}")

    def _serve(self) -> None:
        loop = self.loop
        try:
            loop.run_forever()
        finally:
            try:
                loop.run_until_complete(_wind_down())
            finally:
                loop.close()

    def stalled(self) -> bool:
        """Whether it runs calls and missed its beats (read from any thread)."""
        return self.running > 0 and time.monotonic() - self.last_beat > STALLED

    def start(self, call: _Call) -> None:
        """Hand ``call`` to the loop; what it returns or raises goes to its ``settle``."""
        call.home = self
        self.loop.call_soon_threadsafe(self._begin, call)

    def cancel(self, call: _Call) -> None:
        """Cancel ``call`` (from any thread); harmless once it ended or the loop closed."""
        with contextlib.suppress(RuntimeError):  # the loop closed: the call ended with it
            self.loop.call_soon_threadsafe(call.cancel)

    def _begin(self, call: _Call) -> None:
        if self.stopping:  # handed to it as it stopped: the loop calls go to now takes it
            _shared_loops.pick().start(call)
            return
        try:
            coroutine = call.context.run(call.make)
        except BaseException as exc:
            call.settle(None, exc)
            return
        self.running += 1
        if not self.beating:
            self.beating = True
            self.last_beat = time.monotonic()
            self.loop.call_later(BEAT, self._beat)
        call.task = self.loop.create_task(coroutine, context=call.context)
        call.cut = self.loop.call_later(call.timeout, call.expire)
        call.task.add_done_callback(lambda _: self._end(call))

    def _beat(self) -> None:
        self.last_beat = time.monotonic()
        if self.running:
            self.loop.call_later(BEAT, self._beat)
        else:
            self.beating = False

    def _end(self, call: _Call) -> None:
        self.running -= 1
        assert call.task is not None and call.cut is not None
        call.cut.cancel()
        task = call.task
        error = None if task.cancelled() else task.exception()  # (read, also when unused)
        if call.expired:  # whatever it did once cancelled
            call.settle(None, TimedOut(call.timeout))
        elif task.cancelled():  # (a caller that cancelled its wait takes nothing)
            call.settle(None, _ended_cancelled())
        else:
            call.settle(None if error is not None else task.result(), error)
        if self.retired:
            self._stop_if_idle()  # its last call ended: the thread ends

    def retire(self) -> None:
        """Take no more calls; stop once the calls it runs have ended."""
        self.retired = True
        with contextlib.suppress(RuntimeError):  # closed already
            self.loop.call_soon_threadsafe(self._stop_if_idle)

    def _stop_if_idle(self) -> None:
        if not self.running and not self.stopping:
            self.stopping = True
            self.loop.stop()


def _ended_cancelled() -> RuntimeError:
    """What the caller of a coroutine that ended cancelled on its own gets."""
    return RuntimeError(
        "the coroutine run off the event loop ended cancelled, though neither its caller nor "
        "its timeout cancelled it: a CancelledError from something it awaited (a task "
        "cancelled elsewhere) escaped it; catch that CancelledError inside the coroutine"
    )


async def _wind_down() -> None:
    """What a shared loop does as it stops: the tasks its calls left running are cancelled
    (and waited for, a while), and the async generators they left open are closed (the HTTP
    clients models keep per loop are closed so)."""
    import asyncio

    loop = asyncio.get_running_loop()
    left = [task for task in asyncio.all_tasks(loop) if task is not asyncio.current_task()]
    for task in left:
        task.cancel()
    if left:
        await asyncio.wait(left, timeout=CLOSE_GRACE_SECONDS)
    await loop.shutdown_asyncgens()


class _SharedLoops:
    """The shared loop calls go to, replaced when it is found blocked."""

    def __init__(self) -> None:
        self._current: _SharedLoop | None = None
        self._made = 0
        self._lock = threading.Lock()

    def pick(self) -> _SharedLoop:
        current = self._current
        if current is not None and not current.retired and not current.stalled():
            return current
        with self._lock:
            current = self._current
            if current is not None and not current.retired and current.stalled():
                current.retire()
            if current is None or current.retired:
                self._made += 1
                current = self._current = _SharedLoop(self._made)
            return current


_shared_loops = _SharedLoops()


def _forget_shared_loops() -> None:
    global _shared_loops
    _shared_loops = _SharedLoops()  # the parent's loop threads are not in a forked child


os.register_at_fork(after_in_child=_forget_shared_loops)


async def run_off_loop(
    make_coroutine: Callable[[], Coroutine[Any, Any, _T]],
    timeout: float,
    *,
    cancelled: threading.Event | None = None,
) -> _T:
    """Await ``make_coroutine()`` run on a shared loop of its own, at most ``timeout`` seconds
    (see the module docstring); cancelling the await cancels the coroutine.

    Raises:
        TimedOut: Past ``timeout`` (``cancelled`` is set): the coroutine was cancelled, or
            (``loop_blocked``) its loop did not get back to cancelling it within
            :data:`BLOCKED_GRACE` seconds; the loop is retired and the coroutine abandoned.
    """
    import asyncio

    caller = asyncio.get_running_loop()
    outcome: asyncio.Future[_T] = caller.create_future()
    call = _Call(make_coroutine, timeout, cancelled, copy_context(), _settler(caller, outcome))
    _shared_loops.pick().start(call)

    def give_up() -> None:  # its loop did not cut it: blocked
        if not outcome.done():
            outcome.set_exception(TimedOut(timeout, loop_blocked=True))
            _set(cancelled)
            home = call.home
            assert home is not None
            home.retire()
            home.cancel(call)  # (runs once the loop is free again)

    watchdog = caller.call_later(timeout + BLOCKED_GRACE, give_up)
    try:
        return await outcome
    except asyncio.CancelledError:
        assert call.home is not None
        call.home.cancel(call)  # this await was cancelled: the coroutine goes too
        raise
    finally:
        watchdog.cancel()


def call_off_loop(
    make_coroutine: Callable[[], Coroutine[Any, Any, _T]],
    timeout: float,
    *,
    cancelled: threading.Event | None = None,
) -> _T:
    """:func:`run_off_loop` for sync code (an async tool with a timeout under ``invoke``): the
    coroutine runs on the same shared loop, and this thread waits, handing what the coroutine
    emits meanwhile to a ``stream()`` caller (:func:`wait_delivering`).

    Raises:
        TimedOut: As :func:`run_off_loop`.
    """
    future: Future[_T] = Future()
    call = _Call(
        make_coroutine,
        timeout,
        cancelled,
        copy_context(),
        lambda result, error: _settle(future, result, error),
    )
    home = _shared_loops.pick()
    if home._thread is threading.current_thread():
        # a coroutine on the shared loop waits (blocking) for this call: that blocks the loop
        home.retire()
        home = _shared_loops.pick()
    home.start(call)
    if not wait_delivering([future], timeout + BLOCKED_GRACE)[0]:  # its loop did not cut it
        _set(cancelled)
        home = call.home or home
        home.retire()
        home.cancel(call)  # (runs once the loop is free again)
        raise TimedOut(timeout, loop_blocked=True)
    return future.result()  # raises the TimedOut of a coroutine cut in time


def bound_to_another_loop(error: BaseException) -> bool:
    """Whether ``error``, or an exception it was raised from or groups, is asyncio's
    ``RuntimeError`` for an object used off the event loop it is bound to."""
    seen: set[int] = set()
    pending = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, RuntimeError) and _OTHER_LOOP.search(exception_text(current)):
            return True
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
    return False


def run_on_caller_loop(loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, _T]) -> _T:
    """From a worker thread whose caller awaits it on ``loop`` (so the loop is free), run
    ``coroutine`` there, in a copy of this thread's context, and wait for its result."""
    import asyncio

    return asyncio.run_coroutine_threadsafe(coroutine, loop).result()
