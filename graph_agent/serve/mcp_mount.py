"""``/mcp``: the served assistants as MCP tools over streamable HTTP, on the API's own port.

The tools are :func:`graph_agent.mcp.serve.mcp_server`'s, the ones ``graph-agent mcp serve
--transport http`` serves from a process of its own: one per assistant, named after its id (an
agent's takes ``message``, a graph's ``input``). Here the SDK's session manager runs inside the
app's lifespan and its endpoint sits behind the app's guards, API keys and body limit, as every
route does. Each call is a run of its own that keeps no thread (as LangGraph Server's ``/mcp``
runs are stateless): the assistants are served to MCP without a saver. The transport is
stateless too (no ``Mcp-Session-Id`` to remember), so a call may reach any process of a server
started with ``--workers``.

Without the ``mcp`` extra installed, ``/mcp`` answers a 501 saying what to install.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from graph_agent.runnable import Runnable
from graph_agent.serve.errors import send_error

__all__ = ["MCP_PATH", "McpMount", "mcp_available"]

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"


def mcp_available() -> bool:
    """Whether the ``mcp`` package (the ``mcp`` extra) is installed."""
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        return False
    return True


class McpMount:
    """The ``/mcp`` endpoint of ``assistants`` (by assistant id) and the lifespan its session
    manager needs (enter :meth:`running` inside the app's lifespan).

    Raises:
        graph_agent.mcp.MCPConfigError: Two assistants would get the same tool name.
    """

    def __init__(self, assistants: Mapping[str, Runnable]) -> None:
        self._server: Any = None
        self._manager: Any = None
        if mcp_available():
            from graph_agent.mcp.serve import mcp_server

            # no saver: a call's thread is never reachable again, so none is kept
            self._server = mcp_server(
                {name: runnable.with_saver(None) for name, runnable in assistants.items()}
            )

    @property
    def available(self) -> bool:
        return self._server is not None

    def routes(self) -> list[Route]:
        # an object, not a function: Starlette hands it the raw ASGI call
        return [Route(MCP_PATH, self, methods=["GET", "POST", "DELETE"])]

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The session manager's lifetime: a new one each time (the SDK's runs once)."""
        if self._server is None:
            yield
            return
        from mcp.server.transport_security import TransportSecuritySettings

        # the SDK makes a new session manager per app; the app's guard checks Host and Origin
        self._server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        manager = self._server.session_manager
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._server is None:
            await send_error(
                send,
                501,
                "this server has no /mcp: install the mcp extra (pip install 'graph-agent[mcp]')"
                " and restart it",
            )
            return
        if self._manager is None:  # a request before the lifespan started, or after it ended
            await send_error(send, 503, "the /mcp endpoint is not running (the server stops)")
            return
        await self._manager.handle_request(scope, receive, send)
