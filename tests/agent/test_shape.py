"""The agent's graph shape, pinned: node names, edges and the Mermaid text (DESIGN §5)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from graph_agent import GraphSetupError, tool
from graph_agent.agent import Hook, JumpTo, ModelHook, ReactAgent
from graph_agent.models import ScriptedChatModel


@tool
def search(q: str) -> str:
    """Search."""
    return q


class Everywhere(Hook):
    def before_agent(self, state, config):
        return None

    def before_model(self, state, config):
        return None

    def after_model(self, state, config):
        return None

    def after_agent(self, state, config):
        return None


class First(Everywhere):
    can_jump_to = (JumpTo.END, JumpTo.MODEL)


class Second(Everywhere):
    can_jump_to = (JumpTo.TOOL,)


@dataclass
class Golden:
    nodes: tuple[str, ...]
    edges: list[tuple[str, str, str | None, bool]]


def agent(case: str) -> ReactAgent:
    model = ScriptedChatModel([])
    options = {
        "plain": {},
        "tools": {"tools": [search]},
        "one": {"tools": [search], "hooks": [Everywhere()]},
        "two": {"tools": [search], "hooks": [First(), Second()]},
    }[case]
    return ReactAgent(case, model, **options)


GOLDEN = {
    "plain": Golden(
        nodes=("__model__",),
        edges=[
            ("__start__", "__model__", None, False),
            ("__model__", "__end__", None, False),
        ],
    ),
    "tools": Golden(
        nodes=("__model__", "__tool__"),
        edges=[
            ("__start__", "__model__", None, False),
            ("__model__", "__tool__", "tools", True),
            ("__model__", "__end__", "end", True),
            ("__tool__", "__model__", "model", True),
            ("__tool__", "__end__", "end", True),
        ],
    ),
    "one": Golden(
        nodes=(
            "Everywhere.everywhere.before",
            "Everywhere.everywhere.beforeModel",
            "__model__",
            "Everywhere.everywhere.afterModel",
            "__tool__",
            "Everywhere.everywhere.after",
        ),
        edges=[
            ("__start__", "Everywhere.everywhere.before", None, False),
            ("Everywhere.everywhere.before", "Everywhere.everywhere.beforeModel", None, False),
            ("Everywhere.everywhere.beforeModel", "__model__", None, False),
            ("__model__", "Everywhere.everywhere.afterModel", None, False),
            ("Everywhere.everywhere.afterModel", "__tool__", "tools", True),
            ("Everywhere.everywhere.afterModel", "Everywhere.everywhere.after", "end", True),
            ("__tool__", "Everywhere.everywhere.beforeModel", "model", True),
            ("__tool__", "Everywhere.everywhere.after", "end", True),
            ("Everywhere.everywhere.after", "__end__", None, False),
        ],
    ),
    "two": Golden(
        nodes=(
            "First.first.before",
            "Second.second.before",
            "First.first.beforeModel",
            "Second.second.beforeModel",
            "__model__",
            "Second.second.afterModel",
            "First.first.afterModel",
            "__tool__",
            "Second.second.after",
            "First.first.after",
        ),
        edges=[
            ("__start__", "First.first.before", None, False),
            ("First.first.before", "Second.second.before", "next", True),
            ("First.first.before", "First.first.beforeModel", "model", True),
            ("First.first.before", "Second.second.after", "end", True),
            ("Second.second.before", "First.first.beforeModel", "next", True),
            ("Second.second.before", "__tool__", "tool", True),
            ("First.first.beforeModel", "Second.second.beforeModel", "next", True),
            ("First.first.beforeModel", "First.first.beforeModel", "model", True),
            ("First.first.beforeModel", "Second.second.after", "end", True),
            ("Second.second.beforeModel", "__model__", "next", True),
            ("Second.second.beforeModel", "__tool__", "tool", True),
            ("__model__", "Second.second.afterModel", None, False),
            ("Second.second.afterModel", "First.first.afterModel", "next", True),
            ("Second.second.afterModel", "__tool__", "tool", True),
            ("First.first.afterModel", "__tool__", "tools", True),
            ("First.first.afterModel", "Second.second.after", "end", True),
            ("First.first.afterModel", "First.first.beforeModel", "model", True),
            ("__tool__", "First.first.beforeModel", "model", True),
            ("__tool__", "Second.second.after", "end", True),
            ("Second.second.after", "First.first.after", "next", True),
            ("Second.second.after", "__tool__", "tool", True),
            ("First.first.after", "__end__", "next", True),
            ("First.first.after", "First.first.beforeModel", "model", True),
            ("First.first.after", "__end__", "end", True),
        ],
    ),
}

MERMAID_PLAIN = """\
flowchart TD
    %% graph "plain"
    __start__(["__start__"])
    __model__["__model__"]
    __end__(("__end__"))
    __start__ --> __model__
    __model__ --> __end__
