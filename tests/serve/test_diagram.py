"""The graph as SVG (``?format=svg``): Graphviz's layout where installed, the built-in one
without it; either way every node and edge drawn, subgraphs as clusters, and each node's group
findable by its name."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path

import httpx
import pytest

from graph_agent import END, START, StateGraph
from graph_agent.graph.render import GraphView
from graph_agent.serve import diagram
from graph_agent.serve.diagram import graph_svg, layout_svg
from tests.renderers import require
from tests.serve.conftest import Server
from tests.serve.studio_targets import demo, nested

SVG = "{http://www.w3.org/2000/svg}"


def _odd_names() -> GraphView:
    graph = StateGraph("odd")
    graph.add_node('say "hi" <now> & go', lambda state: {})
    graph.add_node("loop back", lambda state: {})
    graph.add_edge(START, 'say "hi" <now> & go')
    graph.add_edge('say "hi" <now> & go', "loop back")
    graph.add_conditional_edges("loop back", lambda state: END, {"again": "loop back", "done": END})
    return graph.compile().view


def _groups(svg: str, kind: str) -> dict[str, ElementTree.Element]:
    root = ElementTree.fromstring(svg)  # well-formed XML, whatever the names
    return {
        group.attrib[f"data-{kind}"]: group
        for group in root.iter(f"{SVG}g")
        if f"data-{kind}" in group.attrib
    }


def test_graphviz_draws_every_node_findable_by_its_name() -> None:
    require("dot", "apt-get install graphviz")
    svg = graph_svg(_odd_names())
    assert 'data-layout="graphviz"' in svg
    nodes = _groups(svg, "node")
    assert set(nodes) == {START, 'say "hi" <now> & go', "loop back", END}


def test_graphviz_draws_a_subgraph_as_a_cluster_named_after_its_node() -> None:
    require("dot", "apt-get install graphviz")
    svg = graph_svg(nested().compile().view, xray=True)
    assert set(_groups(svg, "cluster")) == {"research"}
    assert {"plan", "write", "research/search", "research/summarise"} <= set(_groups(svg, "node"))


def test_without_graphviz_the_built_in_layout_still_shows_nodes_edges_and_clusters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(diagram.shutil, "which", lambda name: None)
    view = nested().compile().view
    svg = graph_svg(view, xray=True)
    assert 'data-layout="builtin"' in svg
    nodes = _groups(svg, "node")
    inner = ["research/__start__", "research/search", "research/summarise", "research/__end__"]
    assert set(nodes) == {START, "plan", *inner, "write", END}
    assert set(_groups(svg, "cluster")) == {"research"}
    root = ElementTree.fromstring(svg)
    drawn = [g for g in root.iter(f"{SVG}g") if g.get("class") == "edge"]
    edges = {(g.attrib["data-source"], g.attrib["data-target"]) for g in drawn}
    assert ("plan", "research/__start__") in edges
    assert ("research/__end__", "write") in edges
    assert len(drawn) == len(edges) == 7


def test_the_built_in_layout_keeps_names_text_and_labels_loops() -> None:
    svg = layout_svg(_odd_names())
    nodes = _groups(svg, "node")
    assert 'say "hi" <now> & go' in nodes
    texts = ["".join(text.itertext()) for text in ElementTree.fromstring(svg).iter(f"{SVG}text")]
    assert "again" in texts and "done" in texts  # the router's path keys on its edges
    assert 'stroke-dasharray="5,4"' in svg  # conditional edges dashed


def test_the_built_in_layout_puts_no_two_nodes_on_each_other() -> None:
    svg = layout_svg(demo().graph.view)
    boxes = []
    for group in _groups(svg, "node").values():
        shape = group.find(f"{SVG}rect")
        if shape is not None:
            x, y = float(shape.attrib["x"]), float(shape.attrib["y"])
            w, h = float(shape.attrib["width"]), float(shape.attrib["height"])
        else:
            shape = group.find(f"{SVG}ellipse")
            assert shape is not None
            rx, ry = float(shape.attrib["rx"]), float(shape.attrib["ry"])
            x, y = float(shape.attrib["cx"]) - rx, float(shape.attrib["cy"]) - ry
            w, h = 2 * rx, 2 * ry
        boxes.append((x, y, x + w, y + h))
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)


def test_a_failing_dot_falls_back_to_the_built_in_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diagram.shutil, "which", lambda name: "/bin/false")
    assert 'data-layout="builtin"' in graph_svg(_odd_names())


def test_the_graph_route_answers_svg(tmp_path: Path) -> None:
    with Server(tmp_path / "serve.db", [demo(), nested()]) as server:
        response = httpx.get(f"{server.url}/assistants/nested/graph?format=svg&xray=true")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("image/svg+xml")
        assert set(_groups(response.text, "cluster")) == {"research"}
        flat = httpx.get(f"{server.url}/assistants/demo/graph?format=svg").text
        assert {"__model__", "__tool__"} <= set(_groups(flat, "node"))
