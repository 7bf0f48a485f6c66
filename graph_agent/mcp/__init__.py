"""MCP: tools from any Model Context Protocol server for graph_agent agents, and graph_agent
agents served as MCP tools (``graph-agent mcp serve``). Needs the ``mcp`` extra.

Example:
    >>> from graph_agent.mcp import MCPToolset
    >>> servers = {"files": {"command": "mcp-files", "args": ["--root", "."]}}
    >>> with MCPToolset(servers) as toolset:  # doctest: +SKIP
    ...     agent = ReactAgent("helper", model, tools=[*toolset])
"""

from __future__ import annotations

from graph_agent.mcp.config import HttpServer, StdioServer, parse_servers, read_mcp_config
from graph_agent.mcp.errors import MCPConfigError, MCPServerError, MCPToolError
from graph_agent.mcp.toolset import MCPTool, MCPToolset

__all__ = [
    "HttpServer",
    "MCPConfigError",
    "MCPServerError",
    "MCPTool",
    "MCPToolError",
    "MCPToolset",
    "StdioServer",
    "parse_servers",
    "read_mcp_config",
]
