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

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self

from pydantic import BaseModel, ValidationError

from graph_agent.agent.base import AgentBase, _own_copy, coerce_state
from graph_agent.agent.compose import AgentLike, agent_node
from graph_agent.agent.keys import RUN_INPUT_KEY, RUN_KEY
from graph_agent.agent.react import ReactAgent
from graph_agent.agent.turns import run_start
from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.graph.builder import StateGraph
from graph_agent.graph.compiled import CompiledGraph
from graph_agent.graph.errors import GraphRuntimeError, GraphSetupError
from graph_agent.graph.state import AppendStrategy, KeyStrategy, MergeStrategy, OverAllState
from graph_agent.graph.types import (
    END,
    START,
    Command,
    CompileConfig,
    RunnableConfig,
    StateSnapshot,
)
from graph_agent.messages import BaseMessage, SystemMessage, UserMessage
from graph_agent.models.base import ChatModel
from graph_agent.node import SubgraphNode
from graph_agent.store.base import BaseStore

OUTPUTS_KEY = "outputs"
"""Where :class:`ParallelAgent` and :class:`LlmRoutingAgent` collect each agent's answer."""


class FlowAgent(AgentBase):
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

    NO_ANSWER = "the team ended without an answer"
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
        self.store = store
        self.key_strategies = dict(key_strategies or {})
        self.max_concurrency = max_concurrency
        self._init_graph(saver if saver is not None else MemorySaver())

    def _build(self, graph: StateGraph) -> None:
        raise NotImplementedError

    def _agents(self) -> Sequence[AgentLike]:
        raise NotImplementedError

    def _build_graph(self) -> CompiledGraph:
        """The team's graph: its agents as subgraph nodes, wired by :meth:`_build` of a frozen
        copy of the team, so that the nodes it holds (a router, a loop's counter) read the team
        as it was when the graph was built: setting ``team.model`` or ``team.agents`` builds a
        new graph, and a run already going keeps the one it started with."""
        frozen = self._frozen()
        strategies: dict[str, Any] = {"messages": AppendStrategy(), OUTPUTS_KEY: MergeStrategy()}
        strategies.update(frozen.key_strategies)
        graph = StateGraph(frozen.name, key_strategies=strategies, private_keys=self.PRIVATE_KEYS)
        frozen._build(graph)
        return graph.compile(CompileConfig(saver=frozen.saver, store=frozen.store))

    def _frozen(self) -> Self:
        """A shallow copy of the team whose lists and dicts are copies too (the caller holds
        the lock): what a graph built from it reads does not change with the team."""
        return _own_copy(self)

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

    def _config_changes(self) -> dict[str, Any]:
        if self.max_concurrency is None:
            return {}
        return {"max_concurrency": self.max_concurrency}

    def _input(self, input: Any, config: RunnableConfig) -> Any:
        """The graph input for one call (every sync call path goes through here)."""
        return self._with_run_start(input, lambda: self.graph.get_state(config))

    async def _ainput(self, input: Any, config: RunnableConfig) -> Any:
        """:meth:`_input` for the async calls, reading the thread on the caller's loop."""
        state = _as_input(input)
        if isinstance(state, dict) and not _input_messages(state):
            graph = await self._agraph()
            snapshot = await graph.aget_state(config)
            return self._with_run_start(state, lambda: snapshot)
        return self._with_run_start(state, _no_snapshot)

    def _with_run_start(self, input: Any, snapshot: Callable[[], StateSnapshot]) -> Any:
        """``input`` as graph input; new input (a new run, whose answer follows its input)
        gets the run's start, the thread's last message when the input adds none."""
        state = _as_input(input)
        if isinstance(state, dict):
            messages = _input_messages(state)
            earlier = [] if messages else snapshot().values.get("messages", [])
            state[RUN_INPUT_KEY] = run_start(messages, earlier)
        return state

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

    def _with_run_start(self, input: Any, snapshot: Callable[[], StateSnapshot]) -> Any:
        """New input starts the count again (sync and async calls alike)."""
        state = super()._with_run_start(input, snapshot)
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


def _input_messages(state: Mapping[str, Any]) -> list[BaseMessage]:
    """The messages a call's input adds."""
    given = state.get("messages")
    items = given if isinstance(given, list | tuple) else [given]
    return [m for m in items if isinstance(m, BaseMessage)]


def _no_snapshot() -> StateSnapshot:
    raise AssertionError("input with messages does not read the thread")


def _strip_fence(text: str) -> str:
    text = text.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text.strip()


Agent = ReactAgent | FlowAgent
"""An agent or a team of agents: what takes a conversation (a question in, an answer out).
``graph-agent serve``, ``mcp serve`` and the CLI run both kinds alike."""

if TYPE_CHECKING:  # mypy checks that an agent and every team is a Runnable, signatures included
    from graph_agent.runnable import Runnable

    def _implementations(
        base: AgentBase,
        react: ReactAgent,
        sequential: SequentialAgent,
        parallel: ParallelAgent,
        loop: LoopAgent,
        routing: LlmRoutingAgent,
    ) -> tuple[Runnable, ...]:
        return base, react, sequential, parallel, loop, routing


__all__ = [
    "Agent",
    "FlowAgent",
    "LlmRoutingAgent",
    "LoopAgent",
    "ParallelAgent",
    "RouteChoice",
    "SequentialAgent",
]
