"""Tests for graph_agent.graph.render: golden text per format, escaping, and the real renderers."""

from __future__ import annotations

import re
import subprocess
from itertools import pairwise
from pathlib import Path

import pytest

from graph_agent.graph.errors import GraphSetupError
from graph_agent.graph.render import (
    END,
    START,
    EdgeView,
    GraphView,
    is_safe_mermaid_id,
    render,
    to_ascii,
    to_dot,
    to_mermaid,
    to_plantuml,
)
from tests.renderers import mermaid_command, require

FORMATS = ("mermaid", "plantuml", "dot", "ascii")


def edge(
    source: str, target: str, label: str | None = None, *, conditional: bool = False
) -> EdgeView:
    return EdgeView(source=source, target=target, label=label, conditional=conditional)


FAN_LOOP = GraphView(
    name="demo",
    nodes=("a", "b", "c", "join"),
    edges=(
        edge(START, "a"),
        edge("a", "b"),
        edge("a", "c"),
        edge("b", "join"),
        edge("c", "join"),
        edge("join", "a", "again", conditional=True),
        edge("join", END, "done", conditional=True),
    ),
)


def send_view() -> GraphView:
    """A map-reduce graph built with Send: a router's Send edge, and a node's labelled goto."""
    from graph_agent import AppendStrategy, Command, Send, StateGraph

    g = StateGraph("map_reduce", key_strategies={"results": AppendStrategy()})
    g.add_node("plan", lambda s: None)
    g.add_node("work", lambda s: Command(goto=Send("check", s)), destinations={"check": "Send"})
    g.add_node("check", lambda s: {"results": [s["n"]]})
    g.add_node("reduce", lambda s: None, defer=True)
    g.add_edge(START, "plan").add_edge("check", "reduce").add_edge("reduce", END)
    g.add_conditional_edges("plan", lambda s: [Send("work", {"n": 1})], sends=["work"])
    return g.compile().view


def test_send_edges_are_conditional_and_labelled_send() -> None:
    sends = [e for e in SEND_VIEW.edges if e.label == "Send"]
    assert [(e.source, e.target, e.conditional) for e in sends] == [
        ("plan", "work", True),
        ("work", "check", True),
    ]


MERMAID_KEYWORDS = [
    "end",
    "graph",
    "subgraph",
    "flowchart",
    "style",
    "class",
    "classDef",
    "linkStyle",
    "click",
    "call",
    "href",
    "interpolate",
]

AWKWARD_NAMES = (
    *MERMAID_KEYWORDS,
    "End",
    "GRAPH",
    "_self",
    "_blank",
    "_parent",
    "_top",
    "node",
    "edge",
    "digraph",
    "strict",
    "state",
    "title",
    "end.x",
    "end-x",
    "style.x",
    "InstructionAgentHook.instruction.before",
    "__model__",
    "with space",
    'q"uote',
    "back\\slash\\",
    "\\n",
    "nl\nx",
    "#quot;",
    "<b>x</b>",
    "`md`",
    "ünï 漢字",
    "n0",
    "a--b",
    "a;b",
    "a|b@c=d~e",
    "a<b>c",
    "a(b[c{d",
    "%date()",
    "%%{init}%%",
    "**b** //i// ~~w~~",
    "[*]",
    "",
)

AWKWARD_LABELS = (None, "again", '"x"', "a|b", "end", ".->", "-->", "#35;", "<i>", "__u__", "\\")


def awkward_view() -> GraphView:
    """A chain through every awkward name, alternating plain and conditional edges."""
    names = AWKWARD_NAMES
    edges = [edge(START, names[0])]
    for index, (source, target) in enumerate(pairwise(names)):
        label = AWKWARD_LABELS[index % len(AWKWARD_LABELS)]
        edges.append(edge(source, target, label, conditional=index % 2 == 0))
    edges += [edge(names[-1], names[0], "again", conditional=True), edge(names[-1], END)]
    return GraphView(name='awkward "graph" \\ %date() __x__', nodes=names, edges=tuple(edges))


SEND_VIEW = send_view()
VIEWS = [FAN_LOOP, awkward_view(), SEND_VIEW]
VIEW_IDS = ["fan_loop", "awkward", "send"]


def test_mermaid_golden_text_for_a_fan_out_fan_in_loop() -> None:
    assert to_mermaid(FAN_LOOP) == (
        "flowchart TD\n"
        '    %% graph "demo"\n'
        '    __start__(["__start__"])\n'
        '    a["a"]\n'
        '    b["b"]\n'
        '    c["c"]\n'
        '    join["join"]\n'
        '    __end__(("__end__"))\n'
        "    __start__ --> a\n"
        "    a --> b\n"
        "    a --> c\n"
        "    b --> join\n"
        "    c --> join\n"
        '    join -. "again" .-> a\n'
        '    join -. "done" .-> __end__\n'
    )


