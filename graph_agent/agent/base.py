"""``AgentBase``: what an agent and a team share, the :class:`~graph_agent.Runnable` methods.

An agent (:class:`~graph_agent.agent.react.ReactAgent`) and a team
(:class:`~graph_agent.agent.flows.FlowAgent` and its subclasses) are each a description that
does not change while a run uses it, compiled into a graph. The graph is built on first use
(once, under a lock; for the async calls on a worker thread, not the loop), and built again
after a change to what it is built from. Every call goes through that graph: a subclass says
only how it is built (:meth:`AgentBase._build_graph`), how a call's input becomes the graph's
input (:meth:`AgentBase._input`) and how many steps a run may take
(:meth:`AgentBase._max_steps`).

:meth:`AgentBase.with_saver` makes a copy keeping its threads elsewhere; the agent it is
called on keeps its saver, its graph and its threads.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import threading
import typing
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, ClassVar, Self

from graph_agent.agent.compose import agent_node, agent_tool
from graph_agent.agent.turns import run_answer
from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.graph.compiled import CompiledGraph, check_config
from graph_agent.graph.concurrency import shared_pool
from graph_agent.graph.errors import GraphInterrupted, GraphRuntimeError
from graph_agent.graph.state import OverAllState
from graph_agent.graph.stream_modes import StreamModes, TaskEvents
from graph_agent.graph.types import NodeOutput, RunnableConfig, StateSnapshot
from graph_agent.messages import AssistantMessage, BaseMessage, UserMessage
from graph_agent.node import SubgraphNode
from graph_agent.tools import Tool

__all__ = ["AgentBase", "coerce_state"]

_A = typing.TypeVar("_A", bound="AgentBase")


class AgentBase:
    """The agent API over one compiled graph: calls, streams, thread state, drawing.

    Subclasses call :meth:`_init_graph` in ``__init__`` and supply :meth:`_build_graph`,
    :meth:`_input` and :meth:`_max_steps`; :meth:`_config_changes`, :meth:`_ainput` and
    :meth:`_detach` when theirs differ. ``name`` and ``description`` are plain attributes.
    """

    NO_ANSWER: ClassVar[str] = "the run ended without an answer"
    """The error :meth:`call` raises when a run ends without an answer."""

    name: str
    description: str | None
    _saver: CheckpointSaver | None
    _compiled: CompiledGraph | None
    _building: Future[CompiledGraph] | None
    _lock: threading.RLock

    def _init_graph(self, saver: CheckpointSaver | None) -> None:
        """Set up the graph's slot: no graph yet, kept in ``saver``."""
        object.__setattr__(self, "_saver", saver)
        object.__setattr__(self, "_compiled", None)
        object.__setattr__(self, "_building", None)
        object.__setattr__(self, "_lock", threading.RLock())

    # what a subclass supplies
    def _build_graph(self) -> CompiledGraph:
        """The graph, compiled from the agent as it is now (the caller holds the lock)."""
        raise NotImplementedError

    def _input(self, input: Any, config: RunnableConfig) -> Any:
        """The graph input for one call with ``config`` (the config :meth:`_config` made)."""
        raise NotImplementedError

    async def _ainput(self, input: Any, config: RunnableConfig) -> Any:
        """:meth:`_input` for the async calls (the same, unless it reads the thread)."""
        return self._input(input, config)

    def _max_steps(self) -> int:
        """A step budget no run of this agent should exhaust before its own limits."""
        raise NotImplementedError

    def _config_changes(self) -> dict[str, Any]:
        """Fields every call's config gets besides a thread id and the step budget."""
        return {}

    def _detach(self, twin: Self) -> None:
        """Give ``twin`` (a shallow copy made by :meth:`with_saver`) what must not be shared
        with this agent besides its graph (the caller holds this agent's lock)."""

    def _shapes_graph(self, name: str) -> bool:
        """Whether the graph is built from the attribute ``name`` (setting one builds the
        graph again on next use): every public one, unless a subclass says otherwise."""
        return not name.startswith("_")

    def __setattr__(self, name: str, value: Any) -> None:
        """Set an attribute; one the graph is built from (:meth:`_shapes_graph`) is set under
        the lock and makes the agent build its graph again on next use, so no graph is built
        from a half-made change, and a run already going keeps the graph it started with."""
        lock = self.__dict__.get("_lock")
        if lock is None or not self._shapes_graph(name):
            object.__setattr__(self, name, value)
            return
        with lock:
            object.__setattr__(self, name, value)
            self._forget_graph()

    # the saver and the graph
    @property
    def saver(self) -> CheckpointSaver | None:
        """Where the threads are kept; setting it builds the graph again on next use
        (:meth:`with_saver` makes a copy instead and leaves this agent as it was)."""
        return self._saver

    @saver.setter
    def saver(self, saver: CheckpointSaver | None) -> None:
        with self._lock:
            object.__setattr__(self, "_saver", saver)
            self._forget_graph()

    def _forget_graph(self) -> None:
        """Build the graph again on next use (the caller holds the lock); a run already going
        keeps the graph it started with."""
        object.__setattr__(self, "_compiled", None)
        object.__setattr__(self, "_building", None)

    def with_saver(self, saver: CheckpointSaver | None) -> Self:
        """The same agent keeping its threads in ``saver`` (``None``: in none): a new object,
        sharing the model, tools, hooks and sub-agents, with a graph of its own; this one is
        left as it was (its saver, its graph, its threads)."""
        with self._lock:  # no copy of a half-made change
            twin = _own_copy(self)
            twin._init_graph(saver)
            self._detach(twin)
        return twin

    @property
    def graph(self) -> CompiledGraph:
        """The compiled graph, built once on first use (thread-safe)."""
        # read once: a concurrent change may replace it meanwhile
        compiled = self._compiled
        if compiled is None:
            with self._lock:
                compiled = self._compiled
                if compiled is None:
                    compiled = self._build_graph()
                    object.__setattr__(self, "_compiled", compiled)
        return compiled

    async def _agraph(self) -> CompiledGraph:
        """:attr:`graph` for the async calls: built (once) on a worker thread, not the loop."""
        compiled = self._compiled  # read once, as in graph
        if compiled is not None:
            return compiled
        with self._lock:  # concurrent first calls share one build (and one worker thread)
            building = self._building
            if building is None or (building.done() and building.exception() is not None):
                building = shared_pool().submit(lambda: self.graph)
                object.__setattr__(self, "_building", building)
        return await asyncio.wrap_future(building)

    def get_graph(self, fmt: str = "mermaid", *, xray: bool = False) -> str:
        """The graph as Mermaid, PlantUML, DOT or ASCII text (``xray``: the agents and graphs
        running inside are drawn open)."""
        return self.graph.get_graph(fmt, xray=xray)

    # calls
    def _config(self, config: RunnableConfig | None, method: str) -> RunnableConfig:
        """The config one call of ``method`` runs with: a fresh thread when it names none,
        and a step budget the agent's own limits exhaust first (a ``TypeError`` for a config
        that is not a ``RunnableConfig``)."""
        config = check_config(config, method)
        changes: dict[str, Any] = {"max_steps": max(config.max_steps, self._max_steps())}
        if config.thread_id is None:
            changes["thread_id"] = f"thread-{uuid.uuid4().hex}"
        changes.update(self._config_changes())
        return dataclasses.replace(config, **changes)

    def call(self, input: Any, config: RunnableConfig | None = None) -> AssistantMessage:
        """Run and return the final answer.

        Raises:
            GraphInterrupted: the run paused (e.g. for a human approval); its ``interrupts``
                say why. Resume with ``invoke(Command(resume=...), config)``.
        """
        return self._answer(self.invoke(input, check_config(config, "call")))

    async def acall(self, input: Any, config: RunnableConfig | None = None) -> AssistantMessage:
        """Async :meth:`call`."""
        return self._answer(await self.ainvoke(input, check_config(config, "acall")))

    def invoke(self, input: Any, config: RunnableConfig | None = None) -> OverAllState:
        """Run to the end or to a pause; the state's ``interrupts`` say whether it paused."""
        run_config = self._config(config, "invoke")
        graph = self.graph  # one graph for the whole call
        return graph.invoke(self._input(input, run_config), run_config)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None) -> OverAllState:
        """Async :meth:`invoke`."""
        run_config = self._config(config, "ainvoke")
        graph = await self._agraph()
        return await graph.ainvoke(await self._ainput(input, run_config), run_config)

    @typing.overload
    def stream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
        stream_mode: None = None,
        task_events: TaskEvents = False,
    ) -> Iterator[NodeOutput]: ...

    @typing.overload
    def stream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
        stream_mode: StreamModes,
        task_events: TaskEvents = False,
    ) -> Iterator[Any]: ...

    def stream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
        stream_mode: StreamModes | None = None,
        task_events: TaskEvents = False,
    ) -> Iterator[Any]:
        """Run, yielding each finished node's output and, while a model answers, its tokens
        as :class:`~graph_agent.graph.types.StreamingOutput`; with ``subgraphs``, also the node
        outputs of agents and graphs running inside (their ``path`` says where). With
        ``stream_mode``, LangGraph's payloads of those modes instead, and with ``task_events``
        task starts, results and checkpoints among the outputs (see
        :meth:`CompiledGraph.stream`)."""
        run_config = self._config(config, "stream")
        graph = self.graph
        return graph.stream(
            self._input(input, run_config),
            run_config,
            subgraphs=subgraphs,
            stream_mode=stream_mode,
            task_events=task_events,
        )

    @typing.overload
    def astream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
        stream_mode: None = None,
        task_events: TaskEvents = False,
    ) -> AsyncIterator[NodeOutput]: ...

    @typing.overload
    def astream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
        stream_mode: StreamModes,
        task_events: TaskEvents = False,
    ) -> AsyncIterator[Any]: ...

    async def astream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
        stream_mode: StreamModes | None = None,
        task_events: TaskEvents = False,
    ) -> AsyncIterator[Any]:
        """Async :meth:`stream`."""
        run_config = self._config(config, "astream")
        graph = await self._agraph()
        async for output in graph.astream(
            await self._ainput(input, run_config),
            run_config,
            subgraphs=subgraphs,
            stream_mode=stream_mode,
            task_events=task_events,
        ):
            yield output

    def _answer(self, state: OverAllState) -> AssistantMessage:
        """The run's final answer (never an earlier turn's)."""
        if state.interrupts:
            raise GraphInterrupted(state.interrupts)
        message = run_answer(state)
        if message is None:
            raise GraphRuntimeError(self.NO_ANSWER)
        return message

    # thread state
    def get_state(self, config: RunnableConfig, *, subgraphs: bool = False) -> StateSnapshot:
        """The thread's state; with ``subgraphs``, each running agent's too (see
        :meth:`CompiledGraph.get_state`)."""
        return self.graph.get_state(config, subgraphs=subgraphs)

    async def aget_state(self, config: RunnableConfig, *, subgraphs: bool = False) -> StateSnapshot:
        """Async :meth:`get_state`."""
        graph = await self._agraph()
        return await graph.aget_state(config, subgraphs=subgraphs)

    def get_state_history(
        self,
        config: RunnableConfig,
        limit: int | None = None,
        before: str | RunnableConfig | None = None,
    ) -> Iterator[StateSnapshot]:
        """The thread's snapshots, newest first; ``before`` (a checkpoint id or a config)
        starts below that checkpoint (an inner agent's, with a config naming its namespace,
        as ``TaskSnapshot.state.config`` does)."""
        return self.graph.get_state_history(config, limit=limit, before=before)

    async def aget_state_history(
        self,
        config: RunnableConfig,
        limit: int | None = None,
        before: str | RunnableConfig | None = None,
    ) -> AsyncIterator[StateSnapshot]:
        """Async :meth:`get_state_history`."""
        graph = await self._agraph()
        async for snapshot in graph.aget_state_history(config, limit=limit, before=before):
            yield snapshot

    def update_state(
        self, config: RunnableConfig, values: Mapping[str, Any], as_node: str | None = None
    ) -> RunnableConfig:
        """Write ``values`` into the thread as if ``as_node`` had returned them (see
        :meth:`CompiledGraph.update_state`); messages may be given as for a call."""
        return self.graph.update_state(config, coerce_state(values), as_node)

    async def aupdate_state(
        self, config: RunnableConfig, values: Mapping[str, Any], as_node: str | None = None
    ) -> RunnableConfig:
        """Async :meth:`update_state`."""
        graph = await self._agraph()
        return await graph.aupdate_state(config, coerce_state(values), as_node)

    # inside other graphs
    def as_node(
        self,
        *,
        include_contents: bool = True,
        return_reasoning_contents: bool = False,
        output_key: str | None = None,
        **options: Any,
    ) -> SubgraphNode:
        """This agent as a node of another graph (``graph.add_node(name, agent)`` uses the
        defaults). See :func:`graph_agent.agent.compose.agent_node`."""
        return agent_node(
            self,  # type: ignore[arg-type]  # AgentLike: a subclass supplies the rest
            include_contents=include_contents,
            return_reasoning_contents=return_reasoning_contents,
            output_key=output_key,
            **options,
        )

    def as_tool(self, name: str | None = None, description: str | None = None) -> Tool:
        """This agent as a tool another agent's model can call with a request in plain words.
        See :func:`graph_agent.agent.compose.agent_tool`."""
        return agent_tool(self, name, description)  # type: ignore[arg-type]


