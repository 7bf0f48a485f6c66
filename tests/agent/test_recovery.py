"""Pending tool recovery (DESIGN §5): a thread whose last assistant message has unanswered
tool calls is continued with ``None`` (the calls run), with the caller's results for exactly
those calls, or with new input (the calls are answered "interrupted" first)."""

from __future__ import annotations

import pytest

from graph_agent import Command, InvalidResumeError, MemorySaver, RunnableConfig, tool
from graph_agent.agent import HumanInTheLoopHook, JumpTo, ModelHook, ReactAgent, ToolInterceptor
from graph_agent.messages import (
    AssistantMessage,
    BaseMessage,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from graph_agent.models import ScriptedChatModel

INTERRUPTED = "interrupted"


def calls(*items: tuple[str, str, dict]) -> AssistantMessage:
    """An assistant message asking for tools: calls(("c1", "add", {...}), ...)."""
    return AssistantMessage(tool_calls=[ToolCall(i, n, a) for i, n, a in items])


def result(call_id: str, content: str, name: str = "add") -> ToolResponseMessage:
    return ToolResponseMessage(tool_call_id=call_id, name=name, content=content)


def assert_valid_history(messages: list[BaseMessage]) -> None:
    """Every tool call is followed by exactly one result, before the next non-tool message."""
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            answers = []
            for later in messages[index + 1 :]:
                if not isinstance(later, ToolResponseMessage):
                    break
                answers.append(later.tool_call_id)
            assert sorted(answers) == sorted(c.id for c in message.tool_calls), messages
        if isinstance(message, ToolResponseMessage):
            assert index > 0 and isinstance(
                messages[index - 1], AssistantMessage | ToolResponseMessage
            )


class Ledger:
    """Tools that write down every call they run."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict]] = []

        @tool
        def add(a: int, b: int) -> int:
            """Add two integers."""
            self.ran.append(("add", {"a": a, "b": b}))
            return a + b

        @tool
        def send_email(to: str) -> str:
            """Send an email."""
            self.ran.append(("send_email", {"to": to}))
            return f"sent to {to}"

        self.tools = [add, send_email]


def thread_with_unanswered_calls(agent: ReactAgent, config: RunnableConfig, *calls_: ToolCall):
    """A finished run, then an assistant message with ``calls_`` appended by update_state."""
    agent.invoke("hello", config)
    agent.update_state(config, {"messages": [AssistantMessage(tool_calls=list(calls_))]})


def test_none_runs_the_unanswered_calls_of_a_finished_thread_and_the_model_continues():
    ledger = Ledger()
    model = ScriptedChatModel(["hi", "1 + 2 = 3"])
    agent = ReactAgent("a", model, tools=ledger.tools)
    config = RunnableConfig(thread_id="t")
    thread_with_unanswered_calls(agent, config, ToolCall("c1", "add", {"a": 1, "b": 2}))

    state = agent.invoke(None, config)

    assert ledger.ran == [("add", {"a": 1, "b": 2})]
    assert state["messages"][-1].text == "1 + 2 = 3"
    assert model.requests[-1].messages[-1] == state["messages"][-2]
    assert state["messages"][-2].content == "3"
    assert_valid_history(list(state["messages"]))


def test_none_on_a_finished_thread_with_nothing_pending_raises_invalid_resume():
    agent = ReactAgent("a", ScriptedChatModel(["hi"]), tools=Ledger().tools)
    config = RunnableConfig(thread_id="t")
    agent.invoke("hello", config)
    with pytest.raises(InvalidResumeError, match="finished"):
        agent.invoke(None, config)


class StopAfterModel(ModelHook):
    """Ends the run right after the model when the run's context says so."""

    can_jump_to = (JumpTo.END,)

    def after_model(self, state, config):
        return {"jump_to": JumpTo.END} if config.context.get("stop") else None


def test_calls_left_by_a_hook_that_ended_the_run_are_run_by_the_next_none_call():
    ledger = Ledger()
    model = ScriptedChatModel([calls(("c1", "add", {"a": 2, "b": 2})), "it is 4"])
    agent = ReactAgent("a", model, tools=ledger.tools, hooks=[StopAfterModel()])
    stopped = agent.invoke("2 + 2?", RunnableConfig(thread_id="t", context={"stop": True}))
    assert ledger.ran == []
    assert stopped["messages"][-1].tool_calls

    state = agent.invoke(None, RunnableConfig(thread_id="t"))

    assert ledger.ran == [("add", {"a": 2, "b": 2})]
    assert state["messages"][-1].text == "it is 4"
    assert_valid_history(list(state["messages"]))


class Crash(BaseException):
    """Stands in for a process dying: no ``except Exception`` catches it."""


class CrashOn(ToolInterceptor):
    def __init__(self, call_id: str) -> None:
        self.call_id = call_id
        self.armed = True

    def intercept(self, request, call_next):
        if self.armed and request.call.id == self.call_id:
            raise Crash
        return call_next(request)


def crashed_in_the_tool_node(ledger: Ledger, *script) -> tuple[ReactAgent, RunnableConfig]:
    """A thread whose run died inside the tool node after c1 finished (and was recorded)."""
    crash = CrashOn("c2")
    batch = calls(("c1", "add", {"a": 1, "b": 1}), ("c2", "add", {"a": 2, "b": 2}))
    # one call at a time, so c1 has finished (and is recorded) when c2 crashes the node
    agent = ReactAgent(
        "a",
        ScriptedChatModel([batch, *script]),
        tools=ledger.tools,
        tool_interceptors=[crash],
        max_parallel_tools=1,
    )
    config = RunnableConfig(thread_id="t")
    with pytest.raises(Crash):
        agent.invoke("add them", config)
    assert agent.get_state(config).next == ("__tool__",)
    assert ledger.ran == [("add", {"a": 1, "b": 1})]
    crash.armed = False
    return agent, config


def test_none_after_a_crash_in_the_tool_node_runs_only_the_calls_without_a_recorded_result():
    ledger = Ledger()
    agent, config = crashed_in_the_tool_node(ledger, "done")

    state = agent.invoke(None, config)

    assert ledger.ran == [("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2})]
    answers = [m.content for m in state["messages"] if isinstance(m, ToolResponseMessage)]
    assert answers == ["2", "4"]
    assert state["messages"][-1].text == "done"
    assert_valid_history(list(state["messages"]))


def test_results_supplied_after_a_crash_in_the_tool_node_keep_the_recorded_results():
    ledger = Ledger()
    agent, config = crashed_in_the_tool_node(ledger, "done")

    state = agent.invoke(result("c2", "four"), config)

    assert ledger.ran == [("add", {"a": 1, "b": 1})]  # c1 was recorded: it does not run again
    answers = {
        m.tool_call_id: m.content for m in state["messages"] if isinstance(m, ToolResponseMessage)
    }
    assert answers == {"c1": "2", "c2": "four"}
    assert_valid_history(list(state["messages"]))


def test_new_input_after_a_crash_in_the_tool_node_keeps_the_recorded_results():
    ledger = Ledger()
    agent, config = crashed_in_the_tool_node(ledger, "ok")

    state = agent.invoke("something else", config)

    assert ledger.ran == [("add", {"a": 1, "b": 1})]
    answers = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolResponseMessage)}
    assert answers["c1"].content == "2" and not answers["c1"].is_error
    assert answers["c2"].is_error and INTERRUPTED in answers["c2"].content
    assert_valid_history(list(state["messages"]))


def test_none_from_an_older_checkpoint_runs_the_calls_left_unanswered_there():
    ledger = Ledger()
    agent = ReactAgent("a", ScriptedChatModel(["hi", "later", "1 + 1 = 2"]), tools=ledger.tools)
    config = RunnableConfig(thread_id="t")
    agent.invoke("hello", config)
    older = agent.update_state(config, {"messages": [calls(("c1", "add", {"a": 1, "b": 1}))]})
    agent.invoke("something later", config)  # answers c1 as interrupted on the newest branch

    state = agent.invoke(None, older)

    assert ledger.ran == [("add", {"a": 1, "b": 1})]
    assert [m.text for m in state["messages"][-2:]] == ["2", "1 + 1 = 2"]
    assert_valid_history(list(state["messages"]))


def test_caller_supplied_results_for_the_pending_calls_are_used_and_the_model_continues():
    ledger = Ledger()
    model = ScriptedChatModel(["hi", "thanks"])
    agent = ReactAgent("a", model, tools=ledger.tools)
    config = RunnableConfig(thread_id="t")
    thread_with_unanswered_calls(
        agent, config, ToolCall("c1", "add", {"a": 1, "b": 2}), ToolCall("c2", "add", {})
    )

    state = agent.invoke([result("c1", "three"), result("c2", "zero")], config)

    assert ledger.ran == []
    assert [m.content for m in model.requests[-1].messages[-2:]] == ["three", "zero"]
    assert state["messages"][-1].text == "thanks"
    assert_valid_history(list(state["messages"]))


def test_results_supplied_for_some_pending_calls_are_used_and_the_others_run():
    ledger = Ledger()
    model = ScriptedChatModel(["hi", "done"])
    agent = ReactAgent("a", model, tools=ledger.tools)
    config = RunnableConfig(thread_id="t")
    thread_with_unanswered_calls(
        agent,
        config,
        ToolCall("c1", "add", {"a": 1, "b": 2}),
        ToolCall("c2", "add", {"a": 5, "b": 5}),
    )

    state = agent.invoke(result("c1", "three"), config)

    assert ledger.ran == [("add", {"a": 5, "b": 5})]
    answers = {
        m.tool_call_id: m.content for m in state["messages"] if isinstance(m, ToolResponseMessage)
    }
    assert answers == {"c1": "three", "c2": "10"}
    assert_valid_history(list(state["messages"]))


def test_a_result_for_an_unknown_call_id_raises_invalid_resume_and_changes_nothing():
    agent = ReactAgent("a", ScriptedChatModel(["hi"]), tools=Ledger().tools)
    config = RunnableConfig(thread_id="t")
    thread_with_unanswered_calls(agent, config, ToolCall("c1", "add", {"a": 1, "b": 2}))
    before = agent.get_state(config).values["messages"]

    with pytest.raises(InvalidResumeError, match=r"unknown tool call ids.*c9"):
        agent.invoke([result("c1", "3"), result("c9", "?")], config)

    assert agent.get_state(config).values["messages"] == before


def test_two_results_for_one_call_id_raise_invalid_resume():
    agent = ReactAgent("a", ScriptedChatModel(["hi"]), tools=Ledger().tools)
    config = RunnableConfig(thread_id="t")
    thread_with_unanswered_calls(agent, config, ToolCall("c1", "add", {"a": 1, "b": 2}))
    with pytest.raises(InvalidResumeError, match=r"duplicated ids.*c1"):
        agent.invoke([result("c1", "3"), result("c1", "4")], config)


def test_a_result_for_a_call_that_was_already_answered_raises_invalid_resume():
    model = ScriptedChatModel([calls(("c1", "add", {"a": 1, "b": 2})), "3"])
    agent = ReactAgent("a", model, tools=Ledger().tools)
    config = RunnableConfig(thread_id="t")
    agent.invoke("1 + 2?", config)
    with pytest.raises(InvalidResumeError, match="unknown tool call ids"):
        agent.invoke(result("c1", "3"), config)


def test_new_input_answers_the_pending_calls_as_interrupted_before_the_new_message():
    ledger = Ledger()
    model = ScriptedChatModel(["hi", "ok, forget it"])
    agent = ReactAgent("a", model, tools=ledger.tools)
    config = RunnableConfig(thread_id="t")
    thread_with_unanswered_calls(
        agent, config, ToolCall("c1", "add", {"a": 1, "b": 2}), ToolCall("c2", "add", {})
    )

    state = agent.invoke("never mind", config)

    assert ledger.ran == []
    messages = list(state["messages"])
    tail = messages[-4:]
    assert [type(m).__name__ for m in tail] == [
        "ToolResponseMessage",
        "ToolResponseMessage",
        "UserMessage",
        "AssistantMessage",
    ]
    assert [m.tool_call_id for m in tail[:2]] == ["c1", "c2"]
    assert all(m.is_error and INTERRUPTED in m.content for m in tail[:2])
    assert tail[2].text == "never mind"
    assert model.requests[-1].messages == messages[:-1]
    assert_valid_history(messages)


def test_new_input_that_carries_results_uses_them_and_fills_only_the_other_calls():
    ledger = Ledger()
    agent = ReactAgent("a", ScriptedChatModel(["hi", "ok"]), tools=ledger.tools)
    config = RunnableConfig(thread_id="t")
    thread_with_unanswered_calls(
        agent, config, ToolCall("c1", "add", {"a": 1, "b": 2}), ToolCall("c2", "add", {})
    )

    state = agent.invoke([result("c1", "3"), UserMessage("and now?")], config)

    assert ledger.ran == []
    answers = [
        (m.tool_call_id, m.is_error)
        for m in state["messages"]
        if isinstance(m, ToolResponseMessage)
    ]
    assert sorted(answers) == [("c1", False), ("c2", True)]
    assert_valid_history(list(state["messages"]))


def test_new_input_that_carries_a_result_for_an_unknown_call_raises_invalid_resume():
    agent = ReactAgent("a", ScriptedChatModel(["hi"]), tools=Ledger().tools)
    config = RunnableConfig(thread_id="t")
    thread_with_unanswered_calls(agent, config, ToolCall("c1", "add", {"a": 1, "b": 2}))
    with pytest.raises(InvalidResumeError, match="c7"):
        agent.invoke([result("c7", "3"), UserMessage("and now?")], config)


def gated_agent(ledger: Ledger, *script) -> ReactAgent:
    return ReactAgent(
        "a",
        ScriptedChatModel(list(script)),
        tools=ledger.tools,
        hooks=[HumanInTheLoopHook(approve={"send_email": "sends mail as you"})],
    )


def test_recovering_a_gated_call_asks_for_approval_instead_of_running_it():
    ledger = Ledger()
    agent = gated_agent(ledger, "hi", "sent")
    config = RunnableConfig(thread_id="t")
    thread_with_unanswered_calls(
        agent,
        config,
        ToolCall("g1", "send_email", {"to": "bob"}),
        ToolCall("c1", "add", {"a": 1, "b": 1}),
    )

    paused = agent.invoke(None, config)

    assert ledger.ran == []
    assert [c["id"] for c in paused.interrupts[0].value["tool_calls"]] == ["g1"]
    state = agent.invoke(Command(resume={"g1": {"decision": "approve"}}), config)
    assert sorted(name for name, _ in ledger.ran) == ["add", "send_email"]
    assert state["messages"][-1].text == "sent"
    assert_valid_history(list(state["messages"]))


def test_none_on_a_thread_waiting_for_approval_asks_again_and_runs_nothing():
    ledger = Ledger()
    agent = gated_agent(ledger, calls(("g1", "send_email", {"to": "bob"})))
    config = RunnableConfig(thread_id="t")
    first = agent.invoke("mail bob", config)

    again = agent.invoke(None, config)

    assert ledger.ran == []
    assert [i.id for i in again.interrupts] == [i.id for i in first.interrupts]


def test_results_sent_to_a_thread_waiting_for_approval_raise_invalid_resume():
    ledger = Ledger()
    agent = gated_agent(ledger, calls(("g1", "send_email", {"to": "bob"})))
    config = RunnableConfig(thread_id="t")
    agent.invoke("mail bob", config)
    with pytest.raises(InvalidResumeError, match="interrupt"):
        agent.invoke(result("g1", "sent anyway", name="send_email"), config)
    assert ledger.ran == []


def test_new_input_on_a_thread_waiting_for_approval_answers_the_gated_calls_as_interrupted():
    ledger = Ledger()
    agent = gated_agent(
        ledger,
        calls(("g1", "send_email", {"to": "bob"}), ("c1", "add", {"a": 1, "b": 1})),
        "fine",
    )
    config = RunnableConfig(thread_id="t")
    assert agent.invoke("mail bob", config).interrupts

    state = agent.invoke("never mind", config)

    assert ledger.ran == []
    assert not state.interrupts
    answered = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolResponseMessage)}
    assert set(answered) == {"g1", "c1"}
    assert all(m.is_error and INTERRUPTED in m.content for m in answered.values())
    assert state["messages"][-1].text == "fine"
    assert_valid_history(list(state["messages"]))


