"""MCPToolset against real MCP servers, over stdio and over HTTP: listing, calling, errors,
timeouts, and tools of two servers with the same name."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from graph_agent.mcp import MCPServerError, MCPTool, MCPToolError, MCPToolset
from graph_agent.messages import ImagePart, TextPart
from graph_agent.tools import Tool, ToolArgumentsError, ToolTimeoutError
from tests.mcp.conftest import stdio_server
from tests.mcp.servers import PNG_BYTES, calc_server


def test_lists_every_tool_of_the_server_as_a_tool(calc):
    names = [tool.name for tool in calc]

    assert names == ["add", "sum_all", "divide", "hang", "pid", "chart", "header", "echo_upper"]
    assert all(isinstance(tool, Tool) for tool in calc)
    assert calc["add"].description == "Add two whole numbers."
    assert calc["add"].server == "calc"


def test_keeps_each_input_schema_exactly_as_the_server_wrote_it(calc):
    served = {tool.name: tool.input_schema for tool in asyncio.run(calc_server().list_tools())}

    for tool in calc:
        assert tool.parameters == served[tool.remote_name]
    assert calc["hang"].parameters["properties"]["seconds"]["default"] == 60


def test_a_name_a_model_cannot_use_is_made_valid_and_still_calls_the_servers_tool(calc):
    echo = calc["echo_upper"]

    assert echo.remote_name == "echo.upper"
    assert echo.invoke({"text": "quiet"}) == "QUIET"


def test_a_call_answers_with_the_tools_text(calc):
    assert calc["add"].invoke({"a": 2, "b": 3}) == "5"
    assert calc["add"].invoke('{"a": 40, "b": 2}') == "42"  # the model's raw JSON text


def test_a_structured_result_reads_as_its_json(calc):
    assert json.loads(calc["sum_all"].invoke({"numbers": [1, 2, 3]})) == {"total": 6, "terms": 3}


def test_an_image_comes_as_an_image_part_after_the_text(calc):
    caption, image = calc["chart"].run({})

    assert caption == TextPart("the chart:")
    assert isinstance(image, ImagePart)
    assert (image.media_type, base64.b64decode(image.data)) == ("image/png", PNG_BYTES)


def test_invalid_arguments_come_back_as_the_servers_error(calc):
    with pytest.raises(MCPToolError) as wrong_type:
        calc["add"].invoke({"a": "two", "b": 3})
    with pytest.raises(MCPToolError) as missing:
        calc["add"].invoke({"a": 2})

    assert "validation error" in str(wrong_type.value)
    assert "\na\n" in str(wrong_type.value)  # names the argument
    assert "\nb\n" in str(missing.value)
    assert wrong_type.value.tool == "add"


def test_arguments_that_are_not_a_json_object_are_refused_before_the_server(calc):
    with pytest.raises(ToolArgumentsError, match="not valid JSON"):
        calc["add"].invoke('{"a": 2,')
    with pytest.raises(ToolArgumentsError, match="must be a JSON object"):
        calc["add"].invoke("[2, 3]")


def test_a_tool_that_fails_raises_what_the_server_said(calc):
    with pytest.raises(MCPToolError, match="cannot divide by zero") as info:
        calc["divide"].invoke({"a": 1, "b": 0})

    assert info.value.server == "calc"


def test_a_tool_that_hangs_times_out_and_the_session_keeps_working(calc):
    with pytest.raises(ToolTimeoutError, match=r"did not finish within 0\.5 s"):
        calc["hang"].invoke({"seconds": 30}, timeout=0.5)

    assert calc["add"].invoke({"a": 1, "b": 1}) == "2"


def test_the_async_face_calls_the_same_session(calc):
    async def both() -> list[str]:
        tools = await calc.alist_tools()
        add = next(t for t in tools if t.name == "add")
        first = add.ainvoke({"a": 1, "b": 2})
        second = add.arun({"a": 3, "b": 4}, timeout=10)
        return list(await asyncio.gather(first, second))

    assert asyncio.run(both()) == ["3", "7"]


def test_an_async_call_past_its_timeout_is_cut(calc):
    with pytest.raises(ToolTimeoutError):
        asyncio.run(calc["hang"].ainvoke({"seconds": 30}, timeout=0.5))


def test_a_name_two_servers_share_is_prefixed_with_each_servers_name(calc_http):
    servers = {"calc": {"url": calc_http.url}, "other": stdio_server("other")}
    with MCPToolset(servers) as toolset:
        names = [tool.name for tool in toolset]

        assert "add" not in names
        assert {"calc_add", "other_add", "shout", "divide"} <= set(names)
        assert toolset["calc_add"].invoke({"a": 2, "b": 3}) == "5"
        assert toolset["other_add"].invoke({"left": "2", "right": "3"}) == "23"
        assert toolset["other_add"].remote_name == "add"


def test_an_async_with_block_lists_without_blocking_and_closes(calc_http):
    async def use() -> tuple[list[str], MCPToolset]:
        async with MCPToolset({"calc": {"url": calc_http.url}}) as toolset:
            tools = await toolset.alist_tools()
            return [await tools[0].ainvoke({"a": 1, "b": 1})], toolset

    answers, toolset = asyncio.run(use())

    assert answers == ["2"]
    with pytest.raises(MCPServerError, match="closed"):
        toolset["add"].invoke({"a": 1, "b": 1})


def test_the_toolset_opens_no_server_until_its_tools_are_needed(calc_http):
    toolset = MCPToolset({"calc": {"url": calc_http.url}})

    assert not toolset.opened
    assert isinstance(toolset["add"], MCPTool)
    assert toolset.opened
    toolset.close()


def test_a_server_that_cannot_start_is_named_in_a_clear_error():
    missing = {"gone": {"command": "no-such-mcp-server-command-here"}}
    with MCPToolset(missing) as toolset, pytest.raises(MCPServerError) as info:
        list(toolset)

    assert "MCP server 'gone' (no-such-mcp-server-command-here) cannot be started" in str(
        info.value
    )


def test_a_url_with_no_server_is_named_in_a_clear_error():
    from tests.mcp.conftest import free_port

    url = f"http://127.0.0.1:{free_port()}/mcp"
    with MCPToolset({"nobody": {"url": url}}) as toolset, pytest.raises(MCPServerError) as info:
        list(toolset)

    assert f"MCP server 'nobody' ({url}) cannot be reached" in str(info.value)


@pytest.mark.parametrize("transport", ["http", "sse"])
def test_the_configured_headers_reach_an_http_or_sse_server(transport, calc_http, calc_sse):
    url = calc_sse.url if transport == "sse" else calc_http.url
    entry = {"url": url, "type": transport, "headers": {"X-Api-Key": "k-123"}}
    with MCPToolset({"calc": entry}) as toolset:
        assert toolset["header"].invoke({"name": "X-Api-Key"}) == "k-123"


def test_an_sse_url_with_no_server_is_named_in_a_clear_error():
    from tests.mcp.conftest import free_port

    url = f"http://127.0.0.1:{free_port()}/sse"
    entry = {"url": url, "transport": "sse"}
    with MCPToolset({"nobody": entry}) as toolset, pytest.raises(MCPServerError) as info:
        list(toolset)

    assert f"MCP server 'nobody' (SSE {url}) cannot be reached" in str(info.value)


def test_the_record_of_requests_written_is_emptied_as_calls_end(calc):
    for n in range(5):
        assert calc["add"].invoke({"a": n, "b": 1}) == str(n + 1)
    with pytest.raises(MCPToolError):
        calc["divide"].invoke({"a": 1, "b": 0})
    # (through the connection's private state: there is no public need)
    assert calc._connections["calc"]._wire.written == set()


def test_an_idle_sse_stream_is_kept_far_longer_than_the_sdks_five_minutes(calc_sse, monkeypatch):
    from graph_agent.mcp import transports

    given: list[dict] = []

    def recording(url, **options):
        given.append(options)
        return real(url, **options)

    real = transports.sse_client
    monkeypatch.setattr(transports, "sse_client", recording)
    with MCPToolset({"calc": {"url": calc_sse.url, "type": "sse"}}) as toolset:
        assert toolset["add"].invoke({"a": 1, "b": 1}) == "2"
    assert given and given[0]["sse_read_timeout"] >= 3600
