"""A server that dies mid-session is started again (reconnected) once; when it dies again, or
cannot be reached again, its tools fail with a clear error, and the toolset's other servers
carry on. A call is sent again only when it certainly never reached the server: one the server
died during may have run, and fails saying so."""

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


def wait_until_seen_ended(toolset: MCPToolset, server: str) -> None:
    """Until the toolset has seen the server's connection end. A call made in the moment
    between a server's death and that counts as one that may have run (the request may have
    been written to the server before it died), so the tests of calls that certainly did not
    run wait for it (through the connection's private state: there is no public need)."""
    connection = toolset._connections[server]
    deadline = time.monotonic() + 10
    while not connection._wire.ended and time.monotonic() < deadline:
        time.sleep(0.01)
    assert connection._wire.ended


def lines(path) -> list[str]:
    return path.read_text().splitlines()


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


def test_a_call_the_server_dies_during_is_not_sent_again_and_says_it_may_have_run(tmp_path):
    marker = tmp_path / "marker"
    with MCPToolset({"fragile": stdio_server("fragile")}) as toolset:
        first = int(toolset["pid"].invoke({}))

        with pytest.raises(MCPServerError) as info:
            toolset["append_then_die"].invoke({"path": str(marker)})

        assert lines(marker) == ["ran"]  # once: a second "ran" would be the call sent again
        message = str(info.value)
        assert message.startswith("MCP server 'fragile' (")
        assert "stopped during the call of 'append_then_die'" in message
        assert "the tool may have run, so the call was not sent again" in message
        assert "restarted for later calls: call the tool again if" in message
        assert int(toolset["pid"].invoke({})) != first  # later calls reach the restarted one


def test_a_call_to_a_server_found_dead_is_sent_once_to_the_restarted_server(tmp_path):
    marker = tmp_path / "marker"
    with MCPToolset({"fragile": stdio_server("fragile")}) as toolset:
        first = int(toolset["pid"].invoke({}))
        kill(first)
        wait_until_seen_ended(toolset, "fragile")

        assert toolset["append"].invoke({"path": str(marker), "text": "hello"}) == "1"

        assert lines(marker) == ["hello"]
        assert int(toolset["pid"].invoke({})) != first


@pytest.mark.parametrize("transport", ["http", "sse"])
def test_an_http_server_that_dies_during_a_call_fails_it_saying_it_may_have_run(
    transport, tmp_path
):
    marker = tmp_path / "marker"
    remote = HttpServer("fragile", transport)
    try:
        with MCPToolset({"remote": {"url": remote.url, "type": transport}}) as toolset:
            with pytest.raises(MCPServerError) as info:
                toolset["append_then_die"].invoke({"path": str(marker)})

            assert lines(marker) == ["ran"]
            message = str(info.value)
            assert "stopped during the call of 'append_then_die'" in message
            assert "the tool may have run, so the call was not sent again" in message
            assert "could not be brought back" in message  # nobody restarts it
    finally:
        remote.stop()


@pytest.mark.parametrize("transport", ["http", "sse"])
def test_a_server_started_again_at_its_url_is_reconnected_and_gets_the_call(transport, tmp_path):
    marker = tmp_path / "marker"
    remote = HttpServer("fragile", transport)
    entry = {"url": remote.url, "type": transport}
    with MCPToolset({"remote": entry}) as toolset:
        first = int(toolset["pid"].invoke({}))
        remote.stop()
        remote = HttpServer("fragile", transport, port=remote.port)
        try:
            assert toolset["append"].invoke({"path": str(marker), "text": "x"}) == "1"
            assert lines(marker) == ["x"]
            assert int(toolset["pid"].invoke({})) not in (first, 0)
        finally:
            remote.stop()
