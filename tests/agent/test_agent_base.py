"""``AgentBase``: a ReactAgent and every team offer the ``Runnable`` methods, from one place.

``with_saver`` makes a copy and leaves the agent it is called on as it was; the async state
methods read and write the thread as the sync ones do; after ``agent.model = other`` the hooks
and the model node see the same model, and a run already going keeps the one it started with.
"""

from __future__ import annotations

from typing import Any

import pytest

from graph_agent import MemorySaver, Runnable, RunnableConfig, tool
from graph_agent.agent import (
    FlowAgent,
    LlmRoutingAgent,
    LoopAgent,
    ModelHook,
    ParallelAgent,
    ReactAgent,
    SequentialAgent,
)
from graph_agent.agent.base import AgentBase
from graph_agent.agent.flows import Agent
from graph_agent.agent.spec import AgentSpec
from graph_agent.messages import AssistantMessage, ToolCall
from graph_agent.models import ScriptedChatModel


def _agent(name: str, *answers: str) -> ReactAgent:
    return ReactAgent(name, ScriptedChatModel(list(answers) or ["ok"] * 4))


def _teams() -> dict[str, FlowAgent]:
    router = ScriptedChatModel(['{"agents": ["a"]}'] * 4)
    return {
        "sequential": SequentialAgent("seq", [_agent("a"), _agent("b")]),
        "parallel": ParallelAgent("par", [_agent("a"), _agent("b")]),
        "loop": LoopAgent("loop", _agent("a"), times=2),
        "routing": LlmRoutingAgent("route", router, [_agent("a"), _agent("b")]),
    }


def _everything() -> dict[str, AgentBase]:
    return {"react": _agent("solo"), **_teams()}


@pytest.mark.parametrize("kind", sorted(_everything()))
def test_every_agent_and_team_is_a_runnable(kind: str) -> None:
    agent = _everything()[kind]
    assert isinstance(agent, Runnable)
    assert isinstance(agent, AgentBase)
    assert isinstance(agent, Agent)
    assert agent.name in agent.get_graph("mermaid")


@pytest.mark.parametrize("kind", sorted(_everything()))
def test_with_saver_leaves_the_original_untouched(kind: str) -> None:
    own, other = MemorySaver(), MemorySaver()
    agent = _everything()[kind].with_saver(own)
    first = RunnableConfig(thread_id="first")
    agent.call("hello", first)
    graph, before = agent.graph, agent.get_state(first)

    twin = agent.with_saver(other)
    twin.call("hello", RunnableConfig(thread_id="second"))

    assert type(twin) is type(agent) and twin is not agent
    assert agent.saver is own and agent.graph is graph and graph.saver is own
    assert twin.saver is other and twin.graph is not graph and twin.graph.saver is other
    assert own.threads() == ["first"] and other.threads() == ["second"]
    after = agent.get_state(first)
    assert after.config.checkpoint_id == before.config.checkpoint_id
    assert after.values == before.values


def test_with_saver_none_gives_an_agent_that_keeps_no_threads() -> None:
    own = MemorySaver()
    agent = ReactAgent("helper", ScriptedChatModel(["one"]), saver=own)
    twin = agent.with_saver(None)
    assert twin.call("hello").text == "one"
    assert twin.saver is None and agent.saver is own and own.threads() == []


def test_a_copy_steers_its_own_threads() -> None:
    agent = _agent("helper")
    twin = agent.with_saver(MemorySaver())
    assert twin.steering is not agent.steering
    twin.steer(RunnableConfig(thread_id="t"), "also this")
    assert twin.steering.pending("t") and not agent.steering.pending("t")


@pytest.mark.parametrize("kind", sorted(_everything()))
async def test_the_async_state_methods_read_and_write_the_thread_as_the_sync_ones(
    kind: str,
) -> None:
    agent = _everything()[kind].with_saver(MemorySaver())
    config = RunnableConfig(thread_id="t")
    await agent.acall("hello", config)

    snapshot = await agent.aget_state(config)
    assert snapshot.values == agent.get_state(config).values
    history = [s.config.checkpoint_id async for s in agent.aget_state_history(config, limit=3)]
    assert history == [s.config.checkpoint_id for s in agent.get_state_history(config, limit=3)]
    assert len(history) >= 2 and history[0] == snapshot.config.checkpoint_id
    older = [
        s.config.checkpoint_id async for s in agent.aget_state_history(config, before=history[0])
    ]
    assert older[0] == history[1]

    written = await agent.aupdate_state(config, {"messages": "A note."})
    after = agent.get_state(config)
    assert after.config.checkpoint_id == written.checkpoint_id
    assert after.values["messages"][-1].text == "A note."
    assert len(after.values["messages"]) == len(snapshot.values["messages"]) + 1


@pytest.mark.parametrize("kind", sorted(_teams()))
def test_a_team_updates_its_thread_as_a_node_would(kind: str) -> None:
    team = _teams()[kind]
    config = RunnableConfig(thread_id="t")
    team.call("hello", config)
    node = team._agents()[0].name
    written = team.update_state(config, {"messages": "From the agent."}, as_node=node)
    snapshot = team.get_state(config)
    assert snapshot.config.checkpoint_id == written.checkpoint_id
    assert snapshot.values["messages"][-1].text == "From the agent."
    assert snapshot.metadata["source"] == "update" and snapshot.metadata["writers"] == [node]


async def test_a_team_called_async_without_messages_answers_for_its_new_run() -> None:
    writer = _agent("writer", "first answer", "second answer")
    team = SequentialAgent("team", [writer])
    config = RunnableConfig(thread_id="t")
    assert (await team.acall("hello", config)).text == "first answer"
    # the input adds no message: the run starts after the thread's last one (read async)
    assert (await team.acall({"note": "again"}, config)).text == "second answer"


