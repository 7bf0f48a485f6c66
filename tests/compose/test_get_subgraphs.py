"""``CompiledGraph.get_subgraphs``: the graphs a graph's nodes run, by namespace (LangGraph's
``get_subgraphs``), and what a compiled graph keeps of its builder's key declarations."""

from __future__ import annotations

import pytest

from graph_agent import END, START, AppendStrategy, ReactAgent, StateGraph
from graph_agent.graph.compiled import CompiledGraph
from graph_agent.models import ScriptedChatModel


def leaf() -> CompiledGraph:
    graph = StateGraph("leaf")
    graph.add_node("work", lambda state: {"done": True})
    graph.add_edge(START, "work").add_edge("work", END)
    return graph.compile()


def middle() -> CompiledGraph:
    graph = StateGraph("middle", key_strategies={"log": AppendStrategy()}, private_keys=["_n"])
    graph.add_node("inner", leaf())
    graph.add_node("note", lambda state: {"log": "noted"})
    graph.add_edge(START, "inner").add_edge("inner", "note").add_edge("note", END)
    return graph.compile()


def top() -> CompiledGraph:
    graph = StateGraph("top")
    graph.add_node("mid", middle())
    graph.add_node("helper", ReactAgent("helper", model=ScriptedChatModel(["hi"])))
    graph.add_node("plain", lambda state: {})
    graph.add_edge(START, "mid").add_edge("mid", "helper")
    graph.add_edge("helper", "plain").add_edge("plain", END)
    return graph.compile()


def test_only_the_next_level_without_recurse() -> None:
    found = dict(top().get_subgraphs())
    assert list(found) == ["mid", "helper"]
    assert found["mid"].name == "middle" and found["helper"].name == "helper"


def test_recurse_names_nested_subgraphs_by_their_path() -> None:
    assert [name for name, _ in top().get_subgraphs(recurse=True)][:2] == ["mid", "mid|inner"]


def test_a_namespace_picks_one_subgraph_and_ignores_task_ids() -> None:
    assert [name for name, _ in top().get_subgraphs(namespace="mid|inner")] == ["mid|inner"]
    [(name, graph)] = top().get_subgraphs(namespace="mid:4f1c|inner:77aa")
    assert name == "mid|inner" and graph.name == "leaf"
    assert [name for name, _ in top().get_subgraphs(namespace="mid", recurse=True)] == [
        "mid",
        "mid|inner",
    ]


def test_an_unknown_namespace_says_which_subgraphs_there_are() -> None:
    with pytest.raises(KeyError) as missing:
        list(top().get_subgraphs(namespace="mid|elsewhere"))
    assert "elsewhere" in missing.value.args[0] and "inner" in missing.value.args[0]
    with pytest.raises(KeyError):
        list(top().get_subgraphs(namespace="plain"))  # a function node runs no graph


def test_a_compiled_graph_keeps_its_private_keys_and_strategies() -> None:
    graph = middle()
    assert graph.private_keys == frozenset({"_n"})
    assert list(graph.strategies) == ["log"]
    assert isinstance(graph.strategies["log"], AppendStrategy)
