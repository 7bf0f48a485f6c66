"""``ReactAgent.add_tools`` / ``remove_tools``: tools given after the agent was made join its
graph, which is built again with the same saver, store and listeners, so a thread checkpointed
before goes on with them; a name taken is refused, naming both tools, and nothing is added."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import pytest

from graph_agent import GraphSetupError, InMemoryStore, RunnableConfig, SqliteSaver, tool
from graph_agent.agent import JumpTo, ModelHook, ReactAgent, ToolCallLimitHook
from graph_agent.graph.compiled import CompiledGraph
from graph_agent.graph.listeners import Listener, ToolCallEvent
from graph_agent.messages import AssistantMessage, ToolCall, ToolResponseMessage, UserMessage
from graph_agent.models import ScriptedChatModel
from graph_agent.tools import Tool, ToolContext


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def shout(text: str) -> str:
    """Say it louder."""
    return text.upper() + "!"


@tool
def add_and_remember(a: int, b: int, context: ToolContext) -> int:
    """Add two numbers, and keep the sum in the store."""
    assert context.store is not None
    context.store.put(("sums",), "last", {"total": a + b})
    return a + b


def twice(text: str) -> str:
    """Say it twice."""
    return text + text


class ToolCalls(Listener):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_tool_call(self, event: ToolCallEvent) -> None:
        self.seen.append(event.call.name)


def calling(name: str, arguments: dict) -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCall("c1", name, arguments)])


def test_a_tool_added_later_is_called_on_a_thread_checkpointed_before(tmp_path):
    model = ScriptedChatModel(
        [
            "hello",
            calling("add_and_remember", {"a": 2, "b": 3}),
            lambda request: f"sum: {request.messages[-1].content}",
        ]
    )
    listener, store = ToolCalls(), InMemoryStore()
    with contextlib.closing(SqliteSaver(tmp_path / "threads.db")) as saver:
        agent = ReactAgent("adder", model, saver=saver, store=store, listeners=[listener])
        config = RunnableConfig(thread_id="t")
        assert agent.call("hi", config).text == "hello"
        before = agent.graph

        (added,) = agent.add_tools(add_and_remember)

        assert added is add_and_remember
        assert agent.call("2 + 3?", config).text == "sum: 5"
        assert agent.graph is not before  # built again, with a tool node it lacked
        assert agent.saver is saver
        assert store.get(("sums",), "last").value == {"total": 5}  # the tool had the store
        assert listener.seen == ["add_and_remember"]
        messages = agent.get_state(config).values["messages"]
        assert [type(m).__name__ for m in messages] == [
            "UserMessage",
            "AssistantMessage",
            "UserMessage",
            "AssistantMessage",
            "ToolResponseMessage",
            "AssistantMessage",
        ]
        assert isinstance(messages[0], UserMessage) and messages[0].content == "hi"
        assert isinstance(messages[4], ToolResponseMessage) and messages[4].content == "5"
        assert [t.name for t in model.requests[1].tools] == ["add_and_remember"]


def test_tools_come_one_by_one_or_in_any_iterable_and_functions_are_wrapped():
    agent = ReactAgent("kit", ScriptedChatModel(["ok"]), tools=[add])

    added = agent.add_tools(shout, [twice])

    assert [t.name for t in added] == ["shout", "twice"]
    assert isinstance(added[1], Tool)
    assert agent.toolkit.names == ("add", "shout", "twice")
    with pytest.raises(TypeError, match="got str"):
        agent.add_tools("add")


def test_a_name_taken_is_refused_naming_both_tools_and_nothing_is_added():
    @tool(name="add")
    def concatenate(left: str, right: str) -> str:
        """Join two strings."""
        return left + right

    agent = ReactAgent("kit", ScriptedChatModel(["ok"]), tools=[add])

    with pytest.raises(GraphSetupError) as info:
        agent.add_tools(shout, concatenate)

    message = str(info.value)
    assert message.startswith("agent 'kit': cannot add the tools: two tools are named 'add'")
    assert "test_add_tools.add" in message
    assert "concatenate" in message
    assert agent.toolkit.names == ("add",)  # not even shout


def test_removed_tools_leave_the_graph_built_again_without_them():
    agent = ReactAgent("kit", ScriptedChatModel(["ok"]), tools=[add])
    agent.add_tools(shout)
    with_shout = agent.graph

    (removed,) = agent.remove_tools("shout")

    assert removed is shout
    assert agent.toolkit.names == ("add",)
    assert agent.graph is not with_shout
    with pytest.raises(KeyError, match="no tool named 'shout'"):
        agent.remove_tools("add", "shout")
    assert agent.toolkit.names == ("add",)  # all or none


class ChangesToolsBeforeTheModel(ModelHook):
    """Adds or removes the agent's tools while its run goes on (as another thread might)."""

    def __init__(self, change: Callable[[], object]) -> None:
        self.change = change
        self.changed = False

    def before_model(self, state, config):
        if not self.changed:
            self.changed = True
            self.change()


