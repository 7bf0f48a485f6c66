"""MCP tools in a ReactAgent, like any tool: the model sees their schemas, calls them and
answers from their results, errors and timeouts become error results, a human approves
calls, and interceptors wrap them; through the sync and the async face."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

from graph_agent import Command, RunnableConfig, tool
from graph_agent.agent import HumanInTheLoopHook, ReactAgent, ToolInterceptor
from graph_agent.cli.errors import CliError
from graph_agent.cli.mcp import add_mcp_tools
from graph_agent.mcp import MCPServerError
from graph_agent.mcp.toolset import _Connection
from graph_agent.messages import AssistantMessage, ToolCall, ToolResponseMessage
from graph_agent.models import ScriptedChatModel
from graph_agent.models.base import ModelRequest
from tests.mcp.conftest import stdio_server


def answer_from_last_result(request: ModelRequest) -> str:
    return f"The tool said: {request.messages[-1].content}"


def calling(name: str, arguments: dict, call_id: str = "c1") -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCall(call_id, name, arguments)])


def results(state) -> list[ToolResponseMessage]:
    return [m for m in state.value("messages") if isinstance(m, ToolResponseMessage)]


def test_an_agent_calls_an_mcp_tool_and_answers_from_its_result(calc, caller):
    model = ScriptedChatModel([calling("add", {"a": 2, "b": 3}), answer_from_last_result])
    agent = ReactAgent("mathy", model, tools=[*calc])

    state = caller.invoke(agent, "What is 2 + 3?", RunnableConfig(thread_id="t"))

    assert state.value("messages")[-1].content == "The tool said: 5"
    (sent,) = [t for t in model.requests[0].tools if t.name == "add"]
    assert sent.parameters == calc["add"].parameters  # the server's schema, unchanged
    assert sent.description == "Add two whole numbers."


def test_a_failing_mcp_tool_gives_the_model_an_error_result(calc, caller):
    model = ScriptedChatModel([calling("divide", {"a": 1, "b": 0}), answer_from_last_result])
    agent = ReactAgent("mathy", model, tools=[*calc])

    state = caller.invoke(agent, "1 / 0?", RunnableConfig(thread_id="t"))

    (result,) = results(state)
    assert result.is_error
    assert "cannot divide by zero" in result.content
    assert "cannot divide by zero" in state.value("messages")[-1].content


def test_an_mcp_tool_past_the_agents_tool_timeout_is_an_error_result(calc, caller):
    model = ScriptedChatModel([calling("hang", {"seconds": 30}), answer_from_last_result])
    agent = ReactAgent("mathy", model, tools=[*calc], tool_timeout=0.5)

    state = caller.invoke(agent, "wait", RunnableConfig(thread_id="t"))

    (result,) = results(state)
    assert result.is_error
    assert "did not finish within 0.5 s" in result.content


def test_a_human_approves_an_mcp_call_before_it_runs(calc):
    model = ScriptedChatModel([calling("add", {"a": 2, "b": 3}), answer_from_last_result])
    gate = HumanInTheLoopHook(approve={"add": "adds numbers"})
    agent = ReactAgent("careful", model, tools=[*calc], hooks=[gate])
    config = RunnableConfig(thread_id="approve")

    paused = agent.invoke("2 + 3?", config)
    assert paused.interrupts[0].value["tool_calls"][0]["name"] == "add"
    assert results(paused) == []

    edit = {"decision": "edit", "arguments": {"a": 20, "b": 3}}
    final = agent.invoke(Command(resume={"c1": edit}), config)
    assert final.value("messages")[-1].content == "The tool said: 23"


class Recorder(ToolInterceptor):
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict]] = []

    def intercept(self, request, call_next):
        self.seen.append((request.call.name, dict(request.call.arguments)))
        response = call_next(request)
        return response.model_copy(update={"content": f"<{response.content}>"})


def test_a_tool_interceptor_wraps_mcp_calls(calc):
    recorder = Recorder()
    model = ScriptedChatModel([calling("add", {"a": 1, "b": 1}), answer_from_last_result])
    agent = ReactAgent("watched", model, tools=[*calc], tool_interceptors=[recorder])

    state = asyncio.run(agent.ainvoke("1 + 1?", RunnableConfig(thread_id="t")))

    assert recorder.seen == [("add", {"a": 1, "b": 1})]
    assert state.value("messages")[-1].content == "The tool said: <2>"


def test_an_mcp_tool_under_ainvoke_hops_from_the_callers_loop_straight_to_the_toolsets(
    calc, monkeypatch
):
    hops: list[tuple[str, str]] = []
    hop = calc._arun
    connection_call = _Connection.call

    async def recorded_hop(coroutine):
        hops.append(("from", threading.current_thread().name))
        return await hop(coroutine)

    async def recorded_call(self, tool_name, arguments):
        hops.append(("on", threading.current_thread().name))
        return await connection_call(self, tool_name, arguments)

    monkeypatch.setattr(calc, "_arun", recorded_hop)
    monkeypatch.setattr(_Connection, "call", recorded_call)
    model = ScriptedChatModel([calling("add", {"a": 2, "b": 3}), answer_from_last_result])
    agent = ReactAgent("mathy", model, tools=[*calc])  # the default tool_timeout: 60 s

    async def main():
        state = await agent.ainvoke("2 + 3?", RunnableConfig(thread_id="t"))
        return state, threading.current_thread().name

    state, caller_thread = asyncio.run(main())

    assert state.value("messages")[-1].content == "The tool said: 5"
    assert hops[0] == ("from", caller_thread)  # not graph_agent's own loop: one hop
    assert hops[1][0] == "on" and hops[1][1].startswith("mcp:")  # the toolset's loop thread


def test_parallel_mcp_calls_in_one_answer_each_get_their_own_result(calc):
    calls = AssistantMessage(
        tool_calls=[ToolCall(f"c{i}", "add", {"a": i, "b": 100}) for i in (0, 1)]
    )
    model = ScriptedChatModel([calls, "done"])
    agent = ReactAgent("busy", model, tools=[*calc], max_parallel_tools=2)

    state = agent.invoke("add", RunnableConfig(thread_id="t"))

    assert {r.tool_call_id: r.content for r in results(state)} == {"c0": "100", "c1": "101"}


def test_an_image_from_an_mcp_tool_reaches_the_model_as_an_image_part(calc):
    model = ScriptedChatModel([calling("chart", {}), "a chart"])
    agent = ReactAgent("viewer", model, tools=[*calc])

    agent.invoke("show me", RunnableConfig(thread_id="t"))

    result = model.requests[1].messages[-1]
    assert isinstance(result, ToolResponseMessage)
    assert [type(part).__name__ for part in result.content] == ["TextPart", "ImagePart"]


def test_an_agent_made_without_them_gets_mcp_tools_for_its_thread(calc):
    model = ScriptedChatModel(["hi", calling("add", {"a": 4, "b": 5}), answer_from_last_result])
    agent = ReactAgent("later", model)
    config = RunnableConfig(thread_id="later")
    agent.call("hello", config)

    added = agent.add_tools(calc)

    assert [tool.name for tool in added] == [tool.name for tool in calc]
    assert agent.call("4 + 5?", config).text == "The tool said: 9"


def write_config(folder: Path, servers: dict) -> str:
    path = folder / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return str(path)


def test_add_mcp_tools_adds_the_servers_tools_and_takes_them_away_again(tmp_path):
    agent = ReactAgent("cli", ScriptedChatModel(["ok"]))
    config = write_config(tmp_path, {"calc": stdio_server("calc")})

    remove = add_mcp_tools(agent, "cli.py:agent", config)
    try:
        assert "add" in agent.toolkit
        assert agent.toolkit["add"].invoke({"a": 1, "b": 2}) == "3"
    finally:
        remove()
    assert list(agent.toolkit) == []


def test_add_mcp_tools_remover_stops_the_servers_even_when_removing_fails(tmp_path):
    agent = ReactAgent("cli", ScriptedChatModel(["ok"]))
    config = write_config(tmp_path, {"calc": stdio_server("calc")})
    remove = add_mcp_tools(agent, "cli.py:agent", config)
    kept = agent.toolkit["add"]
    agent.remove_tools("add")  # taken away meanwhile: the remover's remove_tools raises

    with pytest.raises(KeyError):
        remove()

    with pytest.raises(MCPServerError, match="toolset of calc is closed"):
        kept.invoke({"a": 1, "b": 2})


def test_add_mcp_tools_refuses_a_tool_name_the_agent_has(tmp_path):
    @tool
    def add(a: int, b: int) -> int:
        """The agent's own add."""
        return a + b

    agent = ReactAgent("cli", ScriptedChatModel(["ok"]), tools=[add])
    config = write_config(tmp_path, {"calc": stdio_server("calc")})

    with pytest.raises(CliError) as info:
        add_mcp_tools(agent, "cli.py:agent", config)

    assert "the MCP tool 'add' (server 'calc') has the name of one of cli.py:agent's" in str(
        info.value
    )
    assert agent.toolkit.names == ("add",)
