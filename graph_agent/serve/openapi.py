"""The API described: an OpenAPI 3.1 document (``/openapi.json``) and a page listing it
(``/docs``).

The schemas are written out here, next to each other, rather than derived from handlers: the
handlers read loose JSON as LangGraph Server does, and the document says what they accept.
``tests/serve/test_openapi.py`` checks that every route is described and every described
route exists, and fuzzes the server from this document. The page is plain HTML made from the
document, with no script and nothing fetched from elsewhere, so it works offline.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

from graph_agent.serve.runs import STREAM_MODES

__all__ = ["docs_html", "openapi_document"]

Schema = dict[str, Any]

_OBJECT: Schema = {"type": "object"}
_STRING: Schema = {"type": "string"}
_COUNT: Schema = {"type": "integer", "minimum": 0}
_NULLABLE_STRING: Schema = {"type": ["string", "null"]}
_THREAD_STATUS: Schema = {"enum": ["idle", "busy", "interrupted", "error"]}
_RUN_STATUS: Schema = {"enum": ["pending", "running", "error", "success", "timeout", "interrupted"]}
_STREAM_MODES = list(STREAM_MODES)


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(properties: dict[str, Schema], required: Sequence[str] = ()) -> Schema:
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def _schemas(assistant_ids: Sequence[str]) -> dict[str, Schema]:
    checkpoint = _obj(
        {
            "thread_id": _STRING,
            "checkpoint_ns": _STRING,
            "checkpoint_id": _NULLABLE_STRING,
            "checkpoint_map": {"type": ["object", "null"]},
        }
    )
    interrupt = _obj({"value": {}, "id": _STRING, "node": _NULLABLE_STRING})
    graph_schemas = {
        "input_schema": _OBJECT,
        "output_schema": _OBJECT,
        "state_schema": _OBJECT,
        "config_schema": _OBJECT,
        "context_schema": _OBJECT,
    }
    assistant_id: Schema = {"type": "string", "description": "a served graph or agent"}
    if assistant_ids:
        assistant_id["enum"] = list(assistant_ids)
    return {
        "Error": _obj(
            {
                "detail": {"type": "string", "description": "what was wrong and how to fix it"},
                "code": {"type": "string", "description": "a stable word, e.g. not_found"},
            },
            ["detail", "code"],
        ),
        "Ok": _obj({"ok": {"type": "boolean"}}, ["ok"]),
        "Assistant": _obj(
            {
                "assistant_id": _STRING,
                "graph_id": _STRING,
                "name": _STRING,
                "description": _NULLABLE_STRING,
                "config": _OBJECT,
                "context": _OBJECT,
                "metadata": _OBJECT,
                "version": {"type": "integer"},
                "created_at": _STRING,
                "updated_at": _STRING,
            },
            ["assistant_id", "graph_id", "name", "created_at"],
        ),
        "AssistantSearch": _obj(
            {
                "metadata": _OBJECT,
                "graph_id": _STRING,
                "name": _STRING,
                "limit": _COUNT,
                "offset": _COUNT,
            }
        ),
        "Graph": _obj(
            {
                "nodes": {
                    "type": "array",
                    "items": _obj(
                        {
                            "id": _STRING,
                            "type": {"enum": ["runnable", "schema", "unknown"]},
                            "data": {
                                "anyOf": [
                                    _STRING,
                                    _obj(
                                        {"id": {"type": "array", "items": _STRING}, "name": _STRING}
                                    ),
                                ],
                                "description": "a runnable's kind and name; the start's or "
                                "end's name",
                            },
                            "metadata": _OBJECT,
                        },
                        ["id", "type", "data"],
                    ),
                },
                "edges": {
                    "type": "array",
                    "items": _obj(
                        {
                            "source": _STRING,
                            "target": _STRING,
                            "conditional": {"type": "boolean"},
                            "data": _STRING,
                        }
                    ),
                },
            },
            ["nodes", "edges"],
        ),
        "GraphSchema": _obj(
            {"graph_id": _STRING, **graph_schemas},
            ["graph_id", "input_schema", "output_schema", "state_schema"],
        ),
        "GraphSchemaNoId": _obj(graph_schemas, ["input_schema", "output_schema", "state_schema"]),
        "Subgraphs": {
            "type": "object",
            "description": "each subgraph's schemas by namespace (node, node|child)",
            "additionalProperties": _ref("GraphSchemaNoId"),
        },
        "Checkpoint": checkpoint,
        "Interrupt": interrupt,
        "Thread": _obj(
            {
                "thread_id": _STRING,
                "created_at": _STRING,
                "updated_at": _STRING,
                "metadata": _OBJECT,
                "status": _THREAD_STATUS,
                "values": _OBJECT,
                "interrupts": {
                    "type": "object",
                    "additionalProperties": {"type": "array", "items": _ref("Interrupt")},
                },
            },
            ["thread_id", "created_at", "updated_at", "metadata", "status"],
        ),
        "ThreadCreate": _obj(
            {
                "thread_id": _STRING,
                "metadata": _OBJECT,
                "if_exists": {"enum": ["raise", "do_nothing"]},
            }
        ),
        "ThreadSearch": _obj(
            {
                "metadata": _OBJECT,
                "status": _THREAD_STATUS,
                "ids": {"type": "array", "items": _STRING},
                "limit": _COUNT,
                "offset": _COUNT,
            }
        ),
        "ThreadState": _obj(
            {
                "values": _OBJECT,
                "next": {"type": "array", "items": _STRING},
                "checkpoint": {"anyOf": [_ref("Checkpoint"), {"type": "null"}]},
                "metadata": _OBJECT,
                "created_at": _NULLABLE_STRING,
                "parent_checkpoint": {"anyOf": [_ref("Checkpoint"), {"type": "null"}]},
                "tasks": {"type": "array", "items": _OBJECT},
                "interrupts": {"type": "array", "items": _ref("Interrupt")},
            },
            ["values", "next", "checkpoint", "metadata", "tasks"],
        ),
        "CheckpointRequest": _obj(
            {"checkpoint_id": _STRING, "checkpoint": _obj({"checkpoint_id": _STRING})}
        ),
        "ThreadStateUpdate": _obj(
            {
                "values": {
                    "type": ["object", "null"],
                    "description": "state keys to write, merged by the keys' strategies",
                },
                "as_node": _STRING,
                "checkpoint_id": _STRING,
                "checkpoint": _obj({"checkpoint_id": _STRING}),
            }
        ),
        "ThreadStateUpdated": _obj({"checkpoint": _ref("Checkpoint")}, ["checkpoint"]),
        "HistoryRequest": _obj(
            {
                "limit": _COUNT,
                "before": {"anyOf": [_STRING, _obj({"checkpoint_id": _STRING})]},
            }
        ),
        "RunCreate": _obj(
            {
                "assistant_id": assistant_id,
                "input": {
                    "type": ["object", "null"],
                    "description": "state keys; messages as LangChain-style dicts",
                },
                "command": _obj(
                    {
                        "resume": {"description": "the answer to a pending interrupt"},
                        "update": {"type": ["object", "null"]},
                        "goto": {"anyOf": [_STRING, {"type": "array", "items": _STRING}]},
                    }
                ),
                "stream_mode": {
                    "anyOf": [
                        {"enum": _STREAM_MODES},
                        {"type": "array", "items": {"enum": _STREAM_MODES}, "minItems": 1},
                    ]
                },
                "checkpoint_id": _STRING,
                "checkpoint": _obj({"checkpoint_id": _STRING}),
                "metadata": _OBJECT,
                "context": _OBJECT,
                "config": _obj({"recursion_limit": {"type": "integer", "minimum": 1}}),
                "multitask_strategy": {"enum": ["reject", "enqueue"]},
                "if_not_exists": {"enum": ["create", "reject"]},
                "on_completion": {"enum": ["delete", "keep"]},
            },
            ["assistant_id"],
        ),
        "Run": _obj(
            {
                "run_id": _STRING,
                "thread_id": _STRING,
                "assistant_id": _STRING,
                "created_at": _STRING,
                "updated_at": _STRING,
                "status": _RUN_STATUS,
                "metadata": _OBJECT,
                "multitask_strategy": _STRING,
                "kwargs": _OBJECT,
            },
            ["run_id", "thread_id", "assistant_id", "status"],
        ),
        "RunResult": {
            "type": "object",
            "description": "the thread's values when the run ended; __interrupt__ lists pending "
            "interrupts, __error__ says why a run failed",
        },
    }


def _json(schema: Schema) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _path_params(path: str) -> list[dict[str, Any]]:
    names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
    return [{"name": n, "in": "path", "required": True, "schema": _STRING} for n in names]


def _query(name: str, schema: Schema, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


_ERRORS = {
    400: "the body is not JSON",
    401: "no valid API key",
    404: "no such thread, run, checkpoint, assistant or subgraph (or another key's thread)",
    409: "the thread is busy, or the id is taken",
    413: "the body is over the size limit",
    422: "a field is of the wrong type or value, or an input key is unknown",
}


def _operation(
    summary: str,
    ok: tuple[int, Schema | None] | tuple[int, Schema | None, str],
    *,
    body: str | None = None,
    errors: Sequence[int] = (),
    query: Sequence[dict[str, Any]] = (),
    public: bool = False,
) -> dict[str, Any]:
    status, schema = ok[0], ok[1]
    media = ok[2] if len(ok) == 3 else "application/json"
    responses: dict[str, Any] = {}
    if status == 204:
        responses["204"] = {"description": "done"}
    elif media == "application/json":
        responses[str(status)] = {"description": "OK", **_json(schema or {})}
    else:
        responses[str(status)] = {
            "description": "OK",
            "content": {media: {"schema": schema or _STRING}},
        }
    for code in sorted({*errors, *(() if public else (401,)), *((400, 413) if body else ())}):
        responses[str(code)] = {"description": _ERRORS[code], **_json(_ref("Error"))}
    operation: dict[str, Any] = {"summary": summary, "responses": responses}
    if body is not None:
        operation["requestBody"] = {"required": False, **_json(_ref(body))}
    if query:
        operation["parameters"] = list(query)
    if public:
        operation["security"] = []
    return operation


def _graph_operation() -> dict[str, Any]:
    """The graph route: LangGraph's JSON, or diagram text with ``?format=``."""
    operation = _operation(
        "An assistant's graph: JSON nodes and edges, or Mermaid/DOT/PlantUML/ASCII text",
        (200, _ref("Graph")),
        errors=[404, 422],
        query=[
            _query(
                "format",
                {"enum": ["json", "mermaid", "dot", "plantuml", "ascii", "svg"]},
                "json (the default: nodes and edges), a diagram's text, or an SVG picture",
            ),
            _query(
                "xray",
                {"anyOf": [{"type": "boolean"}, {"type": "integer", "minimum": 0}]},
                "open subgraph nodes: true for all levels, or how many",
            ),
        ],
    )
    operation["responses"]["200"]["content"]["text/plain"] = {"schema": _STRING}
    operation["responses"]["200"]["content"]["image/svg+xml"] = {"schema": _STRING}
    return operation