def test_plantuml_golden_text_for_a_fan_out_fan_in_loop() -> None:
    assert to_plantuml(FAN_LOOP) == (
        "@startuml\n"
        "hide empty description\n"
        "title demo\n"
        'state "a" as s0\n'
        'state "b" as s1\n'
        'state "c" as s2\n'
        'state "join" as s3\n'
        "[*] --> s0\n"
        "s0 --> s1\n"
        "s0 --> s2\n"
        "s1 --> s3\n"
        "s2 --> s3\n"
        "s3 -[dashed]-> s0 : again\n"
        "s3 -[dashed]-> [*] : done\n"
        "@enduml\n"
    )


def test_dot_golden_text_for_a_fan_out_fan_in_loop() -> None:
    assert to_dot(FAN_LOOP) == (
        'digraph "demo" {\n'
        "    node [shape=box];\n"
        '    "__start__" [shape=ellipse];\n'
        '    "a";\n'
        '    "b";\n'
        '    "c";\n'
        '    "join";\n'
        '    "__end__" [shape=ellipse, peripheries=2];\n'
        '    "__start__" -> "a";\n'
        '    "a" -> "b";\n'
        '    "a" -> "c";\n'
        '    "b" -> "join";\n'
        '    "c" -> "join";\n'
        '    "join" -> "a" [label="again", style=dashed];\n'
        '    "join" -> "__end__" [label="done", style=dashed];\n'
        "}\n"
    )