"""

MERMAID_TOOLS = """\
flowchart TD
    %% graph "tools"
    __start__(["__start__"])
    __model__["__model__"]
    __tool__["__tool__"]
    __end__(("__end__"))
    __start__ --> __model__
    __model__ -. "tools" .-> __tool__
    __model__ -. "end" .-> __end__
    __tool__ -. "model" .-> __model__
    __tool__ -. "end" .-> __end__
"""

MERMAID_ONE = """\
flowchart TD
    %% graph "one"
    __start__(["__start__"])
    Everywhere.everywhere.before["Everywhere.everywhere.before"]
    Everywhere.everywhere.beforeModel["Everywhere.everywhere.beforeModel"]
    __model__["__model__"]
    Everywhere.everywhere.afterModel["Everywhere.everywhere.afterModel"]
    __tool__["__tool__"]
    Everywhere.everywhere.after["Everywhere.everywhere.after"]
    __end__(("__end__"))
    __start__ --> Everywhere.everywhere.before
    Everywhere.everywhere.before --> Everywhere.everywhere.beforeModel
    Everywhere.everywhere.beforeModel --> __model__
    __model__ --> Everywhere.everywhere.afterModel
    Everywhere.everywhere.afterModel -. "tools" .-> __tool__
    Everywhere.everywhere.afterModel -. "end" .-> Everywhere.everywhere.after
    __tool__ -. "model" .-> Everywhere.everywhere.beforeModel
    __tool__ -. "end" .-> Everywhere.everywhere.after
    Everywhere.everywhere.after --> __end__
"""

MERMAID_TWO = """\
flowchart TD
    %% graph "two"
    __start__(["__start__"])
    First.first.before["First.first.before"]
    Second.second.before["Second.second.before"]
    First.first.beforeModel["First.first.beforeModel"]
    Second.second.beforeModel["Second.second.beforeModel"]
    __model__["__model__"]
    Second.second.afterModel["Second.second.afterModel"]
    First.first.afterModel["First.first.afterModel"]
    __tool__["__tool__"]
    Second.second.after["Second.second.after"]
    First.first.after["First.first.after"]
    __end__(("__end__"))
    __start__ --> First.first.before
    First.first.before -. "next" .-> Second.second.before
    First.first.before -. "model" .-> First.first.beforeModel
    First.first.before -. "end" .-> Second.second.after
    Second.second.before -. "next" .-> First.first.beforeModel
    Second.second.before -. "tool" .-> __tool__
    First.first.beforeModel -. "next" .-> Second.second.beforeModel
    First.first.beforeModel -. "model" .-> First.first.beforeModel
    First.first.beforeModel -. "end" .-> Second.second.after
    Second.second.beforeModel -. "next" .-> __model__
    Second.second.beforeModel -. "tool" .-> __tool__
    __model__ --> Second.second.afterModel
    Second.second.afterModel -. "next" .-> First.first.afterModel
    Second.second.afterModel -. "tool" .-> __tool__
    First.first.afterModel -. "tools" .-> __tool__
    First.first.afterModel -. "end" .-> Second.second.after
    First.first.afterModel -. "model" .-> First.first.beforeModel
    __tool__ -. "model" .-> First.first.beforeModel
    __tool__ -. "end" .-> Second.second.after
    Second.second.after -. "next" .-> First.first.after
    Second.second.after -. "tool" .-> __tool__
    First.first.after -. "next" .-> __end__
    First.first.after -. "model" .-> First.first.beforeModel
    First.first.after -. "end" .-> __end__
