"""``/mcp`` and A2A beside the API, on its port: not LangGraph Server API operations (the
OpenAPI document leaves them out), but behind the same guards, API keys and body limit.

- ``/mcp``: :mod:`graph_agent.serve.mcp_mount` (the ``mcp`` extra);
- ``/a2a/{assistant_id}`` and the agent cards: :mod:`graph_agent.serve.a2a_routes` (the
  ``a2a`` extra).

Without its extra installed, each answers a 501 naming the extra to install.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from graph_agent.graph.concurrency import to_thread
from graph_agent.serve.api import Api, ApiError
from graph_agent.serve.mcp_mount import MCP_PATH, McpMount

__all__ = ["PROTOCOL_PATHS", "Protocols", "a2a_available", "is_protocol_path"]

CARD_PATH = "/.well-known/agent-card.json"

PROTOCOL_PATHS = (MCP_PATH, "/a2a/", "/.well-known/")
"""Where the protocols' routes are (a path equal to one or under one)."""

Lifespan = Callable[[Any], contextlib.AbstractAsyncContextManager[None]]


def is_protocol_path(path: str) -> bool:
    """Whether ``path`` is one of the protocols' routes, not an API operation."""
    return path == MCP_PATH or path.startswith(PROTOCOL_PATHS[1:])


def a2a_available() -> bool:
    """Whether the ``a2a-sdk`` package (the ``a2a`` extra) is installed (not imported: the
    first A2A request imports it, so that a server never asked pays nothing)."""
    return importlib.util.find_spec("a2a") is not None


class Protocols:
    """The protocols' routes over ``api``'s assistants, and the lifespan they need."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.mcp = McpMount(api.assistants)
        self._a2a: Any = None
        """The A2A endpoints (:class:`graph_agent.serve.a2a_routes.A2AEndpoints`), once made."""

    def routes(self) -> list[Route]:
        return [
            *self.mcp.routes(),
            Route("/a2a/{assistant_id}", self._rpc, methods=["POST"]),
            Route("/a2a/{assistant_id}" + CARD_PATH, self._card, methods=["GET"]),
            Route(CARD_PATH, self._root_card, methods=["GET"]),
        ]

    def lifespan(self, inner: Lifespan) -> Lifespan:
        """``inner`` (the API's lifespan) with the MCP session manager running inside it."""

        @contextlib.asynccontextmanager
        async def lifespan(app: Any) -> AsyncIterator[None]:
            async with inner(app), self.mcp.running():
                yield

        return lifespan

    async def _endpoints(self) -> Any:
        if self._a2a is None:
            if not a2a_available():
                raise ApiError(501, NO_A2A)
            # the SDK's import takes seconds: off the event loop, at the first A2A request
            module = await to_thread(importlib.import_module, "graph_agent.serve.a2a_routes")
            self._a2a = module.A2AEndpoints(self.api)
        return self._a2a

    async def _rpc(self, request: Request) -> Response:
        return await (await self._endpoints()).rpc(request)  # type: ignore[no-any-return]

    async def _card(self, request: Request) -> Response:
        return (await self._endpoints()).card(request)  # type: ignore[no-any-return]

    async def _root_card(self, request: Request) -> Response:
        return (await self._endpoints()).root_card(request)  # type: ignore[no-any-return]


NO_A2A = (
    "this server has no A2A endpoint: install the a2a extra (pip install 'graph-agent[a2a]') "
    "and restart it"
)