def _subgraphs_operation(*, namespaced: bool) -> dict[str, Any]:
    """The subgraphs routes: every subgraph's schemas, or one namespace's."""
    summary = (
        "The schemas of one subgraph (node or node|child), and with recurse those inside it"
        if namespaced
        else "The schemas of the graphs an assistant's nodes run, by namespace"
    )
    return _operation(
        summary,
        (200, _ref("Subgraphs")),
        errors=[404, 422],
        query=[
            _query(
                "recurse",
                {"type": "boolean"},
                "also the subgraphs of subgraphs (default: only the next level)",
            )
        ],
    )


def _array(name: str) -> Schema:
    return {"type": "array", "items": _ref(name)}


_SSE = "text/event-stream"
_STREAM = (
    200,
    _obj(
        {
            "event": {
                "type": "string",
                "description": "metadata first, then a stream mode's name (messages/partial, "
                "messages/metadata for messages), or error",
            },
            "data": {"type": "string", "description": "the event's JSON"},
            "id": {"type": "string", "description": "its number: send as Last-Event-ID"},
        },
        ["event", "data"],
    ),
    _SSE,
)


def _operations() -> dict[str, dict[str, dict[str, Any]]]:
    t, r = "/threads/{thread_id}", "/threads/{thread_id}/runs/{run_id}"
    run = "RunCreate"
    limit = _query("limit", _COUNT, "at most this many (default 10)")
    offset = _query("offset", _COUNT, "skip this many (default 0)")
    subgraphs = _query("subgraphs", {"type": "boolean"}, "include subgraphs' states")
    return {
        "/ok": {"get": _operation("Whether the server is ready", (200, _ref("Ok")), public=True)},
        "/openapi.json": {
            "get": _operation("This document", (200, _OBJECT), public=True),
        },
        "/docs": {
            "get": _operation("This document as a page", (200, _STRING, "text/html"), public=True)
        },
        "/assistants/search": {
            "post": _operation(
                "List the served assistants",
                (200, _array("Assistant")),
                body="AssistantSearch",
                errors=[422],
            )
        },
        "/assistants/{assistant_id}": {
            "get": _operation("An assistant", (200, _ref("Assistant")), errors=[404]),
        },
        "/assistants/{assistant_id}/graph": {"get": _graph_operation()},
        "/assistants/{assistant_id}/schemas": {
            "get": _operation(
                "An assistant's input, output, state, config and context JSON Schemas",
                (200, _ref("GraphSchema")),
                errors=[404],
            ),
        },
        "/assistants/{assistant_id}/subgraphs": {"get": _subgraphs_operation(namespaced=False)},
        "/assistants/{assistant_id}/subgraphs/{namespace}": {
            "get": _subgraphs_operation(namespaced=True)
        },
        "/threads": {
            "post": _operation(
                "Create a thread", (200, _ref("Thread")), body="ThreadCreate", errors=[409, 422]
            )
        },
        "/threads/search": {
            "post": _operation(
                "Search threads by metadata",
                (200, _array("Thread")),
                body="ThreadSearch",
                errors=[422],
            )
        },
        t: {
            "get": _operation("A thread", (200, _ref("Thread")), errors=[404]),
            "delete": _operation(
                "Delete a thread (its run is cancelled)", (204, None), errors=[404]
            ),
        },
        f"{t}/copy": {
            "post": _operation(
                "Copy a thread with its checkpoints", (200, _ref("Thread")), errors=[404]
            ),
        },
        f"{t}/state": {
            "get": _operation(
                "The thread's newest state",
                (200, _ref("ThreadState")),
                errors=[404],
                query=[subgraphs],
            ),
            "post": _operation(
                "Write values into the thread's state",
                (200, _ref("ThreadStateUpdated")),
                body="ThreadStateUpdate",
                errors=[404, 409, 422],
            ),
        },
        f"{t}/state/checkpoint": {
            "post": _operation(
                "The thread's state at a checkpoint",
                (200, _ref("ThreadState")),
                body="CheckpointRequest",
                errors=[404, 422],
            )
        },
        f"{t}/state/{{checkpoint_id}}": {
            "get": _operation(
                "The thread's state at a checkpoint",
                (200, _ref("ThreadState")),
                errors=[404],
                query=[subgraphs],
            )
        },
        f"{t}/history": {
            "post": _operation(
                "The thread's states, newest first",
                (200, _array("ThreadState")),
                body="HistoryRequest",
                errors=[404, 422],
            )
        },
        f"{t}/runs": {
            "post": _operation(
                "Start a background run", (200, _ref("Run")), body=run, errors=[404, 409, 422]
            ),
            "get": _operation(
                "The thread's runs, newest first",
                (200, _array("Run")),
                errors=[404, 422],
                query=[limit, offset, _query("status", _RUN_STATUS, "only runs in this status")],
            ),
        },
        f"{t}/runs/wait": {
            "post": _operation(
                "Run and answer the final values",
                (200, _ref("RunResult")),
                body=run,
                errors=[404, 409, 422],
            )
        },
        f"{t}/runs/stream": {
            "post": _operation(
                "Run and stream its events", _STREAM, body=run, errors=[404, 409, 422]
            ),
        },
        r: {
            "get": _operation("A run", (200, _ref("Run")), errors=[404]),
            "delete": _operation("Forget a finished run", (204, None), errors=[404, 409]),
        },
        f"{r}/join": {
            "get": _operation(
                "Wait for a run; its final values", (200, _ref("RunResult")), errors=[404]
            ),
        },
        f"{r}/stream": {
            "get": _operation("A run's events, from the first", _STREAM, errors=[404]),
        },
        f"{r}/cancel": {
            "post": _operation(
                "Cancel a run before its next step",
                (204, None),
                errors=[404, 422],
                query=[
                    _query("wait", {"type": "boolean"}, "answer once the run has stopped"),
                    _query("action", {"enum": ["interrupt"]}, "how to cancel"),
                ],
            )
        },
        "/runs/wait": {
            "post": _operation(
                "Run on a thread of its own and answer the final values",
                (200, _ref("RunResult")),
                body=run,
                errors=[404, 422],
            )
        },
        "/runs/stream": {
            "post": _operation(
                "Run on a thread of its own and stream its events",
                _STREAM,
                body=run,
                errors=[404, 422],
            ),
        },
    }


