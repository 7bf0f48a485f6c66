"""``/assistants``: the served graphs and agents, their graphs and schemas."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from graph_agent.graph.concurrency import to_thread
from graph_agent.serve.api import Api, ApiError, Operation, Query, read
from graph_agent.serve.bodies import JSONResponse
from graph_agent.serve.models import Assistant, AssistantSearch, Graph, GraphSchema, Subgraphs
from graph_agent.serve.records import matches
from graph_agent.serve.schemas import (
    DIAGRAM_FORMATS,
    graph_json,
    graph_text,
    subgraph_schemas,
    xray_depth,
)
from graph_agent.serve.targets import assistant_kind, graph_of

__all__ = ["OPERATIONS"]


def assistant_json(api: Api, assistant_id: str) -> dict[str, Any]:
    # ``kind``: agent (an agent or a team: takes a question) or graph, for clients like
    # ``graph-agent run --url``
    kind = assistant_kind(api.assistants[assistant_id])
    return {
        "assistant_id": assistant_id,
        "graph_id": assistant_id,
        "name": assistant_id,
        "description": None,
        "config": {},
        "context": {},
        "metadata": {"created_by": "system", "kind": kind},
        "version": 1,
        "created_at": api.created_at,
        "updated_at": api.created_at,
    }


async def search_assistants(api: Api, request: Request) -> Response:
    body = await read(request, AssistantSearch)
    found = [
        assistant_json(api, assistant_id)
        for assistant_id in api.assistants
        if body.graph_id in (None, assistant_id)
        and (body.name is None or body.name in assistant_id)
        and matches({"created_by": "system"}, body.metadata)
    ]
    return JSONResponse(found[body.offset : body.offset + body.limit])


async def get_assistant(api: Api, request: Request) -> Response:
    assistant_id = request.path_params["assistant_id"]
    api.runnable(assistant_id)
    return JSONResponse(assistant_json(api, assistant_id))


async def get_graph(api: Api, request: Request) -> Response:
    """The graph as LangGraph's JSON, or as ``?format=mermaid|dot|plantuml|ascii`` text;
    ``?xray=`` opens subgraph nodes (``true``, or how many levels)."""
    runnable = api.runnable(request.path_params["assistant_id"])
    view = graph_of(runnable).view
    fmt = request.query_params.get("format", "json")
    if fmt not in DIAGRAM_FORMATS:
        formats = ", ".join(DIAGRAM_FORMATS)
        raise ApiError(422, f"format {fmt!r} is not supported; use {formats}")
    try:
        depth = xray_depth(request.query_params.get("xray"))
    except ValueError as exc:
        raise ApiError(422, str(exc)) from exc
    if fmt == "json":
        return JSONResponse(graph_json(view, depth))
    if fmt == "svg":  # Graphviz runs as a subprocess: not on the event loop
        svg = await to_thread(graph_text, view, fmt, depth)
        return Response(svg, media_type="image/svg+xml")
    return PlainTextResponse(graph_text(view, fmt, depth))


async def get_schemas(api: Api, request: Request) -> Response:
    assistant_id = request.path_params["assistant_id"]
    api.runnable(assistant_id)
    return JSONResponse(api.schemas[assistant_id])


async def get_subgraphs(api: Api, request: Request) -> Response:
    """The schemas of the graphs an assistant's nodes run, by namespace (``node``,
    ``node|child``); ``?recurse=true`` goes all the way down."""
    assistant_id = request.path_params["assistant_id"]
    runnable = api.runnable(assistant_id)
    graph = graph_of(runnable)
    recurse = request.query_params.get("recurse", "false").lower()
    if recurse not in ("true", "false", "1", "0"):
        raise ApiError(422, f"recurse must be true or false, got {recurse!r}")
    namespace = request.path_params.get("namespace")
    try:
        found = subgraph_schemas(graph, namespace, recurse in ("true", "1"))
    except KeyError as exc:
        raise ApiError(404, f"assistant {assistant_id}: {exc.args[0]}") from exc
    return JSONResponse(found)


_A = "/assistants/{assistant_id}"
_RECURSE = Query(
    "recurse", {"type": "boolean"}, "also the subgraphs of subgraphs (default: only the next level)"
)
OPERATIONS = [
    Operation(
        "POST",
        "/assistants/search",
        search_assistants,
        "List the served assistants",
        list[Assistant],
        body=AssistantSearch,
        errors=(422,),
    ),
    Operation("GET", _A, get_assistant, "An assistant", Assistant, errors=(404,)),
    Operation(
        "GET",
        f"{_A}/graph",
        get_graph,
        "An assistant's graph: JSON nodes and edges, or Mermaid/DOT/PlantUML/ASCII text",
        Graph,
        errors=(404, 422),
        also=("text/plain", "image/svg+xml"),
        query=(
            Query(
                "format",
                {"enum": list(DIAGRAM_FORMATS)},
                "json (the default: nodes and edges), a diagram's text, or an SVG picture",
            ),
            Query(
                "xray",
                {"anyOf": [{"type": "boolean"}, {"type": "integer", "minimum": 0}]},
                "open subgraph nodes: true for all levels, or how many",
            ),
        ),
    ),
    Operation(
        "GET",
        f"{_A}/schemas",
        get_schemas,
        "An assistant's input, output, state, config and context JSON Schemas",
        GraphSchema,
        errors=(404,),
    ),
    Operation(
        "GET",
        f"{_A}/subgraphs",
        get_subgraphs,
        "The schemas of the graphs an assistant's nodes run, by namespace",
        Subgraphs,
        errors=(404, 422),
        query=(_RECURSE,),
    ),
    Operation(
        "GET",
        f"{_A}/subgraphs/{{namespace}}",
        get_subgraphs,
        "The schemas of one subgraph (node or node|child), and with recurse those inside it",
        Subgraphs,
        errors=(404, 422),
        query=(_RECURSE,),
    ),
]
