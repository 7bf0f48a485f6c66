"""The sync and async drivers of a call: each runs the call's flow (``_flow.py``) and carries
out its effects (``_effects.py``): saver calls, outputs, and the tasks of a superstep, which
``_run_tasks.py`` runs (a lone sync node inline, or in a greenlet while streaming; parallel and
async nodes on threads; under the async driver, async nodes and DualNodes on the caller's loop
and sync nodes on the pool). The sync driver calls, the async one awaits; both hold the thread's
lease for the whole call. A call with a cancel signal has it watched (``_cancel.py``): set
while a step's tasks run on threads or the loop, they are stopped at once (:class:`StepCancelled`
is thrown into the flow, which raises ``GraphCancelledError``); a lone awaited node, awaited on
the caller's own task as without a signal, is stopped by cancelling that task (``LoneAwait``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncGenerator, Generator
from contextvars import ContextVar
from typing import Any

from graph_agent.graph._cancel import CancelWatch, watch_cancel
from graph_agent.graph._concurrency import FINISHED
from graph_agent.graph._effects import (
    NEXT_OUTCOME,
    Emit,
    GetCheckpoint,
    NextOutcome,
    Outcome,
    PutCheckpoint,
    RunSettings,
    RunTasks,
    SaverCall,
    StepCancelled,
    Task,
)
from graph_agent.graph._flow import call_flow
from graph_agent.graph._run_tasks import (
    AsyncConcurrent,
    Concurrent,
    InlineCancel,
    LoneAwait,
    NodeGreenlet,
    StopHook,
    arun_lone,
    awaits,
    run_inline,
)
from graph_agent.graph.errors import InvalidUpdateError, ParentCommand, ThreadBusyError
from graph_agent.graph.saver import takes_lease_inline
from graph_agent.graph.state import OverAllState
from graph_agent.graph.stream_modes import NO_TASK_EVENTS, TaskEventTypes
from graph_agent.graph.types import NodeOutput, RunnableConfig

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


def drive_sync(
    run: RunSettings,
    input: Any,
    config: RunnableConfig,
    streaming: bool,
    origin_thread: int | None = None,
    subgraphs: bool = False,
    task_events: TaskEventTypes = NO_TASK_EVENTS,
    on_stop: StopHook | None = None,
) -> Generator[NodeOutput, None, OverAllState]:
    """Run a call. ``origin_thread``: the thread that created the stream; lone sync nodes run in
    a greenlet while the stream is read on that thread, else on a worker thread (a stream read
    from worker threads, as web frameworks do, still gets every chunk live). A lone sync node
    running in the caller's thread when the call's cancel is set is taken over
    (:class:`InlineCancel`: the lease is released at once, ``on_stop`` told). ``task_events``:
    see ``_task_events.py``."""
    saver = run.saver
    lease = None
    loaded: Any = NOT_LOADED  # the thread's newest checkpoint, read with the lease
    if saver is not None and config.thread_id is not None:
        lease, loaded = _acquire_sync(saver, config)
    node_greenlet = NodeGreenlet() if streaming else None
    running: Concurrent | None = None  # the step's tasks, when they run on other threads
    watch: CancelWatch | None = None
    inline: InlineCancel | None = None  # takes the call over while a lone node runs inline
    try:
        if config.cancel is not None:
            watch = watch_cancel(config.cancel)
            if watch is not None:
                held = None if lease is None else (saver, lease)
                call = (run.spec.name, config.thread_id, saver is not None)
                inline = InlineCancel(watch, held, on_stop, call)
        flow = call_flow(
            run, input, config, streaming=streaming, subgraphs=subgraphs, task_events=task_events
        )
        reply: Any = None
        failed: Exception | None = None  # a saver call's error, or StepCancelled, for the flow
        while True:
            try:
                effect = flow.send(reply) if failed is None else flow.throw(failed)
            except StopIteration as stop:
                result: OverAllState = stop.value
                return result
            reply = failed = None
            try:
                if type(effect) is RunTasks:
                    tasks = effect.tasks
                    if _on_threads(tasks, node_greenlet, origin_thread):
                        running = Concurrent(effect, streaming, watch)
                        reply = yield from running.next()
                    elif inline is not None:
                        reply = yield from _run_lone_watched(tasks[0], node_greenlet, inline)
                    elif node_greenlet is None:  # the common step: one sync node, in this thread
                        reply = run_inline(tasks[0])
                    else:
                        reply = yield from _in_greenlet(tasks[0], node_greenlet, None)
                elif type(effect) is NodeOutput:
                    yield effect
                elif type(effect) is NextOutcome:
                    assert running is not None
                    reply = yield from running.next()
                elif type(effect) is Emit:
                    yield from effect.items
                else:
                    assert isinstance(effect, SaverCall)
                    try:
                        reply = _saver_reply(effect, saver, lease, loaded)
                    except Exception as exc:
                        failed = exc
                    loaded = NOT_LOADED  # only the call's first saver call may use it
            except StepCancelled as stopped:  # the cancel was set while the step ran
                failed = stopped
    except ParentCommand as handoff:
        if not inside_subgraph.get():
            raise _no_parent(run, handoff) from None
        raise
    finally:
        released = inline is not None and inline.taken  # (by the takeover)
        _end_sync(saver, None if released else lease, watch, running, node_greenlet)


def _on_threads(
    tasks: list[Task], node_greenlet: NodeGreenlet | None, origin_thread: int | None
) -> bool:
    """Whether a step's tasks run on other threads: several, an async one, or one streamed to
    a thread other than the stream's own (its greenlet cannot be resumed from another)."""
    if len(tasks) > 1 or tasks[0].node.is_async:
        return True
    return node_greenlet is not None and threading.get_ident() != origin_thread


