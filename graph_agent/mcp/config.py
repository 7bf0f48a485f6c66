"""Which MCP servers to connect to: a command to start (stdio) or a URL (streamable HTTP, SSE).

A server is given as a mapping, in the shape of the common ``mcpServers`` config files::

    {"command": "python", "args": ["server.py"], "env": {"TOKEN": "..."}}   # a subprocess
    {"url": "https://example.com/mcp", "headers": {"Authorization": "..."}}   # over HTTP
    {"url": "https://example.com/sse", "type": "sse"}   # the older HTTP+SSE transport

Either may set ``max_result_bytes``: the most bytes one answer of the server may have (default:
the toolset's, 4 MiB). A larger one is dropped as it arrives, and the call fails with an error
naming the cap (see :mod:`graph_agent.mcp.framing`).

The transport is named by ``type`` (Claude Desktop, Claude Code, VS Code) or ``transport``
(LangChain's ``MultiServerMCPClient``): ``"stdio"``; ``"http"`` (also ``"streamable-http"``,
``"streamable_http"``, ``"streamableHttp"``), the default for a URL; or ``"sse"``.

:func:`read_mcp_config` reads such a file (``{"mcpServers": {name: server, ...}}``).

Example:
    >>> servers = parse_servers({"files": {"command": "mcp-files", "args": ["--root", "."]}})
    >>> servers["files"]  # doctest: +NORMALIZE_WHITESPACE
    StdioServer(name='files', command='mcp-files', args=('--root', '.'), env=None, cwd=None,
                max_result_bytes=None)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from graph_agent.mcp.errors import MCPConfigError

__all__ = [
    "HttpServer",
    "ServerSpec",
    "StdioServer",
    "check_cap",
    "parse_servers",
    "read_mcp_config",
]

_STDIO_KEYS = frozenset({"command", "args", "env", "cwd", "type", "transport", "max_result_bytes"})
_HTTP_KEYS = frozenset({"url", "headers", "type", "transport", "max_result_bytes"})
_HTTP_TYPES = frozenset({"http", "streamable-http", "streamable_http", "streamableHttp"})
_SSE_TYPES = frozenset({"sse"})

HttpTransport = Literal["streamable-http", "sse"]


@dataclass(frozen=True, kw_only=True, slots=True)
class StdioServer:
    """A server started as a subprocess, spoken to over its stdin and stdout.

    ``env`` is added to the few variables the SDK passes on by default (``PATH``, ``HOME``...):
    the rest of this process's environment (API keys) is not handed to the server.
    """

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    max_result_bytes: int | None = None
    """The most bytes one answer may have (``None``: the toolset's ``max_result_bytes``)."""

    def describe(self) -> str:
        """How the server is reached, for messages (no environment values: they may be keys)."""
        return " ".join((self.command, *self.args))


@dataclass(frozen=True, kw_only=True, slots=True)
class HttpServer:
    """A server reached at ``url``, with ``headers`` on every request, over streamable HTTP or
    (``transport="sse"``) the older HTTP+SSE transport: events from a GET stream, messages
    POSTed to the endpoint it names."""

    name: str
    url: str
    headers: Mapping[str, str] | None = None
    transport: HttpTransport = "streamable-http"
    max_result_bytes: int | None = None
    """The most bytes one answer may have (``None``: the toolset's ``max_result_bytes``)."""

    def __repr__(self) -> str:  # header values are often credentials: never shown
        shown = f", headers=[{', '.join(self.headers)}]" if self.headers else ""
        sse = ", transport='sse'" if self.transport == "sse" else ""
        cap = "" if self.max_result_bytes is None else f", max_result_bytes={self.max_result_bytes}"
        return f"HttpServer(name={self.name!r}, url={self.url!r}{shown}{sse}{cap})"

    def describe(self) -> str:
        """How the server is reached, for messages (headers left out: they may hold keys)."""
        return f"SSE {self.url}" if self.transport == "sse" else self.url


ServerSpec = StdioServer | HttpServer


def parse_servers(servers: Mapping[str, Any]) -> dict[str, ServerSpec]:
    """Check ``{name: {command, args, env} | {url, headers[, type]}}`` and make a spec of each
    server (a spec given already is kept, under its key's name).

    Raises:
        MCPConfigError: A name or a server is malformed; the message names which and why.
    """
    if not isinstance(servers, Mapping):
        raise MCPConfigError(
            f"MCP servers must be a mapping of names to servers, got {type(servers).__name__}: "
            'e.g. {"files": {"command": "mcp-files"}}'
        )
    if not servers:
        raise MCPConfigError('no MCP server given: e.g. {"files": {"command": "mcp-files"}}')
    return {name: _server(name, entry) for name, entry in servers.items()}


def _server(name: Any, entry: Any) -> ServerSpec:
    if not isinstance(name, str) or not name:
        raise MCPConfigError(f"an MCP server's name must be a non-empty string, got {name!r}")
    where = f"MCP server {name!r}"
    if isinstance(entry, StdioServer | HttpServer):
        return replace(entry, name=name)
    if not isinstance(entry, Mapping):
        raise MCPConfigError(
            f"{where} must be a mapping with 'command' (stdio) or 'url' (HTTP), "
            f"got {type(entry).__name__}"
        )
    if ("command" in entry) == ("url" in entry):
        raise MCPConfigError(
            f"{where} needs exactly one of 'command' (a server started as a subprocess) and "
            "'url' (a streamable HTTP server)"
        )
    kind = _kind(where, entry)
    if "url" in entry:
        _check_keys(where, entry, _HTTP_KEYS)
        if kind is not None and kind not in _HTTP_TYPES | _SSE_TYPES:
            raise MCPConfigError(
                f"{where}: transport {kind!r} is not supported for a 'url'; use streamable "
                "HTTP ('http') or SSE ('sse')"
            )
        return HttpServer(
            name=name,
            url=_text(where, "url", entry["url"]),
            headers=_strings(where, "headers", entry.get("headers")),
            transport="sse" if kind in _SSE_TYPES else "streamable-http",
            max_result_bytes=_cap(where, entry.get("max_result_bytes")),
        )
    _check_keys(where, entry, _STDIO_KEYS)
    if kind is not None and kind != "stdio":
        raise MCPConfigError(f"{where}: a 'command' server speaks stdio, not {kind!r}")
    args = entry.get("args", [])
    if not isinstance(args, list | tuple) or not all(isinstance(a, str) for a in args):
        raise MCPConfigError(f"{where}: 'args' must be a list of strings, got {args!r:.100}")
    cwd = entry.get("cwd")
    return StdioServer(
        name=name,
        command=_text(where, "command", entry["command"]),
        args=tuple(args),
        env=_strings(where, "env", entry.get("env")),
        cwd=None if cwd is None else _text(where, "cwd", cwd),
        max_result_bytes=_cap(where, entry.get("max_result_bytes")),
    )


def _kind(where: str, entry: Mapping[str, Any]) -> str | None:
    """The transport the entry names, by ``type`` or ``transport`` (they must agree)."""
    named = {key: entry[key] for key in ("type", "transport") if key in entry}
    for key, value in named.items():
        if not isinstance(value, str):
            raise MCPConfigError(f"{where}: {key!r} must be a string, got {value!r:.100}")
    if len(set(named.values())) > 1:
        raise MCPConfigError(
            f"{where}: 'type' is {named['type']!r} and 'transport' is {named['transport']!r}; "
            "give one of them"
        )
    return next(iter(named.values()), None)


def _check_keys(where: str, entry: Mapping[str, Any], known: frozenset[str]) -> None:
    unknown = sorted(str(key) for key in entry if key not in known)
    if unknown:
        raise MCPConfigError(
            f"{where}: unknown key{'s' * (len(unknown) > 1)} {', '.join(unknown)} "
            f"(known: {', '.join(sorted(known - {'type', 'transport'}))}, type)"
        )


def _text(where: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise MCPConfigError(f"{where}: {key!r} must be a non-empty string, got {value!r:.100}")
    return value


def check_cap(where: str, value: Any) -> int:
    """``value`` as a cap on an answer's bytes: a whole number of 1 or more.

    Raises:
        MCPConfigError: It is not one; the message says what ``where`` was given.
    """
    if type(value) is not int or value < 1:
        raise MCPConfigError(
            f"{where}: 'max_result_bytes' must be a whole number of bytes, 1 or more, got "
            f"{value!r:.100} (e.g. 16777216 for 16 MiB)"
        )
    return value


def _cap(where: str, value: Any) -> int | None:
    return None if value is None else check_cap(where, value)


def _strings(where: str, key: str, value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        # the values may be secrets: name the key only
        raise MCPConfigError(f"{where}: {key!r} must map strings to strings")
    return dict(value)


def read_mcp_config(path: str | Path) -> dict[str, ServerSpec]:
    """The servers of an MCP config file: ``{"mcpServers": {name: server, ...}}`` (JSON).

    Raises:
        MCPConfigError: The file cannot be read, is not JSON, or lists a malformed server.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise MCPConfigError(f"cannot read the MCP config {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MCPConfigError(
            f"the MCP config {path} is not valid JSON ({exc.msg}, line {exc.lineno})"
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers"), dict):
        raise MCPConfigError(
            f'the MCP config {path} must hold {{"mcpServers": {{name: server, ...}}}}, with '
            'each server {"command": ..., "args": [...], "env": {...}} or '
            '{"url": ..., "headers": {...}} (with "type": "sse" for an SSE server)'
        )
    return parse_servers(data["mcpServers"])
