"""Human in the loop: approve, edit, reject tool calls by id; the run pauses once per answer."""

from __future__ import annotations

import pytest

from graph_agent import (
    Command,
    GraphInterrupted,
    GraphSetupError,
    InvalidResumeError,
    RunnableConfig,
    tool,
)
from graph_agent.agent import (
    AgentCommand,
    HumanInTheLoopHook,
    JumpTo,
    MessagesModelHook,
    ModelHook,
    ReactAgent,
)
from graph_agent.messages import AssistantMessage, ToolCall, ToolResponseMessage, UserMessage
from graph_agent.models import ScriptedChatModel

CFG = RunnableConfig(thread_id="t1")
sent: list[dict] = []


@tool
def send_email(to: str, body: str) -> str:
    """Send an email."""
    sent.append({"to": to, "body": body})
    return f"sent to {to}"


@tool
def lookup(name: str) -> str:
    """Look up an address."""
    return f"{name}@example.com"


@pytest.fixture(autouse=True)
def clear_outbox():
    sent.clear()


def mail_agent(*replies, hooks=()):
    batch = AssistantMessage(
        tool_calls=[
            ToolCall("m1", "send_email", {"to": "bob", "body": "hi"}),
            ToolCall("l1", "lookup", {"name": "bob"}),
        ]
    )
    model = ScriptedChatModel([batch, *replies])
    gate = HumanInTheLoopHook(approve={"send_email": "sends mail on your behalf"})
    return ReactAgent("mail", model, tools=[send_email, lookup], hooks=[gate, *hooks]), model


def test_a_listed_tool_pauses_the_run_before_anything_runs():
    agent, _ = mail_agent("done")
    paused = agent.invoke("mail bob", CFG)
    (pending,) = paused.interrupts
    assert pending.value == {
        "tool_calls": [
            {
                "id": "m1",
                "name": "send_email",
                "arguments": {"to": "bob", "body": "hi"},
                "description": "sends mail on your behalf",
            }
        ]
    }
    assert sent == []
    assert agent.get_state(CFG).interrupts == (pending,)


def test_a_call_whose_arguments_were_not_valid_json_shows_the_human_what_the_model_sent():
    bad = ToolCall("m1", "send_email", {}, raw_arguments='{"to": "bob", "body": "hi"')
    gate = HumanInTheLoopHook(approve={"send_email": "sends mail"})
    model = ScriptedChatModel([AssistantMessage(tool_calls=[bad]), "done"])
    agent = ReactAgent("mail", model, tools=[send_email], hooks=[gate])

    (pending,) = agent.invoke("mail bob", CFG).interrupts

    (shown,) = pending.value["tool_calls"]
    assert shown["arguments"] == {}
    assert shown["raw_arguments"] == '{"to": "bob", "body": "hi"'


def test_call_raises_graph_interrupted_when_approval_is_needed():
    agent, _ = mail_agent("done")
    with pytest.raises(GraphInterrupted) as info:
        agent.call("mail bob", CFG)
    assert info.value.interrupts[0].value["tool_calls"][0]["id"] == "m1"


def test_approve_runs_the_call_and_the_ungated_ones():
    agent, model = mail_agent("done")
    agent.invoke("mail bob", CFG)
    final = agent.invoke(Command(resume={"m1": {"decision": "approve"}}), CFG)
    assert final["messages"][-1].text == "done" and final.interrupts == ()
    assert sent == [{"to": "bob", "body": "hi"}]
    results = {
        m.tool_call_id: m.content
        for m in model.requests[1].messages
        if isinstance(m, ToolResponseMessage)
    }
    assert results == {"m1": "sent to bob", "l1": "bob@example.com"}


