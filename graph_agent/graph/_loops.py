"""Event loops graph_agent runs of its own, on threads the package owns (``_threads.py``):

- **Private event loops** (:func:`start_on_loop`, :func:`run_on_loop`): async nodes of a sync
  call (and async tools called without a timeout from sync code), on daemon loop threads, one
  per nesting depth, so that ``invoke()`` also works inside a running loop.
- **A loop of one's own** (:class:`LoopThread`): what must live on one event loop for its whole
  life (an MCP client session), reached from any thread or loop.

asyncio is imported by the first call that needs it, not with the package."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

from graph_agent.graph._threads import start_thread

if TYPE_CHECKING:
    import asyncio

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


def _forget_loop_threads() -> None:
    """In a forked child the parent's loop threads are gone, but their loops still look
    running (``close()`` refuses them): start from none, in place (modules hold the object)."""
    _loop_threads.__init__()  # type: ignore[misc]


os.register_at_fork(after_in_child=_forget_loop_threads)


def _loop_on_daemon_thread(name: str) -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    """A new event loop, running forever on a new daemon thread called ``name``."""
    import asyncio

    loop = asyncio.new_event_loop()
    return loop, start_thread(loop.run_forever, name=name)


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