def _in_greenlet(
    task: Task, node_greenlet: NodeGreenlet, inline: InlineCancel | None
) -> Generator[NodeOutput, None, Outcome | None]:
    """Run a step's lone sync node in the call's greenlet (the stream is read on its own
    thread, this one), each chunk it emits yielded as it comes; ``None`` when ``inline`` took
    the call over meanwhile (the node, stopped at a chunk, is not resumed: its greenlet is
    ended, its ``finally`` blocks run)."""
    event = node_greenlet.run(task, threading.get_ident())
    while event is not FINISHED:  # a chunk the node emitted
        if inline is None:
            yield event
        else:
            if not inline.taken:
                inline.at_chunk = True
                yield event
                inline.at_chunk = False
            if inline.taken:
                node_greenlet.close()
                return None
        event = node_greenlet.resume(task)
    reply: Outcome = node_greenlet.result
    node_greenlet.result = None
    if node_greenlet.buffered and (inline is None or not inline.taken):
        yield from node_greenlet.take_buffered()
    return reply


def _run_lone_watched(
    task: Task, node_greenlet: NodeGreenlet | None, inline: InlineCancel
) -> Generator[NodeOutput, None, Outcome | None]:
    """Run a step's lone sync node in this thread (inline, or in the greenlet) while the call's
    cancel is heard: set meanwhile, it takes the call over (``inline``), and what the node
    returns or emits from then on is dropped.

    Raises:
        StepCancelled: The call was taken over (the node returned since), or the cancel was
            set before the node started (it never does).
    """
    if not inline.enter(task):  # set since the flow looked: the node does not start
        inline.leave()
        raise StepCancelled
    reply: Outcome | None
    try:
        if node_greenlet is None:
            reply = run_inline(task)
        else:
            reply = yield from _in_greenlet(task, node_greenlet, inline)
    finally:
        taken = inline.leave()
    if taken:
        raise StepCancelled
    return reply


NOT_LOADED: Any = object()
"""No checkpoint was read with the lease (the saver cannot, or it was used)."""


def _acquire_sync(saver: Any, config: RunnableConfig) -> tuple[Any, Any]:
    """The thread's lease and, from a saver that reads it in the same transaction
    (``acquire_loading``: the SQLite saver; it returns the checkpoint in a 1-tuple, or None
    when it could not read it), the thread's newest checkpoint; else :data:`NOT_LOADED` (the
    flow's first ``get`` reads it)."""
    assert config.thread_id is not None
    acquire_loading = getattr(saver, "acquire_loading", None)
    if acquire_loading is None:
        return saver.acquire(config.thread_id, config.checkpoint_ns), NOT_LOADED
    lease, loaded = acquire_loading(config.thread_id, config.checkpoint_ns)
    return lease, NOT_LOADED if loaded is None else loaded[0]


def _saver_reply(effect: SaverCall, saver: Any, lease: Any, loaded: Any) -> Any:
    """What a saver call answers: the checkpoint read with the lease for the call's first
    load, the last checkpoint put with the lease's row let go of, else the call itself."""
    if loaded is not NOT_LOADED:
        return _first_load(effect, loaded, lease, saver)
    if lease is not None and type(effect) is PutCheckpoint and effect.last:
        _put_last(saver, effect, lease)
        return None
    return effect.run(saver)  # a SaverCall


def _first_load(effect: SaverCall, loaded: Any, lease: Any, saver: Any) -> Any:
    """The reply to the call's first saver call: the checkpoint read with the lease when
    that call asks for it (the thread's newest, as a ``get`` under the lease would read it)."""
    if (
        type(effect) is GetCheckpoint
        and effect.checkpoint_id is None
        and effect.thread_id == lease.thread_id
        and effect.checkpoint_ns == lease.checkpoint_ns
    ):
        return loaded
    return effect.run(saver)


