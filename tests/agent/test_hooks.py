"""Hooks: order, state updates, jumps and their privacy, messages hooks, declared keys."""

from __future__ import annotations

import pytest

from graph_agent import (
    AppendStrategy,
    GraphSetupError,
    InvalidUpdateError,
    NodeError,
    RemoveMessage,
    RunnableConfig,
    StreamingOutput,
    tool,
)
from graph_agent.agent import (
    AgentCommand,
    AgentHook,
    JumpTo,
    MessagesModelHook,
    ModelHook,
    ReactAgent,
)
from graph_agent.messages import AssistantMessage, SystemMessage, ToolCall, UserMessage
from graph_agent.models import ScriptedChatModel

CFG = RunnableConfig(thread_id="t1")


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


class Recorder(AgentHook, ModelHook):
    """Logs every position it runs at into a shared list."""

    def __init__(self, name, log):
        self.name = name
        self.log = log

    def before_agent(self, state, config):
        self.log.append(f"{self.name}.before_agent")

    def before_model(self, state, config):
        self.log.append(f"{self.name}.before_model")

    def after_model(self, state, config):
        self.log.append(f"{self.name}.after_model")

    def after_agent(self, state, config):
        self.log.append(f"{self.name}.after_agent")


def test_before_hooks_run_in_order_and_after_hooks_in_reverse():
    log = []
    model = ScriptedChatModel(
        [AssistantMessage(tool_calls=[ToolCall("c1", "echo", {"text": "x"})]), "done"]
    )
    agent = ReactAgent("order", model, tools=[echo], hooks=[Recorder("a", log), Recorder("b", log)])
    agent.call("go", CFG)
    assert log == [
        "a.before_agent",
        "b.before_agent",
        "a.before_model",
        "b.before_model",
        "b.after_model",
        "a.after_model",
        "a.before_model",
        "b.before_model",
        "b.after_model",
        "a.after_model",
        "b.after_agent",
        "a.after_agent",
    ]


def test_a_hook_runs_only_at_the_positions_it_lists():
    log = []

    class OnlyBefore(Recorder):
        positions = ("before_model",)

    agent = ReactAgent("pos", ScriptedChatModel(["ok"]), hooks=[OnlyBefore("o", log)])
    agent.call("go", CFG)
    assert log == ["o.before_model"]
    assert [n for n in agent.graph.view.nodes if n.startswith("OnlyBefore")] == [
        "OnlyBefore.o.beforeModel"
    ]


def test_a_hook_without_positions_runs_where_it_overrides_a_method():
    class AfterOnly(ModelHook):
        def after_model(self, state, config):
            return None

    assert AfterOnly.positions is None
    assert AfterOnly().active_positions() == ("after_model",)


@pytest.mark.parametrize("positions", [("before_everything",), "before_model"])
def test_positions_that_are_not_a_tuple_of_position_names_are_refused(positions):
    class Odd(ModelHook):
        pass

    Odd.positions = positions
    with pytest.raises(GraphSetupError, match=r"hook 'Odd.odd' has positions=.*'before_model'"):
        ReactAgent("odd", ScriptedChatModel([]), hooks=[Odd()]).get_graph()


def test_a_hook_update_is_merged_into_the_state():
    class AddContext(ModelHook):
        def before_model(self, state, config):
            if not any(m.id == "ctx" for m in state["messages"]):
                return {"messages": SystemMessage(f"user={config.context['user']}", id="ctx")}
            return None

    model = ScriptedChatModel(["ok"])
    ReactAgent("ctx", model, hooks=[AddContext()]).call(
        "hi", RunnableConfig(context={"user": "ann"})
    )
    assert [m.text for m in model.requests[0].messages] == ["hi", "user=ann"]


class StopBeforeModel(ModelHook):
    can_jump_to = (JumpTo.END,)

    def before_model(self, state, config):
        return {"jump_to": JumpTo.END, "messages": AssistantMessage("blocked")}


def test_a_jump_to_end_skips_the_model_but_after_agent_hooks_still_run():
    log = []
    model = ScriptedChatModel([])
    agent = ReactAgent("stop", model, hooks=[Recorder("r", log), StopBeforeModel()])
    assert agent.call("go", CFG).text == "blocked"
    assert model.requests == []
    assert log == ["r.before_agent", "r.before_model", "r.after_agent"]


