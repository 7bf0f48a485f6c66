"""The HTTP API's routes, by resource: each module a list of
:class:`~graph_agent.serve.api.Operation` (method, path, handler and description), from which
:func:`starlette_routes` makes the app's routes and :mod:`graph_agent.serve.openapi` the
document.

The server serves LangGraph Server's system, assistant, thread, run, cron and store routes.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, Router
from starlette.types import ASGIApp, Receive, Scope, Send

from graph_agent.serve.api import Api, Handler, Operation
from graph_agent.serve.limits import BODY
from graph_agent.serve.routes import (
    assistants,
    crons,
    runs,
    store,
    system,
    thread_stream,
    threads,
)

__all__ = ["OPERATIONS", "RouteTable", "starlette_routes"]

OPERATIONS: list[Operation] = [
    *system.OPERATIONS,
    *assistants.OPERATIONS,
    *threads.OPERATIONS,
    *runs.OPERATIONS,
    *crons.OPERATIONS,
    *thread_stream.OPERATIONS,
    *store.OPERATIONS,
]
"""Every route the API serves, with its description."""


def _bound(handler: Handler, api: Api) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        return await handler(api, request)

    return endpoint


def starlette_routes(api: Api) -> list[Route]:
    """The routes of every operation, answered on ``api``'s state.

    Starlette tries routes in order, a regular expression each (the 26 before it were 8% of
    what a stateless runs/wait cost): runs first, those without a thread before all. No two
    routes take the same method and path, so the order changes nothing else.
    """
    table = sorted(
        OPERATIONS, key=lambda op: (not op.path.startswith("/runs"), "/runs" not in op.path)
    )
    return [Route(op.path, _bound(op.handler, api), methods=[op.method]) for op in table]


_Entry = tuple[re.Pattern[str], dict[str, Any], Route]


class RouteTable:
    """The router's routes looked up by method, number of path segments and first segment,
    in front of Starlette's :class:`Router`, which tries each route's regular expression in
    turn (for a run on a thread, the dozen before it were several percent of the request's
    CPU time). It answers what Starlette would: among the routes taking the method, the first
    in order whose path matches; everything else (no such route, a 405, a redirect, a mount,
    the lifespan) goes to Starlette as before.

    Only the routes before the first one it cannot index (a mount, a websocket, a path
    parameter that may hold a ``/``, a path starting with a parameter) are indexed, so no
    route Starlette would try first is skipped. Install it with :meth:`install`.
    """

    def __init__(self, router: Router) -> None:
        self.router = router
        self.fallback: ASGIApp = router.middleware_stack
        self.table: dict[tuple[str, int, str], list[_Entry]] = {}
        for route in router.routes:
            if not _indexable(route):
                break
            assert isinstance(route, Route) and route.methods is not None
            first = route.path.split("/")[1]
            for method in route.methods:
                key = (method, route.path.count("/"), first)
                self.table.setdefault(key, []).append(
                    (route.path_regex, route.param_convertors, route)
                )

    @classmethod
    def install(cls, router: Router) -> RouteTable:
        """Put a table of ``router``'s routes in front of it."""
        table = cls(router)
        router.middleware_stack = table
        return table

    def find(self, method: str, path: str) -> tuple[Route, dict[str, Any]] | None:
        """The route Starlette would answer ``method path`` with, and its path parameters;
        None when the table does not hold it (Starlette then decides)."""
        key = (method, path.count("/"), path.split("/", 2)[1] if path else "")
        for regex, convertors, route in self.table.get(key, ()):
            found = regex.match(path)
            if found is not None:
                params = {
                    name: convertors[name].convert(value)
                    for name, value in found.groupdict().items()
                }
                return route, params
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = None
        if scope["type"] == "http" and not scope.get("root_path"):
            found = self.find(scope["method"], scope["path"])
        if found is None:
            await self.fallback(scope, receive, send)
            return
        route, params = found
        scope.setdefault("router", self.router)
        scope["route"] = route
        scope["endpoint"] = route.endpoint
        scope["path_params"] = {**scope.get("path_params", {}), **params}
        await _answer(route, scope, receive, send)


async def _answer(route: Route, scope: Scope, receive: Receive, send: Send) -> None:
    """``route``'s endpoint's response to the request (the body already read, if it was).
    Its exceptions go to the app's handlers (Starlette's ``ExceptionMiddleware``, just
    outside the router), as from the route itself."""
    request = Request(scope, receive, send)
    read = scope.get(BODY)
    if read is not None and read[0] is receive:  # as the body limit read it
        request._body = read[1]
    response = await route.endpoint(request)
    await response(scope, receive, send)


def _indexable(route: object) -> bool:
    """Whether :class:`RouteTable` can index ``route``: an HTTP route of an async endpoint
    Starlette calls as it is (no middleware of the route's own), with methods, whose path
    begins with a fixed segment and whose parameters hold no ``/``."""
    if type(route) is not Route or route.methods is None:
        return False
    plain = getattr(route.app, "__qualname__", "") == "request_response.<locals>.app"
    if not plain or not inspect.iscoroutinefunction(route.endpoint):
        return False
    parts = route.path.split("/")
    if len(parts) < 2 or not parts[1] or "{" in parts[1]:
        return False
    return all(
        type(convertor).__name__ in ("StringConvertor", "IntegerConvertor", "UUIDConvertor")
        for convertor in route.param_convertors.values()
    )
