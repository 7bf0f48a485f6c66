"""The sync and async drivers of a call, and :class:`CompiledGraph`, what ``compile()`` returns.

Both drivers run :func:`~graph_agent.graph.flow.call_flow` and differ only in how they carry out
its effects. The sync driver runs a lone sync node inline (no thread round trip), parallel sync
nodes on a shared thread pool and async nodes on a private event-loop thread, so ``invoke()``
also works inside a running event loop. While streaming, a lone sync node runs in a greenlet so
that ``emit_chunk`` reaches the caller the moment it is called.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import inspect
import queue
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from concurrent.futures import Future
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from graph_agent.graph import render as render_module
from graph_agent.graph.errors import (
    GraphInterrupted,
    GraphRuntimeError,
    InvalidUpdateError,
    ParentCommand,
    ThreadBusyError,
)
from graph_agent.graph.flow import (
    Emit,
    RunSettings,
    RunTasks,
    SaverCall,
    Task,
    call_flow,
    pending_interrupts,
    update_flow,
)
from graph_agent.graph.pool import Job, shared_pool
from graph_agent.graph.render import GraphView
from graph_agent.graph.runtime import TaskContext, _current_task
from graph_agent.graph.state import OverAllState
from graph_agent.graph.types import NodeOutput, RunnableConfig, StateSnapshot, StreamingOutput

if TYPE_CHECKING:  # imported where used: a graph with sync nodes never loads them
    import asyncio

    import greenlet

_CAUGHT = (Exception, GraphInterrupted)
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
                self._start()
            return self._loops[depth], depth

    def _start(self) -> None:
        import asyncio

        loop = asyncio.new_event_loop()
        thread = threading.Thread(
            target=loop.run_forever, name=f"graph-agent-loop-{len(self._loops)}", daemon=True
        )
        thread.start()
        self._loops.append(loop)
        self._threads.append(thread)


_loop_threads = _LoopThreads()


def _call(task: Task) -> Any:
    node = task.node
    if node.pass_config:
        return node.fn(task.state, task.config)
    return node.fn(task.state)


def _run_sync(task: Task) -> Any:
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
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()
    return result


async def _await(task: Task, awaitable: Any, depth: int) -> Any:
    _loop_depth.set(depth)
    token = _current_task.set(task.context)
    try:
        return await awaitable
    finally:
        _current_task.reset(token)


async def _run_async(task: Task, depth: int | None = None) -> Any:
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


def _chunk_output(context: TaskContext, chunk: Any) -> NodeOutput:
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


inside_subgraph: ContextVar[bool] = ContextVar("graph_agent_inside_subgraph", default=False)
"""True while a graph runs as a node of another graph: a handoff (``Command.PARENT``) then
goes to that graph instead of failing."""


def _no_parent(run: RunSettings, handoff: ParentCommand) -> InvalidUpdateError:
    where = f"node {handoff.node!r} (step {handoff.step})" if handoff.node else "a node"
    return InvalidUpdateError(
        f"{where} of graph {run.spec.name!r} handed off with Command(graph=Command.PARENT), but "
        "the graph is not running inside another graph; return Command(goto=...) to route here",
        node=handoff.node or run.spec.name,
        step=handoff.step,
    )


def _drive_sync(
    run: RunSettings,
    input: Any,
    config: RunnableConfig,
    streaming: bool,
    origin_thread: int | None = None,
    subgraphs: bool = False,
) -> Generator[NodeOutput, None, OverAllState]:
    """Run a call. ``origin_thread``: the thread that created the stream; lone sync nodes run in
    a greenlet while the stream is read on that thread, else on a worker thread (a stream read
    from worker threads, as web frameworks do, still gets every chunk live)."""
    saver = run.saver
    lease = None
    if saver is not None and config.thread_id:
        lease = saver.acquire(config.thread_id, config.checkpoint_ns)
    node_greenlet = _NodeGreenlet() if streaming else None
    try:
        flow = call_flow(run, input, config, streaming=streaming, subgraphs=subgraphs)
        reply: Any = None
        while True:
            try:
                effect = flow.send(reply)
            except StopIteration as stop:
                result: OverAllState = stop.value
                return result
            reply = None
            if type(effect) is RunTasks:
                tasks = effect.tasks
                if len(tasks) > 1 or tasks[0].node.is_async:
                    yield from _run_concurrently(effect, saver, streaming)
                elif node_greenlet is not None:
                    if threading.get_ident() == origin_thread:
                        task = tasks[0]
                        event = node_greenlet.start(task, origin_thread)
                        while type(event) is not tuple:  # a chunk the node emitted
                            yield event
                            event = node_greenlet.resume(task)
                        leftovers = node_greenlet.finish(effect, saver, task)
                        if leftovers:
                            yield from leftovers
                    else:
                        yield from _run_concurrently(effect, saver, streaming)
                else:  # the common step: one sync node, run in this thread
                    task = tasks[0]
                    try:
                        value = _run_sync(task)
                    except _CAUGHT as exc:
                        task.error = exc
                    else:
                        _finish(effect, saver, task, value)
            elif type(effect) is NodeOutput:
                yield effect
            elif type(effect) is SaverCall:
                reply = getattr(saver, effect.method)(*effect.args)
            else:
                assert isinstance(effect, Emit)
                yield from effect.items
    except ParentCommand as handoff:
        if not inside_subgraph.get():
            raise _no_parent(run, handoff) from None
        raise
    finally:
        if node_greenlet is not None:
            node_greenlet.close()
        if lease is not None:
            saver.release(lease)


def _finish(effect: RunTasks, saver: Any, task: Task, value: Any) -> None:
    try:
        call = effect.on_finish(task, value)
        if call is not None:
            getattr(saver, call.method)(*call.args)
    except Exception as exc:
        task.error = exc
        task.engine_error = True


_NO_OUTPUTS: list[NodeOutput] = []  # never appended to


class _NodeGreenlet:
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
        "_buffered",
        "_busy",
        "_caller",
        "_emit",
        "_getcurrent",
        "_greenlet",
        "_module",
        "_outcome",
        "_thread",
    )

    def __init__(self) -> None:
        import greenlet

        self._module = greenlet
        self._getcurrent = greenlet.getcurrent
        self._greenlet: greenlet.greenlet | None = None
        self._thread = 0
        self._caller: greenlet.greenlet | None = None
        self._busy = False  # a node is running (or paused at a chunk) in the greenlet
        self._outcome: tuple[bool, Any] = _NO_OUTCOME
        self._buffered: list[NodeOutput] = []
        self._emit = self.emit  # one bound method for every task of the call

    def start(self, task: Task, thread: int) -> Any:
        """Run ``task`` (on ``thread``, the caller's) until it emits its first chunk (a
        NodeOutput, returned) or ends (an empty tuple: then :meth:`finish`)."""
        worker = self._greenlet
        if worker is None or self._thread != thread or worker.dead:
            worker = self._greenlet = _parked_greenlet() or self._module.greenlet(_serve)
            self._thread = thread
        caller = self._caller = self._getcurrent()
        if worker.parent is not caller:
            worker.parent = caller  # where an exception the node does not catch goes
        worker.gr_context = contextvars.copy_context()
        task.context._emit = self._emit
        self._busy = True
        return worker.switch(self, task)

    def resume(self, task: Task) -> Any:
        """Carry on after a chunk was yielded: the next chunk, or the end of the node."""
        if threading.get_ident() != self._thread:
            raise GraphRuntimeError(
                f"the stream was read from another thread while node {task.node.name!r} was "
                "streaming; read a stream from one thread, or create it in the thread that "
                "reads it"
            )
        self._caller = self._getcurrent()
        assert self._greenlet is not None
        return self._greenlet.switch()

    def finish(self, effect: RunTasks, saver: Any, task: Task) -> list[NodeOutput]:
        """Record the node's outcome; return chunks it emitted from threads of its own."""
        (finished, value), self._outcome = self._outcome, _NO_OUTCOME
        self._busy = False
        if finished:
            _finish(effect, saver, task, value)
        else:
            task.error = value
        if self._buffered:
            buffered, self._buffered = self._buffered, []
            return buffered
        return _NO_OUTPUTS

    def emit(self, context: TaskContext, chunk: Any) -> None:
        output = _chunk_output(context, chunk)
        if self._getcurrent() is self._greenlet and self._caller is not None:
            self._caller.switch(output)
        else:  # emitted from a thread the node started itself: delivered after the node
            self._buffered.append(output)

    def close(self) -> None:
        """Park the greenlet for the next call, or end it (mid-node, when the caller stopped
        reading the stream: the node's ``finally`` blocks run)."""
        worker, self._greenlet = self._greenlet, None
        if worker is None or worker.dead or self._thread != threading.get_ident():
            return
        if not self._busy and _park(worker):
            return
        worker.parent = self._getcurrent()
        worker.throw(self._module.GreenletExit)


