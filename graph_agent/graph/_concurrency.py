"""Every way graph_agent runs code off the caller's stack: threads, event loops, greenlets and
timeouts (only the savers keep their own: ``asyncio.to_thread``, PostgreSQL's lease watcher).

- **Worker threads** (:class:`WorkerPool`, :func:`shared_pool`, :func:`to_thread`, from
  ``_pool.py``): parallel sync nodes, sync nodes of ``ainvoke``, parallel tool calls.
- **Private event loops** (:func:`start_on_loop`, :func:`run_on_loop`): async nodes of a sync
  call, on daemon loop threads, so that ``invoke()`` also works inside a running loop.
- **A loop of one's own** (:class:`LoopThread`): what must live on one event loop for its whole
  life (an MCP client session), reached from any thread or loop.
- **A greenlet per stream** (:class:`InlineStream`, :func:`wait_delivering`): a stream's lone
  sync node runs on the caller's thread, and each chunk it emits reaches the caller at once. A
  worker thread would do the same with two thread wake-ups a step instead of two greenlet
  switches (W5: about 1.8 times the µs per streamed event).
- **Calls cut at a timeout** (:func:`call_with_timeout`, :func:`at_most`,
  :func:`run_coroutine`, :class:`TimedOut`): tools. A sync call cannot be stopped, nor can a
  coroutine that blocks its loop: past the timeout they are abandoned on their daemon thread,
  and the ``cancelled`` event they may watch is set. An async caller runs such a coroutine on
  a shared loop of its own (``_off_loop.py``: :func:`run_off_loop`), so that its loop stays free.

asyncio and greenlet are imported by the first call that needs them, not with the package."""

from __future__ import annotations

import concurrent.futures
import contextlib
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Collection, Coroutine
from concurrent.futures import Future
from contextvars import ContextVar, copy_context
from typing import TYPE_CHECKING, Any, TypeVar

from graph_agent.graph._pool import Job as Job
from graph_agent.graph._pool import WorkerPool as WorkerPool
from graph_agent.graph._pool import _Settle, _settle, _settler, call_reporting
from graph_agent.graph._pool import shared_pool as shared_pool
from graph_agent.graph._pool import to_thread as to_thread
from graph_agent.graph.task import _current_task

if TYPE_CHECKING:
    import asyncio

    import greenlet

_T = TypeVar("_T")


_loop_depth: ContextVar[int] = ContextVar("graph_agent_loop_depth", default=0)
"""How many private event loops the current code is nested in (see :class:`_LoopThreads`)."""


class _LoopThreads:
    """Private event loops on daemon threads, one per nesting depth: a sync call runs its
    coroutines on loop ``depth``, and code inside them sees depth + 1, carried by a context
    variable that follows it into worker threads. A graph invoked inside a node (at any depth,
    from any thread) therefore never waits on a loop that one of its callers is blocking."""

    def __init__(self) -> None:
        self._loops: list[asyncio.AbstractEventLoop] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def loop(self) -> tuple[asyncio.AbstractEventLoop, int]:
        """The loop for coroutines of a call made at the current depth, and that depth."""
        depth = _loop_depth.get()
        with self._lock:
            while len(self._loops) <= depth:
                self._start(len(self._loops))
            if not self._threads[depth].is_alive():
                # its thread ended (a callback let KeyboardInterrupt or SystemExit out of
                # run_forever): a call waiting on that loop would wait forever
                self._loops[depth].close()
                self._start(depth)
            return self._loops[depth], depth

    def _start(self, depth: int) -> None:
        """Start (or restart) the loop at ``depth`` on a new thread."""
        loop, thread = _loop_on_daemon_thread(f"graph-agent-loop-{depth}")
        if depth < len(self._loops):
            self._loops[depth], self._threads[depth] = loop, thread
        else:
            self._loops.append(loop)
            self._threads.append(thread)


_loop_threads = _LoopThreads()


def _loop_on_daemon_thread(name: str) -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    """A new event loop, running forever on a new daemon thread called ``name``."""
    import asyncio

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name=name, daemon=True)
    thread.start()
    return loop, thread


