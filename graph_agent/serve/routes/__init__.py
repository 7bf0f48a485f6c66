"""The HTTP API's routes, by resource: each module a list of
:class:`~graph_agent.serve.api.Operation` (method, path, handler and description), from which
:func:`starlette_routes` makes the app's routes and :mod:`graph_agent.serve.openapi` the
document.

The server serves LangGraph Server's system, assistant, thread, run, cron and store routes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from graph_agent.serve.api import Api, Handler, Operation
from graph_agent.serve.routes import (
    assistants,
    crons,
    runs,
    store,
    system,
    thread_stream,
    threads,
)

__all__ = ["OPERATIONS", "starlette_routes"]

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