def test_a_jump_to_model_asks_the_model_again():
    class Insist(ModelHook):
        can_jump_to = (JumpTo.MODEL,)

        def after_model(self, state, config):
            if state["messages"][-1].text == "lazy":
                return {"jump_to": JumpTo.MODEL, "messages": UserMessage("Try harder.")}
            return None

    model = ScriptedChatModel(["lazy", "thorough"])
    assert ReactAgent("insist", model, hooks=[Insist()]).call("go").text == "thorough"
    assert model.requests[1].messages[-1].text == "Try harder."


def test_a_jump_to_tool_runs_pending_calls_or_goes_back_to_the_model():
    class Force(ModelHook):
        can_jump_to = (JumpTo.TOOL,)

        def before_model(self, state, config):
            if state["messages"][-1].text == "run it":
                call = ToolCall("forced", "echo", {"text": "forced"})
                return {"messages": AssistantMessage(tool_calls=[call]), "jump_to": JumpTo.TOOL}
            if state["messages"][-1].text == "nothing":  # nothing pending: back to the loop entry
                return {"jump_to": JumpTo.TOOL, "messages": UserMessage("checked")}
            return None

    model = ScriptedChatModel(["after tool", "after nothing"])
    agent = ReactAgent("force", model, tools=[echo], hooks=[Force()])
    agent.call("run it", CFG)
    assert model.requests[0].messages[-1].content == "forced"
    assert agent.call("nothing", CFG).text == "after nothing"
    assert model.requests[1].messages[-1].text == "checked"


def test_a_jump_that_the_hook_did_not_declare_is_an_error_naming_it():
    class Sneaky(ModelHook):
        def before_model(self, state, config):
            return {"jump_to": JumpTo.END}

    class Declared(ModelHook):
        can_jump_to = (JumpTo.MODEL,)

        def before_model(self, state, config):
            return {"jump_to": "end"}

    with pytest.raises(
        NodeError, match=r"Declared.declared.beforeModel.*jump_to='end'.*JumpTo.MODEL"
    ):
        ReactAgent("x", ScriptedChatModel(["ok"]), hooks=[Declared()]).call("go")
    # without a can_jump_to the hook has a plain edge: the stray jump_to is ignored
    assert ReactAgent("y", ScriptedChatModel(["ok"]), hooks=[Sneaky()]).call("go").text == "ok"


def test_a_can_jump_to_of_strings_works_and_an_undeclared_jump_is_still_named():
    class StopOnEnd(ModelHook):
        can_jump_to = ("end",)

        def before_model(self, state, config):
            return {"jump_to": "model" if state["messages"][-1].text == "loop" else "end"}

    agent = ReactAgent("x", ScriptedChatModel(["never"]), hooks=[StopOnEnd()])
    assert agent.invoke("stop")["messages"][-1].text == "stop"
    with pytest.raises(NodeError) as raised:
        agent.invoke("loop")
    assert isinstance(raised.value.__cause__, InvalidUpdateError)
    assert "jump_to='model'" in str(raised.value) and "can_jump_to: JumpTo.END" in str(raised.value)


def test_jump_to_never_appears_in_state_snapshots_or_streams():
    agent = ReactAgent("stop", ScriptedChatModel([]), hooks=[StopBeforeModel()])
    outputs = list(agent.stream("go", CFG))
    for output in outputs:
        assert "jump_to" not in output.update
        if not isinstance(output, StreamingOutput):
            assert output.state.value("jump_to") is None
    assert "jump_to" not in agent.get_state(CFG).values
    assert all("jump_to" not in s.values for s in agent.get_state_history(CFG))


def test_a_messages_hook_gets_the_list_and_can_replace_it():
    class KeepLastTwo(MessagesModelHook):
        def before_model(self, messages, config):
            if len(messages) > 2:
                return AgentCommand(messages[-2:], policy="replace")
            return None

    model = ScriptedChatModel(["one", "two"])
    agent = ReactAgent("trim", model, hooks=[KeepLastTwo()])
    agent.call("first", CFG)
    agent.call("second", CFG)
    assert [m.text for m in model.requests[1].messages] == ["one", "second"]


def test_a_messages_hook_can_append():
    class Remind(MessagesModelHook):
        def before_model(self, messages, config):
            return AgentCommand([SystemMessage("Remember: be brief.")])

    model = ScriptedChatModel(["ok"])
    ReactAgent("remind", model, hooks=[Remind()]).call("hi")
    assert [m.text for m in model.requests[0].messages] == ["hi", "Remember: be brief."]


