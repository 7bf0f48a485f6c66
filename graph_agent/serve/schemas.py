"""What ``GET /assistants/{id}/graph``, ``/schemas`` and ``/subgraphs`` answer: an
assistant's graph and shapes.

The graph is LangGraph Server's JSON (``{"nodes": [...], "edges": [...]}``, subgraphs opened
to a depth with ``xray``) or, with ``?format=``, the Mermaid, DOT, PlantUML or ASCII text a
:class:`CompiledGraph` draws. The schemas are JSON Schemas as far as the graph knows them: an
agent takes and returns ``messages``; a graph (compiled or not) names the keys it has
strategies for and keeps the state open to any other key (a server that closes an
assistant's input with ``input_keys`` lists exactly those). The subgraphs are the schemas of
the graphs its nodes run, by namespace (``node``, ``node|child``), as LangGraph's
``get_subgraphs``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from graph_agent.graph import render
from graph_agent.graph.compiled import CompiledGraph
from graph_agent.graph.render import GraphView
from graph_agent.graph.state import AppendStrategy, KeyStrategy, MergeStrategy
from graph_agent.graph.values import END, START
from graph_agent.runnable_traits import local_graph, private_keys, takes_question
from graph_agent.serve.diagram import graph_svg
from graph_agent.serve.inputs import InputKeys

__all__ = [
    "DIAGRAM_FORMATS",
    "assistant_schemas",
    "graph_json",
    "graph_text",
    "subgraph_schemas",
    "xray_depth",
]

DIAGRAM_FORMATS = ("json", "mermaid", "dot", "plantuml", "ascii", "svg")
"""The values of ``?format=`` on the graph route; ``json`` (the default) is LangGraph's, ``svg``
a picture (:mod:`graph_agent.serve.diagram`)."""

_MESSAGE = {
    "type": "object",
    "description": "A chat message, LangChain-style",
    "properties": {
        "type": {"type": "string", "enum": ["human", "ai", "system", "tool"]},
        "content": {"type": "string"},
        "id": {"type": "string"},
    },
    "required": ["content"],
}
_MESSAGES = {"type": "array", "items": _MESSAGE}


def xray_depth(text: str | None) -> int:
    """``?xray=`` as how many levels of subgraphs to open: ``true`` all, ``false`` none, or a
    number. Raises ValueError for anything else."""
    word = (text or "false").strip().lower()
    if word in ("true", "1"):
        return 1_000 if word == "true" else 1
    if word in ("false", "0", ""):
        return 0
    if word.isdigit():
        return int(word)
    raise ValueError(f"xray must be true, false or a depth (a non-negative integer), got {text!r}")


def _trimmed(view: GraphView, depth: int) -> GraphView:
    """``view`` with subgraphs kept only ``depth`` levels down (0: none)."""
    if depth <= 0:
        return dataclasses.replace(view, subgraphs={})
    children = {name: _trimmed(child, depth - 1) for name, child in view.subgraphs.items()}
    return dataclasses.replace(view, subgraphs=children)


def graph_json(view: GraphView, depth: int = 0) -> dict[str, Any]:
    """LangGraph Server's JSON for ``view``, as LangGraph draws a graph: ``__start__`` and
    ``__end__`` are ``schema`` nodes, every other node a ``runnable`` whose ``data`` holds
    its kind (``id``) and ``name``; an edge has ``source``, ``target``, ``conditional`` and,
    when labelled, ``data``.

    With ``depth``, subgraph nodes are opened that many levels down, LangGraph's way: the
    subgraph's nodes take its place, named ``node:child``, and its own start and end are left
    out when a single edge leaves or enters them.
    """
    nodes, edges = _json_parts(view, depth, "")
    return {"nodes": nodes, "edges": edges}


_NODE_KIND = ["graph_agent", "graph", "Node"]
_SUBGRAPH_KIND = ["graph_agent", "graph", "CompiledGraph"]


def _json_parts(
    view: GraphView, depth: int, prefix: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The nodes and edges of ``view``, every id after ``prefix``, subgraphs opened to
    ``depth``."""
    nodes: list[dict[str, Any]] = [{"id": prefix + START, "type": "schema", "data": prefix + START}]
    edges: list[dict[str, Any]] = []
    entry: dict[str, str] = {}  # an opened subgraph node: where edges into it now lead
    leave: dict[str, str] = {}  # ... and where edges out of it now come from
    for name in view.nodes:
        child = view.subgraphs.get(name) if depth > 0 else None
        if child is None:
            kind = _SUBGRAPH_KIND if name in view.subgraphs else _NODE_KIND
            node_id = prefix + name
            nodes.append({"id": node_id, "type": "runnable", "data": {"id": kind, "name": node_id}})
            continue
        inner_prefix = f"{prefix}{name}:"
        inner_nodes, inner_edges = _json_parts(child, depth - 1, inner_prefix)
        entry[name], leave[name] = _trim_ends(inner_nodes, inner_edges, inner_prefix)
        nodes.extend(inner_nodes)
        edges.extend(inner_edges)
    for edge in view.edges:
        source = leave.get(edge.source, prefix + edge.source)
        target = entry.get(edge.target, prefix + edge.target)
        edges.append(
            {"source": source, "target": target, "conditional": edge.conditional}
            | ({"data": edge.label} if edge.label else {})
        )
    nodes.append({"id": prefix + END, "type": "schema", "data": prefix + END})
    return nodes, edges


