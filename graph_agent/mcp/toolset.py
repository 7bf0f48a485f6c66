"""MCPToolset: the tools of one or more MCP servers, as graph_agent tools an agent can call.

The official ``mcp`` SDK speaks the protocol. Its sessions live on an event loop of the
toolset's own (:class:`~graph_agent.graph.concurrency.LoopThread`), whatever calls the tools:
a sync ``invoke`` (each tool call runs on a loop of its own), an ``ainvoke`` on the caller's
loop, or parallel tool calls on worker threads all reach the same open sessions.

- **Lazily opened**: a server is started (or connected to) when its tools are first listed, by
  iterating the toolset; sessions close with the toolset (``with`` / ``async with`` /
  :meth:`MCPToolset.close`).
- **Names**: a tool keeps the name its server gives it (characters outside
  ``[A-Za-z0-9_-]`` become ``_``, cut to 64). A name that more than one server offers is
  prefixed with its server's name on every server that offers it: ``files_search`` and
  ``tickets_search``, never a bare ``search`` whose meaning depends on the order of servers.
- **Schemas**: the model sees each tool's input schema exactly as its server listed it; the
  server validates the arguments (a mistake comes back as an error result the model reads).
- **Results**: text, or content parts when a result holds images, audio or files (see
  :mod:`graph_agent.mcp.results`); an ``isError`` result or an MCP error
  raises :class:`~graph_agent.mcp.errors.MCPToolError`, which an agent turns into an error
  tool result. So does a result over ``max_result_bytes`` (4 MiB unless the toolset or the
  server's entry says otherwise): it is dropped as it arrives, and the connection goes on
  answering the next calls at once (see :mod:`graph_agent.mcp.framing`).
- **A server that dies** (its process exits, its connection drops) is restarted or reconnected;
  again each time once it has answered a call since, but if it dies again before that, its
  tools fail with :class:`~graph_agent.mcp.errors.MCPServerError` until the toolset is opened
  again. A call
  that found it gone before its request went out is sent again; a call it died during is not
  (the tool may have run, and a side effect would happen twice): that call fails with an
  ``MCPServerError`` saying so, which the model reads, and may retry (see
  :mod:`graph_agent.mcp.transports` for how the two are told apart).

Example:
    >>> import sys
    >>> servers = {"calc": {"command": sys.executable, "args": ["calc_server.py"]}}
    >>> with MCPToolset(servers) as toolset:  # doctest: +SKIP
    ...     agent = ReactAgent("helper", model, tools=[*toolset])
    ...     agent.call("What is 2 + 3?")
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import re
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import anyio
from mcp import Client, MCPError
from mcp.types import CONNECTION_CLOSED, CallToolResult
from mcp.types import Tool as RemoteTool
from pydantic import BaseModel, ConfigDict

from graph_agent.graph.concurrency import LoopThread, to_thread
from graph_agent.mcp.config import ServerSpec, StdioServer, check_cap, parse_servers
from graph_agent.mcp.errors import MCPConfigError, MCPServerError, MCPToolError
from graph_agent.mcp.framing import DEFAULT_MAX_RESULT_BYTES
from graph_agent.mcp.results import result_content, result_text
from graph_agent.mcp.transports import (
    CallAttempt,
    Wire,
    message_limit,
    new_client,
    sending,
)
from graph_agent.messages import MessageContent
from graph_agent.tools import Tool, ToolContext

__all__ = ["MCPTool", "MCPToolset"]

_logger = logging.getLogger(__name__)

_NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9_-]")
_SHUTDOWN_SECONDS = 5.0
"""How long closing one session may take (the SDK stops a stdio server within ~2 s)."""


class MCPTool(Tool):
    """A tool of an MCP server: called through the toolset's open session to that server.

    Attributes:
        server: The name of the server (a key of the toolset's ``servers``).
        remote_name: The tool's name on its server (``name`` may carry a prefix, see
            :class:`MCPToolset`).
        remote: The tool as the server listed it (``mcp.types.Tool``).
    """

    __slots__ = ("remote", "remote_name", "server")

    def __init__(
        self,
        *,
        name: str,
        server: str,
        remote: RemoteTool,
        call: Callable[[dict[str, Any]], Any],
        timeout: float | None = None,
    ) -> None:
        # Tool's own setup (name check, timeout check, every attribute a tool has) on a
        # stand-in with no parameters; then the parts that come from the server. On the
        # caller's loop: the call only awaits the toolset's loop, so it never blocks the
        # caller's, and its timeout cuts it there; graph_agent's own loop would be a second hop
        super().__init__(
            _no_arguments,
            name=name,
            description=remote.description or remote.title or "",
            timeout=timeout,
            on_caller_loop=True,
        )
        self.function = call
        self.is_async = True
        # the server validates the arguments against its own schema; nothing is dropped here
        self.arguments_model = _AnyArguments
        self.parameters = copy.deepcopy(remote.input_schema)
        self.server = server
        self.remote_name = remote.name
        self.remote = remote

    def __repr__(self) -> str:
        return f"MCPTool(name={self.name!r}, server={self.server!r}, timeout={self.timeout})"

    def validate(self, arguments: Mapping[str, Any] | str | None) -> dict[str, Any]:
        """The model's arguments as a JSON object, unchanged: the server checks them against
        its schema (only text that is not a JSON object is refused here).

        Raises:
            ToolArgumentsError: The arguments are not JSON, or not an object.
        """
        return dict(self._arguments_object(arguments))

    def _bind(
        self, arguments: Mapping[str, Any] | str | None, context: ToolContext | None
    ) -> Callable[[], Any]:
        values = self.validate(arguments)
        return lambda: self.function(values)


def _no_arguments() -> None:
    """The stand-in an MCP tool is set up on (see :class:`MCPTool`); never called."""


class _AnyArguments(BaseModel):
    """Any JSON object: what an MCP tool's ``arguments_model`` accepts (its server checks)."""

    model_config = ConfigDict(extra="allow")


