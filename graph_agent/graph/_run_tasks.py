"""How a superstep's tasks run, for the drivers in ``_drive.py``.

A lone sync node runs inline in the caller's thread (no thread round trip); while streaming it
runs in a greenlet (:class:`NodeGreenlet`), so that ``emit_chunk`` reaches the caller the moment
it is called. Parallel sync nodes run on the shared worker pool and async nodes on a private
event-loop thread, so that ``invoke()`` also works inside a running event loop; their outcomes
and chunks come back through one queue. Under ``ainvoke``/``astream``, async nodes and the
async face of a :class:`~graph_agent.graph._engine.DualNode` run on the caller's loop and sync
nodes on the shared pool (:class:`AsyncConcurrent`). The threads, loops and greenlets are
``_concurrency.py``'s. How each task ended goes back to the flow as an
:data:`~graph_agent.graph._effects.Outcome`: the driver's reply to
:class:`~graph_agent.graph._effects.RunTasks` or to ``NEXT_OUTCOME``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import queue
import threading
from collections.abc import AsyncIterator, Callable, Generator
from concurrent.futures import Future
from contextvars import copy_context
from typing import Any

from graph_agent.graph._cancel import CancelWatch
from graph_agent.graph._concurrency import (
    InlineStream,
    Job,
    run_on_loop,
    shared_pool,
    start_on_loop,
    to_thread,
)
from graph_agent.graph._effects import Outcome, RunTasks, StepCancelled, Task
from graph_agent.graph._failures import cancelled
from graph_agent.graph._pool import call_reporting
from graph_agent.graph.errors import (
    GraphCancelledError,
    GraphInterrupted,
    GraphRuntimeError,
    ParentCommand,
)
from graph_agent.graph.task import TaskContext, _current_task
from graph_agent.graph.types import NodeOutput, StreamingOutput

CAUGHT = (Exception, GraphInterrupted)
"""What a node may raise and the engine records; KeyboardInterrupt and SystemExit propagate."""

_CANCELLED: Any = (None, None, None)
"""What a step's queue gets when the call's cancel signal is set (a :class:`CancelWatch` puts
it there): an outcome of no task, read by ``next()`` as "stop the step"."""


def _call(task: Task) -> Any:
    node = task.node
    if node.pass_config:
        return node.fn(task.state, task.config)
    return node.fn(task.state)


def run_sync(task: Task) -> Any:
    """Run a node in this thread with its task context set."""
    node = task.node
    token = _current_task.set(task.context)
    try:
        result = node.fn(task.state, task.config) if node.pass_config else node.fn(task.state)
    finally:
        _current_task.reset(token)
    if type(result) is not dict and inspect.isawaitable(result):
        result = run_on_loop(_with_task(task, result))
    return result


async def _with_task(task: Task, awaitable: Any) -> Any:
    token = _current_task.set(task.context)
    try:
        return await awaitable
    finally:
        _current_task.reset(token)


def awaits(task: Task) -> bool:
    """Whether the async driver awaits ``task`` on its loop (an async node, or the async face
    of a :class:`~graph_agent.graph._engine.DualNode`) rather than on a worker thread."""
    node = task.node
    return node.is_async or node.afn is not None


async def run_async(task: Task) -> Any:
    """Run a node as a coroutine (a DualNode's async face) with its task context set."""
    token = _current_task.set(task.context)
    try:
        node = task.node
        if node.afn is not None:
            afn = node.afn
            result = afn(task.state, task.config) if node.pass_config else afn(task.state)
        else:
            result = _call(task)
        if inspect.isawaitable(result):
            result = await result
        return result
    finally:
        _current_task.reset(token)


def chunk_output(context: TaskContext, chunk: Any) -> NodeOutput:
    """What an ``emit_chunk`` call yields: a StreamingOutput, or (from a graph running in the
    node) that graph's own output, its path now starting at this node."""
    if isinstance(chunk, NodeOutput):
        return dataclasses.replace(chunk, path=(context.node, *chunk.path))
    text = chunk if isinstance(chunk, str) else str(getattr(chunk, "text", "") or "")
    return StreamingOutput(
        node=context.node,
        agent=context.agent,
        step=context.step,
        update={},
        state=None,
        checkpoint_id=None,
        chunk=text,
        message=None if isinstance(chunk, str) else chunk,
        send_index=context.index - 1 if context.index else None,
        attempts=getattr(context, "attempts", 1),
    )


def run_inline(task: Task) -> Outcome:
    """Run a lone sync node in this thread: how it ended."""
    try:
        return task, run_sync(task), None
    except CAUGHT as exc:
        return task, None, exc


class NodeGreenlet(InlineStream):
    """Runs the lone sync nodes of one streamed call in a greenlet (an :class:`InlineStream`),
    so that each ``emit_chunk`` switches back to the driver and is yielded the moment it is
    called. Reading a stream from another thread while a node is streaming is refused with a
    clear error (the driver only takes this path on the stream's own thread).
    """

    __slots__ = ("_emit",)

    def __init__(self) -> None:
        super().__init__()
        # one bound method for every task of the call; close() drops it, as it makes a
        # reference cycle (the call's state would wait for a collection: forever, with it off)
        self._emit: Callable[[TaskContext, Any], None] | None = self.emit

    def run(self, task: Task, thread: int) -> Any:
        """Run ``task`` (on ``thread``, the caller's) until it emits its first chunk (a
        NodeOutput, returned) or ends (:data:`FINISHED`: its :data:`Outcome` is in
        :attr:`result`, for the caller to take; chunks it emitted from threads of its own wait
        in :attr:`buffered`)."""
        task.context._emit = self._emit
        return self.start(thread, run_inline, task)

    def resume(self, task: Task) -> Any:
        """Carry on after a chunk was yielded: the next chunk, or :data:`FINISHED`."""
        if not self.on_its_thread():
            raise GraphRuntimeError(
                f"the stream was read from another thread while node {task.node.name!r} was "
                "streaming; read a stream from one thread, or create it in the thread that "
                "reads it"
            )
        return self.carry_on()

    def emit(self, context: TaskContext, chunk: Any) -> None:
        self.deliver(chunk_output(context, chunk))

    def close(self) -> None:
        self._emit = None
        super().close()


StopHook = Callable[[GraphCancelledError], object]
"""Told, on a worker thread, that a cancel stopped a call whose lone node still runs in the
thread reading it (see :class:`InlineCancel`), with the error the call raises when it returns."""


class InlineCancel:
    """Hears the call's cancel while its lone sync node runs inline (in the thread reading the
    call, which a cancel cannot interrupt) and takes the call over: the thread's lease is
    released at once (on a worker thread: ``set()`` must only hand the news on) and
    ``on_stop``, if any, is told, so that a caller waiting for the stream from another thread
    (the server) need not wait for the node. When the node returns, the driver finds the call
    :attr:`taken` (:meth:`leave`): it takes nothing in, writes nothing and releases nothing, and
    the call raises :class:`GraphCancelledError`. A cancel heard between nodes, or set by the
    node itself (in this thread, while it is not stopped at a chunk it emitted: it does not
    hang), is the flow's to see at its next check, as without a takeover.

    ``held``: the saver and the lease to release (None without a thread); ``call``: the
    graph's name, the thread id and whether the graph has a saver, for the error ``on_stop``
    gets (as the flow would raise it)."""

    __slots__ = (
        "_call",
        "_done",
        "_error",
        "_held",
        "_lock",
        "_on_stop",
        "_running",
        "_thread",
        "_watch",
        "at_chunk",
        "taken",
    )

    def __init__(
        self,
        watch: CancelWatch,
        held: tuple[Any, Any] | None,
        on_stop: StopHook | None,
        call: tuple[str, str | None, bool],
    ) -> None:
        self._watch = watch
        self._held = held
        self._on_stop = on_stop
        self._call = call
        self._lock = threading.Lock()
        self._running: Task | None = None  # the node running inline
        self._thread = 0  # the thread it runs in
        self._done: threading.Event | None = None  # set once the takeover released the lease
        self._error: BaseException | None = None  # what releasing the lease raised
        self.at_chunk = False  # the node stands at a chunk it emitted, yielded to the caller
        self.taken = False

    def enter(self, task: Task) -> bool:
        """``task`` starts running inline; False if the cancel is set already (the node must
        not start)."""
        with self._lock:
            self._running = task
            self._thread = threading.get_ident()
        return not self._watch.listen(self._heard)

    def leave(self) -> bool:
        """The node returned (or stopped at a chunk it emitted): whether the call was taken
        over meanwhile (then once the lease is released; what releasing it raised is raised).
        """
        with self._lock:
            self._running = None
        done = self._done
        if done is None:
            return False
        done.wait()
        if self._error is not None:
            raise self._error
        return True

    def _heard(self) -> None:
        """The cancel was set (on the setting thread, with the event's lock held)."""
        with self._lock:
            task = self._running
            if task is None or self.taken:
                return  # the flow sees it at its next check
            if threading.get_ident() == self._thread and not self.at_chunk:
                return  # set by the node itself: the flow sees it as the node returns
            done = self._done = threading.Event()
            self.taken = True
        shared_pool().start(self._take_over, task, done)

    def _take_over(self, task: Task, done: threading.Event) -> None:
        try:
            if self._held is not None:
                saver, lease = self._held
                saver.release(lease)
        except BaseException as exc:
            self._error = exc
        finally:
            done.set()
            if self._on_stop is not None:
                graph, thread_id, durable = self._call
                step = task.context.step
                error = cancelled(graph, thread_id, step, [task], durable=durable, during=True)
                with contextlib.suppress(Exception):  # the caller's hook must not fail this
                    self._on_stop(error)


class Concurrent:
    """A step's tasks running on the pool / the loop thread, at most ``max_concurrency`` at
    once; :meth:`next` waits for the next to end. ``watch``: the call's cancel signal, heard
    while they run (:meth:`next` then stops them and raises :class:`StepCancelled`)."""

    __slots__ = ("events", "handoff", "running", "streaming", "waiting")

    def __init__(self, effect: RunTasks, streaming: bool, watch: CancelWatch | None = None) -> None:
        events: queue.SimpleQueue[NodeOutput | Outcome] = queue.SimpleQueue()
        self.events = events
        self.waiting = list(reversed(effect.tasks))
        self.running: dict[int, Job | Future[Any]] = {}
        self.streaming = streaming
        self.handoff: ParentCommand | None = None
        try:
            while self.waiting and len(self.running) < effect.max_concurrency:
                self._start(self.waiting.pop())
            if watch is not None:
                watch.listen(lambda: events.put(_CANCELLED))
        except BaseException:
            self.cancel()
            raise

    def _start(self, task: Task) -> None:
        events = self.events
        if self.streaming:

            def emit(context: TaskContext, chunk: Any) -> None:
                events.put(chunk_output(context, chunk))

            task.context._emit = emit
        if task.node.is_async:
            self.running[id(task)] = start_on_loop(_run_async_reporting(task, events))
        else:
            context = copy_context()
            self.running[id(task)] = shared_pool().start(
                context.run, _run_sync_reporting, task, events
            )

    def next(self) -> Generator[NodeOutput, None, Outcome]:
        """Yield the chunks the tasks emit until one ends; return how it ended (after the
        last, the chunks still queued are yielded first)."""
        events, waiting = self.events, self.waiting
        while True:
            event = events.get()
            if not isinstance(event, tuple):
                yield event
                continue
            if event is _CANCELLED:
                self._stop()
                raise StepCancelled
            task, _, error = event
            del self.running[id(task)]
            if error is not None:
                if isinstance(error, ParentCommand):
                    # a handoff ends this graph's run: let the siblings finish, start no more
                    self.handoff = self.handoff or error
                    waiting.clear()
                elif not isinstance(error, CAUGHT):
                    raise error  # KeyboardInterrupt, SystemExit: not the node's result
            if waiting:
                self._start(waiting.pop())
            if self.handoff is not None:
                if self.running:
                    continue
                raise self.handoff
            if not self.running:
                while not events.empty():
                    leftover = events.get()
                    if not isinstance(leftover, tuple):
                        yield leftover
            return event

    def cancel(self) -> None:
        """Those not begun yet never will."""
        for started in self.running.values():
            started.cancel()

    def _stop(self) -> None:
        """The call was cancelled: those waiting never start, the async nodes running are
        cancelled and waited for (their ``finally`` blocks run, on the loop thread), the sync
        ones are abandoned on their threads (what they return is never read)."""
        self.waiting.clear()
        # each awaited node started on the loop reports its end, cancelled or not: a future
        # cancelled from here cancels its task there only after the task's first step
        awaited = {key for key, started in self.running.items() if isinstance(started, Future)}
        self.cancel()
        events = self.events
        while awaited:
            event = events.get()
            if isinstance(event, tuple) and event is not _CANCELLED:
                awaited.discard(id(event[0]))


def _run_sync_reporting(task: Task, events: queue.SimpleQueue[Any]) -> None:
    """On a pool thread: run a sync node and report how it ended (whatever it raised)."""
    try:
        events.put((task, run_sync(task), None))
    except BaseException as exc:
        events.put((task, None, exc))
        if not isinstance(exc, CAUGHT):
            raise


async def _run_async_reporting(task: Task, events: queue.SimpleQueue[Any]) -> None:
    """On the loop thread: run an async node and report how it ended (whatever it raised)."""
    try:
        events.put((task, await run_async(task), None))
    except BaseException as exc:
        # the driver raises what is not the node's result (KeyboardInterrupt, SystemExit) in
        # the caller's thread; raised here too, it would end the shared loop
        events.put((task, None, exc))
        import asyncio

        if isinstance(exc, asyncio.CancelledError):
            raise  # a cancelled coroutine stays cancelled


async def arun_lone(task: Task) -> Outcome:
    """Run a lone awaited node (:func:`awaits`) on the caller's loop (not streaming): how it
    ended."""
    try:
        return task, await run_async(task), None
    except CAUGHT as exc:
        return task, None, exc


_cancelled_by_watch: dict[Any, int] = {}
"""The tasks a :class:`LoneAwait` cancelled and that have not taken that cancel back yet, each
with its count of cancel requests before it (``Task.cancelling()``). One cancel per task,
however many calls nested in it watch one signal (a subgraph's under its parent's): whichever
of them the CancelledError reaches first takes it back."""


class LoneAwait:
    """Awaits the lone awaited node of a step (:func:`arun_lone`) of a call whose cancel signal
    is watched, on the caller's own task, as a call without one does (a task per node, as
    :class:`AsyncConcurrent` makes, costs several times the step), and stops it the moment the
    signal is set: the watch has the caller's task cancelled, and that CancelledError becomes
    :class:`StepCancelled`. A cancellation of the caller's task from elsewhere still propagates
    as one."""

    __slots__ = ("_current_task", "_loop", "_task", "_watch")

    def __init__(self, watch: CancelWatch) -> None:
        import asyncio

        self._watch = watch
        self._loop = asyncio.get_running_loop()
        self._current_task = asyncio.current_task
        self._task: Any = None  # the caller's task while it awaits a node

    async def run(self, task: Task) -> Outcome:
        """How ``task`` ended, as :func:`arun_lone` tells.

        Raises:
            StepCancelled: The cancel signal was set while it ran (it was cancelled).
        """
        current = self._task = self._current_task()
        self._watch.listen(self._heard)
        try:
            outcome = await arun_lone(task)
        except BaseException as exc:
            import asyncio

            if self._took_back(current) and isinstance(exc, asyncio.CancelledError):
                raise StepCancelled from None
            raise
        self._took_back(current)  # the node caught the cancel and ended: the flow drops its write
        return outcome

    def _heard(self) -> None:
        """The signal was set (on the setting thread, with the event's lock held)."""
        self._loop.call_soon_threadsafe(self._cancel)

    def _cancel(self) -> None:
        task = self._task
        if task is not None and task not in _cancelled_by_watch:
            _cancelled_by_watch[task] = task.cancelling()
            task.cancel()

    def _took_back(self, current: Any) -> bool:
        """Stop cancelling; whether a watch had ``current`` cancelled and nothing else did (that
        cancel taken back, so that the task's later awaits are not cut)."""
        self._task = None
        if not _cancelled_by_watch:  # (the common step: nothing was cancelled)
            return False
        before = _cancelled_by_watch.pop(current, None)
        return before is not None and current.uncancel() <= before


class AsyncConcurrent:
    """A step's tasks running on the caller's event loop (sync ones on the shared pool), at
    most ``max_concurrency`` at once; :meth:`next` waits for the next to end."""

    __slots__ = ("events", "remaining", "workers")

    def __init__(self, effect: RunTasks, streaming: bool, watch: CancelWatch | None = None) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        events: asyncio.Queue[NodeOutput | Outcome] = asyncio.Queue()
        self.events = events
        limit = asyncio.Semaphore(effect.max_concurrency)

        def emit_threadsafe(context: TaskContext, chunk: Any) -> None:
            output = chunk_output(context, chunk)
            try:
                running_loop = asyncio.get_running_loop()
            except RuntimeError:
                running_loop = None
            if running_loop is loop:
                events.put_nowait(output)
            else:
                loop.call_soon_threadsafe(events.put_nowait, output)

        async def run_one(task: Task) -> None:
            async with limit:
                if streaming:
                    task.context._emit = emit_threadsafe
                try:
                    if awaits(task):
                        value = await run_async(task)
                    else:
                        value = await to_thread(run_sync, task)
                except asyncio.CancelledError:
                    raise  # the call was cancelled: nothing waits for this task any more
                except BaseException as exc:  # what is not the node's result is raised by next()
                    events.put_nowait((task, None, exc))
                else:
                    events.put_nowait((task, value, None))

        tasks = effect.tasks
        self.workers: list[Job | asyncio.Future[None]] = []
        if len(tasks) <= effect.max_concurrency and not any(map(awaits, tasks)):
            # sync nodes only, none waiting for a slot: each goes straight to the pool and puts
            # its outcome on the queue from there (no task, semaphore or coroutine per node)
            for task in tasks:
                if streaming:
                    task.context._emit = emit_threadsafe
                report = _reporter(loop, events, task)
                self.workers.append(
                    shared_pool().start(call_reporting, copy_context(), report, run_sync, task)
                )
        else:
            self.workers = [asyncio.ensure_future(run_one(task)) for task in tasks]
        self.remaining = len(self.workers)
        if watch is not None:
            watch.listen(lambda: loop.call_soon_threadsafe(events.put_nowait, _CANCELLED))

    async def next(self) -> AsyncIterator[NodeOutput | Outcome]:
        """Yield the chunks the tasks emit until one ends, then how it ended (an
        :data:`Outcome`, a tuple, last; after the last task, the chunks still queued come
        before it). A handoff or KeyboardInterrupt is raised here, its siblings cancelled; a
        cancel of the call stops the tasks running and raises :class:`StepCancelled`."""
        events = self.events
        while True:
            event = await events.get()
            if not isinstance(event, tuple):
                yield event
                continue
            if event is _CANCELLED:
                await self.stop()
                raise StepCancelled
            error = event[2]
            if error is not None and not isinstance(error, CAUGHT):
                raise error  # a handoff (ParentCommand), KeyboardInterrupt, SystemExit
            self.remaining -= 1
            if not self.remaining:
                while not events.empty():
                    leftover = events.get_nowait()
                    if not isinstance(leftover, tuple):
                        yield leftover
            yield event
            return

    def cancel(self) -> None:
        for worker in self.workers:
            worker.cancel()

    async def stop(self) -> None:
        """Stop the tasks still running (the call was cancelled, or ends otherwise): awaited
        nodes are cancelled and waited for (their ``finally`` blocks run), sync ones abandoned
        on their threads (what they return is never read)."""
        import asyncio

        self.cancel()
        running = [w for w in self.workers if isinstance(w, asyncio.Future) and not w.done()]
        if running:
            await asyncio.wait(running)


def _reporter(loop: Any, events: Any, task: Task) -> Callable[[Any, BaseException | None], None]:
    """What puts how a pool-run ``task`` ended on the driver's queue, from its thread."""

    def report(result: Any, error: BaseException | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: no one waits any more
            loop.call_soon_threadsafe(events.put_nowait, (task, result, error))

    return report
