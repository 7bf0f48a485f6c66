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

import asyncio
import contextlib
import contextvars
import importlib.util
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from graph_agent.graph.concurrency import to_thread
from graph_agent.runnable import Runnable
from graph_agent.serve.errors import send_error

__all__ = ["MCP_PATH", "McpMount", "mcp_available"]

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"


NO_MCP = (
    "this server has no /mcp: install the mcp extra (pip install 'graph-agent[mcp]') and restart it"
)


def mcp_available() -> bool:
    """Whether the ``mcp`` package (the ``mcp`` extra) is installed (not imported: that is
    left to the first request, so that a server whose ``/mcp`` is never called pays nothing)."""
    return importlib.util.find_spec("mcp") is not None


class McpMount:
    """The ``/mcp`` endpoint of ``assistants`` (by assistant id), and the lifespan its session
    manager runs in (enter :meth:`running` inside the app's lifespan).

    The MCP server and its session manager are made by the first request (the SDK's import
    takes seconds), the manager then running in a task of its own until the lifespan ends.
    """

    def __init__(self, assistants: Mapping[str, Runnable]) -> None:
        self._assistants = assistants
        self._problem: str | None = None if mcp_available() else NO_MCP
        self._server: Any = None
        self._manager: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None

    @property
    def available(self) -> bool:
        return self._problem is None

    def routes(self) -> list[Route]:
        # an object, not a function: Starlette hands it the raw ASGI call
        return [Route(MCP_PATH, self, methods=["GET", "POST", "DELETE"])]

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """While the app serves: stops the session manager (a new one each time: the SDK's
        runs once) at the end."""
        self._stop, self._lock = asyncio.Event(), asyncio.Lock()
        try:
            yield
        finally:
            stop, task = self._stop, self._task
            self._stop = self._lock = self._task = self._manager = None
            stop.set()
            if task is not None:
                try:
                    await task
                except Exception:  # the server stops all the same
                    log.exception("graph-agent serve: the /mcp session manager failed")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._problem is not None:
            await send_error(send, 501, self._problem)
            return
        if self._lock is None:  # a request before the lifespan started, or after it ended
            await send_error(send, 503, "the /mcp endpoint is not running (the server stops)")
            return
        manager = await self._started()
        if manager is None:
            await send_error(send, 501, str(self._problem))
            return
        await manager.handle_request(scope, receive, send)

    async def _started(self) -> Any:
        """The running session manager (started now if it is not yet), or None (then
        ``_problem`` says why)."""
        assert self._lock is not None and self._stop is not None
        async with self._lock:
            if self._manager is not None or self._problem is not None:
                return self._manager
            if self._server is None:
                try:
                    self._server = await to_thread(self._mcp_server)
                except Exception as exc:  # the extra half installed, or two tools of one name
                    log.exception("graph-agent serve: /mcp cannot serve the assistants")
                    self._problem = f"this server cannot serve /mcp: {exc}"
                    return None
            manager = self._new_manager()
            ready = asyncio.Event()
            # a context of its own: the request's (its caller) is not the manager's
            self._task = asyncio.get_running_loop().create_task(
                self._run(manager, ready, self._stop), context=contextvars.Context()
            )
            await ready.wait()
            if self._task.done():  # it ended at once: it could not start
                error = self._task.exception()
                self._problem = f"this server cannot serve /mcp: {error}"
                return None
            self._manager = manager
            return manager

    def _mcp_server(self) -> Any:
        from graph_agent.mcp.serve import mcp_server

        # no saver: a call's thread is never reachable again, so none is kept
        return mcp_server(
            {name: runnable.with_saver(None) for name, runnable in self._assistants.items()}
        )

    def _new_manager(self) -> Any:
        from mcp.server.transport_security import TransportSecuritySettings

        # the SDK makes a new session manager per app; the app's guard checks Host and Origin
        self._server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        return self._server.session_manager

    @staticmethod
    async def _run(manager: Any, ready: asyncio.Event, stop: asyncio.Event) -> None:
        try:
            async with manager.run():
                ready.set()
                await stop.wait()
        finally:
            ready.set()  # also when it failed to start: the request waiting says so
