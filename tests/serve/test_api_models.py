"""The request bodies are pydantic models (``graph_agent.serve.models``): they check what a
client sends (a 422 naming the field) and they are what the OpenAPI document says, so the two
cannot disagree; and the document lists exactly the routes the app serves."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.routing import BaseRoute, Match, Mount, Route
from starlette.testclient import TestClient

from graph_agent.serve import create_app
from graph_agent.serve.models import REQUEST_MODELS, RunCreate, ThreadSearch, read_body
from graph_agent.serve.openapi import openapi_document
from graph_agent.serve.protocols import is_protocol_path
from graph_agent.serve.routes import OPERATIONS
from graph_agent.serve.runs import MULTITASK_STRATEGIES, STREAM_MODES
from tests.serve.graphs import approval, chain

ASSISTANTS = ["approval", "chain"]


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app([chain(), approval()]), base_url="http://localhost") as client:
        yield client


def _schemas() -> dict[str, Any]:
    schemas: dict[str, Any] = openapi_document(ASSISTANTS)["components"]["schemas"]
    return schemas


def test_the_document_allows_every_multitask_strategy_and_stream_mode_the_runner_takes() -> None:
    run = _schemas()["RunCreate"]["properties"]
    assert run["multitask_strategy"]["enum"] == list(MULTITASK_STRATEGIES)
    assert run["stream_mode"]["anyOf"][0]["enum"] == list(STREAM_MODES)
    assert run["stream_mode"]["anyOf"][1]["items"]["enum"] == list(STREAM_MODES)
    assert run["assistant_id"]["enum"] == ASSISTANTS
    assert _schemas()["RunCreate"]["required"] == ["assistant_id"]


def test_every_request_body_in_the_document_is_its_models_schema() -> None:
    schemas = _schemas()
    bodies = {op.body for op in OPERATIONS if op.body is not None}
    for model in bodies:  # REQUEST_MODELS and those of routes in modules of their own
        fields = set(schemas[model.__name__]["properties"])
        assert fields == set(model.model_fields), model.__name__
    assert set(REQUEST_MODELS) <= bodies  # none listed that no route reads


@pytest.mark.parametrize(
    ("path", "body", "detail"),
    [
        ("/threads/search", {"limit": "ten"}, "limit must be an integer"),
        ("/threads/search", {"limit": -1}, "limit and offset must not be negative"),
        ("/threads/search", {"metadata": [1]}, "metadata must be a JSON object"),
        ("/threads/search", {"status": "asleep"}, "status: Input should be"),
        ("/threads/search", {"ids": "t1"}, "ids must be a JSON array of thread ids"),
        ("/assistants/search", {"graph_id": 3}, "graph_id must be a string"),
        ("/threads", {"if_exists": "nope"}, "if_exists must be raise or do_nothing, not 'nope'"),
        ("/threads", {"thread_id": True}, "thread_id must be a string"),
        ("/runs/wait", {}, "assistant_id must be a string naming a served graph or agent"),
        ("/runs/wait", {"assistant_id": 7}, "assistant_id must be a string naming"),
        ("/runs/wait", {"assistant_id": "chain", "input": [1]}, "input must be a JSON object"),
        ("/runs/wait", {"assistant_id": "chain", "command": "go"}, "command must be a JSON object"),
        (
            "/runs/wait",
            {"assistant_id": "chain", "stream_mode": ["values", "telepathy"]},
            "stream_mode 'telepathy' is not supported; use values, updates",
        ),
        (
            "/runs/wait",
            {"assistant_id": "chain", "stream_mode": []},
            "stream_mode must be a mode or a list of modes",
        ),
        (
            "/runs/wait",
            {"assistant_id": "chain", "multitask_strategy": "x"},
            "multitask_strategy 'x' is not supported; use reject, enqueue, interrupt, rollback",
        ),
        (
            "/runs/wait",
            {"assistant_id": "chain", "config": {"recursion_limit": "9"}},
            "config.recursion_limit must be a positive integer",
        ),
        (
            "/runs/wait",
            {"assistant_id": "chain", "checkpoint": {"checkpoint_id": 5}},
            "checkpoint_id must be a string",
        ),
        (
            "/runs/wait",
            {"assistant_id": "chain", "interrupt_before": ["a"]},
            "interrupt_before names unknown node(s): 'a'",
        ),
        (
            "/runs/wait",
            {"assistant_id": "chain", "interrupt_after": "first"},
            "interrupt_before and interrupt_after must be '*' or a list of node names",
        ),
        ("/runs/wait", {"assistant_id": "chain", "stream_resumable": 1}, "must be a boolean"),
    ],
)
def test_a_body_that_does_not_fit_is_a_422_naming_the_field(
    client: TestClient, path: str, body: dict[str, Any], detail: str
) -> None:
    response = client.post(path, json=body)
    assert response.status_code == 422, response.text
    assert detail in response.json()["detail"]
    assert response.json()["code"] == "invalid_input"


def test_null_is_as_absent_and_unknown_fields_are_ignored() -> None:
    run = read_body(RunCreate, {"assistant_id": "chain", "stream_mode": None, "webhook": "x"})
    assert run.modes() == ("values",) and run.multitask_strategy == "reject"
    search = read_body(ThreadSearch, {"limit": None, "offset": None, "sort_by": "created_at"})
    assert (search.limit, search.offset) == (10, 0)


def test_values_are_not_coerced() -> None:
    for body in ({"limit": True}, {"limit": 2.0}, {"limit": "2"}):
        with pytest.raises(ValueError, match="limit must be an integer"):
            read_body(ThreadSearch, body)


def test_the_sdk_s_requests_still_fit(client: TestClient) -> None:
    """A body as langgraph-sdk sends it (a whole checkpoint object, extra fields) runs."""
    thread = client.post("/threads", json={"metadata": {}, "if_exists": "raise"}).json()
    body = {
        "assistant_id": "chain",
        "input": {"x": 1},
        "stream_mode": ["values"],
        "config": {"configurable": {"a": 1}, "recursion_limit": 25},
        "checkpoint": {
            "thread_id": thread["thread_id"],
            "checkpoint_ns": "",
            "checkpoint_id": None,
        },
        "multitask_strategy": "enqueue",
        "on_disconnect": "continue",
        "durability": "async",
    }
    answer = client.post(f"/threads/{thread['thread_id']}/runs/wait", json=body)
    assert answer.status_code == 200 and answer.json() == {"x": 12}


def _served(routes: list[BaseRoute], prefix: str = "") -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for route in routes:
        if isinstance(route, Mount):
            found |= _served(list(route.routes), prefix + route.path)
        elif isinstance(route, Route):
            found |= {(m.lower(), prefix + route.path) for m in route.methods or () if m != "HEAD"}
    return found


def _documented() -> set[tuple[str, str]]:
    paths = openapi_document(ASSISTANTS)["paths"]
    return {(method, path) for path, operations in paths.items() for method in operations}


@pytest.mark.parametrize("studio", [True, False])
def test_every_served_route_is_documented_and_every_documented_one_served(studio: bool) -> None:
    app = create_app([chain(), approval()], studio=studio)
    served = {
        (method, path)
        for method, path in _served(list(app.routes))
        # the Studio's page and files, /mcp and A2A: not API routes
        if not path.startswith("/studio") and not is_protocol_path(path)
    }
    assert served - _documented() == set(), "served but not documented"
    assert _documented() - served == set(), "documented but not served"
    for method, path in _documented():  # and a request there reaches that very route
        concrete = re.sub(r"{(\w+)}", r"some-\1", path)
        scope = {"type": "http", "method": method.upper(), "path": concrete, "root_path": ""}
        taken = [r for r in app.routes if r.matches(scope)[0] is Match.FULL]
        assert [getattr(r, "path", None) for r in taken[:1]] == [path], (method, path)


def test_each_documented_path_parameter_is_the_routes() -> None:
    for path, operations in openapi_document(ASSISTANTS)["paths"].items():
        named = set(re.findall(r"{(\w+)}", path))
        for operation in operations.values():
            params = operation.get("parameters", [])
            assert {p["name"] for p in params if p["in"] == "path"} == named, path
