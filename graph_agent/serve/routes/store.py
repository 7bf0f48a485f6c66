"""``/store``: the server's long-term memory (:mod:`graph_agent.store`) over HTTP, in LangGraph
Server's shapes: put, get and delete an item, search items, list namespaces.

Any valid key may use the whole store (as on LangGraph Server without custom auth). A store
that refuses an input (:class:`~graph_agent.store.StoreInputError`: a filter's unknown
operator, a query on a store without an index...) is a 422 saying why; a failing database
or embedder a 503.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response

from graph_agent.serve.api import Api, ApiError, Operation, Query, read
from graph_agent.serve.bodies import JSONResponse
from graph_agent.serve.models import (
    Namespaces,
    StoreDelete,
    StoreItems,
    StoreNamespaces,
    StorePut,
    StoreSearch,
)
from graph_agent.store import EmbeddingError, Item, StoreError, StoreInputError
from graph_agent.store.items import NOT_PROVIDED

__all__ = ["OPERATIONS", "item_json"]

T = TypeVar("T")


def item_json(item: Item, *, scored: bool = False) -> dict[str, Any]:
    """``item`` as LangGraph Server sends it (a search's items also carry their ``score``)."""
    found: dict[str, Any] = {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }
    if scored:
        found["score"] = item.score
    return found


async def _checked(call: Awaitable[T]) -> T:
    """What the store answers: a 422 when it refuses the input, a 503 when its database or
    its embedder failed (nothing was half-written)."""
    try:
        return await call
    except StoreInputError as exc:
        raise ApiError(422, str(exc)) from exc
    except (StoreError, EmbeddingError) as exc:
        raise ApiError(503, f"the store failed: {exc}", "store_unavailable") from exc


async def put_item(api: Api, request: Request) -> Response:
    body = await read(request, StorePut)
    ttl = NOT_PROVIDED if body.ttl is None else body.ttl  # none given: the store's default
    namespace = tuple(body.namespace)
    await _checked(api.store.aput(namespace, body.key, body.value, ttl, index=body.index))
    return Response(status_code=204)


def _refresh(request: Request) -> bool | None:
    """The query's ``refresh_ttl``; None when it has none (the store's ``refresh_on_read``)."""
    text = request.query_params.get("refresh_ttl")
    if text is None:
        return None
    text = text.lower()
    if text not in ("true", "false", "1", "0"):
        raise ApiError(422, f"refresh_ttl must be true or false, got {text!r:.40}")
    return text in ("true", "1")


async def get_item(api: Api, request: Request) -> Response:
    """The item, or ``null`` when there is none (as LangGraph Server answers)."""
    text = request.query_params.get("namespace", "")
    namespace = tuple(text.split("."))
    if not all(namespace):
        raise ApiError(
            422, f"namespace must be labels joined by periods, e.g. users.u1; got {text!r:.60}"
        )
    key = request.query_params.get("key", "")
    if not key:
        raise ApiError(422, "key must be a non-empty string")
    item = await _checked(api.store.aget(namespace, key, refresh_ttl=_refresh(request)))
    return JSONResponse(None if item is None else item_json(item))


async def delete_item(api: Api, request: Request) -> Response:
    body = await read(request, StoreDelete)
    await _checked(api.store.adelete(tuple(body.namespace), body.key))
    return Response(status_code=204)


async def search_items(api: Api, request: Request) -> Response:
    body = await read(request, StoreSearch)
    items = await _checked(
        api.store.asearch(
            tuple(body.namespace_prefix),
            query=body.query,
            filter=body.filter,
            limit=body.limit,
            offset=body.offset,
            refresh_ttl=body.refresh_ttl,
        )
    )
    return JSONResponse({"items": [item_json(item, scored=True) for item in items]})


async def list_namespaces(api: Api, request: Request) -> Response:
    """The namespaces starting with ``prefix`` and ending with ``suffix`` (``"*"``: any
    label), cut to ``max_depth`` labels after they matched, as LangGraph lists them."""
    body = await read(request, StoreNamespaces)
    found = await _checked(
        api.store.alist_namespaces(
            tuple(body.prefix),
            body.max_depth,
            suffix=tuple(body.suffix),
            limit=body.limit,
            offset=body.offset,
        )
    )
    return JSONResponse({"namespaces": [list(ns) for ns in found]})


_ITEM_OR_NULL = {"anyOf": [{"$ref": "#/components/schemas/StoreItem"}, {"type": "null"}]}
OPERATIONS = [
    Operation(
        "PUT",
        "/store/items",
        put_item,
        "Store a value at a namespace and key (replacing what was there)",
        None,
        body=StorePut,
        errors=(422, 503),
    ),
    Operation(
        "GET",
        "/store/items",
        get_item,
        "An item, or null when there is none",
        _ITEM_OR_NULL,
        errors=(422, 503),
        query=(
            Query("namespace", {"type": "string"}, "the namespace's labels joined by periods"),
            Query("key", {"type": "string"}, "the item's key"),
            Query(
                "refresh_ttl",
                {"type": "boolean"},
                "restart the item's TTL (default: the store's refresh_on_read, true unless "
                "the server's config says)",
            ),
        ),
    ),
    Operation(
        "DELETE",
        "/store/items",
        delete_item,
        "Delete an item (nothing happens when there is none)",
        None,
        body=StoreDelete,
        errors=(422, 503),
    ),
    Operation(
        "POST",
        "/store/items/search",
        search_items,
        "Items under a namespace prefix: newest first, filtered, or ranked by a query",
        StoreItems,
        body=StoreSearch,
        errors=(422, 503),
    ),
    Operation(
        "POST",
        "/store/namespaces",
        list_namespaces,
        "The namespaces holding items, by prefix, suffix and depth",
        Namespaces,
        body=StoreNamespaces,
        errors=(422, 503),
    ),
]