def _own_copy(agent: _A) -> _A:
    """A shallow copy of ``agent`` whose lists, dicts and sets are copies too: changing one
    of them in place on the copy (``team.agents.append(...)``) leaves ``agent`` as it was."""
    twin = copy.copy(agent)
    for key, value in vars(agent).items():
        if isinstance(value, list | dict | set):
            vars(twin)[key] = copy.copy(value)
    return twin


def coerce_state(input: Any) -> dict[str, Any]:
    """A state update from a string, a message, a list of messages or a dict."""
    if isinstance(input, str):
        return {"messages": [UserMessage(input)]}
    if isinstance(input, BaseMessage):
        return {"messages": [input]}
    if isinstance(input, Mapping):
        state = dict(input)
        if isinstance(state.get("messages"), str | BaseMessage | list | tuple):
            state["messages"] = coerce_state(state["messages"])["messages"]
        return state
    if isinstance(input, Sequence):
        messages = [UserMessage(m) if isinstance(m, str) else m for m in input]
        for message in messages:
            if not isinstance(message, BaseMessage):
                raise TypeError(
                    f"agent input lists must hold messages or strings, got {type(message).__name__}"
                )
        return {"messages": messages}
    raise TypeError(
        f"agent input must be a string, a message, a list of messages, a dict of state, a "
        f"Command or None; got {type(input).__name__}"
    )
