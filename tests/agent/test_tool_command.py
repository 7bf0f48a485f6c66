"""A tool that returns ``Command(update=..., goto=...)``: its update merges into the agent's state
by the keys' strategies after the tool step, its result is the call's ToolResponseMessage, and
``goto=END`` ends the run (LangGraph's and SAA's tools that update state)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from graph_agent import (
    END,
    AppendStrategy,
    Command,
    InvalidUpdateError,
    ReplaceAll,
    RunnableConfig,
    SqliteSaver,
    ToolContext,
    tool,
)
from graph_agent.agent import AgentHook, ReactAgent
from graph_agent.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from graph_agent.models import ScriptedChatModel


def calls(*items):
    return AssistantMessage(tool_calls=[ToolCall(i, n, a) for i, n, a in items])


class Notes(AgentHook):
    """Declares ``notes`` (appended) and the private ``_seen`` key for the tools below."""

    state_keys = {"notes": AppendStrategy()}


@tool
def remember_name(name: str, ctx: ToolContext) -> Command:
    """Remember the user's name."""
    result = ToolResponseMessage(tool_call_id=ctx.call_id, name="remember_name", content="saved")
    return Command(update={"user_name": name, "messages": [result]})


@tool
def note(text: str) -> Command:
    """Take a note."""
    return Command(update={"notes": [text]})


@tool
async def async_note(text: str) -> Command:
    """Take a note, asynchronously."""
    await asyncio.sleep(0)
    return Command(update={"notes": text})


@tool
def set_mood(mood: str) -> Command:
    """Set the mood."""
    return Command(update={"mood": mood})


@tool
def finish(answer: str) -> Command:
    """Give the final answer and stop."""
    return Command(update={"messages": [AssistantMessage(answer)]}, goto=END)


def test_a_tools_update_lands_in_the_state_and_its_result_is_the_calls_message(caller):
    model = ScriptedChatModel([calls(("c1", "remember_name", {"name": "Ada"})), "Hi Ada."])
    agent = ReactAgent("a", model, tools=[remember_name])

    state = caller.invoke(agent, "I am Ada.")

    assert state["user_name"] == "Ada"
    result = model.requests[1].messages[-1]
    assert isinstance(result, ToolResponseMessage)
    assert (result.tool_call_id, result.content) == ("c1", "saved")
    assert '"goto"' not in result.content


def test_without_a_result_in_the_update_one_is_made_from_the_update(caller):
    model = ScriptedChatModel([calls(("c1", "set_mood", {"mood": "calm"})), "ok"])
    agent = ReactAgent("a", model, tools=[set_mood])

    state = caller.invoke(agent, "be calm")

    assert state["mood"] == "calm"
    assert model.requests[1].messages[-1].content == '{"mood":"calm"}'


def test_parallel_tools_updating_one_append_key_merge_in_call_order(caller):
    model = ScriptedChatModel(
        [
            calls(
                ("c1", "async_note", {"text": "one"}),
                ("c2", "note", {"text": "two"}),
                ("c3", "async_note", {"text": "three"}),
            ),
            "noted",
        ]
    )
    agent = ReactAgent("a", model, tools=[note, async_note], hooks=[Notes()])

    state = caller.invoke(agent, "take notes")

    assert state["notes"] == ["one", "two", "three"]
    assert [m.tool_call_id for m in state["messages"] if isinstance(m, ToolResponseMessage)] == [
        "c1",
        "c2",
        "c3",
    ]


def test_two_tools_writing_one_replaced_key_is_an_invalid_update(caller):
    model = ScriptedChatModel(
        [calls(("c1", "set_mood", {"mood": "calm"}), ("c2", "set_mood", {"mood": "glad"}))]
    )
    agent = ReactAgent("a", model, tools=[set_mood])

    with pytest.raises(InvalidUpdateError) as caught:
        caller.invoke(agent, "moods")

    message = str(caught.value)
    assert "(tool 'set_mood', call c1)" in message and "(tool 'set_mood', call c2)" in message
    assert "both wrote the key 'mood'" in message


def tally(old, new):
    """A merge rule that is not associative over writes: counts the writes it is given."""
    return {"writes": (old or {"writes": 0})["writes"] + 1, "last": new}


class Declares(AgentHook):
    """Declares keys with the strategies a user would: a plain merge function, an append key."""

    state_keys = {"tally": tally, "pairs": AppendStrategy()}


@tool
def count(n: int) -> Command:
    """Count a write."""
    return Command(update={"tally": n, "pairs": (n, n * 10)})


def test_several_tools_writes_merge_as_separate_writes_by_any_strategy(caller):
    model = ScriptedChatModel(
        [calls(("c1", "count", {"n": 1}), ("c2", "count", {"n": 2})), "counted"]
    )
    agent = ReactAgent("a", model, tools=[count], hooks=[Declares()])

    state = caller.invoke(agent, {"messages": "count", "tally": "input", "pairs": [(0, 0)]})

    assert state["tally"] == {"writes": 3, "last": 2}  # the input's write, then one per tool
    assert state["pairs"] == [(0, 0), (1, 10), (2, 20)]  # a tuple stays one item


