"""``/ok``, ``/info``, ``/openapi.json`` and ``/docs``: whether the server is up, and what it
serves."""

from __future__ import annotations

from importlib import metadata

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from graph_agent.serve.api import Api, ApiError, Operation
from graph_agent.serve.bodies import JSONResponse, json_bytes
from graph_agent.serve.docs import CONSOLE_HEADERS, PAGE_HEADERS, console_file, docs_html
from graph_agent.serve.models import Info, Ok
from graph_agent.serve.queue import QueueRunner

__all__ = ["OPERATIONS"]


async def ok(api: Api, request: Request) -> Response:
    if isinstance(api.runner, QueueRunner) and api.runner.work:
        return JSONResponse({"ok": True, "worker": api.runner.worker_key})
    return JSONResponse({"ok": True})


def _version() -> str:
    try:
        return metadata.version("graph-agent")
    except metadata.PackageNotFoundError:  # run from a checkout, not installed
        return "unknown"


_INFO = {
    "version": _version(),
    "langgraph_py_version": None,
    # what LangGraph Server's clients look for: this server has its served graphs as
    # assistants and runs crons; it sends no traces to LangSmith
    "flags": {
        "assistants": True,
        "crons": True,
        "langsmith": False,
        "langsmith_tracing_replicas": False,
    },
    "host": {
        "kind": "self-hosted",
        "project_id": None,
        "host_revision_id": None,
        "revision_id": None,
        "tenant_id": None,
    },
    "server": "graph-agent",
}


async def info(api: Api, request: Request) -> Response:
    return JSONResponse(_INFO)


def _document(api: Api) -> bytes:
    """The server's OpenAPI document as JSON, made once."""
    if api.document is None:
        api.document = json_bytes(api.describe())
    return api.document


async def openapi(api: Api, request: Request) -> Response:
    return Response(_document(api), media_type="application/json")


async def docs(api: Api, request: Request) -> Response:
    page = docs_html(api.describe())
    return HTMLResponse(page, headers=PAGE_HEADERS)


async def docs_file(api: Api, request: Request) -> Response:
    name = request.path_params["name"]
    found = console_file(name, keys_required=api.keys_required)
    if found is None:
        raise ApiError(404, f"no /docs file {name!r}; the page is /docs")
    body, media_type = found
    return Response(body, media_type=media_type, headers=CONSOLE_HEADERS)


OPERATIONS = [
    Operation("GET", "/ok", ok, "Whether the server is ready", Ok, public=True),
    Operation(
        "GET", "/info", info, "The server's version and which features it has", Info, public=True
    ),
    Operation("GET", "/openapi.json", openapi, "This document", {"type": "object"}, public=True),
    Operation(
        "GET",
        "/docs",
        docs,
        "This document as a page, with a console to try a request",
        {"type": "string"},
        media="text/html",
        public=True,
    ),
    Operation(
        "GET",
        "/docs/{name}",
        docs_file,
        "The /docs console's files: try.html, try.js, try.css",
        {"type": "string"},
        media="text/html",
        also=("text/javascript", "text/css"),
        errors=(404,),
        public=True,
    ),
]
