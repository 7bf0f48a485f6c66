"""Flow agents: teams of agents wired into one graph, with the agent API.

- :class:`SequentialAgent` runs its agents one after another; each sees what the previous ones
  said.
- :class:`ParallelAgent` runs them at the same time on the same input and merges their answers.
- :class:`LlmRoutingAgent` lets a model pick one or several of them (structured output); several
  run in parallel; a fallback takes over when the choice is empty or invalid.
- :class:`LoopAgent` runs one agent a number of times, once per item of a list, or until a
  condition holds.

Each sub-agent runs as a subgraph (``agent.as_node()``), so interrupts, checkpoints and
streaming go through the team unchanged; teams nest (a team is an agent too).

Example:
    >>> from graph_agent import ReactAgent
    >>> from graph_agent.models import ScriptedChatModel
    >>> writer = ReactAgent("writer", ScriptedChatModel(["A draft."]))
    >>> editor = ReactAgent("editor", ScriptedChatModel(["A better draft."]))
    >>> SequentialAgent("pipeline", [writer, editor]).call("Write something.").text
    'A better draft.'
"""

from __future__ import annotations

import copy
import dataclasses
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, overload

from pydantic import BaseModel, ValidationError

from graph_agent.agent.compose import AgentLike, agent_node, agent_tool
from graph_agent.agent.keys import RUN_INPUT_KEY, RUN_KEY
from graph_agent.agent.nodes import run_answer, run_start
from graph_agent.agent.react import ReactAgent, coerce_state
from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.graph.builder import StateGraph
from graph_agent.graph.compiled import CompiledGraph, check_config
from graph_agent.graph.errors import GraphInterrupted, GraphRuntimeError, GraphSetupError
from graph_agent.graph.state import AppendStrategy, KeyStrategy, MergeStrategy, OverAllState
from graph_agent.graph.stream_modes import StreamModes, TaskEvents
from graph_agent.graph.types import (
    END,
    START,
    Command,
    CompileConfig,
    NodeOutput,
    RunnableConfig,
    StateSnapshot,
)
from graph_agent.messages import AssistantMessage, BaseMessage, SystemMessage, UserMessage
from graph_agent.models.base import ChatModel
from graph_agent.node import SubgraphNode
from graph_agent.store.base import BaseStore
from graph_agent.tools import Tool

OUTPUTS_KEY = "outputs"
"""Where :class:`ParallelAgent` and :class:`LlmRoutingAgent` collect each agent's answer."""