def test_tools_added_during_a_run_are_offered_from_the_next_run():
    model = ScriptedChatModel(["no tools yet", calling("shout", {"text": "hi"}), "done"])
    agent_box: list[ReactAgent] = []
    hook = ChangesToolsBeforeTheModel(lambda: agent_box[0].add_tools(shout))
    agent = ReactAgent("kit", model, hooks=[hook])
    agent_box.append(agent)
    config = RunnableConfig(thread_id="added-mid-run")

    assert agent.call("hello", config).text == "no tools yet"
    assert model.requests[0].tools == []  # the run keeps the tools its graph was built with

    assert agent.call("shout hi", config).text == "done"
    assert [t.name for t in model.requests[1].tools] == ["shout"]
    results = [m for m in agent.get_state(config).values["messages"] if m.role == "tool"]
    assert [m.text for m in results] == ["HI!"]


def test_a_tool_removed_during_a_run_still_runs_for_a_call_that_run_offered():
    model = ScriptedChatModel([calling("shout", {"text": "hi"}), "done"])
    agent_box: list[ReactAgent] = []
    hook = ChangesToolsBeforeTheModel(lambda: agent_box[0].remove_tools("shout"))
    agent = ReactAgent("kit", model, tools=[add, shout], hooks=[hook])
    agent_box.append(agent)
    config = RunnableConfig(thread_id="removed-mid-run")

    assert agent.call("shout hi", config).text == "done"
    results = [m for m in agent.get_state(config).values["messages"] if m.role == "tool"]
    assert [m.text for m in results] == ["HI!"]
    assert agent.toolkit.names == ("add",)
    assert [t.name for t in model.requests[1].tools] == ["add", "shout"]  # the run kept it


def test_removing_a_tool_a_hook_limits_is_refused_and_the_agent_stays_usable():
    model = ScriptedChatModel(["still works"])
    agent = ReactAgent(
        "kit", model, tools=[add, shout], hooks=[ToolCallLimitHook(tool_name="shout", run_limit=1)]
    )

    with pytest.raises(GraphSetupError, match=r"cannot remove the tools.*'shout'.*none is removed"):
        agent.remove_tools("shout")

    assert agent.toolkit.names == ("add", "shout")
    assert agent.call("hi").text == "still works"


def test_removing_the_last_tool_a_hook_jumps_to_is_refused_and_none_is_removed():
    class JumpsToTools(ModelHook):
        can_jump_to = (JumpTo.TOOL,)

        def after_model(self, state, config):
            return None

    model = ScriptedChatModel(["still works"])
    agent = ReactAgent("kit", model, tools=[add], hooks=[JumpsToTools()])

    with pytest.raises(GraphSetupError, match=r"cannot remove the tools.*has no tools"):
        agent.remove_tools("add")

    assert agent.toolkit.names == ("add",)
    assert agent.call("hi").text == "still works"


class GraphDroppedAfterEachRead(ReactAgent):
    """An agent whose graph a concurrent ``add_tools``/``remove_tools``/saver change drops
    right after each read of ``_compiled``: the worst interleaving, made deterministic."""

    @property  # type: ignore[override]
    def _compiled(self) -> CompiledGraph | None:
        value: CompiledGraph | None = self.__dict__["compiled"]
        self.__dict__["compiled"] = None
        return value

    @_compiled.setter
    def _compiled(self, value: CompiledGraph | None) -> None:
        self.__dict__["compiled"] = value


def test_graph_is_never_none_when_a_concurrent_change_drops_it_after_the_check():
    agent = GraphDroppedAfterEachRead("kit", ScriptedChatModel([]), tools=[add])
    assert isinstance(agent.graph, CompiledGraph)
    agent.__dict__["compiled"] = agent.graph
    assert isinstance(agent.graph, CompiledGraph)


async def test_the_async_graph_is_never_none_when_a_concurrent_change_drops_it():
    agent = GraphDroppedAfterEachRead("kit", ScriptedChatModel(["ok"]), tools=[add])
    agent.__dict__["compiled"] = agent.graph
    assert isinstance(await agent._agraph(), CompiledGraph)
