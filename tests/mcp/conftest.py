"""Fixtures for the MCP tests: real MCP servers (tests/mcp/servers.py) in subprocesses, over
stdio (the toolset starts them) and on 127.0.0.1 over streamable HTTP or SSE (started here, once
per module), and toolsets on them shared by a module's tests."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graph_agent.mcp import MCPToolset

ROOT = Path(__file__).resolve().parents[2]


def stdio_server(name: str) -> dict[str, Any]:
    """The test server ``name`` as a config entry: started with this Python, over stdio."""
    return {
        "command": sys.executable,
        "args": ["-m", "tests.mcp.servers", name],
        "cwd": str(ROOT),
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class HttpServer:
    """The test server ``name`` on 127.0.0.1 over streamable HTTP (or SSE), in a subprocess;
    given a ``port``, on that one (a server started again where one stopped)."""

    def __init__(self, name: str, transport: str = "http", port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/{'sse' if transport == 'sse' else 'mcp'}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.mcp.servers", name, transport, str(self.port)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the MCP test server {name} exited: {self.process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the MCP test server {name} did not listen within 30 s")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def calc_http() -> Iterator[HttpServer]:
    server = HttpServer("calc")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def calc_sse() -> Iterator[HttpServer]:
    server = HttpServer("calc", "sse")
    yield server
    server.stop()


@pytest.fixture(scope="module", params=["stdio", "http", "sse"])
def calc(request: pytest.FixtureRequest) -> Iterator[MCPToolset]:
    """A toolset on the calc server, reached over stdio, streamable HTTP or SSE."""
    if request.param == "stdio":
        entry = stdio_server("calc")
    elif request.param == "http":
        entry = {"url": request.getfixturevalue("calc_http").url}
    else:
        entry = {"url": request.getfixturevalue("calc_sse").url, "transport": "sse"}
    with MCPToolset({"calc": entry}) as toolset:
        yield toolset
