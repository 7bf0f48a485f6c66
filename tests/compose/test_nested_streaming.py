"""Streaming from nested graphs and agents: outputs carry the agent's name and the path of
nodes they run under; tokens of nested agents always reach the caller."""

from __future__ import annotations

from typing import Any

from graph_agent import (
    END,
    START,
    AppendStrategy,
    NodeOutput,
    ParallelAgent,
    SequentialAgent,
    StateGraph,
    StreamingOutput,
)
from tests.compose.agents import scripted


def nested_team() -> SequentialAgent:
    """``team``: a ParallelAgent ``research`` (web, papers), then ``writer``."""
    research = ParallelAgent(
        "research", [scripted("web", "Web says A."), scripted("papers", "Papers say B.")]
    )
    return SequentialAgent("team", [research, scripted("writer", "The report.")])


def node_outputs(outputs: list[NodeOutput]) -> list[tuple[tuple[str, ...], str, str]]:
    """``(path, agent, node)`` of each finished node, in order."""
    return [(o.path, o.agent, o.node) for o in outputs if not isinstance(o, StreamingOutput)]


def tokens(outputs: list[NodeOutput], agent: str) -> str:
    return "".join(o.chunk for o in outputs if isinstance(o, StreamingOutput) and o.agent == agent)


def test_subgraph_outputs_carry_the_agent_name_and_the_path_two_teams_deep(caller):
    outputs = caller.stream(nested_team(), "Write a report.", subgraphs=True)

    finished = node_outputs(outputs)
    assert finished[0] == ((), "team", "__start__")
    assert finished[-1] == ((), "team", "writer")
    for web_or_papers in ("web", "papers"):
        path = ("research", web_or_papers)
        assert (path, web_or_papers, "__model__") in finished
        assert finished.index((path, web_or_papers, "__model__")) < finished.index(
            (("research",), "research", web_or_papers)
        )
    assert finished.index((("research",), "research", "papers")) < finished.index(
        ((), "team", "research")
    )
    assert ((("writer",), "writer", "__model__")) in finished
    assert {path for path, _, _ in finished} == {
        (),
        ("research",),
        ("research", "web"),
        ("research", "papers"),
        ("writer",),
    }


def test_tokens_of_nested_agents_carry_their_name_and_path(caller):
    outputs = caller.stream(nested_team(), "Write a report.", subgraphs=True)

    chunks = [o for o in outputs if isinstance(o, StreamingOutput)]
    assert {(o.agent, o.path, o.node) for o in chunks} == {
        ("web", ("research", "web"), "__model__"),
        ("papers", ("research", "papers"), "__model__"),
        ("writer", ("writer",), "__model__"),
    }
    assert tokens(outputs, "web") == "Web says A."
    assert tokens(outputs, "papers") == "Papers say B."
    assert tokens(outputs, "writer") == "The report."
    assert all(o.state is None and o.update == {} for o in chunks)


def test_without_subgraphs_only_the_tokens_of_nested_agents_are_forwarded(caller):
    with_children = caller.stream(nested_team(), "Write a report.", subgraphs=True)
    top_only = caller.stream(nested_team(), "Write a report.")

    assert node_outputs(top_only) == [
        ((), "team", "__start__"),
        ((), "team", "research"),
        ((), "team", "writer"),
    ]
    kept = [o for o in with_children if o.path == () or isinstance(o, StreamingOutput)]
    shape = [(type(o), o.path, o.agent, o.node, getattr(o, "chunk", None)) for o in kept]
    assert sorted(shape, key=repr) == sorted(
        [(type(o), o.path, o.agent, o.node, getattr(o, "chunk", None)) for o in top_only], key=repr
    )
    assert tokens(top_only, "papers") == "Papers say B."


def test_a_nested_output_carries_the_childs_own_step_update_and_state():
    outputs = list(nested_team().stream("Write a report.", subgraphs=True))

    (web_model,) = [
        o
        for o in outputs
        if o.path == ("research", "web") and o.node == "__model__" and o.state is not None
    ]
    assert web_model.step == 0
    assert web_model.update["messages"][-1].text == "Web says A."
    assert [m.text for m in web_model.state["messages"]] == ["Write a report.", "Web says A."]
    assert web_model.checkpoint_id is not None


def test_a_plain_subgraph_streams_its_nodes_under_the_parent_node(caller):
    child = StateGraph("child", key_strategies={"log": AppendStrategy()})
    child.add_node("a", lambda state: {"log": "a"}).add_node("b", lambda state: {"log": "b"})
    child.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    parent = StateGraph("parent", key_strategies={"log": AppendStrategy()})
    parent.add_node("sub", child.compile()).add_edge(START, "sub").add_edge("sub", END)

    outputs = caller.stream(parent.compile(), {"log": []}, subgraphs=True)

    assert node_outputs(outputs) == [
        ((), "parent", "__start__"),
        (("sub",), "child", "__start__"),
        (("sub",), "child", "a"),
        (("sub",), "child", "b"),
        ((), "parent", "sub"),
    ]
    assert [o.update for o in outputs if o.path == ("sub",)][1:] == [{"log": "a"}, {"log": "b"}]


def test_streaming_a_team_ends_with_the_same_state_as_invoking_it():
    outputs: list[Any] = list(nested_team().stream("Write a report.", subgraphs=True))

    final = nested_team().invoke("Write a report.")

    assert [m.text for m in outputs[-1].state["messages"]] == [m.text for m in final["messages"]]


def test_a_supervisor_agent_streams_its_sub_agents_node_outputs_when_asked():
    from graph_agent import ReactAgent, RunnableConfig
    from graph_agent.messages import AssistantMessage, ToolCall
    from graph_agent.models import ScriptedChatModel

    helper = ReactAgent("helper", ScriptedChatModel(["helped"]))
    boss = ReactAgent(
        "boss",
        ScriptedChatModel(
            [AssistantMessage(tool_calls=[ToolCall("h1", "helper", {"request": "help"})]), "done"]
        ),
        tools=[helper.as_tool(description="Helps.")],
    )
    outputs = list(boss.stream("go", RunnableConfig(thread_id="s"), subgraphs=True))
    nested = [o for o in outputs if o.agent == "helper" and o.node == "__model__"]
    assert nested and all(o.path == ("__tool__",) for o in nested)
    assert any(type(o).__name__ == "NodeOutput" for o in nested)


def test_tokens_of_an_agent_tool_reach_a_sync_stream_while_the_tool_runs():
    # the tool runs on a thread of its own (a timeout applies): its tokens must not wait for it
    import threading

    from graph_agent import AssistantMessage, ReactAgent, RunnableConfig, ToolCall
    from graph_agent.models.base import LocalChatModel

    heard = threading.Event()

    class Waits(LocalChatModel):
        """Streams "first ", then waits until the caller has it before streaming "second"."""

        def stream(self, messages, tools=None, options=None):
            for chunk in super().stream(messages, tools, options):
                yield chunk
                if chunk.text == "first ":
                    assert heard.wait(5), "the first token did not reach the caller live"

        def _reply(self, request):
            return AssistantMessage("first second")

    helper = ReactAgent("helper", Waits())
    calls = AssistantMessage(tool_calls=[ToolCall("h1", "helper", {"request": "go"})])
    boss = scripted("boss", calls, "done", tools=[helper.as_tool()], tool_timeout=10)

    for output in boss.stream("go", RunnableConfig(thread_id="t")):
        if isinstance(output, StreamingOutput) and output.chunk == "first ":
            heard.set()

    assert heard.is_set()
    assert boss.get_state(RunnableConfig(thread_id="t")).values["messages"][2].content == (
        "first second"
    )
