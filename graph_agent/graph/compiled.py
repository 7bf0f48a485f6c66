"""``CompiledGraph``: what ``StateGraph.compile()`` returns, the public face of a graph:
``invoke``/``stream`` (and their async twins, run by the drivers in ``_drive.py``), the
thread's state and history, ``update_state``, and diagrams."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Generator,
    Iterator,
    Mapping,
    Sequence,
)
from typing import Any, overload

from graph_agent.graph import render as render_module
from graph_agent.graph._drive import _aacquire, drive_async, drive_sync
from graph_agent.graph._effects import GetCheckpoint, RunSettings, SaverCall
from graph_agent.graph._flow import update_flow
from graph_agent.graph._pending import Pending, nested_namespace, subgraph_place
from graph_agent.graph._saver_calls import arun_saver_calls, run_saver_calls
from graph_agent.graph._sends import next_task_ids
from graph_agent.graph._validate import check_breakpoints
from graph_agent.graph.errors import GraphCancelledError
from graph_agent.graph.render import GraphView
from graph_agent.graph.saver import SENDS_KEY, Saver
from graph_agent.graph.state import KeyStrategy, OverAllState
from graph_agent.graph.stream_modes import (
    ModeItems,
    StreamModes,
    TaskEvents,
    TaskEventTypes,
    check_stream_mode,
    check_task_events,
    task_events_for,
)
from graph_agent.graph.types import NodeOutput, RunnableConfig, StateSnapshot, TaskSnapshot


def check_config(config: Any, method: str) -> RunnableConfig:
    """The config a call of ``method`` was given (``None``: the defaults), or a TypeError
    saying what to pass instead (a LangGraph-style dict, say).

    Every entry point that takes a config checks it with this first (agents and teams too),
    so a wrong one fails with this message instead of an AttributeError deeper down.

    Example:
        >>> check_config(RunnableConfig(thread_id="t"), "invoke").thread_id
        't'
        >>> try:
        ...     check_config({"configurable": {"thread_id": "t"}}, "invoke")
        ... except TypeError as error:
        ...     print(str(error).split(": pass ")[1])
        RunnableConfig(thread_id='t') (from graph_agent import RunnableConfig)
    """
    if type(config) is RunnableConfig:
        return config
    if config is None:
        return RunnableConfig()
    if isinstance(config, RunnableConfig):
        return config
    fix = "RunnableConfig(thread_id=...)"
    if isinstance(config, Mapping):
        nested = config.get("configurable")
        given = nested if isinstance(nested, Mapping) else config
        known = [f"{name}={given[name]!r}" for name in _FIELDS_BY_ID if name in given]
        if known:
            fix = f"RunnableConfig({', '.join(known)})"
    # what was given, by type and key names only: its values may hold secrets
    shown = type(config).__name__
    if isinstance(config, Mapping):
        shown += f" with keys {', '.join(map(repr, list(config)[:8]))}"
    raise TypeError(
        f"{method}() takes a RunnableConfig as its config, not a {shown}: "
        f"pass {fix} (from graph_agent import RunnableConfig)"
    )


_FIELDS_BY_ID = ("thread_id", "checkpoint_id", "checkpoint_ns")
"""The RunnableConfig fields a LangGraph-style ``{"configurable": {...}}`` dict carries."""


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

    @property
    def private_keys(self) -> frozenset[str]:
        """The keys kept out of the state's values (``StateGraph(private_keys=...,
        ephemeral_keys=...)``): the graph's own bookkeeping, never a caller's input."""
        return self._run.spec.hidden_keys

    @property
    def strategies(self) -> Mapping[str, KeyStrategy]:
        """How each key with a strategy merges writes (every other key is replaced)."""
        return self._run.spec.strategies

    @property
    def runs_sync(self) -> bool:
        """Whether :meth:`stream` runs this graph all in threads: every node a plain function
        (no coroutine function, no node with an async face such as a subgraph or an agent
        node, no retry/timeout/cache policy) and no listeners. Such a graph's ``stream``, read
        from a worker thread, costs a fraction of ``astream`` on an event loop (one thread
        hop per run instead of one per node and saver call); the server runs it so."""
        run = self._run
        return not run.listeners and all(
            not node.is_async and node.afn is None and node.policy is None
            for node in run.spec.nodes.values()
        )

    def get_subgraphs(
        self, *, namespace: str | None = None, recurse: bool = False
    ) -> Iterator[tuple[str, CompiledGraph]]:
        """The graphs that nodes of this one run (subgraphs and agent nodes), by namespace:
        the node's name, ``node|child`` for a subgraph's own (as LangGraph's
        ``get_subgraphs``).

        Args:
            namespace: Only this subgraph (``node`` or ``node|child``; task ids after a
                ``:`` are ignored), and with ``recurse`` the ones inside it.
            recurse: Also the subgraphs of subgraphs, all the way down.

        Raises:
            KeyError: ``namespace`` names no subgraph.
        """
        if namespace is None:
            yield from self._subgraphs_below("", recurse)
            return
        graph: CompiledGraph = self
        path = [segment.partition(":")[0] for segment in namespace.split("|")]
        for depth, name in enumerate(path):
            child = graph._child_graphs().get(name)
            if child is None:
                where = "|".join(path[:depth]) or self.name
                known = ", ".join(graph._child_graphs()) or "none"
                raise KeyError(f"{where} has no subgraph {name!r}; its subgraphs: {known}")
            graph = child
        prefix = "|".join(path)
        yield prefix, graph
        if recurse:
            yield from graph._subgraphs_below(prefix + "|", recurse)

    def _subgraphs_below(self, prefix: str, recurse: bool) -> Iterator[tuple[str, CompiledGraph]]:
        for name, child in self._child_graphs().items():
            yield prefix + name, child
            if recurse:
                yield from child._subgraphs_below(f"{prefix}{name}|", recurse)

    def _child_graphs(self) -> dict[str, CompiledGraph]:
        """The nodes that run a compiled graph, with it."""
        found: dict[str, CompiledGraph] = {}
        for name, node in self._run.spec.nodes.items():
            child = getattr(node.fn, "child", None)
            if isinstance(child, CompiledGraph):
                found[name] = child
        return found

    def with_saver(self, saver: Any) -> CompiledGraph:
        """The same graph on another saver (or none): nothing is compiled again."""
        return CompiledGraph(dataclasses.replace(self._run, saver=saver), self._view)

    def with_breakpoints(
        self, before: Sequence[str] | None = None, after: Sequence[str] | None = None
    ) -> CompiledGraph:
        """The same graph pausing before the nodes ``before`` and after the nodes ``after``
        (``"*"``: every node) instead of its compiled ``interrupt_before`` /
        ``interrupt_after`` (``None`` keeps those); nothing is compiled again.

        Raises:
            GraphSetupError: a name is no node of the graph, or the graph has no saver.
        """
        nodes = list(self._run.spec.nodes)
        chosen = {
            "interrupt_before": self._run.interrupt_before if before is None else before,
            "interrupt_after": self._run.interrupt_after if after is None else after,
        }
        names = {what: nodes if "*" in picked else list(picked) for what, picked in chosen.items()}
        check_breakpoints(
            set(nodes),
            self._run.saver is not None,
            names["interrupt_before"],
            names["interrupt_after"],
            owner="",
        )
        run = dataclasses.replace(
            self._run,
            interrupt_before=frozenset(names["interrupt_before"]),
            interrupt_after=frozenset(names["interrupt_after"]),
        )
        return CompiledGraph(run, self._view)

    def invoke(self, input: Any, config: RunnableConfig | None = None) -> OverAllState:
        """Run to the end (or to a pause) and return the state."""
        return _exhaust(drive_sync(self._run, input, check_config(config, "invoke"), False))

    @overload
    def stream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
        stream_mode: None = None,
        task_events: TaskEvents = False,
        on_stop: Callable[[GraphCancelledError], object] | None = None,
    ) -> Iterator[NodeOutput]: ...

    @overload
    def stream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
        stream_mode: StreamModes,
        task_events: TaskEvents = False,
        on_stop: Callable[[GraphCancelledError], object] | None = None,
    ) -> Iterator[Any]: ...

    def stream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
        stream_mode: StreamModes | None = None,
        task_events: TaskEvents = False,
        on_stop: Callable[[GraphCancelledError], object] | None = None,
    ) -> Iterator[Any]:
        """Run, yielding a :class:`NodeOutput` per finished node and a
        :class:`StreamingOutput` per emitted chunk. With ``subgraphs``, graphs that run inside
        nodes stream their own NodeOutputs too, with the path of nodes they run under.

        ``stream_mode`` (``"values"``, ``"updates"``, ``"custom"``, ``"messages"``,
        ``"tasks"``, ``"checkpoints"``, ``"debug"``, or a list of them) yields LangGraph's
        payloads of those modes instead (``(mode, payload)`` tuples for a list): see
        :mod:`graph_agent.graph.stream_modes`. ``task_events`` adds a :class:`TaskEvent` when
        each task starts and ends and each checkpoint is saved, among the NodeOutputs (or, given
        a set of types, ``"task"``, ``"task_result"``, ``"checkpoint"``, only those).

        A node runs in the thread reading the stream when it is the step's only one (and a
        plain function) and the stream is read where it was made. A cancel
        (``config.cancel``) cannot stop it there: the run lets go of its thread at once (its
        lease released; what the node returns is dropped) and ``on_stop`` is told, on a
        worker thread, with the :class:`GraphCancelledError` the stream raises once the node
        has returned, so that a caller waiting for the stream from another thread need not
        wait for that node.
        """
        config = check_config(config, "stream")
        if stream_mode is None:
            origin, told = threading.get_ident(), check_task_events(task_events)
            return drive_sync(self._run, input, config, True, origin, subgraphs, told, on_stop)
        modes = check_stream_mode(stream_mode, subgraphs=subgraphs)
        told = task_events_for(modes)
        items = drive_sync(
            self._run, input, config, True, threading.get_ident(), False, told, on_stop
        )
        return ModeItems(modes, tuples=not isinstance(stream_mode, str)).stream(items)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None) -> OverAllState:
        """Async twin of :meth:`invoke`."""
        result: list[OverAllState] = []
        run_config = check_config(config, "ainvoke")
        async for _ in drive_async(self._run, input, run_config, False, result):
            pass
        return result[0]

    @overload
    def astream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
        stream_mode: None = None,
        task_events: TaskEvents = False,
    ) -> AsyncIterator[NodeOutput]: ...

    @overload
    def astream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
        stream_mode: StreamModes,
        task_events: TaskEvents = False,
    ) -> AsyncIterator[Any]: ...

    def astream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
        stream_mode: StreamModes | None = None,
        task_events: TaskEvents = False,
    ) -> AsyncIterator[Any]:
        """Async twin of :meth:`stream`."""
        run_config = check_config(config, "astream")
        if stream_mode is None:
            told = check_task_events(task_events)
            return self._astream(input, run_config, subgraphs, told)
        modes = check_stream_mode(stream_mode, subgraphs=subgraphs)
        items = self._astream(input, run_config, False, task_events_for(modes))
        return ModeItems(modes, tuples=not isinstance(stream_mode, str)).astream(items)

    async def _astream(
        self,
        input: Any,
        config: RunnableConfig,
        subgraphs: bool,
        task_events: TaskEventTypes,
        result: list[OverAllState] | None = None,
    ) -> AsyncGenerator[NodeOutput, None]:
        """The stream; ``result`` gets the final state once it ends (a subgraph node's)."""
        if result is None:
            result = []
        agen = drive_async(self._run, input, config, True, result, subgraphs, task_events)
        try:
            async for item in agen:
                yield item
        finally:
            with contextlib.suppress(RuntimeError):
                await agen.aclose()

    def get_state(self, config: RunnableConfig, *, subgraphs: bool = False) -> StateSnapshot:
        """The thread's state at its newest checkpoint (or at ``config.checkpoint_id``; in the
        namespace ``config.checkpoint_ns`` names, a subgraph's, say).

        With ``subgraphs``, each task of the next step that runs a graph of its own (a subgraph
        or an agent node) carries that graph's state in ``TaskSnapshot.state``, nested as deep
        as they go: what a paused or failed child holds, and where its history is.
        """
        saver, thread_id = self._thread(config, "get_state")
        return run_saver_calls(self._state_plan(config, thread_id, subgraphs), saver)

    async def aget_state(self, config: RunnableConfig, *, subgraphs: bool = False) -> StateSnapshot:
        """Async twin of :meth:`get_state`: the saver's async API, on the caller's loop."""
        saver, thread_id = self._thread(config, "aget_state")
        return await arun_saver_calls(self._state_plan(config, thread_id, subgraphs), saver)

    def get_state_history(
        self,
        config: RunnableConfig,
        limit: int | None = None,
        before: str | RunnableConfig | None = None,
    ) -> Iterator[StateSnapshot]:
        """The thread's checkpoints, newest first (``before``: a checkpoint id or config)."""
        saver, thread_id, before_id, graph = self._history(config, before, "get_state_history")
        ns = config.checkpoint_ns
        for checkpoint in saver.list(thread_id, limit=limit, before=before_id, checkpoint_ns=ns):
            yield graph._snapshot(checkpoint)

    async def aget_state_history(
        self,
        config: RunnableConfig,
        limit: int | None = None,
        before: str | RunnableConfig | None = None,
    ) -> AsyncIterator[StateSnapshot]:
        """Async twin of :meth:`get_state_history` (``saver.alist``, on the caller's loop)."""
        saver, thread_id, before_id, graph = self._history(config, before, "aget_state_history")
        for checkpoint in await saver.alist(thread_id, limit, before_id, config.checkpoint_ns):
            yield graph._snapshot(checkpoint)

    def _history(
        self, config: RunnableConfig, before: str | RunnableConfig | None, what: str
    ) -> tuple[Saver, str, str | None, CompiledGraph]:
        """What a history read needs: the saver, the thread, the id it ends before, and the
        graph whose checkpoints the namespace holds."""
        saver, thread_id = self._thread(config, what)
        before_id = before.checkpoint_id if isinstance(before, RunnableConfig) else before
        return saver, thread_id, before_id, self._graph_in(config.checkpoint_ns)

    def update_state(
        self, config: RunnableConfig, values: Any, as_node: str | None = None
    ) -> RunnableConfig:
        """Write ``values`` into the thread in a new checkpoint, merged by the key strategies.

        With ``as_node`` the run continues as if that node had just written them (its edges
        decide what runs next); without, the thread keeps its next nodes. Returns the new
        checkpoint's config.
        """
        saver, thread_id = self._thread(config, "update_state")
        lease = saver.acquire(thread_id, config.checkpoint_ns)
        try:
            return run_saver_calls(update_flow(self._run, config, values, as_node), saver)
        finally:
            saver.release(lease)

    async def aupdate_state(
        self, config: RunnableConfig, values: Any, as_node: str | None = None
    ) -> RunnableConfig:
        """Async twin of :meth:`update_state`: the same plan, run through the saver's async
        API on the caller's loop, holding the thread's lease as an async run does."""
        saver, thread_id = self._thread(config, "aupdate_state")
        lease = await _aacquire(saver, thread_id, config.checkpoint_ns)
        try:
            return await arun_saver_calls(update_flow(self._run, config, values, as_node), saver)
        finally:
            await saver.arelease(lease)

    def _thread(self, config: RunnableConfig, what: str) -> tuple[Saver, str]:
        """The saver and the thread a call of ``what`` reads, or a ValueError saying what is
        missing."""
        config = check_config(config, what)
        saver = self._run.saver
        if saver is None:
            raise ValueError(
                f"{what} reads the checkpoints of a thread, and graph {self.name!r} has no "
                "saver: compile with CompileConfig(saver=MemorySaver())"
            )
        if config.thread_id is None:
            raise ValueError(f"{what} needs RunnableConfig(thread_id=...)")
        return saver, config.thread_id

    def _state_plan(
        self, config: RunnableConfig, thread_id: str, subgraphs: bool
    ) -> Generator[SaverCall, Any, StateSnapshot]:
        """``get_state``'s saver calls and decisions, for either runner (``_saver_calls.py``)."""
        ns = config.checkpoint_ns
        checkpoint = yield GetCheckpoint(thread_id, config.checkpoint_id, ns)
        if checkpoint is None:
            return StateSnapshot(
                values={},
                next=(),
                config=config,
                metadata={},
                created_at=None,
                parent_config=None,
            )
        return (yield from self._graph_in(ns)._snapshot_plan(checkpoint, subgraphs))

    def _snapshot(self, checkpoint: Any) -> StateSnapshot:
        """A checkpoint as a snapshot shows it, without its subgraphs' states (no saver call)."""
        return run_saver_calls(self._snapshot_plan(checkpoint, False), None)

    def _snapshot_plan(
        self, checkpoint: Any, subgraphs: bool
    ) -> Generator[SaverCall, Any, StateSnapshot]:
        hidden = self._run.spec.hidden_keys
        thread_id, ns = checkpoint.thread_id, checkpoint.checkpoint_ns
        parent = checkpoint.parent_id
        pending = Pending(checkpoint.pending_writes, self._run.spec.rank)
        tasks = yield from self._tasks(checkpoint, pending, subgraphs)
        return StateSnapshot(
            values={
                k: v for k, v in checkpoint.values.items() if k not in hidden and k != SENDS_KEY
            },
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
            interrupts=tuple(item for _, item in pending.unanswered()),
            tasks=tuple(tasks),
        )

    def _tasks(
        self, checkpoint: Any, pending: Pending, subgraphs: bool
    ) -> Generator[SaverCall, Any, list[TaskSnapshot]]:
        """The next step's tasks as a snapshot shows them (a Send's task among them); with
        ``subgraphs``, each child graph's state is loaded (one saver call per child)."""
        thread_id, nodes = checkpoint.thread_id, self._run.spec.nodes
        ids_thread = pending.ids_thread or thread_id
        next_nodes, values = checkpoint.next, checkpoint.values
        tasks: list[TaskSnapshot] = []
        for name, task_id in next_task_ids(ids_thread, checkpoint.id, next_nodes, values):
            node = nodes.get(name)
            child = getattr(node.fn, "child", None) if node is not None else None
            state = None
            if subgraphs and isinstance(child, CompiledGraph):
                place = subgraph_place(name, task_id, pending.records.get(task_id, {}))
                namespace = nested_namespace(checkpoint.checkpoint_ns, place)
                saved = yield GetCheckpoint(thread_id, None, namespace)
                if saved is not None:  # None: the child stored no checkpoint yet
                    state = yield from child._snapshot_plan(saved, True)
            interrupts = pending.unanswered_of(task_id)
            # an error outlived by a later attempt that finished or paused is not shown
            failed = not interrupts and task_id not in pending.done
            tasks.append(
                TaskSnapshot(
                    id=task_id,
                    name=name,
                    interrupts=interrupts,
                    error=pending.errors.get(task_id) if failed else None,
                    state=state,
                )
            )
        return tasks

    def _graph_in(self, namespace: str) -> CompiledGraph:
        """The graph whose checkpoints ``namespace`` holds: this one's, or a subgraph's found
        by walking the namespace's ``node:task`` segments (a child's snapshot shows its own
        keys and next tasks); as far as it resolves (an agent called as a tool is no node)."""
        graph: CompiledGraph = self
        for segment in namespace.split("|") if namespace else ():
            node = graph._run.spec.nodes.get(segment.rpartition(":")[0])
            child = getattr(node.fn, "child", None) if node is not None else None
            if not isinstance(child, CompiledGraph):
                break
            graph = child
        return graph

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