class CountingSaver(MemorySaver):
    """Counts the checkpoint reads of a thread and whether its lease was held at each."""

    def __init__(self) -> None:
        super().__init__()
        self.held = 0
        self.reads: list[bool] = []

    def acquire(self, thread_id, checkpoint_ns=""):
        lease = super().acquire(thread_id, checkpoint_ns)
        self.held += 1
        return lease

    def release(self, lease):
        self.held -= 1
        super().release(lease)

    def get(self, thread_id, checkpoint_id=None, checkpoint_ns=""):
        self.reads.append(self.held > 0)
        return super().get(thread_id, checkpoint_id, checkpoint_ns)


@pytest.mark.parametrize(
    "given",
    [None, [result("c1", "3")], "something else"],
    ids=["none", "tool results", "new input"],
)
def test_a_call_that_recovers_pending_calls_reads_its_thread_once_under_its_lease(given):
    saver = CountingSaver()
    agent = ReactAgent("a", ScriptedChatModel(["hi", "ok"]), tools=Ledger().tools, saver=saver)
    config = RunnableConfig(thread_id="t")
    thread_with_unanswered_calls(agent, config, ToolCall("c1", "add", {"a": 1, "b": 2}))
    saver.reads.clear()

    state = agent.invoke(given, config)

    assert saver.reads == [True]
    assert state["messages"][-1].text == "ok"
    assert_valid_history(list(state["messages"]))


