"""MCP server configs: the two shapes, the config file, and clear errors for what is wrong."""

from __future__ import annotations

import json

import pytest

from graph_agent.mcp import (
    HttpServer,
    MCPConfigError,
    MCPToolset,
    StdioServer,
    parse_servers,
    read_mcp_config,
)


def test_a_command_is_a_stdio_server_and_a_url_an_http_one():
    servers = parse_servers(
        {
            "files": {"command": "mcp-files", "args": ["--root", "."], "env": {"A": "1"}},
            "tickets": {"url": "https://example.com/mcp", "headers": {"X-Key": "k"}},
        }
    )

    assert servers["files"] == StdioServer(
        name="files", command="mcp-files", args=("--root", "."), env={"A": "1"}
    )
    assert servers["tickets"] == HttpServer(
        name="tickets", url="https://example.com/mcp", headers={"X-Key": "k"}
    )


@pytest.mark.parametrize(
    "entry",
    [
        {"url": "http://x/sse", "type": "sse"},  # Claude Desktop, Claude Code, VS Code
        {"url": "http://x/sse", "transport": "sse"},  # LangChain's MultiServerMCPClient
        {"url": "http://x/sse", "type": "sse", "transport": "sse"},
    ],
)
def test_an_sse_server_is_named_by_type_or_by_transport(entry):
    server = parse_servers({"events": entry})["events"]

    assert server == HttpServer(name="events", url="http://x/sse", transport="sse")
    assert server.describe() == "SSE http://x/sse"
    assert "transport='sse'" in repr(server)


def test_a_url_without_a_transport_or_with_an_http_one_is_streamable_http():
    plain = parse_servers({"a": {"url": "http://x/mcp"}})["a"]
    named = parse_servers({"a": {"url": "http://x/mcp", "transport": "streamable_http"}})["a"]

    assert plain == named == HttpServer(name="a", url="http://x/mcp")
    assert plain.transport == "streamable-http"


def test_header_and_environment_values_never_show_in_reprs_or_errors():
    servers = parse_servers({"t": {"url": "https://x/mcp", "headers": {"Authorization": "s3cr3t"}}})

    assert "s3cr3t" not in repr(servers["t"])
    assert "Authorization" in repr(servers["t"])
    with pytest.raises(MCPConfigError) as info:
        parse_servers({"t": {"command": "x", "env": {"TOKEN": 12345}}})
    assert "12345" not in str(info.value)


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"command": "x", "url": "http://y"}, "exactly one of 'command'"),
        ({"args": ["x"]}, "exactly one of 'command'"),
        ({"command": "x", "args": "--flag"}, "'args' must be a list of strings"),
        ({"command": ""}, "'command' must be a non-empty string"),
        ({"command": "x", "cwdir": "/"}, "unknown key cwdir"),
        ({"url": "http://y", "type": "websocket"}, "transport 'websocket' is not supported"),
        ({"url": "http://y", "type": "sse", "transport": "http"}, "give one of them"),
        ({"url": "http://y", "transport": 3}, "'transport' must be a string"),
        ({"command": "x", "type": "http"}, "speaks stdio"),
        ("mcp-files", "must be a mapping"),
    ],
)
def test_a_malformed_server_is_named_with_what_is_wrong(entry, says):
    with pytest.raises(MCPConfigError, match=says) as info:
        parse_servers({"files": entry})
    assert "'files'" in str(info.value)


def test_no_servers_at_all_is_an_error():
    with pytest.raises(MCPConfigError, match="no MCP server"):
        MCPToolset({})


def test_the_config_file_format_is_read(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"calc": {"command": "calc", "args": ["-v"]}}}))

    assert read_mcp_config(path) == {"calc": StdioServer(name="calc", command="calc", args=("-v",))}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "is not valid JSON"),
        ('{"servers": {}}', 'must hold {"mcpServers"'),
    ],
)
def test_a_bad_config_file_says_what_it_must_hold(tmp_path, text, says):
    path = tmp_path / "mcp.json"
    path.write_text(text)

    with pytest.raises(MCPConfigError, match=says):
        read_mcp_config(path)


def test_a_missing_config_file_is_named(tmp_path):
    with pytest.raises(MCPConfigError, match=r"cannot read the MCP config .*missing\.json"):
        read_mcp_config(tmp_path / "missing.json")


def test_a_toolset_takes_parsed_specs_as_well_as_mappings():
    spec = StdioServer(name="calc", command="calc", env={"A": "1"})
    toolset = MCPToolset({"calc": spec}, timeout=5)

    assert toolset.servers["calc"] == spec
    assert toolset.timeout == 5
    with pytest.raises(MCPConfigError, match="timeout must be positive"):
        MCPToolset({"calc": spec}, timeout=0)
