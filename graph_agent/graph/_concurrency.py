"""Every way graph_agent runs code off the caller's stack: threads, event loops, greenlets and
timeouts. Every thread comes from one owner (``_threads.py``: :func:`start_thread`, which names
and registers it; :func:`package_threads` lists them); this module gathers the rest:

- **Worker threads** (:class:`WorkerPool`, :func:`shared_pool`, :func:`to_thread`, from
  ``_pool.py``): parallel sync nodes, sync nodes of ``ainvoke``, parallel tool calls, and every
  sync call cut at a timeout (a sync tool, a sync node with a timeout).
- **Private event loops** (:func:`start_on_loop`, :func:`run_on_loop`, from ``_loops.py``):
  async nodes of a sync call, and async tools called from sync code without a timeout.
- **A loop of one's own** (:class:`LoopThread`, ``_loops.py``): what must live on one event
  loop for its whole life (an MCP client session), reached from any thread or loop.
- **A greenlet per stream** (:class:`InlineStream`, :func:`wait_delivering`, ``_inline.py``):
  a stream's lone sync node runs on the caller's thread, its chunks reach the caller at once.
- **Calls cut at a timeout** (:func:`call_with_timeout`, :func:`call_on_pool`,
  :func:`run_coroutine`, :func:`at_most`, :class:`TimedOut`): tools and nodes. A sync call
  cannot be stopped: past its timeout it is abandoned on its pool thread (which leaves the pool
  once the call returns, :meth:`WorkerPool.abandon`), and the ``cancelled`` event it may watch
  is set. A coroutine runs on graph_agent's shared loop (``_off_loop.py``), which a coroutine
  blocking it (``time.sleep`` in an ``async def``) gets retired from: it is abandoned too.

No call starts a thread or an event loop of its own: the threads are the pool's (bounded) and
the loops' (one per nesting depth, one shared loop, one per MCP toolset). asyncio and greenlet
are imported by the first call that needs them, not with the package."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from contextvars import copy_context
from typing import TypeVar

from graph_agent.graph._inline import FINISHED as FINISHED
from graph_agent.graph._inline import InlineStream as InlineStream
from graph_agent.graph._inline import wait_delivering as wait_delivering
from graph_agent.graph._loops import CLOSE_GRACE_SECONDS as CLOSE_GRACE_SECONDS
from graph_agent.graph._loops import LoopThread as LoopThread
from graph_agent.graph._loops import _Escaped
from graph_agent.graph._loops import _loop_threads as _loop_threads
from graph_agent.graph._loops import run_on_loop as run_on_loop
from graph_agent.graph._loops import start_on_loop as start_on_loop
from graph_agent.graph._off_loop import call_off_loop
from graph_agent.graph._pool import Job as Job
from graph_agent.graph._pool import WorkerPool as WorkerPool
from graph_agent.graph._pool import _settle, _settler, call_reporting
from graph_agent.graph._pool import shared_pool as shared_pool
from graph_agent.graph._pool import to_thread as to_thread
from graph_agent.graph._threads import package_threads as package_threads
from graph_agent.graph._threads import start_thread as start_thread
from graph_agent.graph._timeouts import BLOCKED_GRACE as BLOCKED_GRACE
from graph_agent.graph._timeouts import TimedOut as TimedOut
from graph_agent.graph._timeouts import _set
from graph_agent.graph._timeouts import at_most as at_most

_T = TypeVar("_T")


def call_with_timeout(
    fn: Callable[[], _T],
    timeout: float,
    *,
    thread_name: str,
    cancelled: threading.Event | None = None,
) -> _T:
    """``fn()`` on a thread of the shared pool (called ``thread_name`` while it runs), in a
    copy of this context, waited for at most ``timeout`` seconds; while it waits, what ``fn``
    emits reaches a ``stream()`` caller live.

    Raises:
        TimedOut: Past ``timeout``: the call is abandoned (it runs to completion on its thread,
            which then leaves the pool; not started yet, it never runs) and ``cancelled`` is
            set, so that ``fn`` can see it and stop.
    """
    future: Future[_T] = Future()
    pool = shared_pool()
    job = pool.start(
        call_reporting,
        copy_context(),
        lambda result, error: _settle(future, result, error),
        _named(fn, thread_name),
    )
    if not wait_delivering([future], timeout)[0]:
        _set(cancelled)
        pool.abandon(job)
        raise TimedOut(timeout)
    return future.result()


async def call_on_pool(fn: Callable[[], _T], *, thread_name: str) -> _T:
    """Await ``fn()`` run on a thread of the shared pool (called ``thread_name`` while it runs),
    in a copy of this context; cancelling the await abandons the call (it runs to completion;
    not started yet, it never runs)."""
    import asyncio

    loop = asyncio.get_running_loop()
    future: asyncio.Future[_T] = loop.create_future()
    pool = shared_pool()
    job = pool.start(
        call_reporting, copy_context(), _settler(loop, future), _named(fn, thread_name)
    )
    try:
        return await future
    except asyncio.CancelledError:
        pool.abandon(job)
        raise


def _named(fn: Callable[[], _T], name: str) -> Callable[[], _T]:
    """``fn``, run under the thread name ``name`` (a thread dump shows which tool runs)."""

    def run() -> _T:
        thread = threading.current_thread()
        before, thread.name = thread.name, name
        try:
            return fn()
        finally:
            thread.name = before

    return run


def run_coroutine(
    make_coroutine: Callable[[], Awaitable[_T]],
    timeout: float | None = None,
    *,
    cancelled: threading.Event | None = None,
) -> _T:
    """Run a coroutine to completion from sync code: without a ``timeout`` on the private event
    loop of this nesting depth (:func:`start_on_loop`), with one on graph_agent's shared loop
    (:func:`~graph_agent.graph._off_loop.call_off_loop`), so that a coroutine blocking its loop
    (``time.sleep`` in an ``async def``) is still cut. What it emits meanwhile reaches a
    ``stream()`` caller live. No thread is started for it.

    Raises:
        TimedOut: Past ``timeout`` (``cancelled`` is set): the coroutine was cancelled, or
            (``loop_blocked``) its loop did not get back to cancelling it within
            :data:`BLOCKED_GRACE` seconds, and it was abandoned with its loop.
    """
    if timeout is not None:
        return call_off_loop(lambda: _awaited(make_coroutine), timeout, cancelled=cancelled)
    future = start_on_loop(_awaited(make_coroutine))
    wait_delivering([future])
    error = future.exception()
    if type(error) is _Escaped:
        raise error.error
    return future.result()


async def _awaited(make_coroutine: Callable[[], Awaitable[_T]]) -> _T:
    return await make_coroutine()
