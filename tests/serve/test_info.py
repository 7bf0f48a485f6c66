"""``GET /info`` answers LangGraph Server's shape, saying honestly what this server has."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from langgraph_sdk import get_client, get_sync_client

from tests.serve.conftest import Server
from tests.serve.graphs import chain


def test_info_has_langgraph_servers_shape_with_crons_on_and_langsmith_off(server: Server) -> None:
    info = get_sync_client(url=server.url, api_key=None).http.get("/info")
    assert set(info) >= {"version", "flags", "host"}
    assert info["flags"] == {
        "assistants": True,
        "crons": True,
        "langsmith": False,
        "langsmith_tracing_replicas": False,
    }
    assert info["host"]["kind"] == "self-hosted"
    assert info["server"] == "graph-agent"
    assert isinstance(info["version"], str) and info["version"]


def test_info_through_the_async_client(server: Server) -> None:
    async def ask() -> dict[str, object]:
        return await get_client(url=server.url, api_key=None).http.get("/info")  # type: ignore[no-any-return]

    assert asyncio.run(ask())["flags"] == {
        "assistants": True,
        "crons": True,
        "langsmith": False,
        "langsmith_tracing_replicas": False,
    }


def test_info_needs_no_key_as_ok_does(tmp_path: Path) -> None:
    with Server(tmp_path / "serve.db", [chain()], api_keys=["k" * 32]) as running:
        assert httpx.get(f"{running.url}/info").status_code == 200
        assert httpx.get(f"{running.url}/threads/x").status_code == 401