def openapi_document(assistant_ids: Sequence[str] = ()) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the server serving ``assistant_ids``."""
    paths: dict[str, Any] = {}
    for path, operations in _operations().items():
        params = _path_params(path)
        paths[path] = {
            method: ({**op, "parameters": params + op.get("parameters", [])} if params else op)
            for method, op in operations.items()
        }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "graph-agent serve",
            "version": "1",
            "description": "LangGraph Server's API over graph_agent graphs and agents. Every "
            "error is a JSON body with detail (what to fix) and code.",
        },
        "paths": paths,
        "components": {
            "schemas": _schemas(assistant_ids),
            "securitySchemes": {
                "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
                "bearer": {"type": "http", "scheme": "bearer"},
            },
        },
        "security": [{"apiKey": []}, {"bearer": []}],
    }


def docs_html(document: dict[str, Any]) -> str:
    """A page listing every operation of ``document``: method, path, summary, body, answers."""
    rows = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            body_name = body["schema"]["$ref"].rsplit("/", 1)[-1] if body else ""
            answers = ", ".join(operation["responses"])
            rows.append(
                f"<tr><td><code>{method.upper()}</code></td><td><code>{html.escape(path)}</code>"
                f"</td><td>{html.escape(operation['summary'])}</td><td>{body_name}</td>"
                f"<td>{answers}</td></tr>"
            )
    schemas = "".join(
        f"<h3 id='{name}'>{name}</h3><pre>{html.escape(_pretty(schema))}</pre>"
        for name, schema in document["components"]["schemas"].items()
    )
    title = html.escape(document["info"]["title"])
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:.2em .8em;"
        "text-align:left;vertical-align:top}pre{background:#f4f4f4;padding:.5em}</style>"
        f"</head><body><h1>{title}</h1><p>{html.escape(document['info']['description'])} "
        "The machine-readable document: <a href='/openapi.json'>/openapi.json</a>. "
        "Send the API key as the <code>x-api-key</code> header.</p>"
        "<table><tr><th>Method</th><th>Path</th><th>What</th><th>Body</th><th>Answers</th></tr>"
        f"{''.join(rows)}</table><h2>Schemas</h2>{schemas}</body></html>"
    )


def _pretty(schema: Schema) -> str:
    return json.dumps(schema, indent=2)
