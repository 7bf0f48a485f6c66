"""The API described: an OpenAPI 3.1 document (``/openapi.json``), written from the routes
themselves.

Each route of :mod:`graph_agent.serve.routes` is an :class:`~graph_agent.serve.api.Operation`
naming its request and answer models (:mod:`graph_agent.serve.models`); the document's paths
come from those operations, its schemas from the models (pydantic writes them), so what the
document says a request may hold is what the server checks. ``tests/serve/test_openapi.py``
checks that every route is described and every described route exists, and fuzzes the server
from this document. ``/docs`` shows it as a page (:mod:`graph_agent.serve.docs`).
"""

from __future__ import annotations

import copy
import functools
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, models_json_schema

from graph_agent.serve.api import Operation, Query
from graph_agent.serve.docs import docs_html
from graph_agent.serve.models import REQUEST_MODELS, RESPONSE_MODELS, Error
from graph_agent.serve.routes import OPERATIONS

__all__ = ["docs_html", "openapi_document", "operation_json"]

Schema = dict[str, Any]
_REF = "#/components/schemas/{model}"
_STRING: Schema = {"type": "string"}

_ERRORS = {
    400: "the body is not JSON",
    401: "no valid API key",
    403: "refused: the Host is not this server's (without keys), or the page's Origin is not "
    "allowed (--allow-host, --cors-origin)",
    404: "no such thread, run, checkpoint, assistant or subgraph (or another key's thread)",
    409: "the thread is busy, the id is taken, or the assistant is a served one (not changed)",
    413: "the body is over the size limit",
    415: "the body is not sent as Content-Type: application/json",
    422: "a field is of the wrong type or value, or an input key is unknown",
    503: "the store's database or embedder failed",
}


class _Schemas(GenerateJsonSchema):
    """pydantic's JSON Schema, without a title on every property."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


@functools.cache
def _components() -> dict[str, Schema]:
    """Every model's schema by its name: requests as read, answers as written."""
    models: list[tuple[type[BaseModel], Any]] = [(m, "validation") for m in REQUEST_MODELS]
    models += [(m, "serialization") for m in RESPONSE_MODELS]
    listed = {model for model, _ in models}
    for operation in OPERATIONS:  # the models of routes in modules of their own
        answer = _answer_model(operation.answer)
        for model, mode in ((operation.body, "validation"), (answer, "serialization")):
            if model is not None and model not in listed:
                listed.add(model)
                models.append((model, mode))
    _, found = models_json_schema(models, ref_template=_REF, schema_generator=_Schemas)
    schemas: dict[str, Schema] = found["$defs"]
    return schemas


def _answer_model(answer: object) -> type[BaseModel] | None:
    """The model of an operation's answer (``M`` or ``list[M]``), else None."""
    if typing.get_origin(answer) is list:
        (answer,) = typing.get_args(answer)
    return answer if isinstance(answer, type) and issubclass(answer, BaseModel) else None


def _ref(model: type[BaseModel]) -> Schema:
    return {"$ref": _REF.format(model=model.__name__)}


def _answer_schema(answer: object) -> Schema:
    if typing.get_origin(answer) is list:
        (item,) = typing.get_args(answer)
        return {"type": "array", "items": _ref(item)}
    if isinstance(answer, type) and issubclass(answer, BaseModel):
        return _ref(answer)
    assert isinstance(answer, Mapping), answer
    return dict(answer)


def _json(schema: Schema) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _parameters(path: str, query: Iterable[Query]) -> list[dict[str, Any]]:
    names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
    found = [{"name": n, "in": "path", "required": True, "schema": _STRING} for n in names]
    found += [
        {"name": q.name, "in": "query", "required": False, "schema": dict(q.schema)}
        | {"description": q.description}
        for q in query
    ]
    return found


def operation_json(operation: Operation) -> dict[str, Any]:
    """The OpenAPI operation object of ``operation``."""
    responses: dict[str, Any] = {}
    if operation.answer is None:
        responses["204"] = {"description": "done"}
    else:
        content = {operation.media: {"schema": _answer_schema(operation.answer)}}
        content |= {media: {"schema": _STRING} for media in operation.also}
        responses["200"] = {"description": "OK", "content": content}
    auth = () if operation.public else (401,)
    body = (400, 413, 415) if operation.body else ()
    for code in sorted({*operation.errors, 403, *auth, *body}):
        responses[str(code)] = {"description": _ERRORS[code], **_json(_ref(Error))}
    found: dict[str, Any] = {"summary": operation.summary, "responses": responses}
    if operation.body is not None:
        schema = _ref(operation.body)
        if operation.many:
            schema = {"type": "array", "items": schema}
        found["requestBody"] = {"required": False, **_json(schema)}
    parameters = _parameters(operation.path, operation.query)
    if parameters:
        found["parameters"] = parameters
    if operation.public:
        found["security"] = []
    return found


def openapi_document(assistant_ids: Sequence[str] = ()) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the server serving ``assistant_ids``."""
    paths: dict[str, dict[str, Any]] = {}
    for operation in OPERATIONS:
        paths.setdefault(operation.path, {})[operation.method.lower()] = operation_json(operation)
    schemas = copy.deepcopy(_components())
    if assistant_ids:
        schemas["RunCreate"]["properties"]["assistant_id"]["enum"] = list(assistant_ids)
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
            "schemas": schemas,
            "securitySchemes": {
                "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
                "bearer": {"type": "http", "scheme": "bearer"},
            },
        },
        "security": [{"apiKey": []}, {"bearer": []}],
    }