class MCPToolset:
    """The tools of one or more MCP servers; iterate it for graph_agent :class:`Tool` s.

    Args:
        servers: ``{name: server}``, each server ``{"command", "args", "env"}`` (started as a
            subprocess, spoken to over stdio; ``env`` adds to the few variables the SDK
            passes on) or ``{"url", "headers"}`` (streamable HTTP; with ``"type": "sse"``, the
            older HTTP+SSE transport). The names prefix clashing tool names.
        timeout: Seconds each tool call may take (``None``: the agent's ``tool_timeout``).
        connect_timeout: Seconds a server may take to start and answer the handshake.
        max_result_bytes: The most bytes one answer of a server may have (a server's own
            ``max_result_bytes`` wins); a larger result fails the call with
            :class:`~graph_agent.mcp.errors.MCPToolError` naming the cap. The SSE transport
            carries at most 1 MiB a message whatever the cap.

    Raises:
        MCPConfigError: A server is described wrong.

    Example:
        >>> toolset = MCPToolset({"tickets": {"url": "http://127.0.0.1:9/mcp"}})
        >>> toolset.servers["tickets"].url, toolset.opened
        ('http://127.0.0.1:9/mcp', False)
        >>> toolset.close()
    """

    def __init__(
        self,
        servers: Mapping[str, Mapping[str, Any] | ServerSpec],
        *,
        timeout: float | None = None,
        connect_timeout: float = 30.0,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    ) -> None:
        if timeout is not None and timeout <= 0:
            raise MCPConfigError(f"MCPToolset: timeout must be positive, got {timeout}")
        if connect_timeout <= 0:
            raise MCPConfigError(
                f"MCPToolset: connect_timeout must be positive, got {connect_timeout}"
            )
        self.servers: dict[str, ServerSpec] = parse_servers(servers)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_result_bytes = check_cap("MCPToolset", max_result_bytes)
        self._loop: LoopThread | None = None
        self._connections = {
            name: _Connection(
                spec,
                connect_timeout=connect_timeout,
                max_result_bytes=spec.max_result_bytes or max_result_bytes,
            )
            for name, spec in self.servers.items()
        }
        self._tools: tuple[MCPTool, ...] | None = None
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        listed = "" if self._tools is None else f", tools={[t.name for t in self._tools]}"
        return f"MCPToolset(servers={list(self.servers)}{listed})"

    @property
    def opened(self) -> bool:
        """Whether any server was started or connected to (its tools listed)."""
        return self._loop is not None

    # the tools
    @property
    def tools(self) -> tuple[MCPTool, ...]:
        """Every server's tools, listed once (the servers are started on first use).

        Raises:
            MCPServerError: A server cannot be started or reached.
            MCPConfigError: Two tools of one server have the same name once made valid.
        """
        if self._tools is None:
            tools = self._run(self._list_all())
            with self._lock:
                if self._tools is None:
                    self._tools = tools
        return self._tools

    async def alist_tools(self) -> tuple[MCPTool, ...]:
        """:attr:`tools` for async code: the servers start without blocking the caller's loop."""
        if self._tools is None:
            tools = await self._arun(self._list_all())
            with self._lock:
                if self._tools is None:
                    self._tools = tools
        return self._tools

    def __iter__(self) -> Iterator[MCPTool]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self.tools)

    def __getitem__(self, name: str) -> MCPTool:
        for found in self.tools:
            if found.name == name:
                return found
        known = ", ".join(t.name for t in self.tools) or "none"
        raise KeyError(f"no MCP tool named {name!r}; known tools: {known}")

    # opening and closing
    def __enter__(self) -> MCPToolset:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> MCPToolset:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def close(self) -> None:
        """Close every session (stopping the servers it started); its tools then fail."""
        loop = self._closing()
        if loop is not None:
            loop.run(self._close_all())
            loop.close()

    async def aclose(self) -> None:
        """:meth:`close` for async code."""
        loop = self._closing()
        if loop is not None:
            await loop.arun(self._close_all())
            await to_thread(loop.close)

    def _closing(self) -> LoopThread | None:
        with self._lock:
            self._closed = True
            loop, self._loop = self._loop, None
        return loop

    def _own_loop(self) -> LoopThread:
        with self._lock:
            if self._closed:
                raise MCPServerError(
                    f"the MCP toolset of {', '.join(self.servers)} is closed: its tools can no "
                    "longer be called; use them inside `with MCPToolset(...)`",
                    server=", ".join(self.servers),
                )
            if self._loop is None:
                self._loop = LoopThread(f"mcp:{','.join(self.servers)}"[:60])
            return self._loop

    def _run(self, coroutine: Any) -> Any:
        try:
            loop = self._own_loop()
        except MCPServerError:
            coroutine.close()
            raise
        return loop.run(coroutine)

    async def _arun(self, coroutine: Any) -> Any:
        try:
            loop = self._own_loop()
        except MCPServerError:
            coroutine.close()
            raise
        return await loop.arun(coroutine)

    # on the toolset's loop
    async def _list_all(self) -> tuple[MCPTool, ...]:
        listed = await asyncio.gather(*(c.list_tools() for c in self._connections.values()))
        by_server = dict(zip(self._connections, listed, strict=True))
        return tuple(self._make_tools(by_server))

    def _make_tools(self, by_server: Mapping[str, list[RemoteTool]]) -> Iterator[MCPTool]:
        valid = {
            server: {remote.name: _valid_name(remote.name) for remote in remotes}
            for server, remotes in by_server.items()
        }
        for server, names in valid.items():
            twins = [n for n, count in Counter(names.values()).items() if count > 1]
            if twins:
                raise MCPConfigError(
                    f"MCP server {server!r} offers several tools named {twins[0]!r} once their "
                    "names are made valid ([A-Za-z0-9_-], at most 64 characters): rename them "
                    "on the server"
                )
        offered = Counter(name for names in valid.values() for name in names.values())
        for server, remotes in by_server.items():
            for remote in remotes:
                name = valid[server][remote.name]
                if offered[name] > 1:
                    name = _valid_name(f"{server}_{name}")
                yield MCPTool(
                    name=name,
                    server=server,
                    remote=remote,
                    call=self._caller(server, remote.name),
                    timeout=self.timeout,
                )

    def _caller(self, server: str, tool_name: str) -> Callable[[dict[str, Any]], Any]:
        connection = self._connections[server]

        async def call(arguments: dict[str, Any]) -> MessageContent:
            result: CallToolResult = await self._arun(connection.call(tool_name, arguments))
            if result.is_error:
                raise MCPToolError(
                    result_text(result)
                    or f"tool {tool_name!r} of MCP server {server!r} failed (no details)",
                    server=server,
                    tool=tool_name,
                )
            return result_content(result)

        return call

    async def _close_all(self) -> None:
        await asyncio.gather(*(c.close() for c in self._connections.values()))


