"""Mermaid, PlantUML, DOT and ASCII export of a graph's structure.

The builder describes a graph as a :class:`GraphView` (nodes in ``add_node`` order, edges with
their labels); this module turns the view into text and knows nothing else about graphs.

Node names may be anything (keywords, dots, quotes, spaces, unicode), so every format escapes
them its own way and never lets a name change the drawn graph: Mermaid falls back to generated
ids with the name as a label, DOT quotes every id, PlantUML draws names through aliases.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import count
from typing import Literal, get_args

from graph_agent.graph.errors import GraphSetupError

START = "__start__"
END = "__end__"

DiagramFormat = Literal["mermaid", "plantuml", "dot", "ascii"]


@dataclass(frozen=True, kw_only=True, slots=True)
class EdgeView:
    """One drawn edge. ``conditional`` edges come from a router or a ``Command`` goto."""

    source: str
    target: str
    label: str | None = None
    conditional: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class GraphView:
    """What a diagram shows: the graph's name, its nodes (START/END excluded) and edges."""

    name: str
    nodes: tuple[str, ...]
    edges: tuple[EdgeView, ...]


def render(view: GraphView, fmt: str = "mermaid") -> str:
    """Draw ``view`` as text in one of the supported diagram formats.

    Args:
        view: The graph to draw.
        fmt: ``"mermaid"``, ``"plantuml"``, ``"dot"`` or ``"ascii"``.

    Returns:
        The diagram source, ending with a newline.

    Raises:
        GraphSetupError: ``fmt`` is not a supported format.

    Example:
        >>> view = GraphView(name="demo", nodes=("a",), edges=(
        ...     EdgeView(source=START, target="a"), EdgeView(source="a", target=END)))
        >>> print(render(view, "dot"), end="")
        digraph "demo" {
            node [shape=box];
            "__start__" [shape=ellipse];
            "a";
            "__end__" [shape=ellipse, peripheries=2];
            "__start__" -> "a";
            "a" -> "__end__";
        }
    """
    renderer = _RENDERERS.get(fmt)
    if renderer is None:
        valid = ", ".join(repr(name) for name in get_args(DiagramFormat))
        raise GraphSetupError(f"unknown diagram format {fmt!r}: use one of {valid}")
    return renderer(view)


def _drawn_nodes(view: GraphView) -> list[str]:
    """Every node to draw, in order: START if an edge touches it, the nodes, then END likewise.

    Edge endpoints missing from ``view.nodes`` are drawn too (after the nodes), so that no
    format can reference a node it never declared.
    """
    endpoints = [name for edge in view.edges for name in (edge.source, edge.target)]
    middle = dict.fromkeys([*view.nodes, *endpoints])
    middle.pop(START, None)
    middle.pop(END, None)
    head = [START] if START in endpoints else []
    tail = [END] if END in endpoints else []
    return [*head, *middle, *tail]


_MERMAID_ID = re.compile(r"[A-Za-z0-9_.]+")
# Words the Mermaid flowchart lexer reserves; as an id, or before a ".", they break the parse.
_MERMAID_KEYWORDS = frozenset(
    {
        "end",
        "graph",
        "subgraph",
        "flowchart",
        "style",
        "class",
        "classdef",
        "linkstyle",
        "click",
        "call",
        "href",
        "interpolate",
        "_self",
        "_blank",
        "_parent",
        "_top",
    }
)
# Mermaid decodes "#name;" and "#123;" entities in labels; "<", ">", "&" would be read as HTML,
# a backtick-quoted label as Markdown, a backslash may start a "\n" line break and "%%{" starts
# a directive wherever it is.
_MERMAID_ENTITIES = {
    "\n": "<br>",
    "\\": "#92;",
    "#": "#35;",
    '"': "#quot;",
    "<": "#lt;",
    ">": "#gt;",
    "&": "#amp;",
    "`": "#96;",
    "%": "#37;",
}


def is_safe_mermaid_id(name: str) -> bool:
    """Tell whether ``name`` can be a bare Mermaid node id without changing the graph.

    Safe names hold only ASCII letters, digits, ``_`` and ``.`` and are not a flowchart keyword
    (compared case-insensitively), nor a keyword followed by ``.`` such as ``end.x``.

    Args:
        name: A node name.

    Returns:
        ``True`` when ``name`` may be written as the id itself.
    """
    if _MERMAID_ID.fullmatch(name) is None:
        return False
    return name.split(".", 1)[0].lower() not in _MERMAID_KEYWORDS


