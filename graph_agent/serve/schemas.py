"""What ``GET /assistants/{id}/graph`` and ``/schemas`` answer: an assistant's graph and shapes.

The graph is LangGraph Server's JSON (``{"nodes": [...], "edges": [...]}``, subgraphs opened
to a depth with ``xray``) or, with ``?format=``, the Mermaid, DOT, PlantUML or ASCII text a
:class:`CompiledGraph` draws. The schemas are JSON Schemas as far as the graph knows them: an
agent takes and returns ``messages``; a StateGraph names the keys it has strategies for and
keeps the state open to any other key (a server that closes an assistant's input with
``input_keys`` lists exactly those); of a graph compiled elsewhere nothing is known but that
its state is an object.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from graph_agent.agent.react import ReactAgent
from graph_agent.graph import render
from graph_agent.graph.builder import StateGraph
from graph_agent.graph.render import GraphView
from graph_agent.graph.state import AppendStrategy, KeyStrategy, MergeStrategy
from graph_agent.graph.values import END, START
from graph_agent.serve.inputs import InputKeys

__all__ = ["DIAGRAM_FORMATS", "assistant_schemas", "graph_json", "graph_text", "xray_depth"]

DIAGRAM_FORMATS = ("json", "mermaid", "dot", "plantuml", "ascii")
"""The values of ``?format=`` on the graph route; ``json`` (the default) is LangGraph's."""

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
    """LangGraph Server's JSON for ``view``; with ``depth``, subgraph nodes opened (their
    nodes named ``node/child``) that many levels down."""
    labels: dict[str, str] = {}
    if depth > 0 and view.subgraphs:
        view, labels, _ = render.expand(_trimmed(view, depth))
    nodes = [START, *view.nodes, END]
    return {
        "nodes": [
            {"id": node, "type": "runnable", "data": labels.get(node, node)} for node in nodes
        ],
        "edges": [
            {"source": e.source, "target": e.target, "conditional": e.conditional}
            | ({"data": e.label} if e.label else {})
            for e in view.edges
        ],
    }


def graph_text(view: GraphView, fmt: str, depth: int = 0) -> str:
    """``view`` drawn as ``fmt`` text (``mermaid``, ``dot``, ``plantuml``, ``ascii``)."""
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
    """The body of ``GET /assistants/{assistant_id}/schemas`` for ``target`` (as given to
    ``create_app``, before it is compiled) whose clients may send ``keys``."""
    if isinstance(target, ReactAgent):
        state = _object({"messages": _MESSAGES})
        input_schema = _object({"messages": _MESSAGES})
        output_schema = state
    elif isinstance(target, StateGraph):
        known = {
            key: _key_schema(strategy)
            for key, strategy in target.strategies.items()
            if key not in target.private_keys
        }
        state = _object(known)
        output_schema = state
        input_schema = state
    else:  # compiled elsewhere: its keys are not on record
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