class FlowAgent:
    """The agent API over a graph of sub-agents; subclasses say how they are wired.

    The graph is built on first use (thread-safe). Calls take a string, a message, a list of
    messages or a state dict, like :class:`~graph_agent.agent.react.ReactAgent`.

    Every subclass takes these keyword arguments too:

    Args:
        saver: Where the team's checkpoints go (default: a new ``MemorySaver``).
        store: Long-term memory shared across threads (a ``graph_agent.store`` store),
            ``CompileConfig(store=...)`` of the team's graph: its nodes and every sub-agent
            see it as ``config.store``, their tools as ``ToolContext.store`` (it takes the
            place of a sub-agent's own store, as a store in a call's config does).
        description: What the team does, for a model that calls it as a tool.
        key_strategies: How state keys merge (beyond ``messages`` and ``outputs``).
        max_concurrency: At most this many sub-agents run at once.
    """

    PRIVATE_KEYS: frozenset[str] = frozenset({RUN_KEY, RUN_INPUT_KEY})
    """Bookkeeping keys: stored, but left out of ``data()`` and snapshot values."""

    ANSWERS_SIDE_BY_SIDE = False
    """Whether the team's answer is every answer its agents gave (they ran side by side),
    not just the last one: what comes back when the team runs as a node or a tool."""

    def __init__(
        self,
        name: str,
        *,
        saver: CheckpointSaver | None = None,
        store: BaseStore | None = None,
        description: str | None = None,
        key_strategies: Mapping[str, KeyStrategy | Callable[[Any, Any], Any]] | None = None,
        max_concurrency: int | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.saver: CheckpointSaver = saver if saver is not None else MemorySaver()
        self.store = store
        self.key_strategies = dict(key_strategies or {})
        self.max_concurrency = max_concurrency
        self._compiled: CompiledGraph | None = None
        self._lock = threading.Lock()

    def _build(self, graph: StateGraph) -> None:
        raise NotImplementedError

    def _agents(self) -> Sequence[AgentLike]:
        raise NotImplementedError

    @property
    def graph(self) -> CompiledGraph:
        """The compiled team graph, built once on first use."""
        if self._compiled is None:
            with self._lock:
                if self._compiled is None:
                    strategies: dict[str, Any] = {
                        "messages": AppendStrategy(),
                        OUTPUTS_KEY: MergeStrategy(),
                    }
                    strategies.update(self.key_strategies)
                    graph = StateGraph(
                        self.name, key_strategies=strategies, private_keys=self.PRIVATE_KEYS
                    )
                    self._build(graph)
                    self._compiled = graph.compile(
                        CompileConfig(saver=self.saver, store=self.store)
                    )
        return self._compiled

    def _max_steps(self) -> int:
        return 100 + sum(agent._max_steps() for agent in self._agents())

    @property
    def output_keys(self) -> tuple[str, ...]:
        """The keys a run of this team hands back to a graph it runs in: its agents'."""
        return tuple(dict.fromkeys(key for agent in self._agents() for key in agent.output_keys))

    @property
    def instruction_keys(self) -> tuple[str, ...]:
        """The state keys its agents' instructions read (passed down to them)."""
        keys = (key for agent in self._agents() for key in agent.instruction_keys)
        return tuple(dict.fromkeys(keys))

    def _config(self, config: RunnableConfig | None, method: str) -> RunnableConfig:
        """The config one call of ``method`` runs with (a TypeError for one that is not a
        RunnableConfig)."""
        config = check_config(config, method)
        changes: dict[str, Any] = {"max_steps": max(config.max_steps, self._max_steps())}
        if config.thread_id is None:
            changes["thread_id"] = f"thread-{uuid.uuid4().hex}"
        if self.max_concurrency is not None:
            changes["max_concurrency"] = self.max_concurrency
        return dataclasses.replace(config, **changes)

    # calls
    def call(self, input: Any, config: RunnableConfig | None = None) -> AssistantMessage:
        """Run and return the team's final answer (``GraphInterrupted`` when it paused)."""
        return _answer(self.invoke(input, check_config(config, "call")))

    def _input(self, input: Any, config: RunnableConfig) -> Any:
        """The graph input for one call (every call path goes through here)."""
        state = _as_input(input)
        if isinstance(state, dict):  # new input: a new run, whose answer follows its input
            given = state.get("messages")
            items = given if isinstance(given, list | tuple) else [given]
            messages = [m for m in items if isinstance(m, BaseMessage)]
            earlier = [] if messages else self.graph.get_state(config).values.get("messages", [])
            state[RUN_INPUT_KEY] = run_start(messages, earlier)
        return state

    def invoke(self, input: Any, config: RunnableConfig | None = None) -> OverAllState:
        config = self._config(config, "invoke")
        return self.graph.invoke(self._input(input, config), config)

    @overload
    def stream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
        stream_mode: None = None,
        task_events: TaskEvents = False,
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
        """Run, streaming as :meth:`CompiledGraph.stream` does (``stream_mode``: LangGraph's
        payloads of those modes)."""
        config = self._config(config, "stream")
        return self.graph.stream(
            self._input(input, config),
            config,
            subgraphs=subgraphs,
            stream_mode=stream_mode,
            task_events=task_events,
        )

    async def acall(self, input: Any, config: RunnableConfig | None = None) -> AssistantMessage:
        return _answer(await self.ainvoke(input, check_config(config, "acall")))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None) -> OverAllState:
        config = self._config(config, "ainvoke")
        return await self.graph.ainvoke(self._input(input, config), config)

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
        config = self._config(config, "astream")
        async for output in self.graph.astream(
            self._input(input, config),
            config,
            subgraphs=subgraphs,
            stream_mode=stream_mode,
            task_events=task_events,
        ):
            yield output

    def get_graph(self, fmt: str = "mermaid", *, xray: bool = False) -> str:
        """The team's graph; with ``xray`` every agent is drawn open."""
        return self.graph.get_graph(fmt, xray=xray)

    def get_state(self, config: RunnableConfig, *, subgraphs: bool = False) -> StateSnapshot:
        """The team's state; with ``subgraphs``, each running agent's too (see
        :meth:`CompiledGraph.get_state`)."""
        return self.graph.get_state(config, subgraphs=subgraphs)

    def get_state_history(
        self,
        config: RunnableConfig,
        limit: int | None = None,
        before: str | RunnableConfig | None = None,
    ) -> Iterator[StateSnapshot]:
        """The team's snapshots, newest first (an agent's, with a config naming its
        namespace, as ``TaskSnapshot.state.config`` does)."""
        return self.graph.get_state_history(config, limit=limit, before=before)

    def update_state(
        self, config: RunnableConfig, values: Mapping[str, Any], as_node: str | None = None
    ) -> RunnableConfig:
        """Write ``values`` into the team's thread as if ``as_node`` had returned them (see
        :meth:`CompiledGraph.update_state`); messages may be given as for a call."""
        return self.graph.update_state(config, coerce_state(values), as_node)

    def with_saver(self, saver: CheckpointSaver) -> FlowAgent:
        """The same team keeping its threads in ``saver`` (its agents' checkpoints go there
        too, under their namespaces): a new object; this one is left as it was."""
        twin = copy.copy(self)
        twin.saver = saver
        twin._compiled = None
        twin._lock = threading.Lock()
        return twin

    def as_node(self, **options: Any) -> SubgraphNode:
        """This team as a node of another graph (see ``ReactAgent.as_node``)."""
        return agent_node(self, **options)

    def as_tool(self, name: str | None = None, description: str | None = None) -> Tool:
        """This team as a tool (see ``ReactAgent.as_tool``)."""
        return agent_tool(self, name, description)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, agents={[a.name for a in self._agents()]})"


