"""``A2AAgent``: a remote A2A agent (here, ``graph-agent serve``'s own ``/a2a`` on 127.0.0.1) as
a callable agent, a node of a local graph and a tool of a local ReactAgent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from graph_agent import END, START, AppendStrategy, Command, ReactAgent, StateGraph
from graph_agent.client import A2AAgent, A2AAgentError
from graph_agent.graph.types import RunnableConfig
from graph_agent.messages import AssistantMessage, ToolCall, UserMessage
from graph_agent.models.scripted import ScriptedChatModel
from tests.serve.a2a_graphs import asking, broken, chat
from tests.serve.graphs import ANSWERS, agent, chain
from tests.serve.servers import Served, serving

KEY = "a2a-agent-key"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("a2a-agent")
    with serving(
        "sqlite", folder, targets=[agent(), chat(), asking(), broken(), chain()]
    ) as running:
        yield running


def test_an_a2a_agent_answers_a_question(server: Served) -> None:
    remote = A2AAgent(f"{server.url}/a2a/chat")
    state = remote.invoke("hi there")
    assert [m.text for m in state["messages"]] == ["hi there", "echo: hi there"]
    assert isinstance(state["messages"][-1], AssistantMessage) and remote.name == "chat"
    assert remote.is_agent and not state.interrupts


def test_an_a2a_agent_is_a_node_of_a_local_graph(server: Served) -> None:
    local = StateGraph("local", key_strategies={"messages": AppendStrategy()})
    local.add_node("remote", A2AAgent(f"{server.url}/a2a/chat"))
    local.add_edge(START, "remote").add_edge("remote", END)
    final = local.compile().invoke({"messages": [UserMessage("from a node")]})
    assert [m.text for m in final["messages"]] == ["from a node", "echo: from a node"]


def test_an_a2a_agent_is_a_tool_of_a_react_agent(server: Served) -> None:
    ask = A2AAgent(f"{server.url}/a2a/assistant").as_tool(description="Ask the assistant.")
    model = ScriptedChatModel(
        [
            AssistantMessage(tool_calls=[ToolCall("c1", ask.name, {"question": "hello?"})]),
            lambda request: f"It said: {request.messages[-1].text}",
        ]
    )
    answer = ReactAgent("caller", model, tools=[ask]).call("Ask it.")
    assert answer.text.removeprefix("It said: ") in ANSWERS


def test_a_thread_goes_on_in_one_context_and_a_pause_is_resumed(server: Served) -> None:
    remote = A2AAgent(f"{server.url}/a2a/asking")
    config = RunnableConfig(thread_id="local-thread")
    paused = remote.invoke("please", config)
    assert len(paused.interrupts) == 1 and "May I?" in str(paused.interrupts[0].value)
    resumed = remote.invoke(Command(resume="yes"), config)
    assert resumed["messages"][-1].text == "you said yes" and not resumed.interrupts


async def test_it_streams_its_answer_and_runs_inside_an_event_loop(server: Served) -> None:
    remote = A2AAgent(f"{server.url}/a2a/chat")
    outputs = [output async for output in remote.astream("streamed")]
    assert [o.node for o in outputs] == ["chat"]
    assert outputs[0].update["messages"][0].text == "echo: streamed"
    assert (await remote.ainvoke("async"))["messages"][-1].text == "echo: async"
    assert remote.invoke("sync in a loop")["messages"][-1].text == "echo: sync in a loop"


def test_a_refusal_names_what_the_agent_said(server: Served) -> None:
    with pytest.raises(A2AAgentError, match="'messages' key"):
        A2AAgent(f"{server.url}/a2a/chain").invoke("hello")
    with pytest.raises(A2AAgentError, match="always fails") as failed:
        A2AAgent(f"{server.url}/a2a/broken").invoke("hello")
    assert failed.value.state == "TASK_STATE_FAILED" and ":" in failed.value.task_id
    with pytest.raises(ValueError, match="takes a question"):
        A2AAgent(f"{server.url}/a2a/chat").invoke({"x": 1})
    with pytest.raises(ValueError, match="with_saver"):
        A2AAgent(f"{server.url}/a2a/chat").with_saver(object())


def test_an_api_key_is_sent(tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("keyed")
    with serving("sqlite", folder, targets=[chat()], api_keys=[KEY]) as keyed:
        with pytest.raises(A2AAgentError, match="401"):
            A2AAgent(f"{keyed.url}/a2a/chat").invoke("no key")
        answered = A2AAgent(f"{keyed.url}/a2a/chat", api_key=KEY).invoke("keyed")
        assert answered["messages"][-1].text == "echo: keyed"
