"""A graph as an SVG picture: what ``GET /assistants/{id}/graph?format=svg`` answers.

Where Graphviz is installed, the project's own DOT export is laid out by ``dot -Tsvg``. Without
it, a small layered layout drawn here still shows every node, edge (labelled, dashed when
conditional) and opened subgraph. Either way each node's ``<g>`` carries ``data-node="NAME"``
and each opened subgraph's ``data-cluster="NAME"``, so a page (the Studio) can find the node a
run is in by the name the stream reports.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from graph_agent.graph import render
from graph_agent.graph.render import EdgeView, GraphView
from graph_agent.graph.values import END, START

__all__ = ["graph_svg", "layout_svg"]

DOT_TIMEOUT = 20.0
"""Seconds ``dot`` may take before the drawing falls back to the built-in layout."""


def graph_svg(view: GraphView, *, xray: bool = False) -> str:
    """``view`` as SVG text: Graphviz's layout where ``dot`` is installed, else
    :func:`layout_svg`. ``xray`` draws subgraph nodes open, as clusters."""
    dot = shutil.which("dot")
    if dot is not None:
        drawn = _graphviz(dot, view, xray)
        if drawn is not None:
            return drawn
    return layout_svg(view, xray=xray)


def _open(view: GraphView, xray: bool) -> tuple[GraphView, dict[str, str], tuple[Any, ...]]:
    if xray and view.subgraphs:
        return render.expand(view)
    return view, {}, ()


def _walk(clusters: Sequence[Any]) -> Iterator[Any]:
    """Every cluster, each before the ones inside it: the order ``to_dot`` numbers them in."""
    for cluster in clusters:
        yield cluster
        yield from _walk(cluster.children)


_FONTS = [f"-{kind}fontname=Helvetica" for kind in "GNE"] + ["-Nfontsize=12", "-Efontsize=11"]
_NODE_GROUP = re.compile(r'<g id="node\d+" class="node">\s*<title>([^<]*)</title>')
_CLUSTER_GROUP = re.compile(r'<g id="clust\d+" class="cluster">\s*<title>cluster_(\d+)</title>')


def _graphviz(dot: str, view: GraphView, xray: bool) -> str | None:
    source = render.render(view, "dot", xray=xray)
    try:
        done = subprocess.run(
            [dot, "-Tsvg", *_FONTS],
            input=source,
            capture_output=True,
            text=True,
            timeout=DOT_TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0 or "<svg" not in done.stdout:
        return None
    svg = done.stdout[done.stdout.index("<svg") :]  # no XML prolog or DOCTYPE: fit for HTML
    svg = svg.replace("<svg ", '<svg class="graph-svg" data-layout="graphviz" ', 1)
    # a title holds the node's DOT id escaped for XML: as an attribute it reads back the same
    svg = _NODE_GROUP.sub(_mark_node, svg)
    keys = [cluster.key for cluster in _walk(_open(view, xray)[2])]

    def mark_cluster(match: re.Match[str]) -> str:
        number = int(match.group(1))
        if number >= len(keys):
            return match.group(0)
        name = escape(keys[number], quote=True)
        return match.group(0).replace('class="cluster"', f'class="cluster" data-cluster="{name}"')

    return _CLUSTER_GROUP.sub(mark_cluster, svg)


def _mark_node(match: re.Match[str]) -> str:
    return match.group(0).replace('class="node"', f'class="node" data-node="{match.group(1)}"', 1)


# the built-in layout
_ROW = 78.0  # from one layer's top to the next's
_HEIGHT = 34.0
_GAP = 28.0
_MARGIN = 24.0
_LEFT = 64.0  # the left margin: room for edges that pass layers by
_PAD = 14.0  # around a cluster's nodes
_CHAR = 7.4  # the width of a character of the 13px sans-serif font, about


@dataclass
class _Box:
    name: str
    label: str
    layer: int
    x: float = 0.0
    y: float = 0.0
    width: float = 0.0

    @property
    def right(self) -> float:
        return self.x + self.width

    @property
    def middle(self) -> float:
        return self.x + self.width / 2


def layout_svg(view: GraphView, *, xray: bool = False) -> str:
    """``view`` drawn without Graphviz: nodes in layers from START down (a node one layer
    below the lowest node with an edge into it, loops aside), edges as curves, back edges
    around the right-hand side, opened subgraphs as boxes around their nodes."""
    flat, labels, clusters = _open(view, xray)
    names = _nodes(flat)
    layers = _layers(names, flat.edges)
    boxes = {
        name: _Box(name, labels.get(name, name), layers[name], width=_width(labels.get(name, name)))
        for name in names
    }
    owner = {m: c.key for c in _walk(clusters) for m in c.members}
    rows: dict[int, list[_Box]] = {}
    for box in boxes.values():
        rows.setdefault(box.layer, []).append(box)
    _order(rows, boxes, flat.edges, owner, names)
    width = max(
        (sum(b.width for b in row) + _GAP * (len(row) - 1) for row in rows.values()), default=0
    )
    for layer, row in rows.items():
        used = sum(b.width for b in row) + _GAP * (len(row) - 1)
        x = _LEFT + (width - used) / 2
        for box in row:
            box.x, box.y = x, _MARGIN + 18 + layer * _ROW
            x += box.width + _GAP
    loops = sum(1 for e in flat.edges if layers[e.target] <= layers[e.source])
    total_w = _LEFT + width + _MARGIN + 40 + 16 * min(loops, 6)
    total_h = _MARGIN * 2 + 18 + (max(layers.values(), default=0) + 1) * _ROW
    parts = [
        f'<svg class="graph-svg" data-layout="builtin" xmlns="http://www.w3.org/2000/svg" '
        f'width="{total_w:.0f}" height="{total_h:.0f}" viewBox="0 0 {total_w:.0f} {total_h:.0f}" '
        'font-family="sans-serif" font-size="13">',
        f"<title>{escape(view.name)}</title>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" '
        'markerWidth="8" markerHeight="8" orient="auto-start-reverse">'
        '<path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>',
    ]
    parts += _clusters(clusters, boxes)
    backs = longs = 0
    for edge in flat.edges:
        source, target = boxes[edge.source], boxes[edge.target]
        if target.layer <= source.layer and edge.source != edge.target:
            lane = _LEFT + width + 16 + 16 * (backs % 6)
            backs += 1
        else:  # an edge past other layers goes left of their nodes
            between = [b.x for b in boxes.values() if source.layer < b.layer < target.layer]
            lane = min(between, default=0.0) - 18 - 10 * (longs % 3)
            longs += bool(between)
        parts.append(_edge(edge, source, target, lane))
    parts += [_node(box) for box in boxes.values()]
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _nodes(view: GraphView) -> list[str]:
    """What ``render`` draws, in its order: START if used, the nodes, edge ends, END."""
    ends = [name for edge in view.edges for name in (edge.source, edge.target)]
    middle = dict.fromkeys([*view.nodes, *ends])
    middle.pop(START, None)
    middle.pop(END, None)
    return [*([START] if START in ends else []), *middle, *([END] if END in ends else [])]


def _layers(names: list[str], edges: Sequence[EdgeView]) -> dict[str, int]:
    """Each node's layer: one below its lowest forward predecessor; edges that close a loop
    (found by a depth-first walk from the first node) do not count."""
    after: dict[str, list[str]] = {name: [] for name in names}
    for edge in edges:
        after[edge.source].append(edge.target)
    back: set[tuple[str, str]] = set()
    state: dict[str, int] = {}  # 1: on the walk's path, 2: done
    for root in names:
        if root in state:
            continue
        stack: list[tuple[str, Iterator[str]]] = [(root, iter(after[root]))]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
            elif state.get(child) == 1:
                back.add((node, child))
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(after[child])))
    layer = dict.fromkeys(names, 0)
    for _ in range(len(names)):  # longest path on what is left, a DAG: settles in |V| rounds
        changed = False
        for edge in edges:
            if (edge.source, edge.target) in back or edge.source == edge.target:
                continue
            if layer[edge.target] < layer[edge.source] + 1:
                layer[edge.target] = layer[edge.source] + 1
                changed = True
        if not changed:
            break
    if END in layer:  # END alone in the last layer
        others = [value for name, value in layer.items() if name != END]
        layer[END] = max(others, default=-1) + 1
    return layer


def _order(
    rows: dict[int, list[_Box]],
    boxes: dict[str, _Box],
    edges: Sequence[EdgeView],
    owner: dict[str, str],
    names: list[str],
) -> None:
    """Order each layer: a cluster's nodes together, then by the mean position of their
    predecessors in the layer above (fewer crossings), then as added."""
    index = {name: i for i, name in enumerate(names)}
    clusters = {key: i for i, key in enumerate(dict.fromkeys(owner.values()))}
    before: dict[str, list[str]] = {name: [] for name in boxes}
    for edge in edges:
        before[edge.target].append(edge.source)
    position: dict[str, float] = {}
    for layer in sorted(rows):

        def key(box: _Box) -> tuple[int, float, int]:
            seen = [position[p] for p in before[box.name] if p in position]
            mean = sum(seen) / len(seen) if seen else float(index[box.name])
            return (clusters.get(owner.get(box.name, ""), -1), mean, index[box.name])

        rows[layer].sort(key=key)
        for i, box in enumerate(rows[layer]):
            position[box.name] = float(i)


def _width(label: str) -> float:
    return max(76.0, len(label) * _CHAR + 26)


def _node(box: _Box) -> str:
    name = escape(box.name, quote=True)
    label = escape(box.label)
    if box.label in (START, END):
        shape = (
            f'<ellipse cx="{box.middle:.1f}" cy="{box.y + _HEIGHT / 2:.1f}" '
            f'rx="{box.width / 2:.1f}" ry="{_HEIGHT / 2:.1f}" fill="white" stroke="#333"/>'
        )
    else:
        shape = (
            f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.width:.1f}" '
            f'height="{_HEIGHT:.0f}" rx="4" fill="white" stroke="#333"/>'
        )
    text = (
        f'<text x="{box.middle:.1f}" y="{box.y + _HEIGHT / 2 + 4.5:.1f}" '
        f'text-anchor="middle">{label}</text>'
    )
    return f'<g class="node" data-node="{name}"><title>{name}</title>{shape}{text}</g>'


def _edge(edge: EdgeView, source: _Box, target: _Box, lane: float) -> str:
    dash = ' stroke-dasharray="5,4"' if edge.conditional else ""
    anchor = "start"
    if edge.source == edge.target:  # a self-loop on the right
        x, y = source.right, source.y + _HEIGHT / 2
        path = f"M{x:.1f},{y - 8:.1f} C{x + 36:.1f},{y - 24:.1f} {x + 36:.1f},{y + 24:.1f} "
        path += f"{x:.1f},{y + 8:.1f}"
        at = (x + 30, y - 14)
    elif target.layer > source.layer + 1 and lane > 0:  # down, around the layers between
        x1, y1 = source.x + 10, source.y + _HEIGHT
        x2, y2 = target.x + 10, target.y
        reach = lane - (x1 - lane) / 3  # a cubic's bulge reaches 3/4 of its control points
        path = f"M{x1:.1f},{y1:.1f} C{reach:.1f},{y1 + _ROW / 2:.1f} {reach:.1f},"
        path += f"{y2 - _ROW / 2:.1f} {x2:.1f},{y2:.1f}"
        at = (lane - 4, (y1 + y2) / 2)
        anchor = "end"
    elif target.layer > source.layer:  # down
        x1, y1 = source.middle, source.y + _HEIGHT
        x2, y2 = target.middle, target.y
        bend = (y2 - y1) / 2
        path = f"M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 + bend:.1f} {x2:.1f},{y2 - bend:.1f} "
        path += f"{x2:.1f},{y2:.1f}"
        at = ((x1 + x2) / 2 + 4, (y1 + y2) / 2)
    else:  # back up (a loop), around the right of everything
        x1, y1 = source.right, source.y + _HEIGHT / 2
        x2, y2 = target.right, target.y + _HEIGHT / 2
        path = f"M{x1:.1f},{y1:.1f} C{lane:.1f},{y1:.1f} {lane:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
        at = (lane - 6, (y1 + y2) / 2)
    label = ""
    if edge.label:
        label = (
            f'<text x="{at[0]:.1f}" y="{at[1]:.1f}" font-size="11" fill="#444" '
            f'text-anchor="{anchor}">'
            f"{escape(edge.label)}</text>"
        )
    ends = f'data-source="{escape(edge.source, quote=True)}" '
    ends += f'data-target="{escape(edge.target, quote=True)}"'
    return (
        f'<g class="edge" {ends}><path d="{path}" fill="none" stroke="#555"{dash} '
        f'marker-end="url(#arrow)"/>{label}</g>'
    )


def _clusters(clusters: Sequence[Any], boxes: dict[str, _Box]) -> list[str]:
    """A box around each opened subgraph's nodes (its inner clusters' too), outer ones
    first so they lie underneath."""
    drawn: list[str] = []

    def members(cluster: Any) -> list[str]:
        return [*cluster.members, *(m for child in cluster.children for m in members(child))]

    def depth_of(cluster: Any) -> int:
        return 1 + max((depth_of(child) for child in cluster.children), default=0)

    for cluster in _walk(clusters):
        inside = [boxes[m] for m in members(cluster) if m in boxes]
        if not inside:
            continue
        pad = _PAD * depth_of(cluster)
        left = min(b.x for b in inside) - pad
        top = min(b.y for b in inside) - pad - 14
        right = max(b.right for b in inside) + pad
        bottom = max(b.y for b in inside) + _HEIGHT + pad
        name = escape(cluster.key, quote=True)
        drawn.append(
            f'<g class="cluster" data-cluster="{name}"><title>{name}</title>'
            f'<rect x="{left:.1f}" y="{top:.1f}" width="{right - left:.1f}" '
            f'height="{bottom - top:.1f}" rx="6" fill="#f6f8fb" stroke="#8aa"/>'
            f'<text x="{left + 8:.1f}" y="{top + 15:.1f}" font-size="12" fill="#355">'
            f"{escape(cluster.label)}</text></g>"
        )
    return drawn