def _put_last(saver: Any, effect: PutCheckpoint, lease: Any) -> None:
    """The call's last checkpoint, with the lease's row let go of in the same commit by a saver
    that can (``put_releasing``; the lease itself is released as usual when the call ends)."""
    put_releasing = getattr(saver, "put_releasing", None)
    if put_releasing is None:
        saver.put(effect.checkpoint)
    else:
        put_releasing(effect.checkpoint, lease)


async def _asaver_reply(effect: SaverCall, saver: Any, lease: Any) -> Any:
    """What an async saver call answers: the call itself, or the last checkpoint put with the
    lease's row let go of by a saver that can (``aput_releasing``; see :func:`_put_last`)."""
    if lease is not None and type(effect) is PutCheckpoint and effect.last:
        aput_releasing = getattr(saver, "aput_releasing", None)
        if aput_releasing is not None:
            return await aput_releasing(effect.checkpoint, lease)
    return await effect.arun(saver)


def _end_sync(
    saver: Any,
    lease: Any,
    watch: CancelWatch | None,
    running: Concurrent | None,
    node_greenlet: NodeGreenlet | None,
) -> None:
    """What a sync call leaves behind: its cancel watch, the tasks still running (cancelled),
    its greenlet, and the thread's lease (released)."""
    if watch is not None:
        watch.close()
    if running is not None:
        running.cancel()
    if node_greenlet is not None:
        node_greenlet.close()
    if lease is not None:
        saver.release(lease)


async def drive_async(
    run: RunSettings,
    input: Any,
    config: RunnableConfig,
    streaming: bool,
    result: list[OverAllState],
    subgraphs: bool = False,
    task_events: TaskEventTypes = NO_TASK_EVENTS,
) -> AsyncGenerator[NodeOutput, None]:
    """:func:`drive_sync` for async callers; ``result`` receives the final state."""
    saver = run.saver
    holder = _Holder()
    lease = await _ahold(saver, config, holder) if saver is not None else None
    running: AsyncConcurrent | None = None  # the step's tasks
    watch: CancelWatch | None = None
    lone: LoneAwait | None = None  # awaits a lone node where a cancel can stop it
    try:
        if config.cancel is not None:
            watch = watch_cancel(config.cancel)
            lone = LoneAwait(watch) if watch is not None else None
        flow = call_flow(
            run, input, config, streaming=streaming, subgraphs=subgraphs, task_events=task_events
        )
        reply: Any = None
        failed: Exception | None = None  # a saver call's error, or StepCancelled, for the flow
        while True:
            try:
                effect = flow.send(reply) if failed is None else flow.throw(failed)
            except StopIteration as stop:
                result.append(stop.value)
                return
            reply = failed = None
            if type(effect) is RunTasks:
                tasks = effect.tasks
                if len(tasks) == 1 and not streaming and awaits(tasks[0]):
                    if lone is None:
                        reply = await arun_lone(tasks[0])
                    else:
                        try:
                            reply = await lone.run(tasks[0])
                        except StepCancelled as cancelled:
                            failed = cancelled
                    continue
                running = AsyncConcurrent(effect, streaming, watch)
                effect = NEXT_OUTCOME
            if type(effect) is NextOutcome:
                assert running is not None
                try:
                    async for event in running.next():
                        if isinstance(event, tuple):
                            reply = event
                        else:
                            holder.waiting = True
                            yield event
                            holder.waiting = False
                except StepCancelled as cancelled:  # the cancel was set while the step ran
                    failed = cancelled
            elif type(effect) is NodeOutput:
                holder.waiting = True
                yield effect
                holder.waiting = False
            elif type(effect) is Emit:
                for item in effect.items:
                    holder.waiting = True
                    yield item
                    holder.waiting = False
            else:
                assert isinstance(effect, SaverCall)
                try:
                    reply = await _asaver_reply(effect, saver, lease)
                except Exception as exc:
                    failed = exc
    except ParentCommand as handoff:
        if not inside_subgraph.get():
            raise _no_parent(run, handoff) from None
        raise
    finally:
        held = None if lease is None else (saver, config, holder, lease)
        await _end_async(watch, running, held)


async def _end_async(
    watch: CancelWatch | None,
    running: AsyncConcurrent | None,
    held: tuple[Any, RunnableConfig, _Holder, Any] | None,
) -> None:
    """What an async call leaves behind: its cancel watch, the nodes still running (cancelled
    and waited for), and the lease it ``held`` (released, see :func:`_aletgo`)."""
    try:
        if watch is not None:
            watch.close()
        if running is not None:
            await running.stop()
    finally:
        if held is not None:
            await _aletgo(*held)


