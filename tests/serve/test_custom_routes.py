"""Custom routes (``--app``): a Starlette app served beside the API on the same port, its routes
first, open or behind the API's auth as configured, its lifespan run with the server's."""

from __future__ import annotations

from pathlib import Path

import httpx
from langgraph_sdk import get_sync_client

from tests.serve import custom_auth_targets
from tests.serve.conftest import Server
from tests.serve.custom_auth_targets import ANN, app, auth
from tests.serve.graphs import chain

KEY = "routes-key-1"


def test_custom_routes_are_open_unless_the_api_auth_covers_them(tmp_path: Path) -> None:
    with Server(tmp_path / "serve.db", [chain()], api_keys=[KEY], custom_app=app) as running:
        assert httpx.get(f"{running.url}/hello").json() == {"hello": "world"}
        assert httpx.get(f"{running.url}/whoami").json() == {"identity": None}
        assert httpx.post(f"{running.url}/threads", json={}).status_code == 401
        client = get_sync_client(url=running.url, api_key=KEY)
        assert client.runs.wait(None, "chain", input={"x": 1}) == {"x": 12}


def test_covered_custom_routes_need_the_key_too(tmp_path: Path) -> None:
    with Server(
        tmp_path / "serve.db", [chain()], api_keys=[KEY], custom_app=app, custom_app_auth=True
    ) as running:
        assert httpx.get(f"{running.url}/hello").status_code == 401
        assert httpx.get(f"{running.url}/hello", headers={"x-api-key": KEY}).status_code == 200


def test_custom_auth_puts_the_user_in_the_custom_routes_request(tmp_path: Path) -> None:
    with Server(
        tmp_path / "serve.db", [chain()], auth=auth, custom_app=app, custom_app_auth=True
    ) as running:
        assert httpx.get(f"{running.url}/whoami", headers=ANN).json() == {"identity": "ann"}
        refused = httpx.get(f"{running.url}/whoami")
        assert refused.status_code == 401
        assert refused.json()["detail"] == "unknown token"


def test_the_custom_apps_routes_come_first_and_the_rest_is_the_apis(tmp_path: Path) -> None:
    with Server(tmp_path / "serve.db", [chain()], custom_app=app) as running:
        shadowed = httpx.post(f"{running.url}/assistants/search", json={})
        assert shadowed.json() == {"shadowed": True}
        client = get_sync_client(url=running.url)
        assert client.assistants.get("chain")["assistant_id"] == "chain"
        assert client.threads.create()["thread_id"]
        # a method the custom route does not take goes to the API: GET /assistants/{id}
        assert "assistant 'search' not found" in httpx.get(f"{running.url}/assistants/search").text


def test_the_custom_apps_lifespan_runs_with_the_servers(tmp_path: Path) -> None:
    custom_auth_targets.STARTED.clear()
    with Server(tmp_path / "serve.db", [chain()], custom_app=app):
        assert custom_auth_targets.STARTED == ["started"]
    assert custom_auth_targets.STARTED == ["started", "stopped"]


def test_the_guard_keeps_web_pages_off_custom_routes_too(tmp_path: Path) -> None:
    with Server(tmp_path / "serve.db", [chain()], custom_app=app) as running:
        page = {"Origin": "https://evil.example"}
        assert httpx.get(f"{running.url}/hello", headers=page).status_code == 403
        rebound = {"Host": "evil.example"}
        assert httpx.get(f"{running.url}/hello", headers=rebound).status_code == 403
