"""RemoteGraph: a served graph or agent called like a local compiled graph, over real HTTP."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from graph_agent import END, START, Command, RunnableConfig, StateGraph
from graph_agent.agent.react import ReactAgent
from graph_agent.client import RemoteGraph, RemoteGraphError
from graph_agent.graph.types import StreamingOutput
from graph_agent.messages import AssistantMessage, ToolCall, UserMessage
from graph_agent.models.scripted import ScriptedChatModel
from tests.serve.conftest import Server
from tests.serve.graphs import ANSWERS


def thread() -> RunnableConfig:
    return RunnableConfig(thread_id=str(uuid.uuid4()))


def test_invoke_on_a_thread_returns_the_final_state_and_keeps_it(server: Server) -> None:
    remote = RemoteGraph(server.url, "chain")
    config = thread()
    result = remote.invoke({"x": 1}, config)
    assert result["x"] == 12 and not result.interrupts
    state = remote.get_state(config)
    assert state.values["x"] == 12 and state.next == ()
    assert state.config.thread_id == config.thread_id and state.config.checkpoint_id


def test_a_thread_id_holding_url_characters_is_addressed_as_itself(server: Server) -> None:
    """Characters a path takes, but that mean something there (``+&=;:@``) or must be
    percent-encoded (any script): sent encoded, read back as they are."""
    remote = RemoteGraph(server.url, "chain")
    config = RunnableConfig(thread_id=f"用户+7&tab=1;top:ü@{uuid.uuid4().hex}")
    assert remote.invoke({"x": 1}, config)["x"] == 12
    assert remote.get_state(config).config.thread_id == config.thread_id
    assert next(iter(remote.get_state_history(config))).values["x"] == 12
    assert remote.update_state(config, {"x": 5}).thread_id == config.thread_id
    assert remote.get_state(config).values["x"] == 5


def test_invoke_without_a_thread_is_a_stateless_run(server: Server) -> None:
    assert RemoteGraph(server.url, "chain").invoke({"x": 0})["x"] == 11


def test_stream_yields_node_outputs_with_state_and_emitted_chunks(server: Server) -> None:
    outputs = list(RemoteGraph(server.url, "chain").stream({"x": 1}, thread()))
    nodes = [o for o in outputs if not isinstance(o, StreamingOutput)]
    assert [(o.node, dict(o.update)) for o in nodes] == [("first", {"x": 2}), ("second", {"x": 12})]
    assert [o.state["x"] for o in nodes if o.state is not None] == [2, 12]
    chunks = [o.chunk for o in outputs if isinstance(o, StreamingOutput)]
    assert "tick" in chunks and "Hel" in chunks and "lo" in chunks


def test_an_interrupt_comes_back_and_is_answered_with_command_resume(server: Server) -> None:
    remote = RemoteGraph(server.url, "approval")
    config = thread()
    paused = remote.invoke({"question": "refund?"}, config)
    assert [i.value for i in paused.interrupts] == [{"approve": "reply to refund?"}]
    assert remote.get_state(config).next == ("ask",)
    done = remote.invoke(Command(resume="yes"), config)
    assert done["answer"] == "yes" and not done.interrupts


def test_history_and_update_state_as_a_node(server: Server) -> None:
    remote = RemoteGraph(server.url, "chain")
    config = thread()
    remote.invoke({"x": 1}, config)
    history = list(remote.get_state_history(config))
    assert [s.values.get("x") for s in history][:2] == [12, 2]
    updated = remote.update_state(config, {"x": 100}, as_node="second")
    assert updated.thread_id == config.thread_id and updated.checkpoint_id
    assert remote.get_state(config).values["x"] == 100


def test_messages_come_back_as_graph_agent_messages(server: Server) -> None:
    agent = RemoteGraph(server.url, "assistant")
    for question in ({"messages": [UserMessage("Hi")]}, "Hi"):  # a string: a question
        messages = agent.invoke(question)["messages"]
        assert isinstance(messages[0], UserMessage) and messages[0].text == "Hi"
        assert isinstance(messages[-1], AssistantMessage) and messages[-1].text


def test_the_async_api_runs_streams_and_reads_state(server: Server) -> None:
    remote = RemoteGraph(server.url, "chain")
    config = thread()

    async def main() -> tuple[int, list[str], int]:
        result = await remote.ainvoke({"x": 5}, config)
        nodes = [o.node async for o in remote.astream({"x": 1}) if o.node]
        state = await remote.aget_state(config)
        return result["x"], nodes, state.values["x"]

    x, nodes, stored = asyncio.run(main())
    assert x == 16 and stored == 16
    assert nodes[-2:] == ["first", "second"]  # after the chunks "first" emitted


def test_errors_name_what_the_server_said(server: Server) -> None:
    with pytest.raises(RemoteGraphError) as missing:
        RemoteGraph(server.url, "no-such-graph").invoke({"x": 1})
    assert missing.value.status == 404 and "no-such-graph" in str(missing.value)
    with pytest.raises(RemoteGraphError):
        RemoteGraph(server.url, "chain").get_state(thread())


def test_a_remote_graph_is_a_node_and_a_remote_agent_is_a_tool(server: Server) -> None:
    local = StateGraph("local")
    local.add_node("remote", RemoteGraph(server.url, "chain"))
    local.add_edge(START, "remote").add_edge("remote", END)
    assert local.compile().invoke({"x": 0})["x"] == 11

    ask = RemoteGraph(server.url, "assistant").as_tool(description="Ask the assistant.")
    model = ScriptedChatModel(
        [
            AssistantMessage(tool_calls=[ToolCall("c1", ask.name, {"question": "hello?"})]),
            lambda request: f"It said: {request.messages[-1].text}",
        ]
    )
    answer = ReactAgent("caller", model, tools=[ask]).call("Ask it.")
    assert answer.text.removeprefix("It said: ") in ANSWERS  # the remote agent's answer


def test_a_streamed_agent_state_holds_messages_not_their_repr(server: Server) -> None:
    outputs = list(RemoteGraph(server.url, "assistant").stream("Hi", thread()))
    states = [o.state for o in outputs if o.state is not None]
    assert states and all(
        isinstance(m, (UserMessage, AssistantMessage)) or m.role == "system"
        for state in states
        for m in state["messages"]
    )
    assert RemoteGraph(server.url, "assistant").is_agent
    assert not RemoteGraph(server.url, "chain").is_agent
