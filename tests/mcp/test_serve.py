"""Our agents and graphs as MCP tools, driven by the SDK's own client: in-process, and through
``graph-agent mcp serve`` over stdio and over HTTP."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import pytest
from mcp import Client, StdioServerParameters

from graph_agent.cli.targets import load_target
from graph_agent.demo import agent as demo_agent
from graph_agent.mcp.errors import MCPConfigError
from graph_agent.mcp.serve import mcp_server
from tests.mcp.conftest import ROOT, free_port

WORKFLOW = f"{ROOT / 'examples' / 'workflow.py'}:build"


async def test_each_agent_and_graph_is_one_tool_taking_its_input():
    review = load_target(WORKFLOW).local
    async with Client(mcp_server([demo_agent, review])) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}

    assert list(tools) == ["demo", "review"]
    assert tools["demo"].input_schema["required"] == ["message"]
    assert tools["demo"].input_schema["properties"]["message"]["type"] == "string"
    assert tools["review"].input_schema["required"] == ["input"]


async def test_the_demo_agent_answers_and_reports_each_node_as_progress():
    progress: list[tuple[float, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, message))

    async with Client(mcp_server([demo_agent])) as client:
        result = await client.call_tool(
            "demo", {"message": "What is 2 + 3?"}, progress_callback=on_progress
        )

    assert not result.is_error
    assert "5" in result.content[0].text
    assert [done for done, _ in progress] == list(range(1, len(progress) + 1))
    messages = [message for _, message in progress]
    assert messages[-3:] == [
        "__model__ finished (step 1)",
        "__tool__ finished (step 2)",
        "__model__ finished (step 3)",
    ]


async def test_a_graph_answers_with_its_final_state_as_json():
    review = load_target(WORKFLOW).local
    async with Client(mcp_server([review])) as client:
        result = await client.call_tool("review", {"input": {"topic": "Graphs"}})

    assert json.loads(result.content[0].text)["draft"] == "Graphs (v2)"


async def test_a_run_that_fails_is_an_error_result_saying_why():
    review = load_target(WORKFLOW).local
    async with Client(mcp_server([review])) as client:
        result = await client.call_tool("review", {"input": {"no_such_key": 1}})

    assert result.is_error
    assert "'review' failed" in result.content[0].text


async def test_a_team_of_agents_is_one_tool_answering_a_question():
    team = load_target(f"{ROOT / 'examples' / 'team.py'}:team").local
    async with Client(mcp_server([team])) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        result = await client.call_tool("report_team", {"message": "Write about graphs."})

    assert tools["report_team"].input_schema["required"] == ["message"]
    assert not result.is_error, result.content
    assert result.content[0].text.strip()


def test_two_targets_with_one_name_are_refused():
    with pytest.raises(MCPConfigError, match="'demo'"):
        mcp_server([demo_agent, demo_agent])


async def test_graph_agent_mcp_serve_speaks_stdio_to_the_sdks_client():
    command = [sys.executable, "-m", "graph_agent", "mcp", "serve", "graph_agent.demo:agent"]
    server = StdioServerParameters(command=command[0], args=command[1:], cwd=str(ROOT))
    async with Client(server) as client:
        (tool,) = (await client.list_tools()).tools
        result = await client.call_tool(tool.name, {"message": "What is 6 * 7?"})

    assert tool.name == "demo"
    assert "42" in result.content[0].text


async def test_graph_agent_mcp_serve_over_http():
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "graph_agent",
            "mcp",
            "serve",
            "graph_agent.demo:agent",
            "--transport",
            "http",
            "--port",
            str(port),
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        banner = process.stderr.readline()
        assert banner.strip() == f"graph-agent mcp serve: demo at http://127.0.0.1:{port}/mcp"
        result = None
        deadline = time.monotonic() + 30
        while result is None:
            try:
                async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                    result = await client.call_tool("demo", {"message": "What is 2 + 3?"})
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)
        assert "5" in result.content[0].text
    finally:
        process.terminate()
        process.wait(15)
