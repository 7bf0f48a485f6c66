"""How a superstep's tasks run, for the drivers in ``runner.py``.

A lone sync node runs inline in the caller's thread (no thread round trip); while streaming it
runs in a greenlet (:class:`NodeGreenlet`), so that ``emit_chunk`` reaches the caller the moment
it is called. Parallel sync nodes run on the shared worker pool (``pool.py``) and async nodes
on a private event-loop thread (:class:`_LoopThreads`), so that ``invoke()`` also works inside a
running event loop; their outcomes and chunks come back through one queue. How each task
ended goes back to the flow as an :data:`~graph_agent.graph.effects.Outcome`: the driver's reply
to :class:`~graph_agent.graph.effects.RunTasks` or to ``NEXT_OUTCOME``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import inspect
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Collection, Generator
from concurrent.futures import Future
from contextvars import ContextVar, copy_context
from typing import TYPE_CHECKING, Any

from graph_agent.graph.effects import Outcome, RunTasks, Task
from graph_agent.graph.errors import GraphInterrupted, GraphRuntimeError, ParentCommand
from graph_agent.graph.pool import Job, shared_pool
from graph_agent.graph.runtime import TaskContext, _current_task
from graph_agent.graph.types import NodeOutput, StreamingOutput

if TYPE_CHECKING:  # imported where used: a graph with sync nodes never loads them
    import asyncio

    import greenlet

CAUGHT = (Exception, GraphInterrupted)
"""What a node may raise and the engine records; KeyboardInterrupt and SystemExit propagate."""

_loop_depth: ContextVar[int] = ContextVar("graph_agent_loop_depth", default=0)
"""How many private event loops the current code is nested in (see :class:`_LoopThreads`)."""


class _LoopThreads:
    """Private event loops on daemon threads, one per nesting depth.

    A sync ``invoke()`` runs its async nodes on loop ``depth``, and code inside them sees depth
    + 1, carried by a context variable that follows it into worker threads. A graph invoked
    inside a node (at any depth, from any thread) therefore never waits on a loop that one of
    its callers is blocking.
    """

    def __init__(self) -> None:
        self._loops: list[asyncio.AbstractEventLoop] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def loop(self) -> tuple[asyncio.AbstractEventLoop, int]:
        """The loop for async nodes of a call made at the current depth, and that depth."""
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
        import asyncio

        loop = asyncio.new_event_loop()
        thread = threading.Thread(
            target=loop.run_forever, name=f"graph-agent-loop-{depth}", daemon=True
        )
        thread.start()
        if depth < len(self._loops):
            self._loops[depth], self._threads[depth] = loop, thread
        else:
            self._loops.append(loop)
            self._threads.append(thread)


_loop_threads = _LoopThreads()


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
        import asyncio

        loop, depth = _loop_threads.loop()
        coroutine = _await(task, result, depth + 1)
        result = asyncio.run_coroutine_threadsafe(coroutine, loop).result()
        if type(result) is _Escaped:
            raise result.error
    return result


class _Escaped:
    """A KeyboardInterrupt or SystemExit a node raised on a loop thread, carried to the
    caller's thread to be raised there: raised on the loop thread, it would also leave
    ``run_forever`` and end the shared loop under every other call using it."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


async def _await(task: Task, awaitable: Any, depth: int) -> Any:
    _loop_depth.set(depth)
    token = _current_task.set(task.context)
    try:
        return await awaitable
    except (KeyboardInterrupt, SystemExit) as exc:
        return _Escaped(exc)
    finally:
        _current_task.reset(token)


async def run_async(task: Task, depth: int | None = None) -> Any:
    """Run a node as a coroutine with its task context set (on a private loop: at ``depth``)."""
    if depth is not None:
        _loop_depth.set(depth)
    token = _current_task.set(task.context)
    try:
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
    )


def run_inline(task: Task) -> Outcome:
    """Run a lone sync node in this thread: how it ended."""
    try:
        return task, run_sync(task), None
    except CAUGHT as exc:
        return task, None, exc


