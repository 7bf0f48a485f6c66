"""Hook and interceptor priority (order beside registration) and tools they contribute."""

from __future__ import annotations

import pytest

from graph_agent import GraphSetupError, RunnableConfig, tool
from graph_agent.agent import ModelHook, ReactAgent, ToolInterceptor
from graph_agent.messages import AssistantMessage, ToolCall, ToolResponseMessage
from graph_agent.models import ScriptedChatModel
from tests.agent.test_hooks import Recorder
from tests.agent.test_interceptors import Recording, RecordingTool

CFG = RunnableConfig(thread_id="t1")


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


@tool
def stamp() -> str:
    """Give a stamp."""
    return "stamped"


def recorder(name: str, log: list[str], priority: int = 0) -> Recorder:
    hook = Recorder(name, log)
    hook.priority = priority
    return hook


def wrapping(label: str, log: list[str], priority: int) -> Recording:
    interceptor = Recording(label, log)
    interceptor.priority = priority
    return interceptor


class StampHook(ModelHook):
    name = "stamper"
    tools = (stamp,)


def test_a_lower_priority_hook_runs_first_before_and_last_after():
    log: list[str] = []
    hooks = [recorder("a", log), recorder("b", log, priority=-5), recorder("c", log, priority=5)]
    ReactAgent("agent", ScriptedChatModel(["done"]), hooks=hooks).invoke("hi", CFG)
    assert log == [
        "b.before_agent",
        "a.before_agent",
        "c.before_agent",
        "b.before_model",
        "a.before_model",
        "c.before_model",
        "c.after_model",
        "a.after_model",
        "b.after_model",
        "c.after_agent",
        "a.after_agent",
        "b.after_agent",
    ]


def test_equal_priorities_keep_registration_order():
    log: list[str] = []
    hooks = [recorder(name, log, priority=3) for name in ("x", "y", "z")]
    agent = ReactAgent("agent", ScriptedChatModel(["done"]), hooks=hooks)
    assert [hook.name for hook in agent.hooks] == ["x", "y", "z"]
    agent.invoke("hi", CFG)
    assert [entry for entry in log if entry.endswith("before_agent")] == [
        "x.before_agent",
        "y.before_agent",
        "z.before_agent",
    ]


def test_the_graph_shape_follows_priority():
    hooks = [recorder("late", [], priority=10), recorder("early", [], priority=-10)]
    agent = ReactAgent("agent", ScriptedChatModel([]), hooks=hooks)
    drawing = agent.get_graph("mermaid")
    assert "__start__ --> Recorder.early.before" in drawing
    assert "Recorder.early.before --> Recorder.late.before" in drawing
    assert "Recorder.late.beforeModel --> __model__" in drawing


def test_the_instruction_hook_stays_first_whatever_the_priorities():
    hooks = [recorder("eager", [], priority=-100)]
    agent = ReactAgent("agent", ScriptedChatModel([]), instruction="Be brief.", hooks=hooks)
    assert agent.effective_hooks[0].full_name == "InstructionAgentHook.instruction"


def test_a_lower_priority_interceptor_sits_further_out():
    log: list[str] = []
    interceptors = [wrapping("inner", log, priority=1), wrapping("outer", log, priority=-1)]
    ReactAgent("agent", ScriptedChatModel(["done"]), model_interceptors=interceptors).invoke(
        "hi", CFG
    )
    assert log == ["outer:in", "inner:in", "inner:out", "outer:out"]


def test_tool_interceptors_follow_priority_too():
    log: list[str] = []
    inner, outer = RecordingTool("inner", log), RecordingTool("outer", log)
    outer.priority = -1
    model = ScriptedChatModel([AssistantMessage(tool_calls=[ToolCall("c1", "stamp", {})]), "ok"])
    ReactAgent("agent", model, tools=[stamp], tool_interceptors=[inner, outer]).invoke("go", CFG)
    assert log == ["outer:in", "inner:in", "inner:out", "outer:out"]


def test_a_priority_that_is_not_an_int_is_refused_naming_the_hook():
    with pytest.raises(GraphSetupError, match=r"Recorder.odd.*priority='high'.*give an int"):
        ReactAgent("agent", ScriptedChatModel([]), hooks=[recorder("odd", [], priority="high")])


def test_a_hook_contributes_a_tool_the_model_can_call():
    model = ScriptedChatModel(
        [AssistantMessage(tool_calls=[ToolCall("c1", "stamp", {})]), "stamped it"]
    )
    agent = ReactAgent("agent", model, tools=[echo], hooks=[StampHook()])
    assert agent.toolkit.names == ("echo", "stamp")
    state = agent.invoke("stamp this", CFG)
    result = next(m for m in state["messages"] if isinstance(m, ToolResponseMessage))
    assert result.content == "stamped"
    assert [t.name for t in model.requests[0].tools] == ["echo", "stamp"]


def test_an_agent_without_tools_of_its_own_gets_a_tool_node_for_contributed_ones():
    agent = ReactAgent("agent", ScriptedChatModel([]), hooks=[StampHook()])
    assert '__model__ -. "tools" .-> __tool__' in agent.get_graph("mermaid")


