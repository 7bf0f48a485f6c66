"""The key check decides what is public (``/ok``, ``/docs`` and its console files, the Studio
page) by the path the app routes, not the full URL path: an app mounted under ``/docs`` or
``/studio`` (``Mount``, or a server's root path) still refuses a keyless request for data."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from graph_agent.serve.app import create_app
from tests.serve.graphs import chain

KEY = "mounted-secret-key-1"


@pytest.mark.parametrize("prefix", ["/docs", "/studio", "/api"])
def test_a_mounted_app_refuses_a_keyless_request_for_data(prefix: str) -> None:
    outer = Starlette(routes=[Mount(prefix, app=create_app([chain()], api_keys=[KEY]))])
    with TestClient(outer, base_url="http://localhost") as client:
        assert client.post(f"{prefix}/threads", json={}).status_code == 401
        assert client.post(f"{prefix}/threads/search", json={}).status_code == 401
        assert client.post(f"{prefix}/threads", json={}, headers={"x-api-key": KEY}).is_success


@pytest.mark.parametrize("prefix", ["/docs", "/api"])
def test_a_mounted_app_keeps_its_public_pages_public(prefix: str) -> None:
    outer = Starlette(routes=[Mount(prefix, app=create_app([chain()], api_keys=[KEY]))])
    with TestClient(outer, base_url="http://localhost") as client:
        assert client.get(f"{prefix}/ok").status_code == 200
        assert client.get(f"{prefix}/openapi.json").status_code == 200
        assert client.get(f"{prefix}/docs/try.js").status_code == 200