def _valid_name(name: str) -> str:
    return _NOT_IN_NAMES.sub("_", name)[:64] or "_"


class _Connection:
    """One server's session, on the toolset's loop: opened on first use, reopened when the
    server is found gone, and refused for good when the reopened session is lost again before
    it answered a call."""

    def __init__(self, spec: ServerSpec, *, connect_timeout: float, max_result_bytes: int) -> None:
        self.spec = spec
        self.connect_timeout = connect_timeout
        self.max_result_bytes = max_result_bytes
        self._client: Client | None = None
        self._wire = Wire(over_http=not isinstance(spec, StdioServer))
        self._holder: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self._generation = 0
        self._reconnected = False
        self._broken: str | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    async def list_tools(self) -> list[RemoteTool]:
        client, _ = await self._current()
        tools: list[RemoteTool] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def call(self, tool_name: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call the tool. A call whose connection was lost before its request went out is sent
        again on the reopened connection (see :meth:`_served` for how often); one lost
        after it went out may have run, so it is not sent again: the connection is reopened
        for later calls and this call fails, saying so."""
        client, generation = await self._current()
        try:
            return await self._call_on(client, generation, tool_name, arguments)
        except _Lost as lost:
            if lost.may_have_run:
                raise await self._lost_during(tool_name, generation, lost.error) from lost.error
            client, generation = await self._after_loss(generation, lost.error)
        try:
            return await self._call_on(client, generation, tool_name, arguments)
        except _Lost as lost:
            if lost.may_have_run:
                raise await self._lost_during(tool_name, generation, lost.error) from lost.error
            await self._after_loss(generation, lost.error)  # raises, unless another call
            raise MCPServerError(  # reconnected meanwhile: then this call gives up
                f"MCP server {self.name!r} lost the call of {tool_name!r} twice before it was "
                f"sent ({_describe(lost.error)}); call it again",
                server=self.name,
            ) from lost.error

    async def _lost_during(
        self, tool_name: str, generation: int, error: BaseException
    ) -> MCPServerError:
        """The error for a call whose server stopped after the call went out, with the server
        brought back (or not) for the calls that follow."""
        stopped = (
            f"MCP server {self.name!r} ({self.spec.describe()}) stopped during the call of "
            f"{tool_name!r} ({_describe(error)}): the tool may have run, so the call was not "
            "sent again"
        )
        try:
            await self._after_loss(generation, error)
        except MCPServerError as exc:
            return MCPServerError(
                f"{stopped}; the server could not be brought back: {exc}", server=self.name
            )
        again = "restarted" if isinstance(self.spec, StdioServer) else "reconnected"
        return MCPServerError(
            f"{stopped}. The server was {again} for later calls: call the tool again if "
            "running it twice is safe",
            server=self.name,
        )

    async def _call_on(
        self, client: Client, generation: int, tool_name: str, arguments: dict[str, Any]
    ) -> CallToolResult:
        attempt = CallAttempt()
        try:
            with sending(attempt):
                result = await client.call_tool(tool_name, arguments)
        except MCPError as exc:
            if attempt.dropped:
                raise self._too_large(tool_name) from exc
            if _connection_lost(exc):
                raise _Lost(exc, may_have_run=attempt.may_have_run) from exc
            raise MCPToolError(
                f"MCP server {self.name!r} refused the call of {tool_name!r}: "
                f"{exc.message or exc} (MCP error {exc.code})",
                server=self.name,
                tool=tool_name,
            ) from exc
        except Exception as exc:
            if _connection_lost(exc):
                raise _Lost(exc, may_have_run=attempt.may_have_run) from exc
            raise
        finally:
            attempt.forget()
        self._served(generation)
        return result

    def _too_large(self, tool_name: str) -> MCPToolError:
        """The error of a call whose result was over the cap (and dropped)."""
        limit = message_limit(self.spec, self.max_result_bytes)
        if limit < self.max_result_bytes:
            cap = (
                f"{limit:,} bytes, the most a message of the SSE transport may have (use the "
                "server's streamable HTTP endpoint for larger results)"
            )
        else:
            cap = (
                f"the cap of {limit:,} bytes (max_result_bytes); if the tool is meant to "
                'return that much, raise it: "max_result_bytes" in the server\'s entry of the '
                "config, or MCPToolset(max_result_bytes=...)"
            )
        return MCPToolError(
            f"the result of {tool_name!r} from MCP server {self.name!r} was dropped: it was "
            f"over {cap}",
            server=self.name,
            tool=tool_name,
        )

    def _served(self, generation: int) -> None:
        """Session ``generation`` answered a call. Once the session reopened after a loss has
        done so, the server is up again: a later loss is reconnected too (an SSE stream that a
        proxy or timeout cuts now and then is no reason to give the server up), while a server
        that dies again before answering anything is given up."""
        if generation == self._generation:
            self._reconnected = False

    async def close(self) -> None:
        self._broken = self._broken or (
            f"MCP server {self.name!r}: the toolset was closed; its tools can no longer be called"
        )
        await self._shut()

    async def _current(self) -> tuple[Client, int]:
        async with self._guard():
            if self._broken is not None:
                raise MCPServerError(self._broken, server=self.name)
            if self._client is None:
                await self._open()
            elif self._wire.ended or (self._holder is not None and self._holder.done()):
                await self._reopen("its connection ended")
            assert self._client is not None
            return self._client, self._generation

    async def _after_loss(self, generation: int, error: BaseException) -> tuple[Client, int]:
        """The client to retry on after ``generation``'s connection was found lost."""
        async with self._guard():
            if self._broken is not None:
                raise MCPServerError(self._broken, server=self.name)
            if self._generation == generation:  # no other call reconnected meanwhile
                await self._reopen(_describe(error))
            assert self._client is not None
            return self._client, self._generation

    async def _reopen(self, why: str) -> None:
        await self._shut()
        where = f"MCP server {self.name!r} ({self.spec.describe()})"
        if self._reconnected:
            self._broken = (
                f"{where} stopped again after it was reconnected once, before it answered a "
                f"call ({why}); its tools are "
                "unavailable: check the server, then open the toolset again"
            )
            raise MCPServerError(self._broken, server=self.name)
        self._reconnected = True
        _logger.warning("%s stopped (%s): reconnecting once", where, why)
        try:
            await self._open()
        except MCPServerError as exc:
            detail = str(exc).removeprefix(f"{where} ")
            self._broken = f"{where} stopped ({why}) and could not be reconnected: it {detail}"
            raise MCPServerError(self._broken, server=self.name) from exc

    @contextlib.asynccontextmanager
    async def _guard(self) -> AsyncIterator[None]:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            yield

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Client] = loop.create_future()
        self._stop = asyncio.Event()
        self._wire = Wire(over_http=not isinstance(self.spec, StdioServer))
        self._holder = loop.create_task(self._hold(ready, self._stop, self._wire))
        where = f"MCP server {self.name!r} ({self.spec.describe()})"
        try:
            async with asyncio.timeout(self.connect_timeout):
                client = await asyncio.shield(ready)
        except TimeoutError:
            await self._shut()
            raise MCPServerError(
                f"{where} did not answer within {self.connect_timeout:g} s: is it an MCP "
                "server? (raise connect_timeout for a slow one)",
                server=self.name,
            ) from None
        except Exception as exc:
            await self._shut()
            doing = (
                "cannot be started" if isinstance(self.spec, StdioServer) else "cannot be reached"
            )
            raise MCPServerError(f"{where} {doing}: {_describe(exc)}", server=self.name) from exc
        self._client = client
        self._generation += 1

    async def _hold(self, ready: asyncio.Future[Client], stop: asyncio.Event, wire: Wire) -> None:
        """Keep one session open until ``stop``: the SDK's transports must be entered and left
        by the same task."""
        try:
            async with new_client(self.spec, wire, limit=self.max_result_bytes) as client:
                ready.set_result(client)
                await stop.wait()
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(_first_error(exc))
            else:
                _logger.debug("MCP server %r: session ended: %s", self.name, _describe(exc))

    async def _shut(self) -> None:
        holder, stop = self._holder, self._stop
        self._client, self._holder, self._stop = None, None, None
        if holder is None or stop is None:
            return
        stop.set()
        done, _ = await asyncio.wait([holder], timeout=_SHUTDOWN_SECONDS)
        if not done:
            holder.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait([holder], timeout=_SHUTDOWN_SECONDS)


class _Lost(Exception):
    """A call found its connection lost (``error``: how; ``may_have_run``: whether its request
    may have reached the server)."""

    def __init__(self, error: BaseException, *, may_have_run: bool) -> None:
        super().__init__(error)
        self.error = error
        self.may_have_run = may_have_run


def _connection_lost(exc: BaseException) -> bool:
    if isinstance(exc, MCPError):
        return exc.code == CONNECTION_CLOSED
    if isinstance(exc, BaseExceptionGroup):
        return any(_connection_lost(inner) for inner in exc.exceptions)
    return isinstance(
        exc,
        anyio.ClosedResourceError | anyio.BrokenResourceError | anyio.EndOfStream | OSError,
    ) or any(cls.__name__ == "TransportError" for cls in type(exc).__mro__)


def _first_error(exc: BaseException) -> BaseException:
    """The error inside task-group wrapping (what failed, not that a group did)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    exc = _first_error(exc)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