class NodeGreenlet:
    """Runs the lone sync nodes of one streamed call in a greenlet, so that each ``emit_chunk``
    switches back to the driver and is yielded the moment it is called.

    One greenlet serves every step of the call, and afterwards waits, parked, for the next
    streamed call on its thread (making one, and ending it, costs about as much as a whole
    ten-step call's switches). Each node runs in a copy of the caller's context, as a node run
    inline would. A greenlet belongs to the thread that made it: reading a stream from another
    thread while a node is streaming is refused with a clear error (the driver only takes this
    path on the stream's own thread).
    """

    __slots__ = (
        "_busy",
        "_caller",
        "_emit",
        "_getcurrent",
        "_greenlet",
        "_module",
        "_thread",
        "_waker",
        "buffered",
        "outcome",
    )

    def __init__(self) -> None:
        import greenlet

        self._module = greenlet
        self._getcurrent = greenlet.getcurrent
        self._greenlet: greenlet.greenlet | None = None
        self._thread = 0
        self._caller: greenlet.greenlet | None = None
        self._busy = False  # a node is running (or paused at a chunk) in the greenlet
        self.buffered: list[NodeOutput] = []
        self.outcome: Outcome | None = None  # how the node that just ended in the greenlet did
        self._waker: queue.SimpleQueue[None] | None = None  # made by the first wait()
        # one bound method for every task of the call; close() drops it, as it makes a
        # reference cycle (the call's state would wait for a collection: forever, with it off)
        self._emit: Callable[[TaskContext, Any], None] | None = self.emit

    def run(self, task: Task, thread: int) -> NodeOutput | Outcome:
        """Run ``task`` (on ``thread``, the caller's) until it emits its first chunk (a
        NodeOutput, returned) or ends (its :data:`Outcome`, a tuple; chunks it emitted from
        threads of its own wait in :attr:`buffered`)."""
        worker = self._greenlet
        if worker is None or self._thread != thread or worker.dead:
            worker = self._greenlet = _parked_greenlet() or self._module.greenlet(_serve)
            self._thread = thread
        caller = self._caller = self._getcurrent()
        if worker.parent is not caller:
            worker.parent = caller  # where an exception the node does not catch goes
        worker.gr_context = copy_context()
        task.context._emit = self._emit
        self._busy = True
        return self._event(worker.switch(self, task))

    def resume(self, task: Task) -> NodeOutput | Outcome:
        """Carry on after a chunk was yielded: the next chunk, or the end of the node."""
        if threading.get_ident() != self._thread:
            raise GraphRuntimeError(
                f"the stream was read from another thread while node {task.node.name!r} was "
                "streaming; read a stream from one thread, or create it in the thread that "
                "reads it"
            )
        self._caller = self._getcurrent()
        assert self._greenlet is not None
        return self._event(self._greenlet.switch())

    def _event(self, event: NodeOutput | tuple[()]) -> NodeOutput | Outcome:
        """What the greenlet switched back with: a chunk, or (an empty tuple) the outcome it
        left."""
        if type(event) is tuple:
            outcome = self.outcome
            assert outcome is not None
            self.outcome = None
            return outcome
        assert isinstance(event, NodeOutput)
        return event

    def take_buffered(self) -> list[NodeOutput]:
        """The chunks the last node emitted from threads of its own and that no
        :meth:`wait` delivered (they follow the node's end)."""
        buffered, self.buffered = self.buffered, []
        return buffered

    def emit(self, context: TaskContext, chunk: Any) -> None:
        output = chunk_output(context, chunk)
        if self._getcurrent() is self._greenlet and self._caller is not None:
            self._caller.switch(output)
        else:  # from a thread the node started: delivered while the node waits, or after it
            self.buffered.append(output)
            waker = self._waker
            if waker is not None:
                waker.put(None)

    def wait(
        self, futures: Collection[Future[Any]], timeout: float | None, return_when: str
    ) -> tuple[set[Future[Any]], set[Future[Any]]]:
        """``concurrent.futures.wait`` for the node in this greenlet, yielding what its threads
        emit meanwhile (see :func:`wait_delivering`)."""
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
        """Park the greenlet for the next call, or end it (mid-node, when the caller stopped
        reading the stream: the node's ``finally`` blocks run)."""
        worker, self._greenlet = self._greenlet, None
        self._emit = None
        if worker is None or worker.dead or self._thread != threading.get_ident():
            return
        if not self._busy and _park(worker):
            return
        worker.parent = self._getcurrent()
        worker.throw(self._module.GreenletExit)


def _serve(host: NodeGreenlet, task: Task) -> None:
    """A node greenlet's body: run each task switched in, leave its outcome with the host, and
    switch back with an empty tuple (which no chunk is). Between tasks, parked or not, it
    holds no task, host or outcome."""
    while True:
        host.outcome = run_inline(task)
        host._busy = False
        caller = host._caller
        assert caller is not None
        del host, task
        host, task = caller.switch(())


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
    if type(host) is NodeGreenlet:
        return host.wait(futures, timeout, return_when)
    return concurrent.futures.wait(futures, timeout, return_when)


