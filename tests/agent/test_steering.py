"""Mid-run steering: ``agent.steer`` reaches the next model call of a running thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from graph_agent import Command, NodeError, NodeTimeoutError, RunnableConfig, interrupt, tool
from graph_agent.agent import AgentCommand, HumanInTheLoopHook, MessagesModelHook, ReactAgent
from graph_agent.agent.steering import (
    SteeringInputError,
    SteeringQueue,
    SteeringQueueFullError,
)
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.graph.saver import Checkpoint
from graph_agent.messages import AssistantMessage, BaseMessage, ToolCall, UserMessage
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
    assert agent.steering.pending("steered") == ()


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
    assert agent.steering.pending("steered") == ()


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
    assert agent.steering.pending("steered") == ()


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


class SaverFailingOnce(MemorySaver):
    """A MemorySaver whose ``fail_at``-th stored checkpoint fails, as a crash before it would."""

    def __init__(self, fail_at: int) -> None:
        super().__init__()
        self.puts = 0
        self.fail_at = fail_at

    def put(self, checkpoint: Checkpoint) -> None:
        self.puts += 1
        if self.puts == self.fail_at:
            raise OSError("disk full")
        super().put(checkpoint)


def count_in_requests(model: ScriptedChatModel, message_id: str) -> list[int]:
    """How many times each request to ``model`` carried the message ``message_id``."""
    return [sum(m.id == message_id for m in request.messages) for request in model.requests]


def test_a_steer_taken_by_a_model_call_that_timed_out_is_delivered_once_by_the_next_call():
    release, threads = threading.Event(), []

    def stuck(request: ModelRequest) -> str:
        threads.append(threading.current_thread())
        assert release.wait(10)
        return "too late"

    model = ScriptedChatModel([stuck, answer_to_last])
    agent = ReactAgent("agent", model, model_timeout=0.2)
    queued = agent.steer(CFG, "keep it short")
    with pytest.raises(NodeTimeoutError):
        agent.call("hi", CFG)
    release.set()
    threads[0].join(10)  # the abandoned call has returned: its answer was never stored
    assert [m.id for m in agent.steering.pending("steered")] == [queued.id]
    assert agent.call("hi again", CFG).text == "heard: keep it short"
    assert count_in_requests(model, queued.id) == [1, 1]
    stored = [m.id for m in agent.get_state(CFG).values["messages"]]
    assert stored.count(queued.id) == 1


def test_a_steer_whose_step_was_never_stored_is_delivered_by_the_next_run():
    # checkpoints: the input (1), then the model's step (2), which fails like a crash
    model = ScriptedChatModel(["lost answer", answer_to_last])
    agent = ReactAgent("agent", model, saver=SaverFailingOnce(fail_at=2))
    queued = agent.steer(CFG, "in French please")
    with pytest.raises(OSError, match="disk full"):
        agent.call("hi", CFG)
    assert [m.id for m in agent.steering.pending("steered")] == [queued.id]
    assert agent.call("hi again", CFG).text == "heard: in French please"
    stored = [m.id for m in agent.get_state(CFG).values["messages"]]
    assert stored.count(queued.id) == 1
    assert agent.steering.pending("steered") == ()


def test_a_steer_delivered_by_the_last_model_call_of_a_run_is_not_sent_again_next_run():
    model = ScriptedChatModel([answer_to_last, answer_to_last])
    agent = ReactAgent("agent", model)
    queued = agent.steer(CFG, "note this")
    agent.call("one", CFG)
    agent.call("two", CFG)
    assert count_in_requests(model, queued.id) == [1, 1]  # once in the history, never re-added
    assert model.requests[1].messages[-1].text == "two"
    assert agent.steering.pending("steered") == ()


@tool
def send_email(to: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def test_a_steer_delivered_before_an_approval_is_not_repeated_after_the_resume():
    asks = AssistantMessage(tool_calls=[ToolCall("c1", "send_email", {"to": "ada"})])
    model = ScriptedChatModel([asks, answer_to_last])
    hitl = HumanInTheLoopHook(approve={"send_email": "sends mail"})
    agent = ReactAgent("agent", model, tools=[send_email], hooks=[hitl])
    queued = agent.steer(CFG, "sign it Bob")
    paused = agent.invoke("mail ada", CFG)
    assert paused.interrupts
    agent.invoke(Command(resume={"c1": "approve"}), CFG)
    assert count_in_requests(model, queued.id) == [1, 1]
    stored = [m.id for m in agent.get_state(CFG).values["messages"]]
    assert stored.count(queued.id) == 1
    assert agent.steering.pending("steered") == ()


def test_a_steer_queued_while_a_run_waits_for_approval_reaches_the_model_after_the_resume():
    asks = AssistantMessage(tool_calls=[ToolCall("c1", "send_email", {"to": "ada"})])
    model = ScriptedChatModel([asks, answer_to_last])
    hitl = HumanInTheLoopHook(approve={"send_email": "sends mail"})
    agent = ReactAgent("agent", model, tools=[send_email], hooks=[hitl])
    agent.invoke("mail ada", CFG)
    agent.steer(CFG, "cc Carol too")
    state = agent.invoke(Command(resume={"c1": "approve"}), CFG)
    assert state["messages"][-1].text == "heard: cc Carol too"


def test_a_full_queue_makes_room_by_dropping_messages_their_threads_already_hold():
    model = ScriptedChatModel([answer_to_last])
    agent = ReactAgent("agent", model)
    agent.steering.max_threads = 1
    agent.steer(CFG, "delivered in this run's last model call")
    agent.call("hi", CFG)
    agent.steer(RunnableConfig(thread_id="other"), "a new thread finds room")
    assert [m.text for m in agent.steering.pending("other")] == ["a new thread finds room"]
    assert agent.steering.pending("steered") == ()


def test_a_full_queue_keeps_messages_no_thread_holds_yet():
    agent = ReactAgent("agent", ScriptedChatModel([]))
    agent.steering.max_threads = 1
    agent.steer(CFG, "not delivered yet")
    with pytest.raises(SteeringQueueFullError, match="max_threads=1"):
        agent.steer(RunnableConfig(thread_id="other"), "no room")
    assert [m.text for m in agent.steering.pending("steered")] == ["not delivered yet"]


def test_take_drops_the_messages_the_thread_holds_and_keeps_the_rest_queued():
    queue = SteeringQueue()
    held, new = queue.put("t", "held"), queue.put("t", "new")
    assert queue.take("t", {held.id}) == (new,)
    assert queue.pending("t") == (new,)  # queued until the thread is seen to hold it
    assert queue.take("t", {held.id, new.id}) == ()
    assert len(queue) == 0


class SeenByHook(MessagesModelHook):
    """Records the texts each before_model call sees."""

    name = "seen"

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def before_model(self, messages: list[BaseMessage], config: RunnableConfig) -> None:
        self.seen.append([m.text for m in messages])


def test_before_model_hooks_see_a_steered_message_before_the_model_does():
    started, go_on = threading.Event(), threading.Event()
    model = ScriptedChatModel([call_tool("slow_search"), answer_to_last])
    hook = SeenByHook()
    agent = ReactAgent("agent", model, tools=[waiting_tool(started, go_on)], hooks=[hook])
    runner = threading.Thread(target=lambda: agent.invoke("find x", CFG))
    runner.start()
    assert started.wait(10)
    queued = agent.steer(CFG, "only in metric units")
    go_on.set()
    runner.join(10)
    assert hook.seen[1][-1] == "only in metric units"
    assert count_in_requests(model, queued.id) == [0, 1]
    stored = [m.id for m in agent.get_state(CFG).values["messages"]]
    assert stored.count(queued.id) == 1


class Shout(MessagesModelHook):
    """Rewrites every user message in upper case (a stand-in for any rewriting hook)."""

    name = "shout"

    def before_model(self, messages: list[BaseMessage], config: RunnableConfig) -> AgentCommand:
        return AgentCommand(
            [
                m.model_copy(update={"content": m.text.upper()})
                if isinstance(m, UserMessage)
                else m
                for m in messages
            ],
            policy="replace",
        )


def test_a_hook_that_rewrites_the_history_rewrites_a_steered_message_too():
    model = ScriptedChatModel([answer_to_last, answer_to_last])
    agent = ReactAgent("agent", model, hooks=[Shout()])
    queued = agent.steer(CFG, "be brief")
    assert agent.call("hi", CFG).text == "heard: BE BRIEF"
    stored = {m.id: m.text for m in agent.get_state(CFG).values["messages"]}
    assert stored[queued.id] == "BE BRIEF"
    agent.call("next", CFG)
    assert count_in_requests(model, queued.id) == [1, 1]


class DropSteered(MessagesModelHook):
    """Removes every message whose text starts with "aside:" (as a trimming hook might)."""

    name = "drop"

    def before_model(self, messages: list[BaseMessage], config: RunnableConfig) -> AgentCommand:
        return AgentCommand([m for m in messages if not m.text.startswith("aside:")], "replace")


def test_a_steer_a_hook_removed_is_not_delivered_again():
    model = ScriptedChatModel([answer_to_last, answer_to_last])
    agent = ReactAgent("agent", model, hooks=[DropSteered()])
    queued = agent.steer(CFG, "aside: ignore me")
    agent.call("one", CFG)
    agent.call("two", CFG)
    assert count_in_requests(model, queued.id) == [0, 0]
    assert agent.steering.pending("steered") == ()


async def test_an_async_run_delivers_a_steer_through_the_hooks_once():
    model = ScriptedChatModel([answer_to_last, answer_to_last])
    hook = SeenByHook()
    agent = ReactAgent("agent", model, hooks=[hook])
    queued = agent.steer(CFG, "shorter please")
    assert (await agent.acall("one", CFG)).text == "heard: shorter please"
    await agent.acall("two", CFG)
    assert hook.seen[0][-1] == "shorter please"
    assert count_in_requests(model, queued.id) == [1, 1]
    assert agent.steering.pending("steered") == ()


class AskFirst(MessagesModelHook):
    """Pauses for a human's go-ahead before each model call, having seen the messages."""

    name = "ask"

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def before_model(self, messages: list[BaseMessage], config: RunnableConfig) -> None:
        self.seen.append([m.text for m in messages])
        interrupt("go on?")


