"""Mermaid, PlantUML, DOT and ASCII export of a graph's structure.

The builder describes a graph as a :class:`GraphView` (nodes in ``add_node`` order, edges with
their labels); this module turns the view into text and knows nothing else about graphs.

Node names may be anything (keywords, dots, quotes, spaces, unicode), so every format escapes
them its own way and never lets a name change the drawn graph: Mermaid falls back to generated
ids with the name as a label, DOT quotes every id, PlantUML draws names through aliases.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import count
from typing import Literal, get_args

from graph_agent.graph.errors import GraphSetupError
from graph_agent.graph.values import END, START

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
    """What a diagram shows: the graph's name, its nodes (START/END excluded) and edges.

    ``subgraphs`` maps a node that runs a whole graph (a subgraph or an agent) to that graph's
    view, drawn inside the node when asked (``xray``).
    """

    name: str
    nodes: tuple[str, ...]
    edges: tuple[EdgeView, ...]
    subgraphs: Mapping[str, GraphView] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Cluster:
    """A subgraph node drawn open: its label, its own nodes and the clusters inside it."""

    key: str
    label: str
    members: tuple[str, ...]
    children: tuple[_Cluster, ...]


def expand(view: GraphView) -> tuple[GraphView, dict[str, str], tuple[_Cluster, ...]]:
    """Open every subgraph node (recursively): its graph's nodes take its place, named
    ``node/child``; edges into the node lead to the child's start, edges out of it leave the
    child's end.

    Returns:
        The flat view, the label of each renamed node, and the clusters to group them in.
    """
    labels: dict[str, str] = {}
    nodes: list[str] = []
    edges: list[EdgeView] = []
    clusters: list[_Cluster] = []
    for name in view.nodes:
        child = view.subgraphs.get(name)
        if child is None:
            nodes.append(name)
            continue
        flat, child_labels, child_clusters = expand(child)
        inner = _members(child_clusters)
        drawn = _drawn_nodes(flat)
        nodes.extend(f"{name}/{n}" for n in drawn)
        labels.update({f"{name}/{n}": child_labels.get(n, n) for n in drawn})
        edges.extend(
            EdgeView(
                source=f"{name}/{e.source}",
                target=f"{name}/{e.target}",
                label=e.label,
                conditional=e.conditional,
            )
            for e in flat.edges
        )
        clusters.append(
            _Cluster(
                key=name,
                label=name,
                members=tuple(f"{name}/{n}" for n in drawn if n not in inner),
                children=tuple(_prefixed(c, name) for c in child_clusters),
            )
        )
    opened = view.subgraphs
    for edge in view.edges:
        source = f"{edge.source}/{END}" if edge.source in opened else edge.source
        target = f"{edge.target}/{START}" if edge.target in opened else edge.target
        edges.append(
            EdgeView(source=source, target=target, label=edge.label, conditional=edge.conditional)
        )
    flat_view = GraphView(name=view.name, nodes=tuple(nodes), edges=tuple(edges))
    return flat_view, labels, tuple(clusters)


def _members(clusters: tuple[_Cluster, ...]) -> set[str]:
    """Every node inside these clusters, nested ones included."""
    found: set[str] = set()
    for cluster in clusters:
        found.update(cluster.members)
        found |= _members(cluster.children)
    return found


def _prefixed(cluster: _Cluster, prefix: str) -> _Cluster:
    return _Cluster(
        key=f"{prefix}/{cluster.key}",
        label=cluster.label,
        members=tuple(f"{prefix}/{m}" for m in cluster.members),
        children=tuple(_prefixed(c, prefix) for c in cluster.children),
    )


def _walk(clusters: tuple[_Cluster, ...]) -> list[_Cluster]:
    """Every cluster, outer ones first."""
    return [c for cluster in clusters for c in (cluster, *_walk(cluster.children))]


def render(view: GraphView, fmt: str = "mermaid", *, xray: bool = False) -> str:
    """Draw ``view`` as text in one of the supported diagram formats.

    Args:
        view: The graph to draw.
        fmt: ``"mermaid"``, ``"plantuml"``, ``"dot"`` or ``"ascii"``.
        xray: Draw subgraph nodes open, as clusters holding their own graphs (a Mermaid
            ``subgraph``, a DOT ``cluster``, a PlantUML composite state).

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
    if xray and view.subgraphs:
        flat, labels, clusters = expand(view)
        return renderer(flat, labels, clusters)
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


def to_mermaid(
    view: GraphView,
    labels: Mapping[str, str] | None = None,
    clusters: tuple[_Cluster, ...] = (),
) -> str:
    """Draw ``view`` as a Mermaid ``flowchart TD``; conditional edges are dotted.

    Args:
        view: The graph to draw.
        labels: Node labels that differ from the node names (opened subgraphs).
        clusters: Nodes to group in ``subgraph`` blocks (opened subgraphs).

    Returns:
        Mermaid source; the graph name is in a comment, since Mermaid titles are not
        plain text.
    """
    names = _drawn_nodes(view)
    ids = _mermaid_ids(names)
    labels = labels or {}
    shapes = {START: ("([", "])"), END: ("((", "))")}

    def declare(name: str, indent: str) -> str:
        opening, closing = shapes.get(labels.get(name, name), ("[", "]"))
        return f"{indent}{ids[name]}{opening}{_mermaid_text(labels.get(name, name))}{closing}"

    taken = set(ids.values())
    cluster_ids = (f"sg{k}" for k in count() if f"sg{k}" not in taken)

    def block(cluster: _Cluster, indent: str) -> list[str]:
        inner = indent + "    "
        return [
            f"{indent}subgraph {next(cluster_ids)}[{_mermaid_text(cluster.label)}]",
            *(declare(name, inner) for name in cluster.members),
            *(line for child in cluster.children for line in block(child, inner)),
            f"{indent}end",
        ]

    grouped = _members(clusters)
    lines = ["flowchart TD", f"    %% graph {_mermaid_text(view.name)}"]
    lines += [declare(name, "    ") for name in names if name not in grouped]
    lines += [line for cluster in clusters for line in block(cluster, "    ")]
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