def _mermaid_ids(names: list[str]) -> dict[str, str]:
    """Map each name to its Mermaid id: itself when safe, else the next free ``n<k>``."""
    taken = {name for name in names if is_safe_mermaid_id(name)}
    generated = (f"n{k}" for k in count() if f"n{k}" not in taken)
    return {name: name if name in taken else next(generated) for name in names}


def _mermaid_text(text: str) -> str:
    """Quote ``text`` for a Mermaid label, with entities for characters Mermaid would read.

    An empty text becomes a zero-width space: Mermaid rejects an empty label.
    """
    escaped = (
        _MERMAID_ENTITIES.get(char, char if char.isprintable() else f"#{ord(char)};")
        for char in text
    )
    return '"' + ("".join(escaped) or "#8203;") + '"'


def to_mermaid(view: GraphView) -> str:
    """Draw ``view`` as a Mermaid ``flowchart TD``; conditional edges are dotted.

    Args:
        view: The graph to draw.

    Returns:
        Mermaid source; the graph name is in a comment, since Mermaid titles are not
        plain text.
    """
    names = _drawn_nodes(view)
    ids = _mermaid_ids(names)
    shapes = {START: ("([", "])"), END: ("((", "))")}
    lines = ["flowchart TD", f"    %% graph {_mermaid_text(view.name)}"]
    for name in names:
        opening, closing = shapes.get(name, ("[", "]"))
        lines.append(f"    {ids[name]}{opening}{_mermaid_text(name)}{closing}")
    for edge in view.edges:
        source, target = ids[edge.source], ids[edge.target]
        if edge.conditional:
            label = f" {_mermaid_text(edge.label)} .->" if edge.label else "->"
            lines.append(f"    {source} -.{label} {target}")
        else:
            label = f"|{_mermaid_text(edge.label)}|" if edge.label else ""
            lines.append(f"    {source} -->{label} {target}")
    return "\n".join(lines) + "\n"


def _dot_text(text: str) -> str:
    """Quote ``text`` as a DOT string; backslashes are doubled so none starts an escape."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n").replace("\r", "\\r") + '"'


def _dot_options(options: list[str]) -> str:
    """Format an attribute list, or nothing when there are no attributes."""
    return f" [{', '.join(options)}]" if options else ""


def _dot_node(name: str) -> str:
    """One node statement; START is an ellipse, END a double ellipse, the rest boxes."""
    options = {START: ["shape=ellipse"], END: ["shape=ellipse", "peripheries=2"]}.get(name, [])
    if name.startswith("%"):  # Graphviz keeps such ids anonymous and would draw "%3"
        options.append(f"label={_dot_text(name)}")
    return f"    {_dot_text(name)}{_dot_options(options)};"


def _dot_edge(edge: EdgeView) -> str:
    """One edge statement, dashed when conditional."""
    options = [f"label={_dot_text(edge.label)}"] if edge.label else []
    options += ["style=dashed"] if edge.conditional else []
    return f"    {_dot_text(edge.source)} -> {_dot_text(edge.target)}{_dot_options(options)};"


def to_dot(view: GraphView) -> str:
    """Draw ``view`` as a Graphviz ``digraph``; conditional edges are dashed.

    Args:
        view: The graph to draw.

    Returns:
        DOT source in which every id is quoted.
    """
    lines = [f"digraph {_dot_text(view.name)} {{", "    node [shape=box];"]
    lines += [_dot_node(name) for name in _drawn_nodes(view)]
    lines += [_dot_edge(edge) for edge in view.edges]
    return "\n".join([*lines, "}"]) + "\n"


# Runs of "_" or "-" are Creole markup (underline, strike); other ASCII punctuation may be
# markup, HTML, an entity or a preprocessor call. "<U+XXXX>" writes a character literally.
_PLANTUML_MARKUP = re.compile(r"__+|--+|[^A-Za-z0-9 ._\-]")


def _plantuml_text(text: str) -> str:
    """Write ``text`` so that PlantUML shows it literally (an empty text becomes a blank)."""

    def literal(match: re.Match[str]) -> str:
        return "".join(
            char if ord(char) > 127 and char.isprintable() else f"<U+{ord(char):04X}>"
            for char in match.group()
        )

    return _PLANTUML_MARKUP.sub(literal, text) or "<U+200B>"


def to_plantuml(view: GraphView) -> str:
    """Draw ``view`` as a PlantUML state diagram; START and END are ``[*]``.

    Only syntax that both Debian's PlantUML 1.2020 and current releases accept is used.

    Args:
        view: The graph to draw.

    Returns:
        PlantUML source between ``@startuml`` and ``@enduml``.
    """
    names = [name for name in _drawn_nodes(view) if name not in (START, END)]
    aliases = {START: "[*]", END: "[*]"} | {name: f"s{k}" for k, name in enumerate(names)}
    lines = ["@startuml", "hide empty description", f"title {_plantuml_text(view.name)}"]
    lines += [f'state "{_plantuml_text(name)}" as {aliases[name]}' for name in names]
    for edge in view.edges:
        arrow = "-[dashed]->" if edge.conditional else "-->"
        label = f" : {_plantuml_text(edge.label)}" if edge.label else ""
        lines.append(f"{aliases[edge.source]} {arrow} {aliases[edge.target]}{label}")
    return "\n".join([*lines, "@enduml"]) + "\n"


def _printable(name: str) -> str:
    """Spell control characters as escapes so a name stays on one terminal line."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in name)


