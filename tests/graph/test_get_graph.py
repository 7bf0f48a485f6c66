"""get_graph(): the compiled graph's own structure in every format, rendered for real."""

from __future__ import annotations

import subprocess

import pytest

from graph_agent import END, START, GraphSetupError, StateGraph
from tests.graph.test_execution import fan_graph
from tests.renderers import require


def test_every_format_shows_the_same_nodes_and_labelled_conditional_edges():
    app = fan_graph()
    for fmt in ("mermaid", "plantuml", "dot", "ascii"):
        text = app.get_graph(fmt)
        for name in ("join", "again", "done"):
            assert name in text, (fmt, name)
    assert 'join -. "again" .-> a' in app.get_graph("mermaid")
    assert '"join" -> "a" [label="again", style=dashed];' in app.get_graph("dot")


def test_the_default_format_is_mermaid():
    assert fan_graph().get_graph().startswith("flowchart TD")


def test_an_unknown_format_names_the_valid_ones():
    with pytest.raises(GraphSetupError, match=r"'svg'.*'mermaid'"):
        fan_graph().get_graph("svg")


def test_barriers_commands_and_routers_without_path_map_are_drawn():
    g = StateGraph("shapes")
    g.add_node("fan", lambda s: {}).add_node("b", lambda s: {}).add_node("c", lambda s: {})
    g.add_node("join", lambda s: {}, destinations=("b", END))
    g.add_edge(START, "fan").add_edge("fan", "b").add_edge("fan", "c")
    g.add_edge(["b", "c"], "join")
    g.add_conditional_edges("join", lambda s: END)
    edges = {(e.source, e.target, e.conditional) for e in g.compile().view.edges}
    assert {("b", "join", False), ("c", "join", False)} <= edges
    assert ("join", "b", True) in edges and ("join", END, True) in edges
    assert ("join", "fan", True) in edges  # a router without a path_map may go anywhere


def test_the_dot_export_renders_with_graphviz():
    dot = require("dot", "apt-get install graphviz")
    result = subprocess.run(
        [dot, "-Tplain"], input=fan_graph().get_graph("dot"), capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    nodes = [line for line in result.stdout.splitlines() if line.startswith("node ")]
    edges = [line for line in result.stdout.splitlines() if line.startswith("edge ")]
    assert len(nodes) == 6 and len(edges) == 7
