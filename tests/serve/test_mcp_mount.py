"""``/mcp`` on ``graph-agent serve``'s port: the served assistants as MCP tools, through the
official ``mcp`` client over streamable HTTP against a real server on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
from langgraph_sdk import get_client
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from graph_agent.serve import create_app
from graph_agent.serve.mcp_mount import McpMount
from tests.serve.graphs import ANSWERS, agent, chain
from tests.serve.servers import Served, serving

KEY = "mcp-test-key"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving("sqlite", tmp_path_factory.mktemp("mcp"), targets=[agent(), chain()]) as running:
        yield running


async def _session_calls(url: str, headers: dict[str, str] | None = None) -> dict[str, object]:
    """The tools listed at ``url``/mcp, and the answers of one call to each."""
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        asked = await session.call_tool("assistant", {"message": "hello?"})
        ran = await session.call_tool("chain", {"input": {"x": 1}})
    return {"tools": tools, "asked": asked, "ran": ran}


async def test_the_served_assistants_are_tools_an_mcp_client_lists_and_calls(
    server: Served,
) -> None:
    got = await _session_calls(server.url)
    tools = got["tools"]
    assert isinstance(tools, dict) and sorted(tools) == ["assistant", "chain"]
    assert "message" in tools["assistant"].input_schema["properties"]
    assert "input" in tools["chain"].input_schema["properties"]
    asked, ran = got["asked"], got["ran"]
    assert not asked.is_error and asked.content[0].text in ANSWERS  # type: ignore[attr-defined]
    assert json.loads(ran.content[0].text) == {"x": 12}  # type: ignore[attr-defined]


async def test_an_mcp_call_leaves_no_thread_behind(server: Served) -> None:
    await _session_calls(server.url)
    threads = await get_client(url=server.url).threads.search(limit=100)
    assert threads == []  # the calls are stateless: no record, and no checkpoint either
    assert list(server.saver.search_threads(limit=100)) == []


async def test_with_api_keys_mcp_needs_the_key(tmp_path: Path) -> None:
    with serving("sqlite", tmp_path, targets=[agent(), chain()], api_keys=[KEY]) as keyed:
        refused = httpx.post(f"{keyed.url}/mcp", json={"jsonrpc": "2.0", "id": 1})
        assert refused.status_code == 401
        got = await _session_calls(keyed.url, headers={"x-api-key": KEY})
        assert json.loads(got["ran"].content[0].text) == {"x": 12}  # type: ignore[attr-defined]


def test_a_web_page_cannot_call_mcp_on_a_keyless_server(server: Served) -> None:
    page = httpx.post(
        f"{server.url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"origin": "https://evil.example", "accept": "application/json, text/event-stream"},
    )
    assert page.status_code == 403
    rebound = httpx.post(
        f"{server.url}/mcp", json={"jsonrpc": "2.0", "id": 1}, headers={"host": "evil.example"}
    )
    assert rebound.status_code == 403


def test_without_the_extras_mcp_and_a2a_answer_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from starlette.testclient import TestClient

    monkeypatch.setattr("graph_agent.serve.mcp_mount.mcp_available", lambda: False)
    monkeypatch.setattr("graph_agent.serve.protocols.a2a_available", lambda: False)
    assert not McpMount({}).available
    with TestClient(create_app([chain()]), base_url="http://127.0.0.1") as client:
        mcp = client.post("/mcp", json={})
        a2a = client.post("/a2a/chain", json={})
    assert mcp.status_code == 501 and "mcp extra" in mcp.json()["detail"]
    assert a2a.status_code == 501 and "a2a extra" in a2a.json()["detail"]


def test_a_server_that_never_serves_mcp_or_a2a_never_imports_their_sdks() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from graph_agent.serve import create_app; from tests.serve.graphs import "
        "chain; create_app([chain()]); print(sorted(m for m in ('mcp', 'a2a') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"  # their imports take seconds: the first request pays


def test_an_app_serves_mcp_again_after_its_lifespan_restarts() -> None:
    from starlette.testclient import TestClient

    app = create_app([chain()])
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"accept": "application/json, text/event-stream"}
    for _ in range(2):  # the SDK's session manager runs once: each lifespan makes its own
        with TestClient(app, base_url="http://127.0.0.1") as client:
            assert client.post("/mcp", json=body, headers=headers).status_code == 200