def _topological_order(
    names: list[str], successors: dict[str, list[str]]
) -> tuple[list[str], set[tuple[str, str]]]:
    """Depth-first search from each name in turn.

    Returns:
        The names in a topological order of the graph without its back-edges, and the
        back-edges (``(source, target)`` pairs that close a cycle, self-loops included).
    """
    on_path: dict[str, bool] = {}
    postorder: list[str] = []
    back_edges: set[tuple[str, str]] = set()
    for root in names:
        if root in on_path:
            continue
        on_path[root] = True
        stack = [(root, iter(successors[root]))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                on_path[node] = False
                postorder.append(node)
            elif child not in on_path:
                on_path[child] = True
                stack.append((child, iter(successors[child])))
            elif on_path[child]:
                back_edges.add((node, child))
    return postorder[::-1], back_edges


def _layers(names: list[str], edges: tuple[EdgeView, ...]) -> list[list[str]]:
    """Group names into rows by longest path from the roots, back-edges ignored; END last."""
    successors: dict[str, list[str]] = {name: [] for name in names}
    for edge in edges:
        successors[edge.source].append(edge.target)
    order, back_edges = _topological_order(names, successors)
    depth = dict.fromkeys(names, 0)
    for node in order:
        for child in successors[node]:
            if (node, child) not in back_edges:
                depth[child] = max(depth[child], depth[node] + 1)
    if END in depth:
        depth[END] = 1 + max((depth[name] for name in names if name != END), default=-1)
    rows: dict[int, list[str]] = {}
    for name in names:
        rows.setdefault(depth[name], []).append(name)
    return [rows[level] for level in sorted(rows)]


def _ascii_box(name: str) -> str:
    """A node as ``[name]``; START and END as ``(__start__)`` and ``(__end__)``."""
    return f"({name})" if name in (START, END) else f"[{_printable(name)}]"


def _ascii_edge(edge: EdgeView) -> str:
    """One edge as ``a --> b``, ``a --label--> b``, ``a -.-> b`` or ``a -.label.-> b``."""
    label = _printable(edge.label) if edge.label else ""
    if edge.conditional:
        arrow = f"-.{label}.->" if label else "-.->"
    else:
        arrow = f"--{label}-->" if label else "-->"
    return f"{_printable(edge.source)} {arrow} {_printable(edge.target)}"


def to_ascii(view: GraphView) -> str:
    """Draw ``view`` for a terminal: nodes in top-down layers, then every edge listed.

    Args:
        view: The graph to draw.

    Returns:
        Plain text; START and END appear in parentheses, nodes in brackets.
    """
    names = _drawn_nodes(view)
    rows = ["   ".join(map(_ascii_box, row)) for row in _layers(names, view.edges)]
    width = max((len(row) for row in rows), default=0)
    drawing: list[str] = []
    for row in rows:
        drawing += [" " * (width // 2) + "|", " " * (width // 2) + "v"] if drawing else []
        drawing.append(row.center(width).rstrip())
    title = f"Graph: {_printable(view.name)}"
    lines = [title, "=" * len(title), "", *drawing, "", "Edges:"]
    lines += [f"  {_ascii_edge(edge)}" for edge in view.edges] or ["  (none)"]
    return "\n".join(lines) + "\n"


_RENDERERS: dict[str, Callable[[GraphView], str]] = {
    "mermaid": to_mermaid,
    "plantuml": to_plantuml,
    "dot": to_dot,
    "ascii": to_ascii,
}