def test_a_messages_hook_can_append_a_single_message_without_a_list():
    class Remind(MessagesModelHook):
        def before_model(self, messages, config):
            return AgentCommand(SystemMessage("be brief", id="note"))

    model = ScriptedChatModel(["ok"])
    agent = ReactAgent("remind", model, hooks=[Remind()])
    agent.invoke("hi", CFG)
    stored = agent.get_state(CFG).values["messages"]
    assert [(type(m).__name__, m.text) for m in stored] == [
        ("UserMessage", "hi"),
        ("SystemMessage", "be brief"),
        ("AssistantMessage", "ok"),
    ]


@pytest.mark.parametrize(
    ("messages", "said"),
    [
        ("be brief", "got the string 'be brief'"),
        (["be brief"], r"messages\[0\] is 'be brief' \(str\), not a message"),
        ({"notes": []}, r"type dict \(other state keys go in update="),
    ],
)
def test_agent_command_refuses_what_is_not_a_message_naming_the_fix(messages, said):
    with pytest.raises(
        TypeError, match=rf"{said}.*AgentCommand\(\[SystemMessage\('be brief'\)\]\)"
    ):
        AgentCommand(messages)


def test_a_messages_hook_can_remove_a_message_and_none_means_no_messages():
    class Tidy(MessagesModelHook):
        def before_model(self, messages, config):
            notes = [m for m in messages if m.text == "scratch note"]
            return AgentCommand([RemoveMessage(m.id) for m in notes] or None)

    model = ScriptedChatModel(["ok"])
    agent = ReactAgent("tidy", model, hooks=[Tidy()])
    state = agent.invoke([UserMessage("hello"), UserMessage("scratch note")], CFG)

    assert [m.text for m in state["messages"]] == ["hello", "ok"]
    assert [m.text for m in model.requests[0].messages] == ["hello"]
    assert AgentCommand(None).messages == ()
    with pytest.raises(ValueError, match=r"a RemoveMessage belongs with policy='append'"):
        AgentCommand([RemoveMessage("x")], policy="replace")


def test_agent_command_refuses_an_unknown_policy_naming_the_two_valid_ones():
    with pytest.raises(ValueError, match=r"policy='Replace'; use 'append' .* or 'replace'"):
        AgentCommand([], policy="Replace")


def test_an_after_model_hook_that_adds_a_message_after_tool_calls_does_not_cancel_them():
    class Note(ModelHook):
        def after_model(self, state, config):
            return {"messages": SystemMessage("(audit: the model answered)")}

    model = ScriptedChatModel(
        [AssistantMessage(tool_calls=[ToolCall("c1", "echo", {"text": "hi"})]), "done"]
    )
    state = ReactAgent("noted", model, tools=[echo], hooks=[Note()]).invoke("go", CFG)
    kinds = [type(m).__name__ for m in state["messages"]]
    assert kinds == [
        "UserMessage",
        "AssistantMessage",
        "SystemMessage",
        "ToolResponseMessage",
        "AssistantMessage",
        "SystemMessage",
    ]
    assert state["messages"][3].content == "hi" and len(model.requests) == 2


def test_a_hook_may_declare_state_keys_with_strategies():
    class Notes(ModelHook):
        state_keys = {"notes": AppendStrategy()}

        def after_model(self, state, config):
            return {"notes": f"saw {state['messages'][-1].text}"}

    agent = ReactAgent("notes", ScriptedChatModel(["a", "b"]), hooks=[Notes()])
    agent.call("x", CFG)
    agent.call("y", CFG)
    assert agent.get_state(CFG).values["notes"] == ["saw a", "saw b"]


class SpecSpy(AgentHook, ModelHook):
    """Notes, at every position, the ``agent`` argument and what ``self.agent`` reads then."""

    def __init__(self):
        self.seen = []

    def before_agent(self, state, config, *, agent):
        self.seen.append(("before_agent", agent, self.agent))

    def before_model(self, state, config, *, agent):
        self.seen.append(("before_model", agent, self.agent))

    def after_model(self, state, config, **kwargs):
        self.seen.append(("after_model", kwargs["agent"], self.agent))

    def after_agent(self, state, config, agent=None):
        self.seen.append(("after_agent", agent, self.agent))