def _dot_node(name: str, label: str | None = None, indent: str = "    ") -> str:
    """One node statement; START is an ellipse, END a double ellipse, the rest boxes."""
    shown = label if label is not None else name
    shapes = {START: ["shape=ellipse"], END: ["shape=ellipse", "peripheries=2"]}
    options = list(shapes.get(shown, []))
    if shown != name or name.startswith("%"):  # Graphviz keeps "%" ids anonymous ("%3")
        options.append(f"label={_dot_text(shown)}")
    return f"{indent}{_dot_text(name)}{_dot_options(options)};"


def _dot_edge(edge: EdgeView) -> str:
    """One edge statement, dashed when conditional."""
    options = [f"label={_dot_text(edge.label)}"] if edge.label else []
    options += ["style=dashed"] if edge.conditional else []
    return f"    {_dot_text(edge.source)} -> {_dot_text(edge.target)}{_dot_options(options)};"


def to_dot(
    view: GraphView,
    labels: Mapping[str, str] | None = None,
    clusters: tuple[_Cluster, ...] = (),
) -> str:
    """Draw ``view`` as a Graphviz ``digraph``; conditional edges are dashed.

    Args:
        view: The graph to draw.
        labels: Node labels that differ from the node names (opened subgraphs).
        clusters: Nodes to group in ``cluster`` subgraphs (opened subgraphs).

    Returns:
        DOT source in which every id is quoted.
    """
    labels = labels or {}
    numbers = count()

    def block(cluster: _Cluster, indent: str) -> list[str]:
        inner = indent + "    "
        return [
            f"{indent}subgraph {_dot_text(f'cluster_{next(numbers)}')} {{",
            f"{inner}label={_dot_text(cluster.label)};",
            *(_dot_node(name, labels.get(name), inner) for name in cluster.members),
            *(line for child in cluster.children for line in block(child, inner)),
            f"{indent}}}",
        ]

    grouped = _members(clusters)
    lines = [f"digraph {_dot_text(view.name)} {{", "    node [shape=box];"]
    top = [name for name in _drawn_nodes(view) if name not in grouped]
    lines += [_dot_node(name, labels.get(name)) for name in top]
    lines += [line for cluster in clusters for line in block(cluster, "    ")]
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


def to_plantuml(
    view: GraphView,
    labels: Mapping[str, str] | None = None,
    clusters: tuple[_Cluster, ...] = (),
) -> str:
    """Draw ``view`` as a PlantUML state diagram; START and END are ``[*]``.

    Only syntax that both Debian's PlantUML 1.2020 and current releases accept is used.

    Args:
        view: The graph to draw.
        labels: Node labels that differ from the node names (opened subgraphs).
        clusters: Nodes to group in composite states (opened subgraphs).

    Returns:
        PlantUML source between ``@startuml`` and ``@enduml``.
    """
    labels = labels or {}
    names = [name for name in _drawn_nodes(view) if name not in (START, END)]
    aliases = {START: "[*]", END: "[*]"} | {name: f"s{k}" for k, name in enumerate(names)}
    numbers = count()

    def state(name: str, indent: str) -> str:
        return f'{indent}state "{_plantuml_text(labels.get(name, name))}" as {aliases[name]}'

    def block(cluster: _Cluster, indent: str) -> list[str]:
        inner = indent + "  "
        return [
            f'{indent}state "{_plantuml_text(cluster.label)}" as c{next(numbers)} {{',
            *(state(name, inner) for name in cluster.members),
            *(line for child in cluster.children for line in block(child, inner)),
            f"{indent}}}",
        ]

    grouped = _members(clusters)
    lines = ["@startuml", "hide empty description", f"title {_plantuml_text(view.name)}"]
    lines += [state(name, "") for name in names if name not in grouped]
    lines += [line for cluster in clusters for line in block(cluster, "")]
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


def to_ascii(
    view: GraphView,
    labels: Mapping[str, str] | None = None,
    clusters: tuple[_Cluster, ...] = (),
) -> str:
    """Draw ``view`` for a terminal: nodes in top-down layers, then every edge listed.

    Args:
        view: The graph to draw (opened subgraphs show as ``node/child`` names).
        labels: Unused: the full ``node/child`` names say where each node belongs.
        clusters: Unused, for the same reason.

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


_RENDERERS: dict[str, Callable[..., str]] = {
    "mermaid": to_mermaid,
    "plantuml": to_plantuml,
    "dot": to_dot,
    "ascii": to_ascii,
}
