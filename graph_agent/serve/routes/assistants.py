"""``/assistants``: the served graphs and agents (the *system* assistants, id = the target's
name, never changed), and the assistants clients create over them: versioned settings of a
served graph (:mod:`graph_agent.serve.assistant_records`); their graphs and schemas."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from graph_agent.graph.concurrency import to_thread
from graph_agent.serve.api import Api, ApiError, Operation, Query, flag, read
from graph_agent.serve.assistant_config import (
    ConfigProblem,
    checked_config,
    patched_settings,
    synced,
)
from graph_agent.serve.assistant_records import AssistantRecord
from graph_agent.serve.auth import OWNER_KEY, owns, stamp_owner
from graph_agent.serve.bodies import JSONResponse
from graph_agent.serve.ids import thread_id_problem
from graph_agent.serve.models import (
    Assistant,
    AssistantVersion,
    Graph,
    GraphSchema,
    Subgraphs,
)
from graph_agent.serve.models_assistants import (
    AssistantCount,
    AssistantCreate,
    AssistantLatest,
    AssistantPatch,
    AssistantSearch,
    AssistantVersionSearch,
)
from graph_agent.serve.records import matches, now
from graph_agent.serve.routes.threads import drop_thread
from graph_agent.serve.schemas import (
    DIAGRAM_FORMATS,
    graph_json,
    graph_text,
    subgraph_schemas,
    xray_depth,
)
from graph_agent.serve.targets import graph_of

__all__ = ["OPERATIONS"]


def _system_refusal(api: Api, assistant_id: str, done: str) -> None:
    """A 409 when ``assistant_id`` is a served target itself: those are never changed."""
    if assistant_id in api.assistants:
        raise ApiError(
            409,
            f"assistant {assistant_id!r} is the served graph itself (metadata.created_by = "
            f"system): it cannot be {done}; create an assistant of graph {assistant_id!r} "
            "(POST /assistants) to give it settings of its own",
            "system_assistant",
        )


def _served_graph(api: Api, graph_id: str) -> str:
    if graph_id not in api.assistants:
        known = ", ".join(sorted(api.assistants))
        raise ApiError(404, f"graph_id {graph_id!r} is not served; this server serves: {known}")
    return graph_id


def _config(config: dict[str, Any]) -> dict[str, Any]:
    try:
        return checked_config(config)
    except ConfigProblem as exc:
        raise ApiError(422, str(exc)) from exc


def _existing(found: AssistantRecord, if_exists: str) -> Response:
    """The answer to a creation whose id is taken: the assistant there (``do_nothing``), else
    a 409."""
    if if_exists == "do_nothing":
        return JSONResponse(found.json())
    raise ApiError(
        409,
        f"assistant {found.assistant_id!r} already exists: send if_exists='do_nothing' to get "
        "it, or another assistant_id (or none, for a new UUID)",
    )


async def create_assistant(api: Api, request: Request) -> Response:
    body = await read(request, AssistantCreate)
    graph_id = _served_graph(api, body.graph_id)
    config, context = synced(_config(body.config), body.context)
    assistant_id = body.assistant_id if body.assistant_id is not None else str(uuid.uuid4())
    if thread_id_problem(assistant_id):
        raise ApiError(
            422,
            f"assistant_id {assistant_id!r:.80} cannot name an assistant: it names it in URL "
            "paths, so it follows the rules of thread ids (1 to 256 characters, none of "
            "/ ? # % \\, whitespace or control characters, not '.' or '..'); leave it out for "
            "a UUID",
        )
    if assistant_id in api.assistants:
        return _existing(api.system_assistant(assistant_id), body.if_exists)
    stamp = now()
    record = AssistantRecord(
        assistant_id=assistant_id,
        graph_id=graph_id,
        name=body.name if body.name is not None else "Untitled",
        description=body.description,
        config=config,
        context=context,
        metadata=stamp_owner(body.metadata, "assistants"),
        created_at=stamp,
        updated_at=stamp,
    )
    saved, created = api.created_assistants.create(record)
    if created:
        return JSONResponse(saved.json())
    # another key's is taken all the same, and never handed out
    return _existing(saved, body.if_exists if owns(saved.metadata, "assistants") else "raise")


async def get_assistant(api: Api, request: Request) -> Response:
    return JSONResponse(api.assistant(request.path_params["assistant_id"]).json())


async def patch_assistant(api: Api, request: Request) -> Response:
    """A new version of the assistant: what the body sends replaces what the current version
    has (``metadata`` is merged into it), the rest stays; it becomes the current version."""
    assistant_id = request.path_params["assistant_id"]
    body = await read(request, AssistantPatch)
    _system_refusal(api, assistant_id, "changed")
    api.assistant(assistant_id)  # a 404 unless the caller sees it
    graph_id = None if body.graph_id is None else _served_graph(api, body.graph_id)
    new_config = None if body.config is None else _config(body.config)
    sent = {key: value for key, value in (body.metadata or {}).items() if key != OWNER_KEY}

    def change(old: AssistantRecord) -> AssistantRecord:
        if not owns(old.metadata, "assistants"):  # its owner changed since: as if gone
            raise ApiError(404, f"assistant {assistant_id!r} not found")
        config, context = patched_settings(old.config, old.context, new_config, body.context)
        return dataclasses.replace(
            old,
            graph_id=graph_id or old.graph_id,
            name=body.name if body.name is not None else old.name,
            description=body.description if body.description is not None else old.description,
            config=config,
            context=context,
            metadata={**old.metadata, **sent},
            updated_at=now(),
        )

    new = api.created_assistants.update(assistant_id, change)
    if new is None:  # deleted meanwhile
        raise ApiError(404, f"assistant {assistant_id!r} not found")
    return JSONResponse(new.json())


async def delete_assistant(api: Api, request: Request) -> Response:
    """Delete the assistant and its versions; with ``?delete_threads=true`` also the threads
    it ran on (``metadata.assistant_id``)."""
    assistant_id = request.path_params["assistant_id"]
    _system_refusal(api, assistant_id, "deleted")
    api.assistant(assistant_id)
    if flag(request, "delete_threads"):
        for thread in api.records.threads():
            if thread.metadata.get("assistant_id") == assistant_id and owns(
                thread.metadata, "threads"
            ):
                await drop_thread(api, thread)
    api.created_assistants.delete(assistant_id)
    return Response(status_code=204)


def _found(api: Api, body: AssistantCount) -> list[AssistantRecord]:
    """The assistants the caller sees that ``body`` asks for: the system ones first (in the
    order served), then those created, oldest first."""
    every = [api.system_assistant(name) for name in api.assistants]
    every += api.created_assistants.all()
    name = body.name.lower() if body.name is not None else None
    return [
        assistant
        for assistant in every
        if (assistant.system or owns(assistant.metadata, "assistants"))
        and body.graph_id in (None, assistant.graph_id)
        and (name is None or name in assistant.name.lower())
        and matches(assistant.metadata, body.metadata)
    ]


async def search_assistants(api: Api, request: Request) -> Response:
    """The assistants that fit, by ``sort_by`` (default ``created_at``) in ``sort_order``
    (default ``desc``); ``X-Pagination-Next`` says the offset of the next page, if any."""
    body = await read(request, AssistantSearch)
    found = _found(api, body)
    key = body.sort_by or "created_at"
    found.sort(key=lambda assistant: getattr(assistant, key), reverse=body.sort_order != "asc")
    end = body.offset + body.limit
    headers = {"X-Pagination-Next": str(end)} if end < len(found) else None
    return JSONResponse([a.json() for a in found[body.offset : end]], headers=headers)


async def count_assistants(api: Api, request: Request) -> Response:
    return JSONResponse(len(_found(api, await read(request, AssistantCount))))


async def list_versions(api: Api, request: Request) -> Response:
    """The assistant's versions, newest first (a system assistant has one)."""
    assistant = api.assistant(request.path_params["assistant_id"])
    body = await read(request, AssistantVersionSearch)
    every = (
        [assistant] if assistant.system else api.created_assistants.versions(assistant.assistant_id)
    )
    found = [version for version in every if matches(version.metadata, body.metadata)]
    page = found[body.offset : body.offset + body.limit]
    return JSONResponse([version.version_json() for version in page])