def test_ascii_golden_text_for_a_fan_out_fan_in_loop() -> None:
    assert to_ascii(FAN_LOOP) == (
        "Graph: demo\n"
        "===========\n"
        "\n"
        "(__start__)\n"
        "     |\n"
        "     v\n"
        "    [a]\n"
        "     |\n"
        "     v\n"
        " [b]   [c]\n"
        "     |\n"
        "     v\n"
        "   [join]\n"
        "     |\n"
        "     v\n"
        " (__end__)\n"
        "\n"
        "Edges:\n"
        "  __start__ --> a\n"
        "  a --> b\n"
        "  a --> c\n"
        "  b --> join\n"
        "  c --> join\n"
        "  join -.again.-> a\n"
        "  join -.done.-> __end__\n"
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_render_dispatches_to_the_renderer_of_each_format(fmt: str) -> None:
    renderers = {"mermaid": to_mermaid, "plantuml": to_plantuml, "dot": to_dot, "ascii": to_ascii}
    assert render(FAN_LOOP, fmt) == renderers[fmt](FAN_LOOP)


def test_render_defaults_to_mermaid() -> None:
    assert render(FAN_LOOP) == to_mermaid(FAN_LOOP)


def test_render_rejects_an_unknown_format_naming_the_valid_ones() -> None:
    with pytest.raises(GraphSetupError) as caught:
        render(FAN_LOOP, "svg")
    assert str(caught.value) == (
        "unknown diagram format 'svg': use one of 'mermaid', 'plantuml', 'dot', 'ascii'"
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_is_deterministic_and_ends_with_a_newline(fmt: str) -> None:
    view = awkward_view()
    first = render(view, fmt)
    assert first == render(view, fmt)
    assert first.endswith("\n")


@pytest.mark.parametrize("fmt", FORMATS)
def test_start_and_end_are_drawn_only_when_an_edge_touches_them(fmt: str) -> None:
    view = GraphView(name="g", nodes=("a", "b"), edges=(edge("a", "b"),))
    text = render(view, fmt)
    assert START not in text
    assert END not in text
    assert "[*]" not in text


@pytest.mark.parametrize(
    "name",
    [
        *MERMAID_KEYWORDS,
        "END",
        "Graph",
        "classdef",
        "_self",
        "_blank",
        "_parent",
        "_top",
        "end.x",
        "End.before",
        "style.x",
        "end-x",
        "with space",
        "a--b",
        "a;b",
        "a|b",
        "a@b",
        "a=b",
        "a~b",
        "a<b",
        "a>b",
        "a(b",
        "a[b",
        "a{b",
        'q"uote',
        "it's",
        "ünï",
        "a-b",
        "",
    ],
)
def test_a_mermaid_id_is_unsafe_for_keywords_and_special_characters(name: str) -> None:
    assert not is_safe_mermaid_id(name)


@pytest.mark.parametrize(
    "name",
    [
        "a",
        "join",
        "__START__",
        "__model__",
        "InstructionAgentHook.instruction.before",
        "endpoint",
        "end_x",
        "x.end",
        "n0",
        "o",
        "x",
        "1",
        "default",
        "direction",
    ],
)
def test_a_mermaid_id_is_safe_for_letters_digits_underscores_and_dots(name: str) -> None:
    assert is_safe_mermaid_id(name)


@pytest.mark.parametrize("name", ["end", "end.x", "with space", "ünï"])
def test_mermaid_draws_an_unsafe_name_as_a_label_on_a_generated_id(name: str) -> None:
    view = GraphView(name="g", nodes=("ok", name), edges=(edge("ok", name),))
    assert to_mermaid(view).splitlines()[2:] == [
        '    ok["ok"]',
        f'    n0["{name}"]',
        "    ok --> n0",
    ]


def test_mermaid_generated_ids_skip_safe_names_that_look_generated() -> None:
    view = GraphView(name="g", nodes=("end", "n0", "graph", "n2"), edges=())
    assert to_mermaid(view).splitlines()[2:] == [
        '    n1["end"]',
        '    n0["n0"]',
        '    n3["graph"]',
        '    n2["n2"]',
    ]


def test_mermaid_labels_write_characters_mermaid_would_interpret_as_entities() -> None:
    view = GraphView(name="g", nodes=('say "hi" #1 <b>&`x`%%{', "back\\n\nx"), edges=())
    assert to_mermaid(view).splitlines()[2:] == [
        '    n0["say #quot;hi#quot; #35;1 #lt;b#gt;#amp;#96;x#96;#37;#37;{"]',
        '    n1["back#92;n<br>x"]',
    ]


def test_mermaid_draws_conditional_edges_dotted_and_plain_labels_in_pipes() -> None:
    view = GraphView(
        name="g",
        nodes=("a", "b"),
        edges=(
            edge("a", "b", "go"),
            edge("a", "b", 'say "x"|y', conditional=True),
            edge("b", "a", conditional=True),
        ),
    )
    assert to_mermaid(view).splitlines()[4:] == [
        '    a -->|"go"| b',
        '    a -. "say #quot;x#quot;|y" .-> b',
        "    b -.-> a",
    ]


def test_mermaid_gives_an_empty_name_a_zero_width_label() -> None:
    view = GraphView(name="", nodes=("",), edges=())
    assert to_mermaid(view).splitlines()[1:] == ['    %% graph "#8203;"', '    n0["#8203;"]']


def test_dot_escapes_quotes_and_backslashes_in_ids_labels_and_the_graph_name() -> None:
    view = GraphView(
        name='my "graph" \\',
        nodes=('say "hi"', "back\\slash\\", "two\nlines"),
        edges=(edge('say "hi"', "back\\slash\\", 'a "label" \\', conditional=True),),
    )
    assert to_dot(view).splitlines() == [
        'digraph "my \\"graph\\" \\\\" {',
        "    node [shape=box];",
        '    "say \\"hi\\"";',
        '    "back\\\\slash\\\\";',
        '    "two\\nlines";',
        '    "say \\"hi\\"" -> "back\\\\slash\\\\" [label="a \\"label\\" \\\\", style=dashed];',
        "}",
    ]


def test_dot_quotes_keywords_and_labels_names_graphviz_would_treat_as_anonymous() -> None:
    view = GraphView(name="graph", nodes=("node", "edge", "%x"), edges=(edge("node", "edge"),))
    assert to_dot(view).splitlines()[2:5] == [
        '    "node";',
        '    "edge";',
        '    "%x" [label="%x"];',
    ]


def test_plantuml_writes_awkward_names_through_aliases_with_literal_characters() -> None:
    view = GraphView(
        name="g",
        nodes=('say "hi"', "__model__", "a.b-c_d", "ünï 漢字", "%date() \\n <b>", "end"),
        edges=(edge("end", "__model__", "__x__ : y", conditional=True),),
    )
    assert to_plantuml(view).splitlines()[3:] == [
        'state "say <U+0022>hi<U+0022>" as s0',
        'state "<U+005F><U+005F>model<U+005F><U+005F>" as s1',
        'state "a.b-c_d" as s2',
        'state "ünï 漢字" as s3',
        'state "<U+0025>date<U+0028><U+0029> <U+005C>n <U+003C>b<U+003E>" as s4',
        'state "end" as s5',
        "s5 -[dashed]-> s1 : <U+005F><U+005F>x<U+005F><U+005F> <U+003A> y",
        "@enduml",
    ]


def test_plantuml_gives_an_empty_name_a_zero_width_blank() -> None:
    view = GraphView(name="", nodes=("",), edges=())
    assert to_plantuml(view).splitlines()[2:4] == ["title <U+200B>", 'state "<U+200B>" as s0']


def test_every_format_draws_edge_endpoints_missing_from_the_nodes() -> None:
    view = GraphView(name="g", nodes=("a",), edges=(edge("a", "ghost"),))
    assert 'n0["ghost"]' not in to_mermaid(view)
    assert 'ghost["ghost"]' in to_mermaid(view)
    assert 'state "ghost" as s1' in to_plantuml(view)
    assert '"ghost";' in to_dot(view)
    assert "[ghost]" in to_ascii(view)


def test_ascii_layers_follow_the_longest_path_and_put_end_last() -> None:
    view = GraphView(
        name="g",
        nodes=("a", "b", "c"),
        edges=(
            edge(START, "a"),
            edge("a", "b"),
            edge("b", "c"),
            edge("a", "c"),
            edge("a", END),
            edge("c", "a", conditional=True),
        ),
    )
    rows = [line.strip() for line in to_ascii(view).split("\n\n")[1].splitlines()]
    assert [row for row in rows if row not in ("|", "v")] == [
        "(__start__)",
        "[a]",
        "[b]",
        "[c]",
        "(__end__)",
    ]


def test_ascii_lists_every_edge_with_its_kind_and_label() -> None:
    view = GraphView(
        name="g",
        nodes=("a", "b"),
        edges=(
            edge("a", "b"),
            edge("a", "b", "go"),
            edge("b", "a", conditional=True),
            edge("b", "b", "again", conditional=True),
        ),
    )
    assert to_ascii(view).split("Edges:\n")[1] == (
        "  a --> b\n  a --go--> b\n  b -.-> a\n  b -.again.-> b\n"
    )


def test_ascii_escapes_control_characters_and_survives_a_graph_without_edges() -> None:
    view = GraphView(name="g\nh", nodes=("x\ty",), edges=())
    assert to_ascii(view) == "Graph: g\\nh\n===========\n\n[x\\ty]\n\nEdges:\n  (none)\n"


def test_ascii_layout_handles_a_long_chain_without_recursion_limits() -> None:
    names = tuple(f"n{index}" for index in range(3000))
    edges = tuple(edge(a, b) for a, b in pairwise(names))
    text = to_ascii(GraphView(name="long", nodes=names, edges=edges))
    assert text.count("[n") == 3000


def run_tool(
    command: list[str], source: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, input=source, capture_output=True, text=True, timeout=120, cwd=cwd, check=False
    )


def distinct_node_count(view: GraphView, *, with_start_end: bool = True) -> int:
    names = {*view.nodes, *(name for e in view.edges for name in (e.source, e.target))}
    return len(names if with_start_end else names - {START, END})


@pytest.mark.parametrize("view", VIEWS, ids=VIEW_IDS)
def test_graphviz_dot_renders_the_dot_output_with_every_node_and_edge(view: GraphView) -> None:
    dot = require("dot", "apt-get install graphviz")
    source = to_dot(view)
    svg = run_tool([dot, "-Tsvg"], source)
    assert svg.returncode == 0, svg.stderr
    plain = run_tool([dot, "-Tplain"], source)
    assert plain.returncode == 0, plain.stderr
    kinds = [line.split(" ", 1)[0] for line in plain.stdout.splitlines()]
    assert kinds.count("node") == distinct_node_count(view)
    assert kinds.count("edge") == len(view.edges)


@pytest.mark.parametrize("view", VIEWS, ids=VIEW_IDS)
def test_plantuml_renders_the_plantuml_output_without_a_syntax_error(view: GraphView) -> None:
    require("plantuml", "apt-get install plantuml")
    result = run_tool(["plantuml", "-pipe", "-tsvg"], to_plantuml(view))
    assert result.returncode == 0, result.stderr
    for error in ("Syntax Error", "An error has occured", "Exception"):
        assert error not in result.stdout
    states = len(re.findall(r'<rect[^>]*rx="12\.5"', result.stdout))
    assert states == distinct_node_count(view, with_start_end=False)


@pytest.mark.parametrize("view", VIEWS, ids=VIEW_IDS)
def test_mermaid_cli_renders_the_mermaid_output_with_every_node_and_edge(
    view: GraphView, tmp_path: Path
) -> None:
    command = mermaid_command(tmp_path / "g.svg", tmp_path)
    result = run_tool(command, to_mermaid(view), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    svg = (tmp_path / "g.svg").read_text()
    assert svg.count('<g class="node default') == distinct_node_count(view)
    assert len(re.findall(r"<path[^>]*flowchart-link", svg)) == len(view.edges)
    dotted = len(re.findall(r"<path[^>]*edge-pattern-dotted[^>]*flowchart-link", svg))
    assert dotted == sum(e.conditional for e in view.edges)