_NO_OUTCOME: tuple[bool, Any] = (False, None)


def _serve(host: _NodeGreenlet, task: Task) -> None:
    """A node greenlet's body: run each task switched in and leave its outcome on the host,
    ``(True, its return)`` or ``(False, the exception)``; switch back with nothing (an empty
    tuple, which no chunk is). Between tasks, parked or not, it holds no task, host or outcome.
    """
    while True:
        try:
            host._outcome = (True, _run_sync(task))
        except _CAUGHT as exc:
            host._outcome = (False, exc)
        caller = host._caller
        assert caller is not None
        del host, task
        host, task = caller.switch()


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


def _run_concurrently(effect: RunTasks, saver: Any, streaming: bool) -> Iterator[NodeOutput]:
    """Run tasks on the pool / the loop thread, at most ``max_concurrency`` at once."""
    events: queue.SimpleQueue[Any] = queue.SimpleQueue()
    waiting = list(reversed(effect.tasks))
    running: dict[int, Job | Future[Any]] = {}

    def emit(context: TaskContext, chunk: Any) -> None:
        events.put(_chunk_output(context, chunk))

    def start(task: Task) -> None:
        if streaming:
            task.context._emit = emit
        if task.node.is_async:
            import asyncio

            loop, depth = _loop_threads.loop()
            running[id(task)] = asyncio.run_coroutine_threadsafe(
                _run_async_reporting(task, events, depth + 1), loop
            )
        else:
            context = contextvars.copy_context()
            running[id(task)] = shared_pool().start(
                context.run, _run_sync_reporting, task, events
            )

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
                elif not isinstance(event.error, _CAUGHT):
                    raise event.error  # KeyboardInterrupt, SystemExit: not the node's result
                task.error = event.error
            elif handoff is None:
                _finish(effect, saver, task, event.value)
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
        events.put(_Finished(task, _run_sync(task)))
    except BaseException as exc:
        events.put(_Failed(task, exc))
        if not isinstance(exc, _CAUGHT):
            raise