"""


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_the_graph_has_exactly_the_pinned_nodes_and_edges(case):
    view = agent(case).graph.view
    assert view.nodes == GOLDEN[case].nodes
    assert [(e.source, e.target, e.label, e.conditional) for e in view.edges] == GOLDEN[case].edges


MERMAID = {"plain": MERMAID_PLAIN, "tools": MERMAID_TOOLS, "one": MERMAID_ONE, "two": MERMAID_TWO}


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_the_mermaid_text_is_pinned(case):
    assert agent(case).get_graph("mermaid") == MERMAID[case]


def test_the_instruction_hook_is_always_first():
    class Early(ModelHook):
        def before_model(self, state, config):
            return None

    graph_agent = ReactAgent("a", ScriptedChatModel([]), instruction="hi", hooks=[Early()])
    assert graph_agent.graph.view.nodes[0] == "InstructionAgentHook.instruction.before"
    assert graph_agent.graph.view.edges[0].target == "InstructionAgentHook.instruction.before"


def test_two_hooks_with_the_same_full_name_are_refused_with_a_hint():
    with pytest.raises(
        GraphSetupError, match=r"two hooks are named 'Everywhere.everywhere'.*name="
    ):
        ReactAgent("a", ScriptedChatModel([]), hooks=[Everywhere(), Everywhere()]).get_graph()


def test_two_hooks_of_one_class_with_distinct_names_are_fine():
    first, second = Everywhere(), Everywhere()
    second.name = "again"
    nodes = ReactAgent("a", ScriptedChatModel([]), hooks=[first, second]).graph.view.nodes
    assert "Everywhere.again.before" in nodes and "Everywhere.everywhere.before" in nodes


def test_a_jump_to_tool_without_tools_is_refused():
    with pytest.raises(GraphSetupError, match=r"may jump to TOOL.*no tools"):
        ReactAgent("a", ScriptedChatModel([]), hooks=[Second()]).get_graph()


@pytest.mark.parametrize(
    ("can_jump_to", "said"),
    [
        (("end", "finish"), r"has 'finish' in can_jump_to, which is not a jump target"),
        ("end", r"has can_jump_to='end'; give a tuple of jump targets"),
    ],
)
def test_a_can_jump_to_that_is_not_a_tuple_of_targets_is_refused_naming_the_targets(
    can_jump_to, said
):
    class Stopper(ModelHook):
        def before_model(self, state, config):
            return None

    Stopper.can_jump_to = can_jump_to
    with pytest.raises(
        GraphSetupError,
        match=rf"'Stopper.stopper' {said}.*JumpTo.MODEL \('model'\), JumpTo.TOOL \('tool'\), JumpTo.END \('end'\)",
    ):
        ReactAgent("a", ScriptedChatModel([]), hooks=[Stopper()]).get_graph()


def test_a_can_jump_to_given_as_a_set_is_wired_in_jump_to_order():
    class Stopper(ModelHook):
        can_jump_to = {JumpTo.END, "model"}

        def before_model(self, state, config):
            return None

    hook = Stopper()
    assert hook.jump_targets() == (JumpTo.MODEL, JumpTo.END)
    assert (
        "Stopper.stopper.beforeModel"
        in ReactAgent("a", ScriptedChatModel([]), hooks=[hook]).graph.view.nodes
    )


def test_the_graph_is_built_once_on_first_use():
    agent_ = agent("tools")
    assert agent_._compiled is None
    assert agent_.graph is agent_.graph
