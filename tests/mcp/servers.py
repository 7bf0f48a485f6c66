"""The MCP servers the tests talk to, written with the SDK's MCPServer (FastMCP in mcp 1.x).

Run as ``python -m tests.mcp.servers NAME [stdio|http PORT|sse PORT]``: ``calc`` (arithmetic, an
error, a hang, its process id, an image, structured output, a request header), ``other`` (a
second server whose ``add`` clashes with calc's), ``fragile`` (tools with a side effect on a
file, one of which kills the server after it, for the tests of calls that may have run) and
``flood`` (a result as large as asked, as a hostile server sends).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from pydantic import BaseModel

PNG_BYTES = b"\x89PNG\r\n\x1a\n" + bytes(24)


class Sum(BaseModel):
    total: int
    terms: int


def calc_server() -> MCPServer:
    server = MCPServer("calc")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two whole numbers."""
        return a + b

    @server.tool()
    def sum_all(numbers: list[int]) -> Sum:
        """Add up a list of numbers: the total and how many there were."""
        return Sum(total=sum(numbers), terms=len(numbers))

    @server.tool()
    def divide(a: float, b: float) -> float:
        """Divide a by b."""
        if b == 0:
            raise ToolError("cannot divide by zero")
        return a / b

    @server.tool()
    async def hang(seconds: float = 60) -> str:
        """Wait, then answer (a tool that takes too long)."""
        await asyncio.sleep(seconds)
        return "done"

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool(structured_output=False)
    def chart() -> list[Any]:
        """A caption and a tiny PNG."""
        return ["the chart:", Image(data=PNG_BYTES, format="png")]

    @server.tool()
    def header(name: str, ctx: Context) -> str:
        """The value of the HTTP request header ``name`` ("" when absent or over stdio)."""
        return (ctx.headers or {}).get(name.lower(), "")

    @server.tool(name="echo.upper")
    def echo_upper(text: str) -> str:
        """Say the text in capitals (a dotted name, not valid for a model)."""
        return text.upper()

    return server


def other_server() -> MCPServer:
    server = MCPServer("other")

    @server.tool()
    def add(left: str, right: str) -> str:
        """Join two strings."""
        return left + right

    @server.tool()
    def shout(text: str) -> str:
        """Say it louder."""
        return text.upper() + "!"

    return server


def fragile_server() -> MCPServer:
    server = MCPServer("fragile")

    @server.tool()
    def append(path: str, text: str) -> int:
        """Append a line to a file: how many lines it has now."""
        with open(path, "a", encoding="utf-8") as file:
            file.write(text + "\n")
        with open(path, encoding="utf-8") as file:
            return len(file.readlines())

    @server.tool()
    def append_then_die(path: str) -> str:
        """Append the line "ran" to a file, then end the server's process before answering."""
        append(path, "ran")
        os._exit(3)

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    return server


def flood_server() -> MCPServer:
    server = MCPServer("flood")

    @server.tool()
    def flood(megabytes: float) -> str:
        """A result of that many megabytes (millions of characters)."""
        return "x" * int(megabytes * 1_000_000)

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two whole numbers."""
        return a + b

    return server


SERVERS = {
    "calc": calc_server,
    "other": other_server,
    "fragile": fragile_server,
    "flood": flood_server,
}


def main(argv: list[str]) -> None:
    server = SERVERS[argv[0]]()
    transport = argv[1] if len(argv) > 1 else "stdio"
    if transport == "stdio":
        server.run("stdio")
    elif transport == "sse":
        server.run("sse", host="127.0.0.1", port=int(argv[2]))
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(argv[2]))


if __name__ == "__main__":
    main(sys.argv[1:])