class SequentialAgent(FlowAgent):
    """Runs ``agents`` one after another; each sees the conversation so far, the previous
    agents' answers included."""

    def __init__(self, name: str, agents: Sequence[AgentLike], **options: Any) -> None:
        super().__init__(name, **options)
        self.agents = _checked(name, agents)

    def _agents(self) -> Sequence[AgentLike]:
        return self.agents

    def _build(self, graph: StateGraph) -> None:
        previous = START
        for agent in self.agents:
            graph.add_node(agent.name, agent_node(agent, collect_key=OUTPUTS_KEY))
            graph.add_edge(previous, agent.name)
            previous = agent.name
        graph.add_edge(previous, END)


class ParallelAgent(FlowAgent):
    """Runs ``agents`` at the same time on the same input (at most ``max_concurrency`` at
    once) and merges their answers: each final message is appended to ``messages`` in the
    order the agents were given, and ``outputs`` maps each agent's name to its answer.
    As a node or a tool of another agent, the team answers with all of their answers."""

    ANSWERS_SIDE_BY_SIDE = True

    def __init__(self, name: str, agents: Sequence[AgentLike], **options: Any) -> None:
        super().__init__(name, **options)
        self.agents = _checked(name, agents)

    def _agents(self) -> Sequence[AgentLike]:
        return self.agents

    def _build(self, graph: StateGraph) -> None:
        for agent in self.agents:
            graph.add_node(agent.name, _side_by_side_node(agent, self.agents))
            graph.add_edge(START, agent.name)
            graph.add_edge(agent.name, END)


def _side_by_side_node(
    agent: AgentLike,
    team: Sequence[AgentLike],
    query_key: str | None = None,
    chosen_key: str | None = None,
) -> SubgraphNode:
    """``agent`` as a node that may run in the same step as the rest of ``team``: its answer
    goes to ``outputs``, and its own output key only when no other agent of the team that runs
    beside it shares the key (two writes to one key in a step would clash): always when no
    other agent has it, else when ``chosen_key`` (the agents a router chose) names it alone."""
    keys = set(agent.output_keys)
    shared = any(keys & set(other.output_keys) for other in team if other is not agent)
    share: bool | Callable[[OverAllState], bool] = not shared
    if shared and chosen_key is not None:
        share = lambda state: list(state.value(chosen_key, ())) == [agent.name]  # noqa: E731
    return agent_node(agent, collect_key=OUTPUTS_KEY, share_output=share, query_key=query_key)


class RouteTarget(BaseModel):
    """One chosen agent, with the request it should handle (SAA's routing answer)."""

    agent: str
    query: str | None = None


