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


def test_a_killed_server_is_restarted_each_time_it_answered_a_call_since():
    remote = HttpServer("calc")
    servers = {"calc": stdio_server("calc"), "remote": {"url": remote.url}}
    with MCPToolset(servers) as toolset:
        pids = [int(toolset["calc_pid"].invoke({}))]
        for _ in range(2):
            kill(pids[-1])
            wait_until_seen_ended(toolset, "calc")
            pids.append(int(toolset["calc_pid"].invoke({})))  # found dead, restarted
            assert toolset["calc_add"].invoke({"a": 1, "b": 2}) == "3"
        assert len(set(pids)) == 3

        assert toolset["remote_add"].invoke({"a": 2, "b": 2}) == "4"  # the other server

        remote.stop()  # an HTTP server that dies cannot be restarted from here: one try
        with pytest.raises(MCPServerError) as info:
            toolset["remote_add"].invoke({"a": 2, "b": 2})
        assert str(info.value).startswith(
            f"MCP server 'remote' ({remote.url}) stopped (MCPError: Connection closed) and could "
            "not be reconnected: it cannot be reached: "
        )
        assert toolset["calc_add"].invoke({"a": 1, "b": 1}) == "2"


def test_a_server_that_dies_again_before_answering_a_call_is_given_up(tmp_path):
    marker = tmp_path / "marker"
    with MCPToolset({"fragile": stdio_server("fragile")}) as toolset:
        with pytest.raises(MCPServerError, match="restarted for later calls"):
            toolset["append_then_die"].invoke({"path": str(marker)})

        with pytest.raises(MCPServerError) as info:  # the restarted one dies too
            toolset["append_then_die"].invoke({"path": str(marker)})

        message = str(info.value)
        assert "MCP server 'fragile'" in message
        assert "could not be brought back" in message
        assert "stopped again after it was reconnected once, before it answered a call" in message
        with pytest.raises(MCPServerError, match="reconnected once"):
            toolset["pid"].invoke({})  # every tool of that server, from now on
        assert lines(marker) == ["ran", "ran"]


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


@pytest.mark.parametrize("transport", ["http", "sse"])
def test_a_server_started_again_twice_at_its_url_keeps_working(transport):
    remote = HttpServer("calc", transport)
    with MCPToolset({"remote": {"url": remote.url, "type": transport}}) as toolset:
        try:
            pids = [int(toolset["pid"].invoke({}))]
            for _ in range(3):  # a stream a proxy cuts now and then, between answered calls
                remote.stop()
                remote = HttpServer("calc", transport, port=remote.port)
                pids.append(int(toolset["pid"].invoke({})))
            assert len(set(pids)) == 4
        finally:
            remote.stop()


def test_an_sse_server_started_again_that_dies_before_answering_is_given_up(tmp_path):
    # (over SSE the restart ends the session's stream: seen as a loss, unlike streamable HTTP,
    # whose session goes on with the restarted server)
    marker = tmp_path / "marker"
    remote = HttpServer("fragile", "sse")
    with MCPToolset({"remote": {"url": remote.url, "type": "sse"}}) as toolset:
        try:
            toolset["pid"].invoke({})
            remote.stop()
            remote = HttpServer("fragile", "sse", port=remote.port)
            with pytest.raises(MCPServerError) as info:  # reconnected, then it dies in the call
                toolset["append_then_die"].invoke({"path": str(marker)})

            assert "stopped again after it was reconnected once, before it answered a call" in (
                str(info.value)
            )
            with pytest.raises(MCPServerError, match="reconnected once"):
                toolset["pid"].invoke({})
        finally:
            remote.stop()
