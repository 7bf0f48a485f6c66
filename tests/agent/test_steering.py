"""Mid-run steering: ``agent.steer`` reaches the next model call of a running thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from graph_agent import NodeError, RunnableConfig, tool
from graph_agent.agent import ReactAgent
from graph_agent.agent.steering import (
    SteeringInputError,
    SteeringQueue,
    SteeringQueueFullError,
)
from graph_agent.messages import AssistantMessage, ToolCall, UserMessage
from graph_agent.models import ModelRequest, ScriptedChatModel

CFG = RunnableConfig(thread_id="steered")


def call_tool(name: str) -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCall("c1", name, {})])


def answer_to_last(request: ModelRequest) -> str:
    return f"heard: {request.messages[-1].text}"


def waiting_tool(started: threading.Event, go_on: threading.Event) -> Callable[[], str]:
    @tool
    def slow_search() -> str:
        """Search slowly."""
        started.set()
        assert go_on.wait(10), "the test never steered"
        return "found it"

    return slow_search


def test_a_steer_from_another_thread_reaches_the_next_model_call_of_a_sync_run():
    started, go_on = threading.Event(), threading.Event()
    model = ScriptedChatModel([call_tool("slow_search"), answer_to_last])
    agent = ReactAgent("agent", model, tools=[waiting_tool(started, go_on)])
    outcome: dict[str, object] = {}
    runner = threading.Thread(target=lambda: outcome.update(state=agent.invoke("find x", CFG)))
    runner.start()
    assert started.wait(10)
    queued = agent.steer(CFG, "only in metric units")
    go_on.set()
    runner.join(10)
    assert outcome["state"]["messages"][-1].text == "heard: only in metric units"
    second = model.requests[1].messages
    assert [type(m).__name__ for m in second[-2:]] == ["ToolResponseMessage", "UserMessage"]
    assert second[-1].id == queued.id
    messages = agent.get_state(CFG).values["messages"]
    assert [m.text for m in messages][-2:] == [
        "only in metric units",
        "heard: only in metric units",
    ]
    assert len(agent.steering) == 0


async def test_a_steer_from_another_thread_reaches_an_async_run():
    started, go_on = threading.Event(), threading.Event()
    model = ScriptedChatModel([call_tool("slow_search"), answer_to_last])
    agent = ReactAgent("agent", model, tools=[waiting_tool(started, go_on)])
    run = asyncio.ensure_future(agent.ainvoke("find x", CFG))
    assert await asyncio.to_thread(started.wait, 10)

    def steer_then_go_on() -> None:
        agent.steer(CFG, "hurry up")
        go_on.set()

    await asyncio.to_thread(steer_then_go_on)
    state = await asyncio.wait_for(run, 10)
    assert state["messages"][-1].text == "heard: hurry up"
    assert model.requests[1].messages[-1].text == "hurry up"
    assert len(agent.steering) == 0


def test_a_steer_to_a_thread_with_no_run_is_delivered_at_its_next_run_after_the_input():
    model = ScriptedChatModel(["first", answer_to_last])
    agent = ReactAgent("agent", model)
    agent.call("hello", CFG)
    agent.steer(CFG, "answer in French from now on")
    agent.call("how are you?", CFG)
    sent = [m.text for m in model.requests[1].messages]
    assert sent[-2:] == ["how are you?", "answer in French from now on"]
    stored = [m.text for m in agent.get_state(CFG).values["messages"]]
    assert stored == [
        "hello",
        "first",
        "how are you?",
        "answer in French from now on",
        "heard: answer in French from now on",
    ]


def test_a_steered_message_is_delivered_once():
    model = ScriptedChatModel([answer_to_last, answer_to_last])
    agent = ReactAgent("agent", model)
    agent.steer(CFG, "note this")
    agent.call("one", CFG)
    agent.call("two", CFG)
    texts = [m.text for m in agent.get_state(CFG).values["messages"]]
    assert texts.count("note this") == 1
    assert model.requests[1].messages[-1].text == "two"


def test_a_model_call_that_fails_leaves_the_steered_message_queued():
    model = ScriptedChatModel([RuntimeError("server down"), answer_to_last])
    agent = ReactAgent("agent", model)
    agent.steer(CFG, "keep it short")
    with pytest.raises(NodeError):
        agent.call("hi", CFG)
    assert [m.text for m in agent.steering.pending("steered")] == ["keep it short"]
    assert agent.call("hi again", CFG).text == "heard: keep it short"
    assert len(agent.steering) == 0


def test_a_steer_reaches_only_its_own_thread():
    model = ScriptedChatModel([answer_to_last])
    agent = ReactAgent("agent", model)
    agent.steer(RunnableConfig(thread_id="other"), "not for you")
    assert agent.call("mine", CFG).text == "heard: mine"
    assert [m.text for m in agent.steering.pending("other")] == ["not for you"]


def test_stream_messages_yields_the_steered_message():
    model = ScriptedChatModel([answer_to_last])
    agent = ReactAgent("agent", model)
    agent.steer(CFG, UserMessage("be kind", id="steer-1"))
    streamed = [m.id for m in agent.stream_messages("hi", CFG)]
    assert "steer-1" in streamed


def test_the_queue_is_bounded_per_thread_and_in_threads():
    queue = SteeringQueue(max_per_thread=2, max_threads=2)
    queue.put("a", "1")
    queue.put("a", "2")
    with pytest.raises(SteeringQueueFullError, match=r"thread 'a'.*max_per_thread=2"):
        queue.put("a", "3")
    queue.put("b", "1")
    with pytest.raises(SteeringQueueFullError, match="max_threads=2"):
        queue.put("c", "1")
    queue.delivered("b", [m.id for m in queue.pending("b")])
    queue.put("c", "1")  # a thread whose messages were delivered frees its place
    assert len(queue) == 3


def test_steer_needs_a_thread_id_and_a_user_message():
    agent = ReactAgent("agent", ScriptedChatModel([]))
    with pytest.raises(SteeringInputError, match="thread_id"):
        agent.steer(RunnableConfig(), "hi")
    with pytest.raises(SteeringInputError, match="a string or a UserMessage"):
        agent.steer(CFG, AssistantMessage("not a user"))  # type: ignore[arg-type]


def test_a_steered_message_that_fails_every_call_can_be_cleared():
    model = ScriptedChatModel([RuntimeError("refused"), answer_to_last])
    agent = ReactAgent("agent", model)
    agent.steer(CFG, "a message the server refuses")
    with pytest.raises(NodeError):
        agent.call("hi", CFG)
    cleared = agent.steering.clear("steered")
    assert [m.text for m in cleared] == ["a message the server refuses"]
    assert agent.call("hi again", CFG).text == "heard: hi again"
    assert agent.steering.clear("steered") == ()
