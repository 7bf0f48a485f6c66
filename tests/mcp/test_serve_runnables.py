"""``mcp serve`` takes any runnable: a team built in place is one tool answering a question, a
runnable of a class it does not know is a graph's tool; both through the SDK's own client."""

from __future__ import annotations

import json

from mcp import Client

from graph_agent.agent.flows import SequentialAgent
from graph_agent.agent.react import ReactAgent
from graph_agent.mcp.serve import mcp_server
from graph_agent.models.scripted import ScriptedChatModel
from tests.serve.graphs import chain
from tests.serve.test_serve_runnables import Wrapped


def two_agent_team() -> SequentialAgent:
    writer = ReactAgent("writer", ScriptedChatModel(["Draft 1."]))
    editor = ReactAgent("editor", ScriptedChatModel(["Edited 1."]))
    return SequentialAgent("pipeline", [writer, editor], description="Writes, then edits.")


async def test_a_team_is_served_as_one_tool_answering_with_its_last_agent_answer():
    async with Client(mcp_server([two_agent_team()])) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        result = await client.call_tool("pipeline", {"message": "Write about graphs."})

    assert tools["pipeline"].description == "Writes, then edits."
    assert tools["pipeline"].input_schema["required"] == ["message"]
    assert not result.is_error
    assert result.content[0].text == "Edited 1."


async def test_a_runnable_of_an_unknown_class_is_a_graph_tool_taking_state_keys():
    async with Client(mcp_server([Wrapped(chain().compile(), "counter")])) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        result = await client.call_tool("counter", {"input": {"x": 1}})

    assert tools["counter"].input_schema["required"] == ["input"]
    assert json.loads(result.content[0].text) == {"x": 12}
