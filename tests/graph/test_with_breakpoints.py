"""``CompiledGraph.with_breakpoints``: the same graph pausing at other nodes, as a run of
LangGraph's ``stream(interrupt_before=...)`` does, without compiling again."""

from __future__ import annotations

from typing import Any

import pytest

from graph_agent import (
    END,
    START,
    Command,
    CompileConfig,
    CompiledGraph,
    GraphSetupError,
    MemorySaver,
    StateGraph,
)
from graph_agent.graph.types import RunnableConfig


def _graph(**options: Any) -> CompiledGraph:
    graph = StateGraph("two")
    graph.add_node("a", lambda state: {"x": state["x"] + 1})
    graph.add_node("b", lambda state: {"x": state["x"] * 10})
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    return graph.compile(CompileConfig(saver=MemorySaver(), **options))


def test_it_pauses_where_asked_and_leaves_the_graph_as_it_was() -> None:
    graph = _graph()
    paused = graph.with_breakpoints(before=["b"])
    config = RunnableConfig(thread_id="t")
    assert paused.invoke({"x": 1}, config).data() == {"x": 2}
    assert graph.get_state(config).next == ("b",)
    assert graph.invoke(Command(resume=None), config).data() == {"x": 20}
    other = RunnableConfig(thread_id="u")
    assert graph.invoke({"x": 1}, other).data() == {"x": 20}


def test_star_is_every_node_and_after_pauses_after() -> None:
    graph = _graph()
    config = RunnableConfig(thread_id="t")
    everywhere = graph.with_breakpoints(before="*")
    assert everywhere.invoke({"x": 1}, config).data() == {"x": 1}
    assert everywhere.invoke(None, config).data() == {"x": 2}
    after = graph.with_breakpoints(after=["a"])
    assert after.invoke({"x": 3}, RunnableConfig(thread_id="u")).data() == {"x": 4}


def test_none_keeps_the_compiled_breakpoints_and_a_list_replaces_them() -> None:
    graph = _graph(interrupt_before=["b"])
    config = RunnableConfig(thread_id="t")
    assert graph.with_breakpoints(after=[]).invoke({"x": 1}, config).data() == {"x": 2}
    free = graph.with_breakpoints(before=[])
    assert free.invoke({"x": 1}, RunnableConfig(thread_id="u")).data() == {"x": 20}


def test_a_name_that_is_no_node_is_named() -> None:
    with pytest.raises(GraphSetupError, match=r"interrupt_after names unknown node\(s\): 'c'"):
        _graph().with_breakpoints(after=["c"])