class RouteChoice(BaseModel):
    """What the routing model answers: the agents to run, as names or as
    ``{"agent": name, "query": text}``."""

    agents: list[str | RouteTarget]

    def queries(self) -> dict[str, str | None]:
        """Each chosen agent's name and its own request (``None``: the conversation's), in
        the order chosen; a name chosen twice keeps its first request."""
        chosen: dict[str, str | None] = {}
        for entry in self.agents:
            name, query = (entry, None) if isinstance(entry, str) else (entry.agent, entry.query)
            if name not in chosen or chosen[name] is None:
                chosen[name] = query
        return chosen


class LlmRoutingAgent(FlowAgent):
    """Lets ``model`` pick which of ``agents`` handle the request (one or several, as JSON
    ``{"agents": [names]}``, or SAA's ``{"agents": [{"agent": name, "query": text}]}``, where
    each chosen agent gets its query as a request of its own after the conversation); several
    run in parallel and their answers merge as in :class:`ParallelAgent`. ``fallback`` runs
    when the model picks nothing valid (without one, that is an error)."""

    ROUTER = "route"
    ANSWERS_SIDE_BY_SIDE = True
    QUERIES_KEY = "_route_queries"
    """The requests of their own the routing model gave the chosen agents, by name."""
    CHOSEN_KEY = "_route_chosen"
    """The agents the routing model chose, by name (one alone shares its output key)."""
    PRIVATE_KEYS = frozenset({*FlowAgent.PRIVATE_KEYS, QUERIES_KEY, CHOSEN_KEY})

    def __init__(
        self,
        name: str,
        model: ChatModel,
        agents: Sequence[AgentLike],
        *,
        fallback: AgentLike | None = None,
        instruction: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(name, **options)
        self.model = model
        self.agents = _checked(name, [*agents, *([fallback] if fallback else [])])[: len(agents)]
        self.fallback = fallback
        self.instruction = instruction

    def _agents(self) -> Sequence[AgentLike]:
        return [*self.agents, *([self.fallback] if self.fallback else [])]

    def _build(self, graph: StateGraph) -> None:
        names = [agent.name for agent in self._agents()]
        if self.ROUTER in names:
            raise GraphSetupError(f"{self.name}: no agent may be named {self.ROUTER!r}")
        graph.add_node(self.ROUTER, self._route, destinations=names)
        graph.add_edge(START, self.ROUTER)
        for agent in self._agents():
            node = _side_by_side_node(agent, self._agents(), self.QUERIES_KEY, self.CHOSEN_KEY)
            graph.add_node(agent.name, node)
            graph.add_edge(agent.name, END)

    def routing_prompt(self) -> str:
        lines = [
            self.instruction
            or "Choose which agents should handle the user's latest request. Pick only the ones "
            "needed; pick several when the request has several parts.",
            'Answer with JSON only: {"agents": ["name", ...]}; to give an agent a request of '
            'its own, {"agents": [{"agent": "name", "query": "what it should do"}, ...]}. '
            "The agents:",
        ]
        lines += [
            f"- {agent.name}: {agent.description or 'no description'}" for agent in self.agents
        ]
        return "\n".join(lines)

    def _route(self, state: OverAllState, config: RunnableConfig) -> Command:
        conversation = [m for m in state.value("messages", ()) if not isinstance(m, SystemMessage)]
        reply = self.model.generate(
            [SystemMessage(self.routing_prompt()), *conversation],
            None,
            {"response_format": RouteChoice},
        )
        chosen = self._parse(reply.text)
        if chosen:
            queries = {name: query for name, query in chosen.items() if query is not None}
            update = {self.QUERIES_KEY: queries, self.CHOSEN_KEY: list(chosen)}
            return Command(goto=list(chosen), update=update)
        if self.fallback is not None:
            fallback = self.fallback.name
            return Command(
                goto=fallback, update={self.QUERIES_KEY: {}, self.CHOSEN_KEY: [fallback]}
            )
        raise GraphRuntimeError(
            f"{self.name}: the routing model chose no known agent ({reply.text!r:.120}); known: "
            f"{', '.join(a.name for a in self.agents)}; give the team a fallback agent"
        )

    def _parse(self, text: str) -> dict[str, str | None]:
        """The known agents the answer chose, in the team's order, with their requests."""
        try:
            queries = RouteChoice.model_validate_json(_strip_fence(text)).queries()
        except ValidationError:
            return {}
        return {a.name: queries[a.name] for a in self.agents if a.name in queries}


class LoopAgent(FlowAgent):
    """Runs ``agent`` repeatedly: ``times`` times, once per item of the list at
    ``items_key`` (the item, as text, is the agent's request), or ``until(state)`` holds
    (checked after each run; at most ``max_loops`` runs)."""

    PREPARE = "next"
    PRIVATE_KEYS = frozenset({RUN_KEY, RUN_INPUT_KEY, "_loop"})

    def __init__(
        self,
        name: str,
        agent: AgentLike,
        *,
        times: int | None = None,
        items_key: str | None = None,
        until: Callable[[OverAllState], bool] | None = None,
        max_loops: int = 25,
        **options: Any,
    ) -> None:
        super().__init__(name, **options)
        modes = [m for m in (times, items_key, until) if m is not None]
        if len(modes) != 1:
            raise GraphSetupError(
                f"LoopAgent {name!r} needs exactly one of times=, items_key= or until="
            )
        if times is not None and times < 1:
            raise GraphSetupError(f"LoopAgent {name!r}: times must be at least 1")
        self.agent = _checked(name, [agent])[0]
        self.times, self.items_key, self.until, self.max_loops = times, items_key, until, max_loops
        self.key_strategies.setdefault("_loop", lambda old, new: new)

    def _agents(self) -> Sequence[AgentLike]:
        return [self.agent]

    def _max_steps(self) -> int:
        return 100 + (self.max_loops + 1) * (self.agent._max_steps() + 2)

    def _build(self, graph: StateGraph) -> None:
        if self.agent.name == self.PREPARE:
            raise GraphSetupError(f"{self.name}: the agent may not be named {self.PREPARE!r}")
        per_item = self.items_key is not None
        graph.add_node(self.PREPARE, self._prepare)
        graph.add_node(
            self.agent.name,
            agent_node(self.agent, include_contents=not per_item, collect_key=OUTPUTS_KEY),
        )
        graph.add_edge(START, self.PREPARE)
        graph.add_edge(self.PREPARE, self.agent.name)
        graph.add_conditional_edges(
            self.agent.name, self._again, {"again": self.PREPARE, "done": END}
        )

    def _prepare(self, state: OverAllState) -> dict[str, Any]:
        done = state.value("_loop", 0) or 0
        update: dict[str, Any] = {"_loop": done + 1}
        if self.items_key is not None:
            items = list(state.value(self.items_key, ()))
            if done < len(items):
                update["item"] = items[done]
                update["messages"] = UserMessage(str(items[done]))
        return update

    def _again(self, state: OverAllState) -> str:
        done = state.value("_loop", 0) or 0
        if done >= self.max_loops:
            return "done"
        if self.times is not None:
            return "again" if done < self.times else "done"
        if self.items_key is not None:
            return "again" if done < len(state.value(self.items_key, ())) else "done"
        assert self.until is not None
        return "done" if self.until(state) else "again"

    def _input(self, input: Any, config: RunnableConfig) -> Any:
        """New input starts the count again (sync and async calls alike)."""
        state = super()._input(input, config)
        if isinstance(state, dict):
            state.setdefault("_loop", 0)
        return state


def _checked(team: str, agents: Sequence[AgentLike]) -> list[AgentLike]:
    agents = list(agents)
    if not agents:
        raise GraphSetupError(f"{team}: a team needs at least one agent")
    names = [agent.name for agent in agents]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise GraphSetupError(
            f"{team}: agent names must be unique within a team, {duplicated} repeat"
        )
    return agents


def _as_input(input: Any) -> Any:
    if input is None or isinstance(input, Command):
        return input
    return coerce_state(input)


def _answer(state: OverAllState) -> AssistantMessage:
    if state.interrupts:
        raise GraphInterrupted(state.interrupts)
    message = run_answer(state)  # never an earlier turn's answer
    if message is None:
        raise GraphRuntimeError("the team ended without an answer")
    return message


def _strip_fence(text: str) -> str:
    text = text.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text.strip()


Agent = ReactAgent | FlowAgent
"""An agent or a team of agents: what takes a conversation (a question in, an answer out).
``graph-agent serve``, ``mcp serve`` and the CLI run both kinds alike."""

__all__ = [
    "Agent",
    "FlowAgent",
    "LlmRoutingAgent",
    "LoopAgent",
    "ParallelAgent",
    "RouteChoice",
    "SequentialAgent",
]
