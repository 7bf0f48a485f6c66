"""The worker threads sync code runs on off the caller's stack (parallel sync nodes, the sync
nodes of ``ainvoke``, parallel tool calls, sync models and tools under an async call), and
:func:`to_thread`, which awaits a call on them. Part of :mod:`~graph_agent.graph._concurrency`,
which re-exports it; asyncio is imported by the first async call, not with the package."""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from contextvars import Context, copy_context
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from graph_agent.graph._threads import start_thread

if TYPE_CHECKING:
    import asyncio

_P = ParamSpec("_P")
_T = TypeVar("_T")


_QUEUED, _RUNNING, _OVER, _DETACHED = 0, 1, 2, 3
"""A job's phases: waiting for a thread; taken by one; over (its thread went on); abandoned by
its caller while it ran (:meth:`WorkerPool.abandon`: its thread leaves the pool after it)."""


class Job:
    """A task handed to the pool; :meth:`cancel` keeps it from starting if it has not yet."""

    __slots__ = ("args", "cancelled", "fn", "phase")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args
        self.cancelled = False
        self.phase = _QUEUED

    def cancel(self) -> None:
        self.cancelled = True


class WorkerPool(Executor):
    """Daemon threads taking :class:`Job` values from one queue, made only when none is idle.

    ``ThreadPoolExecutor`` costs about 6 µs a task in locks, a ``Future``, a work item and a
    semaphore (a fan-out of 50 one-line nodes spent two thirds of its time there); here a job
    reaches an idle thread through one queue and reports its own outcome. It is also an
    ``Executor`` (for ``loop.run_in_executor``). Daemon threads: a call abandoned by its caller
    never keeps the interpreter from exiting.

    Args:
        max_threads: The most threads; past it, jobs wait for a free thread (it matters only
            for deep nesting: a node waiting for a subgraph holds its thread).
        name: Thread names are ``f"{name}-{n}"``, ``n`` counting from 1.

    Example:
        >>> import queue
        >>> done = queue.SimpleQueue()
        >>> pool = WorkerPool(max_threads=2, name="example")
        >>> job = pool.start(done.put, "ran")
        >>> done.get(timeout=5)
        'ran'
        >>> pool.submit(sum, [1, 2]).result(timeout=5)
        3
    """

    def __init__(self, *, max_threads: int, name: str) -> None:
        if max_threads < 1:
            raise ValueError(f"WorkerPool(max_threads={max_threads}): needs at least 1 thread")
        self.max_threads = max_threads
        self.name = name
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0  # threads waiting for a job no one has claimed
        self._backlog = 0  # jobs queued when every thread was busy and none could be made
        self._abandoned = 0  # threads still running a job its caller abandoned
        self._made = 0  # threads started (their names count up: ``f"{name}-{n}"``)
        self._closed = False

    def start(self, fn: Callable[..., Any], /, *args: Any) -> Job:
        """Run ``fn(*args)`` on a pool thread. What it returns or raises is dropped: ``fn``
        reports its own outcome (the engine's runners put it on a queue)."""
        job = Job(fn, args)
        with self._lock:
            if self._closed:
                raise RuntimeError(f"worker pool {self.name!r} is shut down")
            number = 0
            if self._idle:
                self._idle -= 1  # that thread is spoken for, even before it wakes up
            elif self._threads < self.max_threads:
                self._threads += 1
                number = self._made = self._made + 1
            else:
                self._backlog += 1  # the next thread to finish takes it
        if number:  # the thread first: if none can be had, nothing was queued
            self._start_thread(number)
        self._jobs.put(job)
        return job

    def _start_thread(self, number: int) -> None:
        try:
            start_thread(self._work, name=f"{self.name}-{number}")
        except BaseException:  # e.g. "can't start new thread"
            with self._lock:
                self._threads -= 1
            raise

    def abandon(self, job: Job) -> None:
        """The caller of ``job`` stops waiting for it (its timeout ran out, its await was
        cancelled): a job no thread took yet never runs; one running keeps its thread, which
        leaves the pool once the job returns, and a new thread takes its place, so that calls
        that never return (a hung tool) do not use up the pool."""
        job.cancelled = True
        replace = 0
        with self._lock:
            if job.phase != _RUNNING:
                return  # not started (it will not) or over
            job.phase = _DETACHED
            self._threads -= 1
            self._abandoned += 1
            if self._backlog and not self._closed:  # a queued job was waiting for this thread
                self._backlog -= 1
                self._threads += 1
                replace = self._made = self._made + 1
        if replace:
            self._start_thread(replace)

    @property
    def threads(self) -> int:
        """The pool's threads (not counting those running an abandoned job)."""
        return self._threads

    def submit(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> Future[_T]:
        """The ``Executor`` interface (for ``loop.run_in_executor``): a ``Future`` of the call."""
        future: Future[_T] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)

        self.start(run)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop the threads once the queued jobs are done (``wait`` is not supported: the
        threads are daemons, and a job may be a node that never returns)."""
        with self._lock:
            self._closed = True
            threads = self._threads
        for _ in range(threads):
            self._jobs.put(None)

    def _work(self) -> None:
        jobs, lock = self._jobs, self._lock
        while True:
            job = jobs.get()
            if job is None:
                return
            job.phase = _RUNNING  # (before reading `cancelled`: see abandon)
            if not job.cancelled:
                with contextlib.suppress(BaseException):  # the job reported it (see start)
                    job.fn(*job.args)
            with lock:
                if job.phase == _DETACHED:  # abandoned: the pool counted this thread out
                    self._abandoned -= 1
                    return
                job.phase = _OVER
                job = None  # drop the task and its state while idle
                if self._backlog:
                    self._backlog -= 1
                else:
                    self._idle += 1


_shared: WorkerPool | None = None
_shared_lock = threading.Lock()


def shared_pool() -> WorkerPool:
    """The process's worker threads (up to 1,024; a run's own bound is ``max_concurrency``)."""
    global _shared
    if _shared is None:
        with _shared_lock:
            if _shared is None:
                _shared = WorkerPool(max_threads=1024, name="graph-agent")
    return _shared


def _forget_shared_pool() -> None:
    global _shared, _shared_lock
    _shared, _shared_lock = None, threading.Lock()  # the parent's threads are not in the child


os.register_at_fork(after_in_child=_forget_shared_pool)


async def to_thread(fn: Callable[..., _T], /, *args: Any) -> _T:
    """``fn(*args)`` on the shared pool in a copy of this context, awaited (``asyncio.to_thread``
    without the loop's default executor, which is sized by the CPU count).

    The outcome comes back in one ``call_soon_threadsafe`` to the awaited future, not through
    ``run_in_executor``'s ``concurrent.futures.Future`` chained to an asyncio one (with its
    lock, condition and callbacks, ``astream`` of a three-node chain took a third more
    instructions). Cancelled before a thread took it, ``fn`` never runs."""
    import asyncio

    loop = asyncio.get_running_loop()
    future: asyncio.Future[_T] = loop.create_future()
    pool = shared_pool()
    job = pool.start(call_reporting, copy_context(), _settler(loop, future), fn, *args)
    try:
        return await future
    except asyncio.CancelledError:
        pool.abandon(job)  # not started: it never runs; running: its thread is replaced
        raise


_Settle = Callable[[Any, BaseException | None], None]


def _settler(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any]) -> _Settle:
    """What hands a call's outcome, from any thread, to ``future`` on ``loop``."""

    def settle(result: Any, error: BaseException | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed while an abandoned call ran
            loop.call_soon_threadsafe(_settle, future, result, error)

    return settle


def call_reporting(context: Context, settle: _Settle, fn: Callable[..., Any], *args: Any) -> None:
    """``fn(*args)`` in ``context``; what it returned or raised goes to ``settle``."""
    try:
        result = context.run(fn, *args)
    except BaseException as exc:
        settle(None, exc)
    else:
        settle(result, None)


def _settle(future: Future[Any] | asyncio.Future[Any], result: Any, error: Any) -> None:
    if future.done():  # cancelled: the caller gave up on this call
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