async def set_latest(api: Api, request: Request) -> Response:
    """Make one of the assistant's versions its current one (what its runs use)."""
    assistant_id = request.path_params["assistant_id"]
    body = await read(request, AssistantLatest)
    _system_refusal(api, assistant_id, "changed")
    api.assistant(assistant_id)
    chosen = api.created_assistants.set_latest(assistant_id, body.version)
    if chosen is None:
        raise ApiError(404, f"assistant {assistant_id!r} has no version {body.version}")
    return JSONResponse(chosen.json())


async def get_graph(api: Api, request: Request) -> Response:
    """The graph as LangGraph's JSON, or as ``?format=mermaid|dot|plantuml|ascii`` text;
    ``?xray=`` opens subgraph nodes (``true``, or how many levels)."""
    runnable = api.graph_runnable(api.assistant(request.path_params["assistant_id"]))
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
    assistant = api.assistant(request.path_params["assistant_id"])
    api.graph_runnable(assistant)
    return JSONResponse(api.schemas[assistant.graph_id])


async def get_subgraphs(api: Api, request: Request) -> Response:
    """The schemas of the graphs an assistant's nodes run, by namespace (``node``,
    ``node|child``); ``?recurse=true`` goes all the way down."""
    assistant_id = request.path_params["assistant_id"]
    graph = graph_of(api.graph_runnable(api.assistant(assistant_id)))
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
        "/assistants",
        create_assistant,
        "Create an assistant: a served graph with settings of its own (version 1)",
        Assistant,
        body=AssistantCreate,
        errors=(404, 409, 422),
    ),
    Operation(
        "POST",
        "/assistants/search",
        search_assistants,
        "List the assistants: the served ones and those created",
        list[Assistant],
        body=AssistantSearch,
        errors=(422,),
    ),
    Operation(
        "POST",
        "/assistants/count",
        count_assistants,
        "Count the assistants that fit",
        {"type": "integer", "minimum": 0},
        body=AssistantCount,
        errors=(422,),
    ),
    Operation("GET", _A, get_assistant, "An assistant", Assistant, errors=(404,)),
    Operation(
        "PATCH",
        _A,
        patch_assistant,
        "Change an assistant: a new version, made its current one",
        Assistant,
        body=AssistantPatch,
        errors=(404, 409, 422),
    ),
    Operation(
        "DELETE",
        _A,
        delete_assistant,
        "Delete an assistant and its versions",
        None,
        errors=(404, 409),
        query=(
            Query(
                "delete_threads",
                {"type": "boolean"},
                "also delete the threads it ran on (metadata.assistant_id)",
            ),
        ),
    ),
    Operation(
        "POST",
        f"{_A}/versions",
        list_versions,
        "An assistant's versions, newest first",
        list[AssistantVersion],
        body=AssistantVersionSearch,
        errors=(404, 422),
    ),
    Operation(
        "POST",
        f"{_A}/latest",
        set_latest,
        "Make one of an assistant's versions its current one",
        Assistant,
        body=AssistantLatest,
        errors=(404, 409, 422),
    ),
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