def test_hooks_know_their_agent_while_they_run_and_the_hook_is_not_changed():
    hook = SpecSpy()
    model = ScriptedChatModel(["ok"])
    agent = ReactAgent("owner", model, tools=[echo], hooks=[hook], instruction="Be brief.")
    agent.call("x")
    assert [position for position, _, _ in hook.seen] == [
        "before_agent",
        "before_model",
        "after_model",
        "after_agent",
    ]
    for _, given, read in hook.seen:
        assert given is read  # the argument and the property are the same spec
        assert (given.name, given.model, given.tool_names) == ("owner", model, ("echo",))
        assert given.instruction == "Be brief." and given.max_iterations == 10
    assert hook.agent is None  # outside a call nobody runs it: no agent is kept on the hook
    assert list(vars(hook)) == ["seen"]  # the agent set nothing on it


def test_a_hook_method_gets_only_the_keyword_arguments_it_declares():
    calls = []

    class Old(ModelHook):
        def before_model(self, state, config):
            calls.append(("old", config.thread_id))

    class New(ModelHook):
        def before_model(self, state, config, *, agent):
            calls.append(("new", agent.name))

    class Messages(MessagesModelHook):
        def before_model(self, messages, config, *, agent):
            calls.append(("messages", agent.name, len(messages)))

    agent = ReactAgent("kw", ScriptedChatModel(["ok"]), hooks=[Old(), New(), Messages()])
    agent.call("x", CFG)
    assert calls == [("old", "t1"), ("new", "kw"), ("messages", "kw", 1)]


def test_the_agent_spec_is_frozen():
    spec = ReactAgent("frozen", ScriptedChatModel([]), tools=[echo]).spec
    with pytest.raises(AttributeError):
        spec.name = "other"
    assert spec.tools[0].name == "echo" and repr(spec) == "AgentSpec('frozen', tools=['echo'])"


class AgentSpy(ModelHook):
    """Notes the name of the agent it sees while it runs."""

    def __init__(self):
        self.seen = []

    def before_model(self, state, config):
        self.seen.append(self.agent.name)


def test_a_hook_shared_by_two_agents_sees_the_agent_that_runs_it():
    spy = AgentSpy()
    first = ReactAgent("first", ScriptedChatModel(["1", "3"]), hooks=[spy])
    second = ReactAgent("second", ScriptedChatModel(["2"]), hooks=[spy])
    first.call("a")
    second.call("b")  # built last: its graph holds the hook too
    first.call("c")
    assert spy.seen == ["first", "second", "first"]


def test_a_hook_shared_by_two_agents_running_at_once_sees_its_own_agent_in_each_call():
    import threading

    both_inside = threading.Barrier(2, timeout=10)
    seen = []

    class Shared(ModelHook):
        def before_model(self, state, config, *, agent):
            both_inside.wait()  # each agent's call is inside this method at the same time
            seen.append((agent.name, self.agent.name, agent.model.requests == []))

    shared = Shared()
    agents = [ReactAgent(n, ScriptedChatModel([n]), hooks=[shared]) for n in ("first", "second")]
    answers = {}
    workers = [
        threading.Thread(target=lambda a=a: answers.update({a.name: a.call("go").text}))
        for a in agents
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(10)
    assert answers == {"first": "first", "second": "second"}  # each called its own model
    assert sorted(seen) == [("first", "first", True), ("second", "second", True)]


def test_a_summary_by_a_shared_hook_uses_the_running_agents_model():
    from graph_agent.agent import SummarizationHook

    shared = SummarizationHook(max_tokens=10, messages_to_keep=1)
    first_model = ScriptedChatModel(["first's summary", "first's answer"])
    second_model = ScriptedChatModel(["second's summary", "second's answer"])
    first = ReactAgent("first", first_model, hooks=[shared])
    second = ReactAgent("second", second_model, hooks=[shared])
    first.get_graph(), second.get_graph()  # both built: the second built last
    history = [UserMessage("a long question " * 10), AssistantMessage("a long answer " * 10)]
    state = first.invoke([*history, UserMessage("next")])
    assert "first's summary" in state["messages"][0].text
    assert len(first_model.requests) == 2 and second_model.requests == []


def test_run_counters_reset_on_new_input():
    model = ScriptedChatModel(
        [
            AssistantMessage(tool_calls=[ToolCall("c1", "echo", {"text": "1"})]),
            "done",
            AssistantMessage(tool_calls=[ToolCall("c2", "echo", {"text": "2"})]),
            "done again",
        ]
    )
    agent = ReactAgent("count", model, tools=[echo], max_iterations=1)
    agent.call("first", CFG)
    assert agent.call("second", CFG).text == "done again"
    assert [len(r.tools) for r in model.requests] == [1, 0, 1, 0]
