"""The route table in front of Starlette's router answers each request with the route
Starlette's own scan would (:class:`graph_agent.serve.routes.RouteTable`)."""

from __future__ import annotations

import re

import httpx
import pytest
from starlette.routing import Match, Route

from graph_agent import END, START, StateGraph
from graph_agent.serve.app import create_app
from graph_agent.serve.routes import RouteTable


def _app():
    graph = StateGraph("inc")
    graph.add_node("inc", lambda state: {"x": state["x"] + 1})
    graph.add_edge(START, "inc").add_edge("inc", END)
    return create_app([graph])


def _starlette_choice(routes: list, method: str, path: str) -> Route | None:
    scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    for route in routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return route
    return None


def _sample(path: str) -> str:
    return re.sub(r"{[^}]+}", "abc-1", path)


def test_every_api_route_is_found_as_starlette_finds_it() -> None:
    app = _app()
    table = app.router.middleware_stack
    assert isinstance(table, RouteTable)
    routes = [r for r in app.routes if isinstance(r, Route) and r.methods]
    indexed = 0
    for route in routes:
        for method in sorted(route.methods):
            path = _sample(route.path)
            found = table.find(method, path)
            expected = _starlette_choice(app.routes, method, path)
            if found is not None:
                indexed += 1
                assert found[0] is expected, (method, path)
    assert indexed > 40  # the API's routes are in it
    found = table.find("POST", "/threads/t-1/runs/wait")
    assert found is not None
    assert found[0].path == "/threads/{thread_id}/runs/wait"
    assert found[1] == {"thread_id": "t-1"}


@pytest.mark.parametrize(
    ("method", "path"),
    [("DELETE", "/runs/wait"), ("GET", "/nowhere/at/all"), ("GET", "/studio/app.js")],
)
def test_what_the_table_does_not_hold_goes_to_starlette(method: str, path: str) -> None:
    table = _app().router.middleware_stack
    assert isinstance(table, RouteTable)
    assert table.find(method, path) is None


async def test_a_run_on_a_thread_and_a_wrong_method_answer_as_before() -> None:
    app = _app()
    transport = httpx.ASGITransport(app=app)
    client = httpx.AsyncClient(transport=transport, base_url="http://localhost")
    async with app.router.lifespan_context(app), client:
        thread = (await client.post("/threads", json={})).json()["thread_id"]
        done = await client.post(
            f"/threads/{thread}/runs/wait", json={"assistant_id": "inc", "input": {"x": 1}}
        )
        assert done.status_code == 200
        assert done.json() == {"x": 2}
        refused = await client.delete("/runs/wait")
        assert refused.status_code == 405
        missing = await client.post(
            "/threads/nope/runs/wait", json={"assistant_id": "inc", "input": {"x": 1}}
        )
        assert missing.status_code == 404
        assert missing.json()["detail"].startswith("thread nope not found")
