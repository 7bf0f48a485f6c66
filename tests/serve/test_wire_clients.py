"""A real server read by LangGraph's client (langgraph-sdk), LangChain's message classes
(langchain-core) and our RemoteGraph: token usage in LangChain's shape, updates in LangGraph's
shapes on an agent's first run, after a summarisation and after a human's edit, and a failed
run's error as LangGraph reports it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, convert_to_messages
from langgraph_sdk import get_sync_client

from graph_agent import END, START, StateGraph, tool
from graph_agent.agent import HumanInTheLoopHook, SummarizationHook
from graph_agent.agent.react import ReactAgent
from graph_agent.client import RemoteGraph, RemoteGraphError
from graph_agent.messages import AssistantMessage, ReplaceAll, ToolCall, Usage
from graph_agent.models.scripted import ScriptedChatModel
from tests.serve.conftest import Server

USAGE = Usage(
    prompt_tokens=120,
    completion_tokens=15,
    total_tokens=135,
    cache_read_tokens=100,
    reasoning_tokens=6,
)
USAGE_METADATA = {
    "input_tokens": 120,
    "output_tokens": 15,
    "total_tokens": 135,
    "input_token_details": {"cache_read": 100},
    "output_token_details": {"reasoning": 6},
}


def counter() -> ReactAgent:
    """Answers with a known usage; its instruction replaces the messages on a first run."""
    model = ScriptedChatModel([lambda request: AssistantMessage("Four.", usage=USAGE)] * 50)
    return ReactAgent("counter", model=model, instruction="Be brief.")


@tool
def send_email(to: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def mailer() -> ReactAgent:
    """Asks a human before sending; summarises the conversation once it grows."""

    def reply(request: Any) -> AssistantMessage:
        if request.messages[-1].role == "tool":
            return AssistantMessage("Sent.")
        return AssistantMessage("", tool_calls=[ToolCall("c1", "send_email", {"to": "ann"})])

    return ReactAgent(
        "mailer",
        model=ScriptedChatModel([reply] * 50),
        tools=[send_email],
        hooks=[
            HumanInTheLoopHook(approve={"send_email": "check the address"}),
            SummarizationHook(
                max_tokens=10, messages_to_keep=1, model=ScriptedChatModel(["Earlier: mail."] * 50)
            ),
        ],
    )


def failing() -> StateGraph:
    def check(state: Any) -> dict[str, Any]:
        raise ValueError("boom")

    graph = StateGraph("failing")
    graph.add_node("check", check)
    graph.add_edge(START, "check").add_edge("check", END)
    return graph


def looping() -> StateGraph:
    graph = StateGraph("looping")
    graph.add_node("again", lambda state: {"n": state.get("n", 0) + 1})
    graph.add_edge(START, "again")
    graph.add_conditional_edges("again", lambda state: "again" if state["n"] < 100 else END)
    return graph


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db: Path = tmp_path_factory.mktemp("wire") / "serve.db"
    with Server(db, [counter(), mailer(), failing(), looping()]) as running:
        yield running


def _messages_written(parts: list[Any], node: str) -> Any:
    """What ``node`` first wrote to ``messages``, as the ``updates`` events among ``parts`` say."""
    return next(
        update["messages"]
        for name, update in _updates(parts)
        if name == node and "messages" in update
    )


def _updates(parts: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """Each ``(node, update)`` of the ``updates`` events among ``parts``."""
    return [
        (node, update)
        for part in parts
        if part.event == "updates"
        for node, update in part.data.items()
        if node != "__interrupt__"
    ]


def test_an_agents_answer_validates_as_langchains_ai_message_with_its_usage(
    served: Server,
) -> None:
    client = get_sync_client(url=served.url)
    values = client.runs.wait(
        None, "counter", input={"messages": [{"type": "human", "content": "2+2?"}]}
    )
    answer = AIMessage(**values["messages"][-1])
    assert answer.content == "Four." and answer.usage_metadata == USAGE_METADATA


def test_streamed_chunks_validate_as_langchains_ai_message_chunk(served: Server) -> None:
    client = get_sync_client(url=served.url)
    parts = client.runs.stream(
        None, "counter", input={"messages": "2+2?"}, stream_mode="messages-tuple"
    )
    chunks = [AIMessageChunk(**part.data[0]) for part in parts if part.event == "messages"]
    whole = sum(chunks[1:], chunks[0])
    assert whole.content == "Four." and whole.usage_metadata == USAGE_METADATA


def test_usage_events_carry_langchains_usage_metadata(served: Server) -> None:
    client = get_sync_client(url=served.url)
    parts = client.runs.stream(None, "counter", input={"messages": "2+2?"}, stream_mode="updates")
    usage = [part.data for part in parts if part.event == "usage"]
    assert usage == [{"node": "__model__", "step": usage[0]["step"], "usage": USAGE_METADATA}]


def test_an_ai_message_sent_back_keeps_its_usage_on_the_thread(served: Server) -> None:
    client = get_sync_client(url=served.url)
    thread_id = client.threads.create()["thread_id"]
    earlier = AIMessage("Three.", id="earlier", usage_metadata=USAGE_METADATA).model_dump()
    question = {"type": "human", "content": "And 2+2?"}
    client.runs.wait(thread_id, "counter", input={"messages": [earlier, question]})
    stored = client.threads.get_state(thread_id)["values"]["messages"]
    (sent_back,) = [message for message in stored if message["id"] == "earlier"]
    assert AIMessage(**sent_back).usage_metadata == USAGE_METADATA


def test_remote_graph_reads_the_usage_back_as_ours(served: Server) -> None:
    messages = RemoteGraph(served.url, "counter").invoke("2+2?")["messages"]
    assert messages[-1].usage == USAGE


def test_a_first_runs_updates_hold_messages_as_langgraph_sends_them(served: Server) -> None:
    client = get_sync_client(url=served.url)
    thread_id = client.threads.create()["thread_id"]
    parts = list(
        client.runs.stream(thread_id, "counter", input={"messages": "2+2?"}, stream_mode="updates")
    )
    instructed = _messages_written(parts, "InstructionAgentHook.instruction.before")
    assert isinstance(instructed, list)  # not our replace-all as {"items": [...]}
    remove_all, *kept = convert_to_messages(instructed)
    assert (remove_all.type, remove_all.id) == ("remove", "__remove_all__")
    assert [(m.type, m.content) for m in kept] == [("system", "Be brief."), ("human", "2+2?")]
    for _, update in _updates(parts):
        if "messages" in update:
            convert_to_messages(update["messages"])


def test_updates_after_a_human_edit_and_a_summarisation_are_in_langgraphs_shape(
    served: Server,
) -> None:
    client = get_sync_client(url=served.url)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "mailer", input={"messages": "Mail Ann."})
    edit = {"c1": {"decision": "edit", "arguments": {"to": "ann@example.com"}}}
    parts = list(
        client.runs.stream(thread_id, "mailer", command={"resume": edit}, stream_mode="updates")
    )
    edited = _messages_written(parts, "HumanInTheLoopHook.human_in_the_loop.afterModel")
    assert AIMessage(**edited).tool_calls[0]["args"] == {"to": "ann@example.com"}
    summarised = _messages_written(parts, "SummarizationHook.summarization.beforeModel")
    remove_all, *kept = convert_to_messages(summarised)
    assert (remove_all.type, remove_all.id) == ("remove", "__remove_all__")
    assert any("Earlier: mail." in str(m.content) for m in kept)
    assert "items" not in str(_updates(parts))


def test_remote_graph_streams_a_replace_all_as_a_local_stream_does(served: Server) -> None:
    outputs = list(RemoteGraph(served.url, "counter").stream("2+2?"))
    instructed = [o for o in outputs if o.node == "InstructionAgentHook.instruction.before"]
    replaced = instructed[0].update["messages"]
    assert isinstance(replaced, ReplaceAll)
    assert [m.text for m in replaced.items] == ["Be brief.", "2+2?"]


def test_runs_wait_raises_the_exception_the_node_raised_as_langgraph_does(
    served: Server,
) -> None:
    client = get_sync_client(url=served.url)
    with pytest.raises(Exception) as failure:
        client.runs.wait(None, "failing", input={"x": 1})
    assert str(failure.value) == "ValueError: boom"


def test_the_error_event_names_the_exception_with_the_node_and_step(served: Server) -> None:
    client = get_sync_client(url=served.url)
    thread_id = client.threads.create()["thread_id"]
    parts = list(client.runs.stream(thread_id, "failing", input={"x": 1}, stream_mode="updates"))
    expected = {"error": "ValueError", "message": "boom", "node": "check", "step": 0}
    assert [part.data for part in parts if part.event == "error"] == [expected]
    run = client.runs.list(thread_id)[0]
    assert run["status"] == "error"
    assert client.runs.join(thread_id, run["run_id"]) == {"__error__": expected}


def test_a_recursion_limit_reaches_clients_as_a_graph_recursion_error(served: Server) -> None:
    client = get_sync_client(url=served.url)
    with pytest.raises(Exception, match=r"^GraphRecursionError: "):
        client.runs.wait(None, "looping", input={"n": 0}, config={"recursion_limit": 3})


def test_remote_graph_raises_naming_the_node_and_step(served: Server) -> None:
    remote = RemoteGraph(served.url, "failing")
    for call in (remote.invoke, lambda x: list(remote.stream(x))):
        with pytest.raises(RemoteGraphError) as failure:
            call({"x": 1})
        assert "node 'check' raised ValueError: boom (step 0)" in str(failure.value)
        assert failure.value.detail["error"] == "ValueError"