async def _run_async_reporting(
    task: Task, events: queue.SimpleQueue[Any], depth: int
) -> None:
    """On the loop thread: run an async node and report how it ended (whatever it raised)."""
    try:
        events.put(_Finished(task, await _run_async(task, depth)))
    except BaseException as exc:
        events.put(_Failed(task, exc))
        if not isinstance(exc, _CAUGHT):
            raise  # a cancelled coroutine stays cancelled


async def _drive_async(
    run: RunSettings,
    input: Any,
    config: RunnableConfig,
    streaming: bool,
    result: list[OverAllState],
    subgraphs: bool = False,
) -> AsyncGenerator[NodeOutput, None]:
    saver = run.saver
    lease = None
    if saver is not None and config.thread_id:
        lease = await _aacquire(saver, config.thread_id, config.checkpoint_ns)
    try:
        flow = call_flow(run, input, config, streaming=streaming, subgraphs=subgraphs)
        reply: Any = None
        while True:
            try:
                effect = flow.send(reply)
            except StopIteration as stop:
                result.append(stop.value)
                return
            reply = None
            if type(effect) is RunTasks:
                async for chunk in _arun_tasks(effect, saver, streaming):
                    yield chunk
            elif type(effect) is NodeOutput:
                yield effect
            elif type(effect) is SaverCall:
                reply = await getattr(saver, "a" + effect.method)(*effect.args)
            else:
                assert isinstance(effect, Emit)
                for item in effect.items:
                    yield item
    except ParentCommand as handoff:
        if not inside_subgraph.get():
            raise _no_parent(run, handoff) from None
        raise
    finally:
        if lease is not None:
            await saver.arelease(lease)


