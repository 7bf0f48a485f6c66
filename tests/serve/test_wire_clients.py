"""A real server read by LangGraph's client (langgraph-sdk), LangChain's message classes
(langchain-core) and our RemoteGraph: token usage in LangChain's shape."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langgraph_sdk import get_sync_client

from graph_agent.agent.react import ReactAgent
from graph_agent.client import RemoteGraph
from graph_agent.messages import AssistantMessage, Usage
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


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db: Path = tmp_path_factory.mktemp("wire") / "serve.db"
    with Server(db, [counter()]) as running:
        yield running


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


# a failed run's error (item 13)
