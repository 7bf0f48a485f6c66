"""graph-agent mcp serve: agents and graphs served as MCP tools, over stdio or streamable HTTP."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from graph_agent.cli.errors import EXIT_USAGE, CliError
from graph_agent.cli.mcp import EXTRA, add_mcp_tools
from graph_agent.cli.targets import load_target

__all__ = ["mcp_command"]


def mcp_command(args: argparse.Namespace) -> int:
    """``graph-agent mcp serve``: serve every TARGET as an MCP tool until stopped."""
    try:
        from graph_agent.mcp import MCPConfigError
        from graph_agent.mcp.serve import mcp_server
    except ImportError as exc:
        raise CliError(
            f"graph-agent mcp needs the mcp extra ({exc.name or 'a module'} is missing)",
            EXTRA,
            EXIT_USAGE,
        ) from exc
    runnables = [load_target(spec).local for spec in args.target]
    closers: list[Callable[[], None]] = []
    try:
        if args.mcp is not None:
            closers += [
                add_mcp_tools(r, s, args.mcp) for r, s in zip(runnables, args.target, strict=True)
            ]
        try:
            server = mcp_server(runnables)
        except MCPConfigError as exc:
            raise CliError(str(exc), "give each target its own name", EXIT_USAGE) from exc
        names = ", ".join(r.name for r in runnables)
        if args.transport == "stdio":
            # stdout is the protocol's: anything said goes to stderr
            print(f"graph-agent mcp serve: {names} on stdio", file=sys.stderr, flush=True)
            server.run("stdio")
        else:
            url = f"http://{args.host}:{args.port}/mcp"
            print(f"graph-agent mcp serve: {names} at {url}", file=sys.stderr, flush=True)
            server.run("streamable-http", host=args.host, port=args.port)
    except KeyboardInterrupt:
        pass
    finally:
        for close in closers:
            close()
    return 0