async def test_a_loop_called_async_counts_again_on_new_input() -> None:
    model = ScriptedChatModel(["one", "two", "three", "four"])
    loop = LoopAgent("loop", ReactAgent("step", model), times=2)
    config = RunnableConfig(thread_id="t")
    assert (await loop.acall("go", config)).text == "two"
    assert (await loop.acall("again", config)).text == "four"
    assert len(model.requests) == 4


class SeesModel(ModelHook):
    """Records the model the hook is told its agent has, at each model call."""

    def __init__(self) -> None:
        self.models: list[Any] = []

    def before_model(self, state: Any, config: Any, *, agent: AgentSpec) -> None:
        self.models.append(agent.model)


def test_hooks_and_the_model_node_see_the_model_set_after_the_agent_was_made() -> None:
    first, second = ScriptedChatModel(["from the first"]), ScriptedChatModel(["from the second"])
    hook = SeesModel()
    agent = ReactAgent("helper", first, hooks=[hook])
    agent.call("hello")
    old_graph = agent.graph

    agent.model = second

    assert agent.spec.model is second
    assert agent.graph is not old_graph  # a new graph, from a new spec
    assert agent.call("again").text == "from the second"
    assert hook.models == [first, second]
    assert len(first.requests) == 1 and len(second.requests) == 1


def test_a_model_changed_by_a_tool_mid_run_reaches_only_the_next_run() -> None:
    first = ScriptedChatModel(
        [AssistantMessage(tool_calls=[ToolCall("c1", "switch", {})]), "done by the first"]
    )
    second = ScriptedChatModel(["done by the second"])
    hook = SeesModel()
    agent: ReactAgent

    @tool
    def switch() -> str:
        """Switch the agent's model."""
        agent.model = second
        return "switched"

    agent = ReactAgent("helper", first, tools=[switch], hooks=[hook])
    assert agent.call("hello").text == "done by the first"
    assert hook.models == [first, first]  # the run kept the model (and spec) it started with
    assert agent.call("again").text == "done by the second"
    assert hook.models == [first, first, second]
    assert len(first.requests) == 2 and len(second.requests) == 1


def test_a_team_changed_mid_run_keeps_its_settings_until_the_next_run() -> None:
    loop: LoopAgent

    def first_answer(request: Any) -> AssistantMessage:
        loop.times = 3  # while the loop runs
        return AssistantMessage(content="one")

    model = ScriptedChatModel([first_answer, "two", "three", "four", "five"])
    loop = LoopAgent("loop", ReactAgent("step", model), times=2)
    config = RunnableConfig(thread_id="t")
    graph = loop.graph
    assert loop.call("go", config).text == "two"  # the run kept times=2
    assert loop.graph is not graph
    assert loop.call("again", config).text == "five"  # the next run loops 3 times
    assert len(model.requests) == 5


def test_a_routing_team_routes_with_the_model_it_was_given_last() -> None:
    first = ScriptedChatModel(['{"agents": ["a"]}'])
    second = ScriptedChatModel(['{"agents": ["b"]}'])
    team = LlmRoutingAgent("route", first, [_agent("a", "from a"), _agent("b", "from b")])
    assert team.call("hello").text == "from a"
    team.model = second
    assert team.call("hello").text == "from b"
    assert len(first.requests) == 1 and len(second.requests) == 1


@pytest.mark.parametrize("saver_kind", ["memory", "postgres"])
@pytest.mark.parametrize("kind", ["react", "sequential", "loop"])
async def test_an_agent_served_on_a_saver_keeps_its_state_there_async(
    kind: str, saver_kind: str
) -> None:
    if saver_kind == "memory":
        await _state_round_trip(_everything()[kind], MemorySaver())
        return
    from graph_agent.checkpoint.postgres import AsyncPostgresSaver
    from tests.checkpoint.postgres_db import fresh_schema

    with fresh_schema() as dsn:
        async with AsyncPostgresSaver(dsn) as saver:
            await _state_round_trip(_everything()[kind], saver)


async def _state_round_trip(agent: AgentBase, saver: Any) -> None:
    served = agent.with_saver(saver)
    config = RunnableConfig(thread_id="t")
    await served.acall("hello", config)
    snapshot = await served.aget_state(config)
    written = await served.aupdate_state(config, {"messages": "A note."})
    history = [s async for s in served.aget_state_history(config)]

    assert history[0].config.checkpoint_id == written.checkpoint_id
    assert history[1].config.checkpoint_id == snapshot.config.checkpoint_id
    assert history[0].values["messages"][-1].text == "A note."
    assert (await served.aget_state(config)).values == history[0].values
    assert agent.saver is not saver and agent.saver.get("t") is None


@pytest.mark.parametrize("kind", sorted(_teams()))
def test_a_copy_has_lists_and_dicts_of_its_own(kind: str) -> None:
    team = _teams()[kind]
    agents, strategies = list(team._agents()), dict(team.key_strategies)
    twin = team.with_saver(MemorySaver())
    if isinstance(getattr(twin, "agents", None), list):
        twin.agents.append(_agent("late"))
    twin.key_strategies["late"] = lambda old, new: new
    assert list(team._agents()) == agents and team.key_strategies == strategies


def test_a_copy_has_a_toolkit_of_its_own() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    agent = _agent("helper")
    twin = agent.with_saver(MemorySaver())
    twin.toolkit.add(ping)
    assert "ping" in twin.toolkit and "ping" not in agent.toolkit
