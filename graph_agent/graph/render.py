"""Mermaid, PlantUML, DOT and ASCII export of a graph's structure.

The builder describes a graph as a :class:`GraphView` (nodes in ``add_node`` order, edges with
their labels); this module turns the view into text and knows nothing else about graphs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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
