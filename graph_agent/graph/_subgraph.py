"""A compiled graph run as one node of another graph.

``StateGraph.add_node("research", research_graph)`` (or an agent) wraps the child in a
:class:`SubgraphNode`. The child gets the parent's state as input, and its result comes back as
an update: keys it changed, and for the parent's append keys only the items it appended.

With a saver, the child keeps its own checkpoints in the parent's thread, under the namespace
``"<node>:<task id>"`` (nested under the parent's own namespace). That gives three properties:

- an ``interrupt()`` inside the child pauses the parent once, with the child's interrupts; the
  parent's ``Command(resume=...)`` reaches the child, which resumes where it paused (also after
  ``update_state`` on the parent: the task that takes over keeps the child's namespace); a
  static breakpoint of the child stays one for the parent, so ``invoke(None)`` passes it once;
- a crash inside the child resumes inside the child (the parent's task id, hence the namespace,
  is the same when the task runs again), and a child that had finished is not run again;
- a ``Command(graph=Command.PARENT, goto=...)`` returned in the child (by a node or a tool)
  stops the child and routes the parent (declare the targets with ``destinations=``).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from graph_agent.graph._drive import inside_subgraph
from graph_agent.graph._engine import DualNode
from graph_agent.graph._pending import (
    SUBGRAPH_CONSUMED,
    Pending,
    nested_namespace,
    subgraph_place,
)
from graph_agent.graph._pool import to_thread
from graph_agent.graph.compiled import CompiledGraph
from graph_agent.graph.errors import GraphInterrupted, ParentCommand
from graph_agent.graph.state import OverAllState, ReplaceAll, SeqView
from graph_agent.graph.stream_modes import NO_TASK_EVENTS
from graph_agent.graph.task import TaskContext, emit_chunk
from graph_agent.graph.types import (
    CancelSignal,
    Command,
    Interrupt,
    RunnableConfig,
    StreamingOutput,
)

InputMap = Callable[[OverAllState], dict[str, Any]]
OutputMap = Callable[[OverAllState, Mapping[str, Any]], dict[str, Any]]


def run_nested(
    child: CompiledGraph,
    fresh_input: Callable[[], Any],
    config: RunnableConfig,
    place: str,
    *,
    max_steps: int | None = None,
    cancel: CancelSignal | None = None,
) -> OverAllState:
    """Run ``child`` for the task running now (``config.task``) and return its final state.

    With a saver, the child runs in the task's thread under the namespace ``place`` (nested in
    the task's own): it resumes with the answers the task was given for the child's interrupts,
    carries on where it stopped after a crash, and is not run again if it had finished.
    Without one it runs from ``fresh_input()`` and keeps nothing. The child stops when the
    caller's ``config.cancel`` is set, or ``cancel`` when given (which should cover the former).

    Raises:
        GraphInterrupted: the child paused; its interrupts pause the caller too.
        ParentCommand: the child handed off (``Command.PARENT``).
    """
    nested = _Nested.prepare(child, fresh_input, config, place, max_steps, cancel)
    token = inside_subgraph.set(True)
    try:
        final = _run(nested.app, nested.input, nested.config, nested.task)
    except Exception:
        nested.note_consumed()
        raise
    finally:
        inside_subgraph.reset(token)
    if final.interrupts:
        nested.raise_paused(final)
    return final


async def arun_nested(
    child: CompiledGraph,
    fresh_input: Callable[[], Any],
    config: RunnableConfig,
    place: str,
    *,
    max_steps: int | None = None,
) -> OverAllState:
    """:func:`run_nested` awaited: the child runs on the caller's event loop (``ainvoke`` or
    ``astream``), so a cancel of the caller's run (its signal is the child's) stops the node
    the child awaits at once, and cancelling this await stops the child. Reading where the
    child stands in the saver (before it runs, and when it pauses or fails) is done on a
    worker thread.

    Raises:
        GraphInterrupted: the child paused; its interrupts pause the caller too.
        ParentCommand: the child handed off (``Command.PARENT``).
    """
    task = config.task
    if task is not None and task.saver is not None:
        nested = await to_thread(
            _Nested.prepare, child, fresh_input, config, place, max_steps, None
        )
    else:
        nested = _Nested.prepare(child, fresh_input, config, place, max_steps, None)
    token = inside_subgraph.set(True)
    try:
        final = await _arun(nested.app, nested.input, nested.config, nested.task)
    except Exception:
        if nested.resumed:
            await to_thread(nested.note_consumed)
        raise
    finally:
        inside_subgraph.reset(token)
    if final.interrupts:
        await to_thread(nested.raise_paused, final)
    return final


@dataclass(slots=True)
class _Nested:
    """A child's run for the task running now: the child on the task's saver (or on none),
    its input and its config."""

    app: CompiledGraph
    input: Any
    config: RunnableConfig
    task: TaskContext | None
    saver: Any

    @classmethod
    def prepare(
        cls,
        child: CompiledGraph,
        fresh_input: Callable[[], Any],
        config: RunnableConfig,
        place: str,
        max_steps: int | None,
        cancel: CancelSignal | None,
    ) -> _Nested:
        """The child's run (see :func:`run_nested`): with a saver, where it starts is read
        from the saver."""
        task = config.task
        steps = max(config.max_steps, max_steps or 0)
        cancel = cancel if cancel is not None else config.cancel
        saver = task.saver if task is not None else None
        if task is None or saver is None:
            child_config = RunnableConfig(
                max_steps=steps,
                max_concurrency=config.max_concurrency,
                context=config.context,
                cancel=cancel,
                store=config.store,
            )
            return cls(child.with_saver(None), fresh_input(), child_config, task, saver)
        child_config = RunnableConfig(
            thread_id=config.thread_id,
            checkpoint_ns=_namespace(task, place),
            max_steps=steps,
            max_concurrency=config.max_concurrency,
            metadata=config.metadata,
            context=config.context,
            cancel=cancel,
            store=config.store,
        )
        app = child.with_saver(saver)
        return cls(
            app, _where_to_start(app, child_config, task, fresh_input), child_config, task, saver
        )

    @property
    def resumed(self) -> bool:
        """Whether the child was given answers to its interrupts."""
        return isinstance(self.input, Command) and self.task is not None

    def note_consumed(self) -> None:
        """The child failed: see :func:`_note_consumed` (reads the saver)."""
        if self.resumed:
            assert self.task is not None
            _note_consumed(self.app, self.config, self.task, self.input.resume)

    def raise_paused(self, final: OverAllState) -> None:
        """The child paused (``final`` has interrupts): pause the caller with them."""
        raise GraphInterrupted(
            final.interrupts,
            nested=[i.id for i in final.interrupts],
            breakpoints=_breakpoints(self.saver, self.config, final.interrupts),
        )


def _namespace(task: TaskContext, place: str) -> str:
    """The checkpoint namespace of the graph ``task`` runs at ``place`` (nested in its own)."""
    return nested_namespace(task.checkpoint_ns, place)


def _first_values(saver: Any, thread_id: str | None, namespace: str) -> dict[str, Any] | None:
    """The values of the first checkpoint in ``namespace`` (a child's input), or ``None``
    when there is none (or it was pruned).

    Keys the child never wrote keep that checkpoint's id as their version, so the oldest
    version usually names it: one read instead of the whole history."""
    newest = saver.get(thread_id, None, namespace)
    if newest is None:
        return None
    first = min(newest.versions.values(), default=None)
    candidate = saver.get(thread_id, first, namespace) if first is not None else None
    if candidate is None or candidate.parent_id is not None:  # every key was rewritten
        oldest = collections.deque(saver.list(thread_id, checkpoint_ns=namespace), maxlen=1)
        candidate = oldest[0] if oldest else None
    if candidate is None or candidate.parent_id is not None:
        return None
    return dict(candidate.values)


def _where_to_start(
    app: CompiledGraph,
    config: RunnableConfig,
    task: TaskContext,
    fresh_input: Callable[[], Any],
) -> Any:
    earlier = app.get_state(config)
    answers = {i.id: task._resume[i.id] for i in earlier.interrupts if i.id in task._resume}
    if answers:
        return Command(resume=answers)
    if earlier.next or earlier.interrupts:
        return None  # it crashed or waits: carry on where it stopped
    if earlier.created_at is not None:
        return _Finished(earlier.values)  # it finished before the caller's step was lost
    return fresh_input()


def _note_consumed(
    app: CompiledGraph, config: RunnableConfig, task: TaskContext, answers: dict[str, Any]
) -> None:
    """The child failed after being resumed with ``answers``: record those it no longer waits
    for, so the caller does not take the failure for a refusal of them (the child stored a
    checkpoint after taking them, and carries on from there)."""
    waiting = {i.id for i in app.get_state(config).interrupts}
    consumed = set(task.recorded(SUBGRAPH_CONSUMED, ())) | (answers.keys() - waiting)
    if consumed:
        task.record(SUBGRAPH_CONSUMED, sorted(consumed))


def _breakpoints(
    saver: Any, config: RunnableConfig, interrupts: tuple[Interrupt, ...]
) -> frozenset[str]:
    """The ids among the paused child's ``interrupts`` that are static breakpoints."""
    if saver is None:
        return frozenset()
    paused = saver.get(config.thread_id, None, config.checkpoint_ns)
    static = Pending(paused.pending_writes).static_ids if paused is not None else set()
    return frozenset(i.id for i in interrupts if i.id in static)


def _run(
    app: CompiledGraph, child_input: Any, config: RunnableConfig, task: TaskContext | None
) -> OverAllState:
    if isinstance(child_input, _Finished):
        return OverAllState(child_input.values)
    if task is None or not task.streaming:
        return app.invoke(child_input, config)
    stream = app.stream(child_input, config, subgraphs=task.stream_subgraphs)
    while True:
        try:
            output = next(stream)
        except StopIteration as stop:
            result: OverAllState = stop.value
            return result
        if isinstance(output, StreamingOutput) or task.stream_subgraphs:
            emit_chunk(output)  # forwarded to the caller's stream with this node in its path


async def _arun(
    app: CompiledGraph, child_input: Any, config: RunnableConfig, task: TaskContext | None
) -> OverAllState:
    """:func:`_run` on the caller's event loop."""
    if isinstance(child_input, _Finished):
        return OverAllState(child_input.values)
    if task is None or not task.streaming:
        return await app.ainvoke(child_input, config)
    result: list[OverAllState] = []
    async for output in app._astream(
        child_input, config, task.stream_subgraphs, NO_TASK_EVENTS, result
    ):
        if isinstance(output, StreamingOutput) or task.stream_subgraphs:
            emit_chunk(output)  # forwarded to the caller's stream with this node in its path
    return result[0]


class SubgraphNode(DualNode):
    """The node function that runs ``child`` (see the module docstring): with ``invoke`` under
    ``invoke``/``stream``, with ``ainvoke`` (or ``astream``) under their async twins
    (:meth:`acall`).

    Args:
        child: The compiled graph to run.
        append_keys: The parent's append keys, for which only new items are handed back.
        input: Builds the child's input from the parent's state (default: every key).
        output: Builds the parent's update from (parent state, child's final values) (default:
            every key the child changed from its input).
        max_steps: A step budget the child needs (an agent's), when above the caller's.
    """

    def __init__(
        self,
        child: CompiledGraph,
        *,
        append_keys: frozenset[str] = frozenset(),
        input: InputMap | None = None,
        output: OutputMap | None = None,
        max_steps: int | None = None,
    ) -> None:
        self.child = child
        self.append_keys = append_keys
        self.make_input = input or _all_keys
        self.make_output = output
        self.max_steps = max_steps

    @property
    def name(self) -> str:
        return self.child.name

    def __call__(self, state: OverAllState, config: RunnableConfig) -> Any:
        place, given, fresh_input = self._inputs(state, config)
        try:
            final = run_nested(self.child, fresh_input, config, place, max_steps=self.max_steps)
        except ParentCommand as handoff:
            return _handed_off(handoff)
        return self._update(state, config, place, given, final)

    async def acall(self, state: OverAllState, config: RunnableConfig) -> Any:
        """:meth:`__call__` awaited on the caller's event loop (:func:`arun_nested`): a cancel
        of the run stops the node the child awaits at once, as it stops the caller's own."""
        place, given, fresh_input = self._inputs(state, config)
        try:
            final = await arun_nested(
                self.child, fresh_input, config, place, max_steps=self.max_steps
            )
        except ParentCommand as handoff:
            return _handed_off(handoff)
        if given or self.make_output is not None or config.task is None:
            return self._update(state, config, place, given, final)
        return await to_thread(self._update, state, config, place, given, final)  # reads the saver

    def _inputs(
        self, state: OverAllState, config: RunnableConfig
    ) -> tuple[str, list[dict[str, Any]], Callable[[], dict[str, Any]]]:
        """Where the child keeps its checkpoints, the inputs it was given (none when it
        resumes), and what gives it one."""
        task = config.task
        # after update_state on a paused parent, the task keeps the namespace of the one it
        # took over, where the child waits
        place = subgraph_place(task.node, task.id, task.records) if task else self.name
        given: list[dict[str, Any]] = []

        def fresh_input() -> dict[str, Any]:
            given.append(self.make_input(state))
            return given[-1]

        return place, given, fresh_input

    def _update(
        self,
        state: OverAllState,
        config: RunnableConfig,
        place: str,
        given: list[dict[str, Any]],
        final: OverAllState,
    ) -> Any:
        """The parent's update from the child's final state."""
        if self.make_output is not None:
            return self.make_output(state, final.data())
        if given:  # the child ran from its input in this call: the common case
            return self._changed_keys(given[-1], final.data())
        # resumed (or found finished): its input is its first checkpoint, not the parent's
        # state now, which update_state may have changed while the child waited
        task = config.task
        started = None
        if task is not None and task.saver is not None:
            started = _first_values(task.saver, task.thread_id, _namespace(task, place))
        return self._changed_keys(started if started is not None else state, final.data())

    def _changed_keys(self, before: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
        """The child's final values as a parent update: the keys it changed from its input
        ``before``; for append keys the items it appended, or the whole list when it rewrote
        it. Keys it left alone are not handed back (the parent may have changed them since)."""
        update: dict[str, Any] = {}
        for key, value in values.items():
            old = before.get(key)
            if key in self.append_keys and isinstance(value, SeqView | list):
                earlier = list(old) if old is not None else []
                items = list(value)
                if items[: len(earlier)] == earlier:
                    if len(items) > len(earlier):
                        update[key] = items[len(earlier) :]
                else:
                    update[key] = ReplaceAll(items)
            elif key not in before or old != value:
                update[key] = value
        return update


def _handed_off(handoff: ParentCommand) -> Command:
    """The parent's own Command for a child's ``Command(graph=Command.PARENT, ...)``."""
    command = handoff.command
    return Command(goto=command.goto, update=command.update)


class _Finished:
    """A child that had finished before the parent's step was lost: its values, not re-run."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.values = dict(values)


def _all_keys(state: OverAllState) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, SeqView) else v for k, v in state.items()}


def is_node_graph(obj: Any) -> bool:
    """True for what ``add_node`` runs as a subgraph: a compiled graph or an agent."""
    return isinstance(obj, CompiledGraph) or callable(getattr(obj, "as_node", None))
