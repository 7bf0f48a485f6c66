"""How a superstep's tasks run, for the drivers in ``runner.py``.

A lone sync node runs inline in the caller's thread (no thread round trip); while streaming it
runs in a greenlet (:class:`NodeGreenlet`), so that ``emit_chunk`` reaches the caller the moment
it is called. Parallel sync nodes run on the shared worker pool and async nodes on a private
event-loop thread, so that ``invoke()`` also works inside a running event loop; their outcomes
and chunks come back through one queue. The threads, loops and greenlets are
``concurrency.py``'s. Whatever a node returns is handed to the flow with :func:`finish_task`.
"""

from __future__ import annotations

import dataclasses
import inspect
import queue
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Future
from contextvars import copy_context
from typing import Any

from graph_agent.graph.concurrency import (
    InlineStream,
    Job,
    run_on_loop,
    shared_pool,
    start_on_loop,
    to_thread,
)
from graph_agent.graph.errors import GraphInterrupted, GraphRuntimeError, ParentCommand
from graph_agent.graph.flow import RunTasks, Task
from graph_agent.graph.runtime import TaskContext, _current_task
from graph_agent.graph.types import NodeOutput, StreamingOutput

CAUGHT = (Exception, GraphInterrupted)
"""What a node may raise and the engine records; KeyboardInterrupt and SystemExit propagate."""


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


async def run_async(task: Task) -> Any:
    """Run a node as a coroutine with its task context set."""
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


class _Finished:
    __slots__ = ("task", "value")

    def __init__(self, task: Task, value: Any) -> None:
        self.task = task
        self.value = value


class _Failed:
    __slots__ = ("error", "task")

    def __init__(self, task: Task, error: BaseException) -> None:
        self.task = task
        self.error = error


def run_inline(effect: RunTasks, saver: Any, task: Task) -> None:
    """Run a lone sync node in this thread and hand its outcome to the flow."""
    try:
        value = run_sync(task)
    except CAUGHT as exc:
        task.error = exc
    else:
        finish_task(effect, saver, task, value)


def finish_task(effect: RunTasks, saver: Any, task: Task, value: Any) -> None:
    try:
        call = effect.on_finish(task, value)
        if call is not None:
            getattr(saver, call.method)(*call.args)
    except Exception as exc:
        task.error = exc
        task.engine_error = True


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

    def run(self, effect: RunTasks, saver: Any, task: Task, thread: int) -> Any:
        """Run ``task`` of ``effect`` (on ``thread``, the caller's) and hand its outcome to
        the flow, until it emits its first chunk (a NodeOutput, returned) or is done (an
        empty tuple; chunks it emitted from threads of its own wait in :attr:`buffered`)."""
        task.context._emit = self._emit
        return self.start(thread, run_inline, effect, saver, task)

    def resume(self, task: Task) -> Any:
        """Carry on after a chunk was yielded: the next chunk, or the end of the node."""
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


def run_concurrently(effect: RunTasks, saver: Any, streaming: bool) -> Iterator[NodeOutput]:
    """Run tasks on the pool / the loop thread, at most ``max_concurrency`` at once."""
    events: queue.SimpleQueue[Any] = queue.SimpleQueue()
    waiting = list(reversed(effect.tasks))
    running: dict[int, Job | Future[Any]] = {}

    def emit(context: TaskContext, chunk: Any) -> None:
        events.put(chunk_output(context, chunk))

    def start(task: Task) -> None:
        if streaming:
            task.context._emit = emit
        if task.node.is_async:
            running[id(task)] = start_on_loop(_run_async_reporting(task, events))
        else:
            context = copy_context()
            running[id(task)] = shared_pool().start(context.run, _run_sync_reporting, task, events)

    handoff: ParentCommand | None = None
    try:
        while waiting and len(running) < effect.max_concurrency:
            start(waiting.pop())
        while running:
            event = events.get()
            if isinstance(event, NodeOutput):
                yield event
                continue
            task = event.task
            del running[id(task)]
            if isinstance(event, _Failed):
                if isinstance(event.error, ParentCommand):
                    # a handoff ends this graph's run: let the siblings finish, start no more
                    handoff = handoff or event.error
                    waiting.clear()
                elif not isinstance(event.error, CAUGHT):
                    raise event.error  # KeyboardInterrupt, SystemExit: not the node's result
                task.error = event.error
            elif handoff is None:
                finish_task(effect, saver, task, event.value)
            if waiting:
                start(waiting.pop())
        if handoff is not None:
            raise handoff
        while not events.empty():
            leftover = events.get()
            if isinstance(leftover, NodeOutput):
                yield leftover
    finally:
        for started in running.values():
            started.cancel()  # those not begun yet never will


def _run_sync_reporting(task: Task, events: queue.SimpleQueue[Any]) -> None:
    """On a pool thread: run a sync node and report how it ended (whatever it raised)."""
    try:
        events.put(_Finished(task, run_sync(task)))
    except BaseException as exc:
        events.put(_Failed(task, exc))
        if not isinstance(exc, CAUGHT):
            raise


async def _run_async_reporting(task: Task, events: queue.SimpleQueue[Any]) -> None:
    """On the loop thread: run an async node and report how it ended (whatever it raised)."""
    try:
        events.put(_Finished(task, await run_async(task)))
    except BaseException as exc:
        # the driver raises what is not the node's result (KeyboardInterrupt, SystemExit) in
        # the caller's thread; raised here too, it would end the shared loop
        events.put(_Failed(task, exc))
        import asyncio

        if isinstance(exc, asyncio.CancelledError):
            raise  # a cancelled coroutine stays cancelled


async def afinish_task(effect: RunTasks, saver: Any, task: Task, value: Any) -> None:
    try:
        call = effect.on_finish(task, value)
        if call is not None:
            await getattr(saver, "a" + call.method)(*call.args)
    except Exception as exc:
        task.error = exc
        task.engine_error = True


async def arun_tasks(effect: RunTasks, saver: Any, streaming: bool) -> AsyncIterator[NodeOutput]:
    import asyncio

    tasks = effect.tasks
    if len(tasks) == 1 and not streaming and tasks[0].node.is_async:
        task = tasks[0]
        try:
            value = await run_async(task)
        except CAUGHT as exc:
            task.error = exc
            return
        await afinish_task(effect, saver, task, value)
        return
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[Any] = asyncio.Queue()
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
                else:
                    value = await to_thread(run_sync, task)
            except CAUGHT as exc:
                task.error = exc
            else:
                await afinish_task(effect, saver, task, value)

    workers = [asyncio.ensure_future(run_one(task)) for task in tasks]
    done = asyncio.ensure_future(asyncio.gather(*workers))
    done.add_done_callback(lambda _: events.put_nowait(None))
    # a cancelled call leaves `done` failed with CancelledError and never awaited: retrieve
    # it, or asyncio logs "exception was never retrieved" when it is collected
    done.add_done_callback(_retrieve)
    try:
        while True:
            event = await events.get()
            if event is None:
                break
            yield event
        while not events.empty():
            leftover = events.get_nowait()
            if leftover is not None:
                yield leftover
        await done
    finally:
        for worker in workers:
            worker.cancel()


def _retrieve(future: Any) -> None:
    if not future.cancelled():
        future.exception()
