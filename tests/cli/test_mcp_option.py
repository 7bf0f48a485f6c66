"""``--mcp CONFIG.json``: an agent run from the command line gets the tools of MCP servers."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import example
from tests.mcp.conftest import stdio_server

AGENT = """
from graph_agent.agent import ReactAgent
from graph_agent.messages import AssistantMessage, ToolCall
from graph_agent.models import ScriptedChatModel

model = ScriptedChatModel([
    AssistantMessage(tool_calls=[ToolCall("c1", "add", {"a": 2, "b": 3})]),
    lambda request: f"2 + 3 = {request.messages[-1].content}",
])
agent = ReactAgent("adder", model)
"""


def write_config(folder: Path, servers: dict) -> str:
    path = folder / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return str(path)


def test_run_gives_the_agent_the_mcp_servers_tools(cli, isolated):
    (isolated / "adder.py").write_text(AGENT)
    config = write_config(isolated, {"calc": stdio_server("calc")})

    result = cli("run", "adder.py:agent", "2 + 3?", "--mcp", config)

    assert result.code == 0, result.err
    assert result.out == "2 + 3 = 5\n"


def test_mcp_on_a_graph_target_is_a_clear_usage_error(cli, isolated):
    config = write_config(isolated, {"calc": stdio_server("calc")})

    result = cli("run", f"{example('workflow.py')}:build", "{}", "--mcp", config)

    assert result.code == 2
    assert "--mcp gives tools to an agent" in result.err
    assert "is a graph" in result.err


def test_a_broken_config_is_named_before_anything_runs(cli, isolated):
    (isolated / "adder.py").write_text(AGENT)
    config = write_config(isolated, {"calc": {"command": "x", "url": "http://y"}})

    result = cli("chat", "adder.py:agent", "--mcp", config, stdin="")

    assert result.code == 2
    assert "MCP server 'calc' needs exactly one of 'command'" in result.err


def test_a_server_that_does_not_start_is_named(cli, isolated):
    (isolated / "adder.py").write_text(AGENT)
    config = write_config(isolated, {"calc": {"command": "no-such-mcp-server-here"}})

    result = cli("serve", "adder.py:agent", "--mcp", config)

    assert result.code == 1
    assert "MCP server 'calc' (no-such-mcp-server-here) cannot be started" in result.err
