"""A server that dies mid-session is started again (reconnected) once; when it dies again, or
cannot be reached again, its tools fail with a clear error, and the toolset's other servers
carry on."""

from __future__ import annotations

import os
import signal
import time

import pytest

from graph_agent.mcp import MCPServerError, MCPToolset
from tests.mcp.conftest import HttpServer, stdio_server


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # until the process is gone (reaped by its parent)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)


def test_a_killed_server_is_restarted_once_then_its_tools_fail_clearly():
    remote = HttpServer("calc")
    servers = {"calc": stdio_server("calc"), "remote": {"url": remote.url}}
    with MCPToolset(servers) as toolset:
        first = int(toolset["calc_pid"].invoke({}))

        kill(first)
        second = int(toolset["calc_pid"].invoke({}))  # the call that found it dead, sent again
        assert second != first
        assert toolset["calc_add"].invoke({"a": 1, "b": 2}) == "3"

        kill(second)
        with pytest.raises(MCPServerError) as info:
            toolset["calc_add"].invoke({"a": 1, "b": 2})
        message = str(info.value)
        assert "MCP server 'calc'" in message
        assert "stopped again after it was reconnected once" in message
        with pytest.raises(MCPServerError, match="reconnected once"):
            toolset["calc_pid"].invoke({})  # every tool of that server, from now on

        assert toolset["remote_add"].invoke({"a": 2, "b": 2}) == "4"  # the other server

        remote.stop()  # an HTTP server that dies cannot be restarted from here: one try
        with pytest.raises(MCPServerError) as info:
            toolset["remote_add"].invoke({"a": 2, "b": 2})
        assert str(info.value).startswith(
            f"MCP server 'remote' ({remote.url}) stopped (MCPError: Connection closed) and could "
            "not be reconnected: it cannot be reached: "
        )