async def _aacquire(saver: Any, thread_id: str, checkpoint_ns: str) -> Any:
    """Take the thread's lease. A stream the caller broke out of releases its lease when the
    event loop finalizes it, which is scheduled but not yet run: give the loop a few turns."""
    import asyncio

    for turn in range(20):
        try:
            return await saver.aacquire(thread_id, checkpoint_ns)
        except ThreadBusyError:
            if turn == 19:
                raise
            await asyncio.sleep(0 if turn < 10 else 0.005)
    raise AssertionError("unreachable")


async def _afinish(effect: RunTasks, saver: Any, task: Task, value: Any) -> None:
    try:
        call = effect.on_finish(task, value)
        if call is not None:
            await getattr(saver, "a" + call.method)(*call.args)
    except Exception as exc:
        task.error = exc
        task.engine_error = True


async def _arun_tasks(
    effect: RunTasks, saver: Any, streaming: bool
) -> AsyncIterator[NodeOutput]:
    import asyncio

    tasks = effect.tasks
    if len(tasks) == 1 and not streaming and tasks[0].node.is_async:
        task = tasks[0]
        try:
            value = await _run_async(task)
        except _CAUGHT as exc:
            task.error = exc
            return
        await _afinish(effect, saver, task, value)
        return
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[Any] = asyncio.Queue()
    limit = asyncio.Semaphore(effect.max_concurrency)

    def emit_threadsafe(context: TaskContext, chunk: Any) -> None:
        output = _chunk_output(context, chunk)
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
                    value = await _run_async(task)
                else:  # the shared pool, not the loop's CPU-sized default executor
                    context = contextvars.copy_context()
                    value = await loop.run_in_executor(
                        shared_pool(), context.run, _run_sync, task
                    )
            except _CAUGHT as exc:
                task.error = exc
            else:
                await _afinish(effect, saver, task, value)

    workers = [asyncio.ensure_future(run_one(task)) for task in tasks]
    done = asyncio.ensure_future(asyncio.gather(*workers))
    done.add_done_callback(lambda _: events.put_nowait(None))
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


def _exhaust(gen: Generator[Any, None, OverAllState]) -> OverAllState:
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            result: OverAllState = stop.value
            return result


