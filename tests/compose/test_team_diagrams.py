"""Diagrams of nested teams and subgraphs: with ``xray`` every agent and subgraph is drawn open
as a cluster (Mermaid ``subgraph``, DOT ``cluster_N``, PlantUML composite state), and the
result renders with Graphviz (and PlantUML and Mermaid when installed)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from graph_agent import END, START, ParallelAgent, SequentialAgent, StateGraph, tool
from tests.compose.agents import scripted
from tests.renderers import mermaid_command, require


@tool
def search(query: str) -> str:
    """Search the web."""
    return query


def nested_team() -> SequentialAgent:
    """``team``: ``research`` (web with a tool, papers) in parallel, then ``writer``."""
    research = ParallelAgent(
        "research", [scripted("web", "A.", tools=[search]), scripted("papers", "B.")]
    )
    return SequentialAgent("team", [research, scripted("writer", "C.")])


# drawn nodes: the team's START/END; research's START/END; web's START, model, tool, END;
# papers' START, model, END; writer's START, model, END
XRAY_NODES = 2 + 2 + 4 + 3 + 3
CLUSTERS = ["research", "web", "papers", "writer"]


def run_tool(
    command: list[str], source: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, input=source, capture_output=True, text=True, timeout=120, cwd=cwd
    )


def plain_layout(source: str) -> list[str]:
    """The first word of each ``dot -Tplain`` line (``node``, ``edge``, ...)."""
    dot = require("dot", "apt-get install graphviz")
    result = run_tool([dot, "-Tplain"], source)
    assert result.returncode == 0, result.stderr
    return [line.split(" ", 1)[0] for line in result.stdout.splitlines()]


def test_the_xray_dot_of_a_nested_team_renders_with_graphviz_with_every_node_and_edge():
    source = nested_team().get_graph("dot", xray=True)

    kinds = plain_layout(source)

    assert kinds.count("node") == XRAY_NODES
    assert kinds.count("edge") == source.count(" -> ")
    assert re.findall(r'subgraph "cluster_\d+"', source) == [
        f'subgraph "cluster_{n}"' for n in range(4)
    ]
    assert re.findall(r"^\s+label=\"(\w+)\";$", source, flags=re.MULTILINE) == CLUSTERS
    svg = run_tool(["dot", "-Tsvg"], source)
    assert svg.returncode == 0, svg.stderr
    assert svg.stdout.count('class="cluster"') == len(CLUSTERS)


def test_without_xray_a_team_draws_its_agents_as_single_nodes():
    source = nested_team().get_graph("dot")

    kinds = plain_layout(source)

    assert kinds.count("node") == 4
    assert "cluster" not in source


def test_the_xray_dot_nests_clusters_like_the_teams():
    source = nested_team().get_graph("dot", xray=True)

    research = source[source.index('label="research"') : source.index('label="writer"')]

    assert 'label="web"' in research and 'label="papers"' in research
    assert (
        '"research/web/__model__" -> "research/web/__tool__" [label="tools", style=dashed];'
        in source
    )
    assert '"__start__" -> "research/__start__";' in source
    assert '"research/__end__" -> "writer/__start__";' in source
    assert '"writer/__end__" -> "__end__";' in source


def test_the_xray_mermaid_of_a_nested_team_groups_agents_in_subgraphs():
    source = nested_team().get_graph("mermaid", xray=True)
    lines = source.splitlines()

    opened = [line.strip() for line in lines if line.strip().startswith("subgraph ")]
    assert opened == [f'subgraph sg{n}["{name}"]' for n, name in enumerate(CLUSTERS)]
    assert sum(line.strip() == "end" for line in lines) == len(CLUSTERS)
    declared = {m.group(1) for m in re.finditer(r"^\s+(\w+)[\[(]", source, flags=re.MULTILINE)}
    assert len(declared) == XRAY_NODES
    for source_id, target_id in re.findall(
        r"^\s+(\w+) -[-.].*?>\s*(\w+)$", source, flags=re.MULTILINE
    ):
        assert {source_id, target_id} <= declared


def test_the_xray_plantuml_of_a_nested_team_uses_composite_states():
    source = nested_team().get_graph("plantuml", xray=True)

    composites = re.findall(r'^\s*state "(\w+)" as c\d+ \{$', source, flags=re.MULTILINE)
    assert composites == CLUSTERS
    assert source.count("{") == source.count("}") == len(CLUSTERS)
    assert source.count("[*]") == 2
    assert (
        len(re.findall(r"^\s*state \"[^\"]*\" as s\d+$", source, flags=re.MULTILINE))
        == XRAY_NODES - 2
    )


def test_the_xray_plantuml_renders_without_a_syntax_error():
    require("plantuml", "apt-get install plantuml")

    result = run_tool(
        ["plantuml", "-pipe", "-tsvg"], nested_team().get_graph("plantuml", xray=True)
    )

    assert result.returncode == 0, result.stderr
    for error in ("Syntax Error", "An error has occured", "Exception"):
        assert error not in result.stdout
    for name in CLUSTERS:
        assert f">{name}<" in result.stdout


def test_the_xray_mermaid_renders_with_mermaid_cli(tmp_path):
    command = mermaid_command(tmp_path / "team.svg", tmp_path)

    result = run_tool(command, nested_team().get_graph("mermaid", xray=True), cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    svg = (tmp_path / "team.svg").read_text()
    assert svg.count('<g class="node default') == XRAY_NODES
    assert svg.count('class="cluster"') == len(CLUSTERS)


def test_a_plain_subgraph_node_is_drawn_open_with_xray():
    child = StateGraph("child")
    child.add_node("a", lambda state: None).add_node("b", lambda state: None)
    child.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    parent = StateGraph("parent")
    parent.add_node("prep", lambda state: None).add_node("sub", child.compile())
    parent.add_edge(START, "prep").add_edge("prep", "sub").add_edge("sub", END)
    app = parent.compile()

    ascii_text = app.get_graph("ascii", xray=True)
    kinds = plain_layout(app.get_graph("dot", xray=True))

    assert "sub/__start__ --> sub/a" in ascii_text and "prep --> sub/__start__" in ascii_text
    assert kinds.count("node") == 2 + 1 + 4
    assert app.get_graph("ascii").count("[sub]") == 1