def test_results_refused_on_an_older_checkpoint_write_nothing_to_the_thread():
    agent = ReactAgent("a", ScriptedChatModel(["hi", "later"]), tools=Ledger().tools)
    config = RunnableConfig(thread_id="t")
    agent.invoke("hello", config)
    older = agent.update_state(config, {"messages": [calls(("c1", "add", {"a": 1, "b": 1}))]})
    agent.invoke("something later", config)
    history = [s.config.checkpoint_id for s in agent.get_state_history(config)]

    with pytest.raises(InvalidResumeError, match=r"unknown tool call ids.*c9"):
        agent.invoke(result("c9", "?"), older)

    assert [s.config.checkpoint_id for s in agent.get_state_history(config)] == history


def test_results_sent_to_an_older_checkpoint_continue_a_fork_of_it():
    ledger = Ledger()
    agent = ReactAgent("a", ScriptedChatModel(["hi", "later", "1 + 1 = 2"]), tools=ledger.tools)
    config = RunnableConfig(thread_id="t")
    agent.invoke("hello", config)
    older = agent.update_state(config, {"messages": [calls(("c1", "add", {"a": 1, "b": 1}))]})
    agent.invoke("something later", config)

    state = agent.invoke(result("c1", "two"), older)

    assert ledger.ran == []
    assert [m.text for m in state["messages"][-2:]] == ["two", "1 + 1 = 2"]
    sources = [s.metadata["source"] for s in agent.get_state_history(config, limit=4)]
    assert sources[2:] == ["update", "fork"]  # the fork, the results as the model's, then on
    assert_valid_history(list(state["messages"]))