class CompiledGraph:
    """A validated graph, ready to run. Made by :meth:`StateGraph.compile`.

    Example:
        >>> from graph_agent import StateGraph, START, END
        >>> g = StateGraph("inc")
        >>> _ = g.add_node("inc", lambda state: {"x": state["x"] + 1})
        >>> _ = g.add_edge(START, "inc").add_edge("inc", END)
        >>> g.compile().invoke({"x": 1})["x"]
        2
    """

    def __init__(self, run: RunSettings, view: GraphView) -> None:
        self._run = run
        self._view = view

    @property
    def name(self) -> str:
        return self._run.spec.name

    @property
    def saver(self) -> Any:
        return self._run.saver

    def with_saver(self, saver: Any) -> CompiledGraph:
        """The same graph on another saver (or none): nothing is compiled again."""
        return CompiledGraph(dataclasses.replace(self._run, saver=saver), self._view)

    def invoke(self, input: Any, config: RunnableConfig | None = None) -> OverAllState:
        """Run to the end (or to a pause) and return the state."""
        return _exhaust(_drive_sync(self._run, input, config or RunnableConfig(), False))

    def stream(
        self, input: Any, config: RunnableConfig | None = None, *, subgraphs: bool = False
    ) -> Iterator[NodeOutput]:
        """Run, yielding a :class:`NodeOutput` per finished node and a
        :class:`StreamingOutput` per emitted chunk. With ``subgraphs``, graphs that run inside
        nodes stream their own NodeOutputs too, with the path of nodes they run under."""
        config = config or RunnableConfig()
        return _drive_sync(self._run, input, config, True, threading.get_ident(), subgraphs)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None) -> OverAllState:
        """Async twin of :meth:`invoke`."""
        result: list[OverAllState] = []
        run_config = config or RunnableConfig()
        async for _ in _drive_async(self._run, input, run_config, False, result):
            pass
        return result[0]

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, *, subgraphs: bool = False
    ) -> AsyncIterator[NodeOutput]:
        """Async twin of :meth:`stream`."""
        result: list[OverAllState] = []
        run_config = config or RunnableConfig()
        agen = _drive_async(self._run, input, run_config, True, result, subgraphs)
        try:
            async for item in agen:
                yield item
        finally:
            with contextlib.suppress(RuntimeError):
                await agen.aclose()

    def get_state(self, config: RunnableConfig) -> StateSnapshot:
        """The thread's state at its newest checkpoint (or at ``config.checkpoint_id``)."""
        thread_id = self._thread(config, "get_state")
        checkpoint = self._run.saver.get(thread_id, config.checkpoint_id, config.checkpoint_ns)
        if checkpoint is None:
            return StateSnapshot(
                values={},
                next=(),
                config=config,
                metadata={},
                created_at=None,
                parent_config=None,
            )
        return self._snapshot(checkpoint)

    def get_state_history(
        self,
        config: RunnableConfig,
        limit: int | None = None,
        before: str | RunnableConfig | None = None,
    ) -> Iterator[StateSnapshot]:
        """The thread's checkpoints, newest first (``before``: a checkpoint id or config)."""
        thread_id = self._thread(config, "get_state_history")
        if isinstance(before, RunnableConfig):
            before = before.checkpoint_id
        saver, ns = self._run.saver, config.checkpoint_ns
        for checkpoint in saver.list(thread_id, limit=limit, before=before, checkpoint_ns=ns):
            yield self._snapshot(checkpoint)

    def update_state(
        self, config: RunnableConfig, values: Any, as_node: str | None = None
    ) -> RunnableConfig:
        """Write ``values`` into the thread in a new checkpoint, merged by the key strategies.

        With ``as_node`` the run continues as if that node had just written them (its edges
        decide what runs next); without, the thread keeps its next nodes. Returns the new
        checkpoint's config.
        """
        thread_id = self._thread(config, "update_state")
        saver = self._run.saver
        lease = saver.acquire(thread_id, config.checkpoint_ns)
        try:
            flow = update_flow(self._run, config, values, as_node)
            reply: Any = None
            while True:
                try:
                    effect = flow.send(reply)
                except StopIteration as stop:
                    new_config: RunnableConfig = stop.value
                    return new_config
                assert isinstance(effect, SaverCall)
                reply = getattr(saver, effect.method)(*effect.args)
        finally:
            saver.release(lease)

    def _thread(self, config: RunnableConfig, what: str) -> str:
        if self._run.saver is None:
            raise ValueError(
                f"{what} reads the checkpoints of a thread, and graph {self.name!r} has no "
                "saver: compile with CompileConfig(saver=MemorySaver())"
            )
        if config.thread_id is None:
            raise ValueError(f"{what} needs RunnableConfig(thread_id=...)")
        return config.thread_id

    def _snapshot(self, checkpoint: Any) -> StateSnapshot:
        hidden = self._run.spec.hidden_keys
        thread_id, ns = checkpoint.thread_id, checkpoint.checkpoint_ns
        parent = checkpoint.parent_id
        return StateSnapshot(
            values={k: v for k, v in checkpoint.values.items() if k not in hidden},
            next=tuple(checkpoint.next),
            config=RunnableConfig(
                thread_id=thread_id, checkpoint_id=checkpoint.id, checkpoint_ns=ns
            ),
            metadata=checkpoint.metadata,
            created_at=checkpoint.created_at,
            parent_config=(
                RunnableConfig(thread_id=thread_id, checkpoint_id=parent, checkpoint_ns=ns)
                if parent
                else None
            ),
            interrupts=pending_interrupts(checkpoint.pending_writes, self._run.spec.rank),
        )

    def get_graph(self, fmt: str = "mermaid", *, xray: bool = False) -> str:
        """The graph as ``"mermaid"``, ``"plantuml"``, ``"dot"`` or ``"ascii"`` text; with
        ``xray``, nodes that run a graph of their own are drawn open, as clusters."""
        return render_module.render(self._view, fmt, xray=xray)

    @property
    def view(self) -> GraphView:
        """The nodes and edges diagrams are drawn from."""
        return self._view

    def __repr__(self) -> str:
        return f"CompiledGraph({self.name!r}, nodes={list(self._run.spec.nodes)})"