def test_interceptors_contribute_tools_too():
    class StampingInterceptor(ToolInterceptor):
        tools = (stamp,)

    agent = ReactAgent("agent", ScriptedChatModel([]), tool_interceptors=[StampingInterceptor()])
    assert agent.toolkit.names == ("stamp",)


def test_a_contributed_tool_that_clashes_with_an_agent_tool_is_refused():
    @tool(name="stamp")
    def own_stamp() -> str:
        """The agent's own stamp."""
        return "own"

    with pytest.raises(GraphSetupError, match=r"StampHook.stamper.*'stamp'.*agent 'agent'"):
        ReactAgent("agent", ScriptedChatModel([]), tools=[own_stamp], hooks=[StampHook()])


def test_two_hooks_contributing_one_tool_name_are_refused_naming_both():
    class OtherStamp(ModelHook):
        tools = (stamp,)

    with pytest.raises(GraphSetupError, match=r"OtherStamp.*'stamp'.*StampHook.stamper"):
        ReactAgent("agent", ScriptedChatModel([]), hooks=[StampHook(), OtherStamp()])


def test_tools_that_are_not_a_list_of_tools_are_refused():
    class Odd(ModelHook):
        tools = "stamp"

    with pytest.raises(GraphSetupError, match=r"'Odd.odd' has tools='stamp'.*give a list of @tool"):
        ReactAgent("agent", ScriptedChatModel([]), hooks=[Odd()])


def test_a_hook_listing_tool_names_in_tools_is_refused_naming_it_and_the_entry():
    class Watcher(ModelHook):
        name = "watch"

        def __init__(self) -> None:
            self.tools = ["search", "fetch"]  # the tools it watches: not tools it brings

    with pytest.raises(GraphSetupError) as caught:
        ReactAgent("agent", ScriptedChatModel([]), tools=[echo], hooks=[Watcher()])
    text = str(caught.value)
    assert "hook 'Watcher.watch'" in text
    assert "tools[0] is 'search' (str), not a tool" in text
    assert "an attribute for anything else needs another name" in text


def test_an_interceptor_with_a_mapping_or_a_class_in_tools_is_refused_naming_it():
    class Mapped(ToolInterceptor):
        tools = {"stamp": stamp}  # type: ignore[assignment]

    class Classy(ToolInterceptor):
        tools = (ToolResponseMessage,)

    with pytest.raises(GraphSetupError, match=r"interceptor 'Mapped' has tools=\{"):
        ReactAgent("agent", ScriptedChatModel([]), tool_interceptors=[Mapped()])
    with pytest.raises(GraphSetupError, match=r"'Classy': tools\[0\] is .*ToolResponseMessage"):
        ReactAgent("agent", ScriptedChatModel([]), tool_interceptors=[Classy()])


def test_a_function_that_cannot_be_a_tool_is_refused_naming_the_hook():
    class Builtin(ModelHook):
        name = "builtin"
        tools = (print,)

    with pytest.raises(GraphSetupError, match=r"'Builtin.builtin': tools\[0\] .*cannot be made"):
        ReactAgent("agent", ScriptedChatModel([]), hooks=[Builtin()])


def test_a_plain_function_in_tools_becomes_a_tool():
    def shout(text: str) -> str:
        """Shout the text."""
        return text.upper()

    class Shouting(ModelHook):
        name = "shouting"
        tools = (shout,)

    agent = ReactAgent("agent", ScriptedChatModel([]), hooks=[Shouting()])
    assert agent.toolkit.names == ("shout",)


class DuckInterceptor:  # intercepts like a ModelInterceptor, without subclassing it
    priority = 0
    tools: tuple[object, ...] = (echo,)

    def intercept(self, request, call_next):
        return call_next(request)


def test_an_interceptor_that_does_not_subclass_one_and_lists_tools_is_refused_naming_it():
    with pytest.raises(GraphSetupError, match=r"'DuckInterceptor'.*subclass ModelInterceptor"):
        ReactAgent("agent", ScriptedChatModel([]), model_interceptors=[DuckInterceptor()])  # type: ignore[list-item]


def test_a_hook_that_does_not_subclass_one_and_lists_tools_is_refused():
    class DuckHook:
        name = "duck"
        tools = (echo,)

        def before_model(self, state, config):
            return None

    with pytest.raises(GraphSetupError, match=r"'DuckHook'.*subclass ModelInterceptor"):
        ReactAgent("agent", ScriptedChatModel([]), hooks=[DuckHook()])  # type: ignore[list-item]


def test_an_interceptor_that_does_not_subclass_one_with_no_tools_is_accepted():
    duck = DuckInterceptor()
    duck.tools = ()
    model = ScriptedChatModel(["done"])
    agent = ReactAgent("agent", model, model_interceptors=[duck])  # type: ignore[list-item]
    assert agent.toolkit.names == ()
    assert agent.call("hi", CFG).text == "done"


def test_a_shared_hook_contributes_its_tool_to_each_agent():
    hook = StampHook()
    first = ReactAgent("first", ScriptedChatModel([]), hooks=[hook])
    second = ReactAgent("second", ScriptedChatModel([]), tools=[echo], hooks=[hook])
    assert first.toolkit.names == ("stamp",)
    assert second.toolkit.names == ("echo", "stamp")
