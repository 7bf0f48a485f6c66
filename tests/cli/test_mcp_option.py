"""``--mcp CONFIG.json``: an agent run from the command line gets the tools of MCP servers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

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


@pytest.mark.parametrize(
    ("command", "target", "agent"),
    [
        (["run"], "adder.py:agent", "adder"),
        (["chat"], "adder.py:agent", "adder"),
        (["demo", "--plain"], None, "demo"),
    ],
)
def test_the_command_says_which_servers_and_tools_the_agent_got(
    cli, isolated, command, target, agent
):
    (isolated / "adder.py").write_text(AGENT)
    servers = {"calc": stdio_server("calc"), "words": stdio_server("other")}
    config = write_config(isolated, servers)
    question = [] if command[0] == "chat" else ["2 + 3?"]

    result = cli(*command, *([target] if target else []), *question, "--mcp", config, stdin="")

    assert result.code == 0, result.err
    calc, words = result.error_lines[:2]
    assert calc.startswith(f"mcp: agent {agent!r} got 8 tools from calc ({sys.executable} -m ")
    assert calc.endswith("): calc_add, chart, divide, echo_upper, hang, header, pid, sum_all")
    assert words.startswith(f"mcp: agent {agent!r} got 2 tools from words (")
    assert words.endswith("): shout, words_add")


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