def test_edit_replaces_the_arguments_and_history_holds_one_edited_call():
    agent, _ = mail_agent("done")
    agent.invoke("mail bob", CFG)
    edit = {"decision": "edit", "arguments": {"to": "bob", "body": "hello, kindly"}}
    agent.invoke(Command(resume={"m1": edit}), CFG)
    assert sent == [{"to": "bob", "body": "hello, kindly"}]
    messages = agent.get_state(CFG).values["messages"]
    calls = [c for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert [(c.id, c.arguments.get("body")) for c in calls] == [
        ("m1", "hello, kindly"),
        ("l1", None),
    ]


def test_reject_makes_the_reason_the_result_and_the_call_never_runs():
    agent, model = mail_agent("ok, not sending")
    agent.invoke("mail bob", CFG)
    agent.invoke(Command(resume={"m1": {"decision": "reject", "reason": "too early"}}), CFG)
    assert sent == []
    result = next(
        m
        for m in model.requests[1].messages
        if isinstance(m, ToolResponseMessage) and m.tool_call_id == "m1"
    )
    assert result.is_error and "too early" in result.content


def test_a_rejected_call_never_runs_even_when_a_hook_jumps_to_tool():
    class PushToTools(ModelHook):
        can_jump_to = (JumpTo.TOOL,)
        pushes = 0

        def before_model(self, state, config):
            if isinstance(state["messages"][-1], ToolResponseMessage) and self.pushes < 2:
                self.pushes += 1
                return {"jump_to": JumpTo.TOOL}
            return None

    hook = PushToTools()
    agent, _ = mail_agent("final", hooks=[hook])
    agent.invoke("mail bob", CFG)
    agent.invoke(Command(resume={"m1": {"decision": "reject", "reason": "no"}}), CFG)
    assert hook.pushes == 2 and sent == []


def test_a_hook_that_could_jump_past_the_approval_to_the_tools_is_refused_at_build():
    class FastPath(ModelHook):  # registered after the gate, so it runs before it
        can_jump_to = (JumpTo.TOOL,)

        def after_model(self, state, config):
            return {"jump_to": JumpTo.TOOL} if state["messages"][-1].tool_calls else None

    agent, _ = mail_agent("final", hooks=[FastPath()])

    with pytest.raises(
        GraphSetupError,
        match=r"'FastPath.fast_path' may jump to TOOL.*"
        r"register 'FastPath.fast_path' before 'HumanInTheLoopHook",
    ):
        agent.invoke("mail bob", CFG)
    assert sent == []


def test_a_hook_registered_before_the_approval_may_jump_to_the_tools_after_it():
    class FastPath(ModelHook):  # runs after the gate: it sees the human's decisions
        can_jump_to = (JumpTo.TOOL,)

        def after_model(self, state, config):
            return {"jump_to": JumpTo.TOOL} if state["messages"][-1].tool_calls else None

    call = ToolCall("m1", "send_email", {"to": "bob", "body": "hi"})
    model = ScriptedChatModel([AssistantMessage(tool_calls=[call]), "final"])
    gate = HumanInTheLoopHook(approve={"send_email": "sends mail"})
    agent = ReactAgent("mail", model, tools=[send_email], hooks=[FastPath(), gate])

    paused = agent.invoke("mail bob", CFG)
    assert paused.interrupts and sent == []
    agent.invoke(Command(resume={"m1": "approve"}), CFG)
    assert sent == [{"to": "bob", "body": "hi"}]


def test_an_approval_policy_naming_none_of_the_agents_tools_is_refused_when_built():
    gate = HumanInTheLoopHook(approve={"sned_email": "typo"})
    agent = ReactAgent("mail", ScriptedChatModel(["hi"]), tools=[send_email], hooks=[gate])

    with pytest.raises(GraphSetupError, match=r"approval for 'sned_email'.*'send_email'"):
        agent.invoke("mail bob", CFG)


def test_one_approval_policy_may_serve_agents_with_different_tools():
    policy = {"send_email": "sends mail", "delete_file": "deletes files"}
    agent = ReactAgent(
        "mail",
        ScriptedChatModel(
            [AssistantMessage(tool_calls=[ToolCall("m1", "send_email", {"to": "b", "body": "x"})])]
        ),
        tools=[send_email, lookup],
        hooks=[HumanInTheLoopHook(approve=policy)],
    )
    assert agent.invoke("mail bob", CFG).interrupts  # gated by the shared policy
    assert sent == []


def test_a_gated_call_without_a_decision_is_refused_and_stays_pending():
    agent, _ = mail_agent("done")
    pending = agent.invoke("mail bob", CFG).interrupts
    with pytest.raises(
        InvalidResumeError, match=r"no decision for the tool call\(s\) m1 \(send_email\)"
    ):
        agent.invoke(Command(resume={"l1": {"decision": "approve"}}), CFG)
    assert agent.get_state(CFG).interrupts == pending
    assert sent == []
    agent.invoke(Command(resume={"m1": {"decision": "approve"}}), CFG)
    assert len(sent) == 1


def test_an_unknown_decision_is_refused():
    agent, _ = mail_agent("done")
    agent.invoke("mail bob", CFG)
    with pytest.raises(InvalidResumeError, match="unknown decision 'maybe'"):
        agent.invoke(Command(resume={"m1": {"decision": "maybe"}}), CFG)


def test_a_bare_approve_string_approves():
    agent, _ = mail_agent("done")
    agent.invoke("mail bob", CFG)
    final = agent.invoke(Command(resume={"m1": "approve"}), CFG)
    assert final["messages"][-1].text == "done" and sent == [{"to": "bob", "body": "hi"}]


def test_a_bare_reject_string_rejects_without_a_reason():
    agent, model = mail_agent("not sent")
    agent.invoke("mail bob", CFG)
    agent.invoke(Command(resume={"m1": "reject"}), CFG)
    assert sent == []
    result = next(
        m
        for m in model.requests[1].messages
        if isinstance(m, ToolResponseMessage) and m.tool_call_id == "m1"
    )
    assert result.is_error and "no reason given" in result.content


@pytest.mark.parametrize(
    "decision",
    [
        "edit",
        3,
        None,
        ["approve"],
        {"decision": "edit"},
        {"decision": "edit", "arguments": "body=hello"},
    ],
    ids=["bare-edit", "int", "none", "list", "edit-without-arguments", "edit-with-text"],
)
def test_a_malformed_decision_is_refused_naming_the_call_and_the_shapes_and_stays_pending(decision):
    agent, _ = mail_agent("done")
    pending = agent.invoke("mail bob", CFG).interrupts
    with pytest.raises(InvalidResumeError, match=r"tool call m1 \(send_email\)") as raised:
        agent.invoke(Command(resume={"m1": decision}), CFG)
    assert "{'decision': 'edit', 'arguments': {...}}" in str(raised.value)
    assert agent.get_state(CFG).interrupts == pending and sent == []
    agent.invoke(Command(resume={"m1": "approve"}), CFG)
    assert len(sent) == 1


def test_continuing_with_none_asks_again_with_the_same_interrupt():
    agent, _ = mail_agent("done")
    first = agent.invoke("mail bob", CFG).interrupts
    assert agent.invoke(None, CFG).interrupts == first
    assert sent == []


def test_each_model_answer_with_gated_calls_pauses_once():
    second_batch = AssistantMessage(
        tool_calls=[ToolCall("m2", "send_email", {"to": "eve", "body": "yo"})]
    )
    agent, _ = mail_agent(second_batch, "all sent")
    agent.invoke("mail bob and eve", CFG)
    paused = agent.invoke(Command(resume={"m1": {"decision": "approve"}}), CFG)
    assert [c["id"] for c in paused.interrupts[0].value["tool_calls"]] == ["m2"]
    done = agent.invoke(Command(resume={"m2": {"decision": "approve"}}), CFG)
    assert done["messages"][-1].text == "all sent" and len(sent) == 2


def test_a_streamed_resume_ends_with_the_answer():
    agent, _ = mail_agent("done")
    outputs = list(agent.stream("mail bob", CFG))
    assert outputs[-1].interrupts
    resumed = list(agent.stream(Command(resume={"m1": {"decision": "approve"}}), CFG))
    assert resumed[-1].state["messages"][-1].text == "done"


def test_results_including_a_rejection_come_in_call_order():
    batch = AssistantMessage(
        tool_calls=[
            ToolCall("l1", "lookup", {"name": "ann"}),
            ToolCall("m1", "send_email", {"to": "bob", "body": "hi"}),
            ToolCall("l2", "lookup", {"name": "eve"}),
        ]
    )
    model = ScriptedChatModel([batch, "done"])
    gate = HumanInTheLoopHook(approve={"send_email": "sends mail"})
    agent = ReactAgent("mail", model, tools=[send_email, lookup], hooks=[gate])
    agent.invoke("go", CFG)
    agent.invoke(Command(resume={"m1": {"decision": "reject", "reason": "no"}}), CFG)
    results = [m for m in model.requests[1].messages if isinstance(m, ToolResponseMessage)]
    assert [r.tool_call_id for r in results] == ["l1", "m1", "l2"]
    assert results[1].is_error and sent == []


class KeepLastTurn(MessagesModelHook):
    """The model sees only the latest request and what followed it (earlier call ids are gone,
    so a model that numbers its calls per answer reuses them)."""

    def before_model(self, messages, config):
        start = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
        return AgentCommand(messages[start:], policy="replace") if start else None


def test_a_rejection_does_not_reach_a_later_call_that_reuses_its_id():
    mail = AssistantMessage(tool_calls=[ToolCall("c0", "send_email", {"to": "bob", "body": "hi"})])
    find = AssistantMessage(tool_calls=[ToolCall("c0", "lookup", {"name": "bob"})])
    model = ScriptedChatModel([mail, "not sent", find, "found it"])
    gate = HumanInTheLoopHook(approve={"send_email": "sends mail"})
    agent = ReactAgent("mail", model, tools=[send_email, lookup], hooks=[KeepLastTurn(), gate])
    agent.invoke("mail bob", CFG)
    agent.invoke(Command(resume={"c0": {"decision": "reject", "reason": "not now"}}), CFG)
    assert agent.call("bob's address?", CFG).text == "found it"
    result = model.requests[-1].messages[-1]
    assert isinstance(result, ToolResponseMessage) and result.tool_call_id == "c0"
    assert (result.is_error, result.content) == (False, "bob@example.com")
