"""What goes wrong with MCP servers, as errors of graph_agent's tree.

::

    GraphAgentError
    ├── MCPConfigError (ValueError)       a server is described wrong (config file, servers=)
    ├── MCPServerError (RuntimeError)     a server cannot be started, reached, or died for good
    └── MCPToolError (RuntimeError)       a tool answered with an error (isError, or an MCP error)

Inside an agent, a tool call that raises :class:`MCPServerError` or :class:`MCPToolError`
becomes an error tool result the model reads, as any tool's exception does.
"""

from __future__ import annotations

from graph_agent.graph.errors import GraphAgentError

__all__ = ["MCPConfigError", "MCPServerError", "MCPToolError"]


class MCPConfigError(GraphAgentError, ValueError):
    """An MCP server is described wrong; the message names the server and the fix."""


class MCPServerError(GraphAgentError, RuntimeError):
    """An MCP server cannot be started or reached, or stopped and could not be brought back."""

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


class MCPToolError(GraphAgentError, RuntimeError):
    """An MCP tool's call failed on the server: the message is what the server said."""

    def __init__(self, message: str, *, server: str, tool: str) -> None:
        super().__init__(message)
        self.server = server
        self.tool = tool