def test_a_steer_seen_by_a_hook_that_paused_is_delivered_once_after_the_resume():
    model = ScriptedChatModel([answer_to_last])
    hook = AskFirst()
    agent = ReactAgent("agent", model, hooks=[hook])
    queued = agent.steer(CFG, "be brief")
    assert agent.invoke("hi", CFG).interrupts  # the hook's step, steer included, is not kept
    assert [m.id for m in agent.steering.pending("steered")] == [queued.id]
    assert agent.invoke(Command(resume="yes"), CFG)["messages"][-1].text == "heard: be brief"
    assert [seen[-1] for seen in hook.seen] == ["be brief", "be brief"]
    assert count_in_requests(model, queued.id) == [1]
    stored = [m.id for m in agent.get_state(CFG).values["messages"]]
    assert stored.count(queued.id) == 1


def test_a_full_queue_drops_a_steer_a_hook_removed_after_its_delivery():
    model = ScriptedChatModel([answer_to_last])
    agent = ReactAgent("agent", model, hooks=[DropSteered()])
    agent.steering.max_threads = 1
    agent.steer(CFG, "aside: delivered, then removed by the hook")
    agent.call("one", CFG)
    assert "_agent_steered" not in agent.get_state(CFG).values  # private: only the saver has it
    agent.steer(RunnableConfig(thread_id="other"), "a new thread finds room")
    assert agent.steering.queued("steered") == ()


def cannot_read(thread_id: str) -> set[str]:
    raise RuntimeError(f"the saver is down for {thread_id}")


def test_a_full_queue_whose_held_fails_counts_as_full(caplog):
    queue = SteeringQueue(max_threads=1, held=cannot_read)
    queue.put("t1", "first")
    queue.take("t1", held=())
    with (
        caplog.at_level("DEBUG", logger="graph_agent.agent.steering"),
        pytest.raises(SteeringQueueFullError, match="max_threads=1"),
    ):
        queue.put("t2", "no room")
    assert "cannot read what thread 't1' holds" in caplog.text
    assert [m.text for m in queue.queued("t1")] == ["first"]


def test_the_length_of_the_queue_reads_no_thread_state():
    queue = SteeringQueue(held=cannot_read)
    queue.put("t1", "first")
    queue.take("t1", held=())
    assert len(queue) == 1
