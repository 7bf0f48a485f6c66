"""A result over the toolset's cap (``max_result_bytes``) fails its call with an error naming
the cap and how to raise it, and the connection goes on answering at once: over stdio,
streamable HTTP and SSE, against a real server that sends megabytes (tests/mcp/servers.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from graph_agent import RunnableConfig
from graph_agent.agent import ReactAgent
from graph_agent.mcp import MCPConfigError, MCPToolError, MCPToolset
from graph_agent.messages import AssistantMessage, ToolCall, ToolResponseMessage
from graph_agent.models import ScriptedChatModel
from tests.mcp.conftest import HttpServer, stdio_server

CAP = 100_000


@pytest.fixture(scope="module")
def flood_http() -> Iterator[HttpServer]:
    server = HttpServer("flood")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def flood_sse() -> Iterator[HttpServer]:
    server = HttpServer("flood", "sse")
    yield server
    server.stop()


@pytest.fixture(params=["stdio", "http", "sse"])
def flood_entry(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The flood server's config entry, over stdio, streamable HTTP or SSE."""
    if request.param == "stdio":
        return stdio_server("flood")
    if request.param == "http":
        return {"url": request.getfixturevalue("flood_http").url}
    return {"url": request.getfixturevalue("flood_sse").url, "transport": "sse"}


def test_a_result_over_the_cap_fails_naming_it_and_the_next_calls_answer_at_once(flood_entry):
    with MCPToolset({"flood": flood_entry}, max_result_bytes=CAP) as toolset:
        with pytest.raises(MCPToolError) as info:
            toolset["flood"].invoke({"megabytes": 3}, timeout=30)

        message = str(info.value)
        assert "the result of 'flood' from MCP server 'flood' was dropped" in message
        assert f"over the cap of {CAP:,} bytes (max_result_bytes)" in message
        assert '"max_result_bytes" in the server\'s entry' in message
        assert "MCPToolset(max_result_bytes=...)" in message
        for b in range(4):
            started = time.monotonic()
            assert toolset["add"].invoke({"a": 1, "b": b}, timeout=5) == str(1 + b)
            assert time.monotonic() - started < 2


def test_a_result_under_the_cap_arrives_whole(flood_entry):
    # the cap counts the server's message: an SDK server sends a text result twice (as text
    # and as structured content), so 40,000 characters are about 80,000 bytes
    with MCPToolset({"flood": flood_entry}, max_result_bytes=CAP) as toolset:
        assert toolset["flood"].invoke({"megabytes": 0.04}, timeout=30) == "x" * 40_000


def test_the_default_cap_is_4_mib_and_a_servers_entry_raises_it():
    with (
        MCPToolset({"flood": stdio_server("flood")}) as toolset,
        pytest.raises(MCPToolError, match="over the cap of 4,194,304 bytes"),
    ):
        toolset["flood"].invoke({"megabytes": 4.3}, timeout=30)

    raised = {**stdio_server("flood"), "max_result_bytes": 10_000_000}  # text + structured
    with MCPToolset({"flood": raised}, max_result_bytes=CAP) as toolset:
        assert len(toolset["flood"].invoke({"megabytes": 4.3}, timeout=30)) == 4_300_000


def test_over_sse_a_cap_above_one_mib_is_held_to_what_the_transport_carries(flood_sse):
    entry = {"url": flood_sse.url, "transport": "sse"}
    with MCPToolset({"flood": entry}) as toolset:
        with pytest.raises(MCPToolError) as info:
            toolset["flood"].invoke({"megabytes": 1.5}, timeout=30)

        assert "over 1,048,576 bytes, the most a message of the SSE transport" in str(info.value)
        assert "streamable HTTP endpoint" in str(info.value)
        assert toolset["add"].invoke({"a": 2, "b": 2}, timeout=5) == "4"


def test_an_agent_gives_the_model_the_cap_error_as_the_tools_result():
    model = ScriptedChatModel(
        [AssistantMessage(tool_calls=[ToolCall("c1", "flood", {"megabytes": 1})]), "Too big."]
    )
    with MCPToolset({"flood": stdio_server("flood")}, max_result_bytes=CAP) as toolset:
        agent = ReactAgent("reader", model, tools=[*toolset])
        state = agent.invoke("Read it all.", RunnableConfig(thread_id="t"))

    (result,) = [m for m in state.value("messages") if isinstance(m, ToolResponseMessage)]
    assert result.is_error
    assert f"over the cap of {CAP:,} bytes (max_result_bytes)" in result.content


@pytest.mark.parametrize("cap", [0, -1, 2.5, True, "4MB"])
def test_a_cap_that_is_not_a_positive_whole_number_is_refused(cap):
    with pytest.raises(MCPConfigError, match="'max_result_bytes' must be a whole number"):
        MCPToolset({"flood": {**stdio_server("flood"), "max_result_bytes": cap}})
    with pytest.raises(MCPConfigError, match="MCPToolset: 'max_result_bytes'"):
        MCPToolset({"flood": stdio_server("flood")}, max_result_bytes=cap)