def _trim_ends(
    nodes: list[dict[str, Any]], edges: list[dict[str, Any]], prefix: str
) -> tuple[str, str]:
    """Drop a subgraph's start when one edge leaves it and its end when one edge enters it (in
    place, as LangGraph does); return where the subgraph is now entered and left."""
    start, end = prefix + START, prefix + END
    entered, left = start, end
    out_of_start = [e for e in edges if e["source"] == start]
    if len(out_of_start) == 1 and out_of_start[0]["target"] != end:
        entered = out_of_start[0]["target"]
        edges.remove(out_of_start[0])
        nodes[:] = [n for n in nodes if n["id"] != start]
    into_end = [e for e in edges if e["target"] == end]
    if len(into_end) == 1 and into_end[0]["source"] != start:
        left = into_end[0]["source"]
        edges.remove(into_end[0])
        nodes[:] = [n for n in nodes if n["id"] != end]
    return entered, left


def graph_text(view: GraphView, fmt: str, depth: int = 0) -> str:
    """``view`` drawn as ``fmt`` text (``mermaid``, ``dot``, ``plantuml``, ``ascii``, ``svg``)."""
    if fmt == "svg":
        return graph_svg(_trimmed(view, depth), xray=depth > 0)
    return render.render(_trimmed(view, depth), fmt, xray=depth > 0)


def _key_schema(strategy: KeyStrategy | None) -> dict[str, Any]:
    if isinstance(strategy, AppendStrategy):
        return {"type": "array", "description": "appended to on each write"}
    if isinstance(strategy, MergeStrategy):
        return {"type": "object", "description": "merged into on each write"}
    return {}


def _object(properties: dict[str, Any], *, closed: bool = False) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    if properties:
        schema["properties"] = properties
    if closed:
        schema["additionalProperties"] = False
    return schema


def assistant_schemas(assistant_id: str, target: Any, keys: InputKeys) -> dict[str, Any]:
    """The body of ``GET /assistants/{assistant_id}/schemas`` for ``target`` (a served
    runnable, or a graph not compiled yet) whose clients may send ``keys``."""
    strategies = getattr(local_graph(target) or target, "strategies", None)
    if takes_question(target):
        state = _object({"messages": _MESSAGES})
        input_schema = _object({"messages": _MESSAGES})
        output_schema = state
    elif isinstance(strategies, Mapping):
        known = {
            key: _key_schema(strategy)
            for key, strategy in strategies.items()
            if key not in private_keys(target)
        }
        state = _object(known)
        output_schema = state
        input_schema = state
    else:  # a graph that does not say what it keeps: its shape is unknown
        state = input_schema = output_schema = {"type": "object"}
    if keys.allowed is not None:
        known_input = input_schema.get("properties", {})
        input_schema = _object(
            {key: known_input.get(key, {}) for key in sorted(keys.allowed)}, closed=True
        )
    return {
        "graph_id": assistant_id,
        "input_schema": input_schema,
        "output_schema": output_schema,
        "state_schema": state,
        "config_schema": _object(
            {"recursion_limit": {"type": "integer", "minimum": 1}}, closed=False
        ),
        "context_schema": {"type": "object"},
    }


def subgraph_schemas(
    graph: CompiledGraph, namespace: str | None = None, recurse: bool = False
) -> dict[str, dict[str, Any]]:
    """The body of ``GET /assistants/{id}/subgraphs[/{namespace}]`` for an assistant running
    ``graph``: each subgraph's schemas (LangGraph's ``GraphSchemaNoId``) by namespace.

    Raises:
        KeyError: ``namespace`` names no subgraph (the message says which there are).
    """
    found: dict[str, dict[str, Any]] = {}
    for name, child in graph.get_subgraphs(namespace=namespace, recurse=recurse):
        schemas = assistant_schemas(name, child, InputKeys.of(child))
        del schemas["graph_id"]
        found[name] = schemas
    return found