class LoopThread:
    """An event loop of its own, on a daemon thread, for something bound to one loop for its
    whole life (an MCP session: its transport's tasks and cancel scopes): sync code waits for
    coroutines run on it (:meth:`run`), async code on any other loop awaits them (:meth:`arun`);
    cancelling that await cancels the coroutine on this loop.

    Example:
        >>> import asyncio
        >>> async def answer() -> int:
        ...     return 42
        >>> own = LoopThread("example")
        >>> own.run(answer()), asyncio.run(own.arun(answer()))
        (42, 42)
        >>> own.close()
    """

    def __init__(self, name: str) -> None:
        self.loop, self._thread = _loop_on_daemon_thread(name)

    def submit(self, coroutine: Coroutine[Any, Any, _T]) -> Future[_T]:
        """Start ``coroutine`` on this loop; its result comes in the returned future."""
        import asyncio

        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        """Run ``coroutine`` on this loop and wait for its result (from any other thread)."""
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError(f"{self._thread.name}: run() from its own loop would wait forever")
        return self.submit(coroutine).result()

    async def arun(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        """Await ``coroutine`` run on this loop, from code on any loop (this one included)."""
        import asyncio

        if asyncio.get_running_loop() is self.loop:
            return await coroutine
        return await asyncio.wrap_future(self.submit(coroutine))

    @property
    def running(self) -> bool:
        """Whether the loop still runs (:meth:`close` not called)."""
        return self._thread.is_alive()

    def close(self) -> None:
        """Cancel the tasks still on the loop (so nobody waits on one forever), stop the loop
        once the callbacks it has ready have run, and end its thread."""
        if not self._thread.is_alive():
            return
        if threading.current_thread() is not self._thread:
            # a task that will not end (or the wait timing out): the loop stops regardless
            with contextlib.suppress(Exception):
                self.submit(_cancel_other_tasks()).result(timeout=CLOSE_GRACE_SECONDS)
        self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.current_thread() is not self._thread:
            self._thread.join()
            self.loop.close()


CLOSE_GRACE_SECONDS = 10.0
"""How long :meth:`LoopThread.close` waits for the tasks it cancelled to end."""


async def _cancel_other_tasks() -> None:
    """Cancel every task of the running loop but this one, and wait for them to end."""
    import asyncio

    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def start_on_loop(coroutine: Coroutine[Any, Any, _T]) -> Future[_T]:
    """Start ``coroutine`` on the private event loop of this nesting depth; code it runs sees
    the next depth. A KeyboardInterrupt or SystemExit it raises fails the future (wrapped in
    :class:`_Escaped`) instead of ending the loop that other calls share."""
    import asyncio

    loop, depth = _loop_threads.loop()
    return asyncio.run_coroutine_threadsafe(_at_depth(depth + 1, coroutine), loop)


def run_on_loop(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coroutine`` to completion on the private event loop of this nesting depth and
    return its result; a KeyboardInterrupt or SystemExit it raises is raised here."""
    future = start_on_loop(coroutine)
    error = future.exception()
    if type(error) is _Escaped:
        raise error.error
    return future.result()


class _Escaped(Exception):
    """A KeyboardInterrupt or SystemExit raised on a loop thread, carried to the caller's thread
    to be raised there: raised on the loop thread, it would also leave ``run_forever`` and end
    the shared loop under every other call using it."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


async def _at_depth(depth: int, coroutine: Coroutine[Any, Any, _T]) -> _T:
    _loop_depth.set(depth)
    try:
        return await coroutine
    except (KeyboardInterrupt, SystemExit) as exc:
        raise _Escaped(exc) from None


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


def call_with_timeout(
    fn: Callable[[], _T],
    timeout: float,
    *,
    thread_name: str,
    cancelled: threading.Event | None = None,
) -> _T:
    """``fn()`` on a daemon thread of its own, in a copy of this context, waited for at most
    ``timeout`` seconds; while it waits, what ``fn`` emits reaches a ``stream()`` caller live.

    Raises:
        TimedOut: Past ``timeout``: the thread is abandoned (it runs to completion) and
            ``cancelled`` is set, so that ``fn`` can see it and stop.
    """
    future: Future[_T] = Future()
    _on_daemon_thread(fn, thread_name, lambda result, error: _settle(future, result, error))
    if not wait_delivering([future], timeout)[0]:
        _set(cancelled)
        raise TimedOut(timeout)
    return future.result()


async def call_on_daemon_thread(fn: Callable[[], _T], *, thread_name: str) -> _T:
    """Await ``fn()`` run on a daemon thread of its own, in a copy of this context; cancelling
    the await abandons the thread (it runs to completion)."""
    import asyncio

    loop = asyncio.get_running_loop()
    future: asyncio.Future[_T] = loop.create_future()
    _on_daemon_thread(fn, thread_name, _settler(loop, future))
    return await future


def _on_daemon_thread(fn: Callable[[], Any], thread_name: str, settle: _Settle) -> None:
    args = (copy_context(), settle, fn)
    threading.Thread(target=call_reporting, args=args, name=thread_name, daemon=True).start()


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


def run_coroutine(
    make_coroutine: Callable[[], Awaitable[_T]],
    timeout: float | None = None,
    *,
    thread_name: str = "graph-agent-coroutine",
    cancelled: threading.Event | None = None,
) -> _T:
    """Run a coroutine to completion from sync code, on an event loop of its own: on this
    thread (a pool thread if this one runs a loop), or with a ``timeout`` on a daemon thread, so
    that a coroutine blocking its loop (``time.sleep`` in an ``async def``) is still cut.

    Raises:
        TimedOut: Past ``timeout`` (``cancelled`` is set): the coroutine was cancelled, or
            (``loop_blocked``) its loop did not get back to cancelling it within
            :data:`BLOCKED_GRACE` seconds, and its thread was abandoned.
    """
    if timeout is None:
        return _run_to_completion(make_coroutine)
    future: Future[_T] = Future()
    _on_daemon_thread(
        lambda: _run_to_completion(lambda: at_most(make_coroutine(), timeout, cancelled=cancelled)),
        thread_name,
        lambda result, error: _settle(future, result, error),
    )
    if not wait_delivering([future], timeout + BLOCKED_GRACE)[0]:
        _set(cancelled)
        raise TimedOut(timeout, loop_blocked=True)
    return future.result()  # raises the TimedOut of a coroutine cut in time


def _run_to_completion(make_coroutine: Callable[[], Awaitable[_T]]) -> _T:
    import asyncio

    async def main() -> _T:
        return await make_coroutine()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    return shared_pool().submit(asyncio.run, main()).result()
