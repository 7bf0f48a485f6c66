"""MCP on the command line: ``--mcp CONFIG.json`` (an agent gets those servers' tools) and the
options of ``graph-agent mcp serve`` (run by :mod:`graph_agent.cli.mcp_serve`). Needs the ``mcp``
extra."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from graph_agent.cli.errors import EXIT_USAGE, CliError
from graph_agent.cli.output import printable
from graph_agent.graph.errors import GraphSetupError
from graph_agent.runnable_traits import takes_question

if TYPE_CHECKING:
    from graph_agent.mcp import MCPToolset

__all__ = [
    "EXTRA",
    "add_mcp_option",
    "add_mcp_parser",
    "add_mcp_tools",
    "loaded",
    "open_toolset",
]

EXTRA = "pip install 'graph-agent[mcp]'"


def add_mcp_tools(runnable: Any, spec: str, config: str) -> Callable[[], None]:
    """Give the agent ``runnable`` the tools of the MCP servers in the file ``config``, and say
    on stderr which servers and tools it got; the returned function takes them away again and
    stops the servers.

    Raises:
        CliError: ``runnable`` is not a local agent, the extra is missing, the file is wrong,
            a server does not start, or a tool's name is taken.
    """
    if not callable(getattr(runnable, "add_tools", None)):  # an agent takes more tools
        raise CliError(
            f"--mcp gives tools to an agent, and {spec} is {_what(runnable)}, whose nodes call "
            "what they call themselves",
            "point at a local ReactAgent, or drop --mcp",
            EXIT_USAGE,
        )
    toolset = open_toolset(config)
    try:
        for tool in toolset:
            if tool.name in runnable.toolkit:
                raise CliError(
                    f"the MCP tool {tool.name!r} (server {tool.server!r}) has the name of one of "
                    f"{spec}'s own tools",
                    "rename the server's tool, or leave that server out of the config",
                    EXIT_USAGE,
                )
        added = runnable.add_tools(toolset)
    except GraphSetupError as exc:
        toolset.close()
        raise CliError(str(exc), "leave that server out of the config", EXIT_USAGE) from exc
    except BaseException:
        toolset.close()
        raise
    for line in loaded(toolset, runnable.name):
        print(printable(line), file=sys.stderr)
    return lambda: _remove(runnable, [tool.name for tool in added], toolset)


def loaded(toolset: MCPToolset, agent: str) -> list[str]:
    """What the agent got: a line per server, with how it is reached and its tools' names.

    ``mcp: agent 'helper' got 2 tools from notes (python notes.py): read_note, search_notes``
    """
    lines = []
    for name, spec in toolset.servers.items():
        tools = sorted(tool.name for tool in toolset if tool.server == name)
        listed = f": {', '.join(tools)}" if tools else ""
        count = f"{len(tools)} tool{'s' * (len(tools) != 1)}"
        lines.append(f"mcp: agent {agent!r} got {count} from {name} ({spec.describe()}){listed}")
    return lines


def open_toolset(config: str) -> MCPToolset:
    """The servers of the MCP config file ``config``, with their tools listed.

    Raises:
        CliError: The extra is missing, the file is wrong, or a server does not start.
    """
    try:
        from graph_agent.mcp import MCPConfigError, MCPServerError, MCPToolset, read_mcp_config
    except ImportError as exc:
        raise CliError(
            f"--mcp needs the mcp extra ({exc.name or 'a module'} is missing)", EXTRA, EXIT_USAGE
        ) from exc
    try:
        toolset = MCPToolset(read_mcp_config(config))
    except MCPConfigError as exc:
        raise CliError(str(exc), "see --help for the config's shape", EXIT_USAGE) from exc
    try:
        _ = toolset.tools
    except (MCPServerError, MCPConfigError) as exc:
        toolset.close()
        raise CliError(str(exc), f"check the server in {config}") from exc
    return toolset


def _remove(agent: Any, names: list[str], toolset: MCPToolset) -> None:
    """Take the tools away, and stop the servers whatever that raised."""
    try:
        agent.remove_tools(*names)
    finally:
        toolset.close()


def _what(runnable: Any) -> str:
    """What ``runnable``, which takes no tools, is: a served assistant (it has a ``url``), a
    team of agents, or a graph."""
    if isinstance(getattr(runnable, "url", None), str):
        return "a served assistant"
    return "a team of agents" if takes_question(runnable) else "a graph"


def add_mcp_parser(commands: Any, add_common: Callable[..., None]) -> None:
    """``graph-agent mcp serve TARGET... [--transport stdio|http] [--host] [--port]``."""
    mcp = commands.add_parser(
        "mcp",
        help="serve agents and graphs as tools of an MCP server",
        description="Model Context Protocol. Needs the mcp extra: " + EXTRA + ".",
    )
    actions = mcp.add_subparsers(dest="action", metavar="ACTION", required=True)
    serve = actions.add_parser(
        "serve",
        help="one MCP tool per agent or graph, over stdio or streamable HTTP",
        description="Serve each MODULE:OBJECT as an MCP tool named after it: an agent's takes "
        "a message and answers with its final answer, a graph's takes a JSON object of state "
        "keys and answers with its final state. Each finished node is sent as a progress "
        "notification.",
    )
    serve.add_argument("target", metavar="MODULE:OBJECT", nargs="+")
    serve.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    serve.add_argument("--host", default="127.0.0.1", help="with --transport http")
    serve.add_argument("--port", type=int, default=8000, help="with --transport http")
    add_mcp_option(serve)
    add_common(serve, top=False)


def add_mcp_option(parser: argparse.ArgumentParser) -> None:
    """``--mcp CONFIG.json``: the agent also gets the tools of those MCP servers."""
    parser.add_argument(
        "--mcp",
        metavar="CONFIG.json",
        help='give the agent the tools of the MCP servers in CONFIG.json: {"mcpServers": '
        '{NAME: {"command": ..., "args": [...], "env": {...}} or {"url": ..., "headers": '
        '{...}} (add "type": "sse" for an SSE server)}} (needs the mcp extra)',
    )
