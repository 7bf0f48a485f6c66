"""``/mcp`` and A2A beside the API, on its port: not LangGraph Server API operations (the
OpenAPI document leaves them out), but behind the same guards, API keys and body limit.

- ``/mcp``: :mod:`graph_agent.serve.mcp_mount` (the ``mcp`` extra);
- ``/a2a/{assistant_id}`` and the agent cards: :mod:`graph_agent.serve.a2a_routes` (the
  ``a2a`` extra).

Without its extra installed, each answers a 501 naming the extra to install.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from graph_agent.serve.api import Api, ApiError
from graph_agent.serve.mcp_mount import MCP_PATH, McpMount

__all__ = ["PROTOCOL_PATHS", "Protocols", "is_protocol_path"]

PROTOCOL_PATHS = (MCP_PATH, "/a2a/", "/.well-known/")
"""Where the protocols' routes are (a path equal to one or under one)."""

Lifespan = Callable[[Any], contextlib.AbstractAsyncContextManager[None]]


def is_protocol_path(path: str) -> bool:
    """Whether ``path`` is one of the protocols' routes, not an API operation."""
    return path == MCP_PATH or path.startswith(PROTOCOL_PATHS[1:])


def a2a_available() -> bool:
    """Whether the ``a2a-sdk`` package (the ``a2a`` extra) is installed."""
    try:
        import a2a.server.routes  # noqa: F401
    except ImportError:
        return False
    return True


class Protocols:
    """The protocols' routes over ``api``'s assistants, and the lifespan they need."""

    def __init__(self, api: Api) -> None:
        self.mcp = McpMount(api.assistants)
        if a2a_available():
            from graph_agent.serve.a2a_routes import a2a_routes

            self._a2a = a2a_routes(api)
        else:
            self._a2a = [
                Route(path, _no_a2a, methods=[method])
                for method, path in (
                    ("POST", "/a2a/{assistant_id}"),
                    ("GET", "/a2a/{assistant_id}/.well-known/agent-card.json"),
                    ("GET", "/.well-known/agent-card.json"),
                )
            ]

    def routes(self) -> list[Route]:
        return self.mcp.routes() + self._a2a

    def lifespan(self, inner: Lifespan) -> Lifespan:
        """``inner`` (the API's lifespan) with the MCP session manager running inside it."""

        @contextlib.asynccontextmanager
        async def lifespan(app: Any) -> AsyncIterator[None]:
            async with inner(app), self.mcp.running():
                yield

        return lifespan


async def _no_a2a(request: Request) -> Response:
    raise ApiError(
        501,
        "this server has no A2A endpoint: install the a2a extra (pip install "
        "'graph-agent[a2a]') and restart it",
    )