@tool
def reset_pairs() -> Command:
    """Start the pairs over."""
    return Command(update={"pairs": ReplaceAll([(9, 9)])})


def test_a_replace_all_from_one_tool_then_an_append_from_the_next_apply_in_call_order():
    model = ScriptedChatModel([calls(("c1", "reset_pairs", {}), ("c2", "count", {"n": 3})), "ok"])
    agent = ReactAgent("a", model, tools=[reset_pairs, count], hooks=[Declares()])

    state = agent.invoke({"messages": "go", "pairs": [(0, 0)]})

    assert state["pairs"] == [(9, 9), (3, 30)]


def test_goto_end_ends_the_run_after_the_tool_step_and_after_agent_hooks_still_run(caller):
    ran = []

    class After(AgentHook):
        def after_agent(self, state, config):
            ran.append("after_agent")

    model = ScriptedChatModel([calls(("c1", "finish", {"answer": "42"}))])
    agent = ReactAgent("a", model, tools=[finish], hooks=[After()])

    state = caller.invoke(agent, "answer")

    assert len(model.requests) == 1  # the model was not called again
    assert [type(m) for m in state["messages"]] == [
        UserMessage,
        AssistantMessage,
        ToolResponseMessage,
        AssistantMessage,
    ]
    assert state["messages"][-1].text == "42"
    assert ran == ["after_agent"]
    assert "jump_to" not in state.data()


@tool
def write_private(value: str) -> Command:
    """Write a key that belongs to the agent."""
    return Command(update={"_agent_run": value})


@tool
def write_undeclared(value: str) -> Command:
    """Write a private key nobody declared."""
    return Command(update={"_secret": value})


@tool
def wander(value: str) -> Command:
    """Go somewhere the agent has no edge to."""
    return Command(goto="elsewhere")


@tool
def answer_another_call(value: str) -> Command:
    """Answer a call that is not this one."""
    return Command(
        update={"messages": [ToolResponseMessage(tool_call_id="other", name="x", content="y")]}
    )


@pytest.mark.parametrize(
    ("bad_tool", "says"),
    [
        (write_private, "'_agent_run' is private to the agent"),
        (write_undeclared, "'_secret' is private to the agent"),
        (wander, "goto='elsewhere'"),
        (answer_another_call, "with a result for call 'other'"),
    ],
    ids=["bookkeeping key", "undeclared private key", "unknown goto", "another call's result"],
)
def test_a_command_the_agent_cannot_apply_is_an_error_result_not_a_silent_write(bad_tool, says):
    model = ScriptedChatModel([calls(("c1", bad_tool.name, {"value": "v"})), "ok"])
    agent = ReactAgent("a", model, tools=[bad_tool])

    state = agent.invoke("go")

    result = model.requests[1].messages[-1]
    assert isinstance(result, ToolResponseMessage) and result.is_error
    assert says in result.content
    assert "_secret" not in state.data() and state.value("_agent_run")["model_calls"] == 2


def test_a_private_key_a_hook_declares_may_be_written():
    class Private(AgentHook):
        state_keys = {"_seen": AppendStrategy()}

    @tool
    def see(thing: str) -> Command:
        """See a thing."""
        return Command(update={"_seen": thing})

    model = ScriptedChatModel([calls(("c1", "see", {"thing": "bird"})), "seen"])
    state = ReactAgent("a", model, tools=[see], hooks=[Private()]).invoke("look")

    assert state.value("_seen") == ["bird"]


def test_a_replayed_call_keeps_its_update(tmp_path):
    """The tool ran and its result was recorded, then the process died before the step
    committed: on resume the call is not run again, and its update is not lost."""
    runs = []
    gate = threading.Event()

    @tool
    def charge(amount: int) -> Command:
        """Charge a card."""
        runs.append(amount)
        return Command(update={"charged": amount})

    @tool
    def slow() -> str:
        """Wait for the test."""
        if not gate.is_set():
            raise KeyboardInterrupt  # stands in for the process dying mid-step
        return "done"

    model = ScriptedChatModel(
        [calls(("c1", "charge", {"amount": 5}), ("c2", "slow", {})), "charged"]
    )
    config = RunnableConfig(thread_id="t")
    agent = ReactAgent("a", model, tools=[charge, slow], saver=SqliteSaver(tmp_path / "db"))
    with pytest.raises(KeyboardInterrupt):
        agent.invoke("charge 5", config)
    gate.set()

    state = agent.invoke(None, config)

    assert runs == [5]
    assert state["charged"] == 5


def test_an_instruction_can_read_what_a_tool_stored():
    model = ScriptedChatModel(
        [calls(("c1", "remember_name", {"name": "Ada"})), "Hello.", "Hello again."]
    )
    agent = ReactAgent("a", model, tools=[remember_name], instruction="The user is {user_name}.")
    config = RunnableConfig(thread_id="t")
    agent.invoke({"messages": "I am Ada.", "user_name": "unknown"}, config)

    assert model.requests[1].messages[0] == SystemMessage("The user is Ada.", id="instruction")