class _Holder:
    """An async run holding a thread's lease; ``waiting``: stopped at a yield, waiting for
    its consumer to ask for more (or to drop the stream). A run refused the lease waits for
    :meth:`released` (:meth:`wait_released`) instead of polling."""

    __slots__ = ("_waiters", "done", "waiting")

    def __init__(self) -> None:
        self.waiting = False
        self.done = False  # the lease was released
        self._waiters: list[tuple[Any, Any]] | None = None  # (loop, future) of waiting runs

    async def wait_released(self, timeout: float) -> None:
        """Return once the lease is released, or after ``timeout`` seconds."""
        import asyncio

        if self.done:
            return
        loop = asyncio.get_running_loop()
        released = loop.create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append((loop, released))
        await asyncio.wait([released], timeout=timeout)

    def released(self) -> None:
        """The lease was released: wake the runs waiting for it (on their own loops)."""
        self.done = True
        waiters, self._waiters = self._waiters, None
        for loop, released in waiters or ():
            with contextlib.suppress(RuntimeError):  # that loop closed meanwhile
                loop.call_soon_threadsafe(_wake, released)


def _wake(released: Any) -> None:
    if not released.done():
        released.set_result(None)


_async_holders: dict[tuple[int, str, str], _Holder] = {}
"""The async runs holding a lease in this process, by (saver, thread, namespace)."""

RELEASE_WAIT = 0.05
"""Seconds a run refused a thread's lease waits for a holder stopped at a yield to let go."""


async def _ahold(saver: Any, config: RunnableConfig, holder: _Holder) -> Any:
    """The thread's lease for an async run (``None`` without a thread), ``holder`` registered
    as holding it."""
    if config.thread_id is None:
        return None
    lease = await _aacquire(saver, config.thread_id, config.checkpoint_ns)
    _async_holders[(id(saver), config.thread_id, config.checkpoint_ns)] = holder
    return lease


async def _aletgo(saver: Any, config: RunnableConfig, holder: _Holder, lease: Any) -> None:
    """Release the lease :func:`_ahold` took, and wake the runs waiting for it."""
    assert config.thread_id is not None
    key = (id(saver), config.thread_id, config.checkpoint_ns)
    if _async_holders.get(key) is holder:
        del _async_holders[key]
    try:
        await saver.arelease(lease)
    finally:
        holder.released()


async def _aacquire(saver: Any, thread_id: str, checkpoint_ns: str) -> Any:
    """Take the thread's lease, or raise :class:`ThreadBusyError` at once, as a sync call
    does. One wait: a stream the caller broke out of releases its lease when the event loop
    finalizes it, a few turns later; while the holder is such a stream (stopped at a yield),
    wait (at most :data:`RELEASE_WAIT` seconds) for it to let go, then try once more."""
    try:
        return await _aacquire_once(saver, thread_id, checkpoint_ns)
    except ThreadBusyError:
        holder = _async_holders.get((id(saver), thread_id, checkpoint_ns))
        if holder is None or not holder.waiting:
            raise
    await holder.wait_released(RELEASE_WAIT)
    return await _aacquire_once(saver, thread_id, checkpoint_ns)


async def _aacquire_once(saver: Any, thread_id: str, checkpoint_ns: str) -> Any:
    """``saver.aacquire``, safe to cancel: a saver taking the lease in a worker thread (or
    over a connection) may still take it after the caller was cancelled, so the acquire runs
    shielded and, on cancellation, what it took is released before the cancellation goes on."""
    aacquire = saver.aacquire
    if takes_lease_inline(aacquire):
        return await aacquire(thread_id, checkpoint_ns)  # acquire() inline: nothing to cancel
    import asyncio

    attempt = asyncio.ensure_future(aacquire(thread_id, checkpoint_ns))
    try:
        return await asyncio.shield(attempt)
    except asyncio.CancelledError:
        giving_back = asyncio.ensure_future(_release_taken(saver, attempt))
        _giving_back.add(giving_back)  # runs to the end even if this task is cancelled again
        giving_back.add_done_callback(_giving_back.discard)
        await asyncio.shield(giving_back)
        raise


_giving_back: set[Any] = set()
"""The :func:`_release_taken` tasks running (the event loop keeps only weak references)."""


async def _release_taken(saver: Any, attempt: Any) -> None:
    """Wait for an acquire whose caller was cancelled, and release the lease it took."""
    try:
        lease = await attempt
    except Exception:  # it took nothing (ThreadBusyError, a store error)
        return
    await saver.arelease(lease)
