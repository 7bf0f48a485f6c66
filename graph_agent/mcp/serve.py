"""graph_agent agents and graphs served as MCP tools, with the SDK's ``MCPServer``.

Each agent (a team of agents too) or graph becomes one tool, named after it (its assistant id):
an agent's tool takes ``message`` (what to ask) and answers with the agent's final answer; a
graph's tool takes ``input`` (a JSON object of state keys) and answers with the final state as
JSON. Every call is a new thread. While it runs, each finished node is sent to the client as a
progress notification ("model finished (step 0)"), when the client asked for progress.

A run that pauses (a human approval) cannot be answered over MCP: the call fails, saying so.

Example:
    >>> from graph_agent.demo import agent
    >>> server = mcp_server([agent])
    >>> server.name
    'graph-agent'
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from graph_agent.agent.nodes import run_answer
from graph_agent.graph.errors import GraphAgentError, exception_text
from graph_agent.graph.state import OverAllState
from graph_agent.graph.types import RunnableConfig, StreamingOutput
from graph_agent.mcp.errors import MCPConfigError
from graph_agent.mcp.toolset import _valid_name
from graph_agent.runnable import Runnable
from graph_agent.runnable_traits import takes_question

__all__ = ["mcp_server"]


def mcp_server(
    runnables: Iterable[Runnable] | Mapping[str, Runnable], *, name: str = "graph-agent"
) -> MCPServer:
    """An MCP server with one tool per runnable (see the module's docstring): an agent's or a
    team's (one that takes a question) answers a message, any other's runs on a JSON object.
    A mapping names each tool by its key (a served assistant's id), else by the runnable's name.

    Run it with ``server.run("stdio")`` or ``server.run("streamable-http", host=..., port=...)``.

    Raises:
        MCPConfigError: Two of them would get the same tool name.
    """
    server = MCPServer(name, log_level="WARNING")
    seen: set[str] = set()
    named = (
        runnables.items() if isinstance(runnables, Mapping) else ((r.name, r) for r in runnables)
    )
    for given, runnable in named:
        tool_name = _valid_name(given)
        if tool_name in seen:
            raise MCPConfigError(
                f"two agents or graphs would be served as the MCP tool {tool_name!r}: give "
                "each its own name"
            )
        seen.add(tool_name)
        if takes_question(runnable):
            description = getattr(runnable, "description", None)
            server.add_tool(
                _agent_tool(runnable),
                name=tool_name,
                description=description or f"Ask the agent {runnable.name!r}.",
                structured_output=False,
            )
        else:
            server.add_tool(
                _graph_tool(runnable),
                name=tool_name,
                description=f"Run the graph {runnable.name!r} on a JSON object of state keys; "
                "answers with its final state.",
                structured_output=False,
            )
    return server


def _agent_tool(agent: Runnable) -> Any:
    async def ask(message: str, ctx: Context) -> str:
        """Ask the agent.

        Args:
            message: What to ask, in plain words.
        """
        state = await _run(agent, message, ctx)
        answer = run_answer(state)
        if answer is None:
            raise ToolError(f"the agent {agent.name!r} finished without an answer")
        return answer.text

    return ask


def _graph_tool(graph: Runnable) -> Any:
    async def run(input: dict[str, Any], ctx: Context) -> str:
        """Run the graph.

        Args:
            input: The graph's input: a JSON object of state keys.
        """
        state = await _run(graph, input, ctx)
        return _json(state.data())

    return run


async def _run(runnable: Runnable, input: Any, ctx: Context) -> OverAllState:
    """Stream one call on a new thread, reporting each finished node as progress."""
    config = RunnableConfig(thread_id=f"mcp-{uuid.uuid4().hex}")
    last: OverAllState | None = None
    finished = 0
    try:
        async for output in runnable.astream(input, config):
            if isinstance(output, StreamingOutput) or output.step < 0:
                continue  # tokens, and the input
            if output.interrupts:
                raise ToolError(
                    f"{runnable.name!r} paused for a human ({output.interrupts[0].id}); a run "
                    "served over MCP cannot be resumed: serve it with graph-agent serve instead"
                )
            finished += 1
            await ctx.report_progress(
                finished, None, f"{output.node} finished (step {output.step})"
            )
            if output.state is not None:
                last = output.state
    except GraphAgentError as exc:
        raise ToolError(f"{runnable.name!r} failed: {exception_text(exc)}") from exc
    if last is None:
        raise ToolError(f"{runnable.name!r} ran no node")
    return last


def _json(value: Any) -> str:
    import pydantic_core

    return pydantic_core.to_json(value, fallback=str).decode()