_MAX_PARKED = 4
_parked = threading.local()


def _parked_greenlet() -> greenlet.greenlet | None:
    """An idle node greenlet this thread parked, if any."""
    idle: list[greenlet.greenlet] | None = getattr(_parked, "idle", None)
    while idle:
        worker = idle.pop()
        if not worker.dead:
            return worker
    return None


def _park(worker: greenlet.greenlet) -> bool:
    """Keep an idle node greenlet for this thread's next streamed call (a few at most)."""
    idle: list[greenlet.greenlet] | None = getattr(_parked, "idle", None)
    if idle is None:
        idle = _parked.idle = []
    if len(idle) >= _MAX_PARKED:
        return False
    worker.gr_context = None  # the finished call's context variables go with it
    idle.append(worker)
    return True


class Concurrent:
    """A step's tasks running on the pool / the loop thread, at most ``max_concurrency`` at
    once; :meth:`next` waits for the next to end."""

    __slots__ = ("events", "handoff", "running", "streaming", "waiting")

    def __init__(self, effect: RunTasks, streaming: bool) -> None:
        self.events: queue.SimpleQueue[NodeOutput | Outcome] = queue.SimpleQueue()
        self.waiting = list(reversed(effect.tasks))
        self.running: dict[int, Job | Future[Any]] = {}
        self.streaming = streaming
        self.handoff: ParentCommand | None = None
        try:
            while self.waiting and len(self.running) < effect.max_concurrency:
                self._start(self.waiting.pop())
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
            import asyncio

            loop, depth = _loop_threads.loop()
            self.running[id(task)] = asyncio.run_coroutine_threadsafe(
                _run_async_reporting(task, events, depth + 1), loop
            )
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


def _run_sync_reporting(task: Task, events: queue.SimpleQueue[Any]) -> None:
    """On a pool thread: run a sync node and report how it ended (whatever it raised)."""
    try:
        events.put((task, run_sync(task), None))
    except BaseException as exc:
        events.put((task, None, exc))
        if not isinstance(exc, CAUGHT):
            raise


async def _run_async_reporting(task: Task, events: queue.SimpleQueue[Any], depth: int) -> None:
    """On the loop thread: run an async node and report how it ended (whatever it raised)."""
    try:
        events.put((task, await run_async(task, depth), None))
    except BaseException as exc:
        # the driver raises what is not the node's result (KeyboardInterrupt, SystemExit) in
        # the caller's thread; raised here too, it would end the shared loop (see _Escaped)
        events.put((task, None, exc))
        import asyncio

        if isinstance(exc, asyncio.CancelledError):
            raise  # a cancelled coroutine stays cancelled


async def arun_lone(task: Task) -> Outcome:
    """Run a lone async node on the caller's loop (not streaming): how it ended."""
    try:
        return task, await run_async(task), None
    except CAUGHT as exc:
        return task, None, exc


class AsyncConcurrent:
    """A step's tasks running on the caller's event loop (sync ones on the shared pool), at
    most ``max_concurrency`` at once; :meth:`next` waits for the next to end."""

    __slots__ = ("events", "remaining", "workers")

    def __init__(self, effect: RunTasks, streaming: bool) -> None:
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
                    if task.node.is_async:
                        value = await run_async(task)
                    else:  # the shared pool, not the loop's CPU-sized default executor
                        context = copy_context()
                        value = await loop.run_in_executor(
                            shared_pool(), context.run, run_sync, task
                        )
                except asyncio.CancelledError:
                    raise  # the call was cancelled: nothing waits for this task any more
                except BaseException as exc:  # what is not the node's result is raised by next()
                    events.put_nowait((task, None, exc))
                else:
                    events.put_nowait((task, value, None))

        self.workers = [asyncio.ensure_future(run_one(task)) for task in effect.tasks]
        self.remaining = len(self.workers)

    async def next(self) -> AsyncIterator[NodeOutput | Outcome]:
        """Yield the chunks the tasks emit until one ends, then how it ended (an
        :data:`Outcome`, a tuple, last; after the last task, the chunks still queued come
        before it). A handoff or KeyboardInterrupt is raised here, its siblings cancelled."""
        events = self.events
        while True:
            event = await events.get()
            if not isinstance(event, tuple):
                yield event
                continue
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
