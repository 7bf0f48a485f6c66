"""The app's route table: each route is the one its own paths reach, whatever the order the
app lists them in (runs first, for speed)."""

from __future__ import annotations

import re

from starlette.routing import Match, Route

from graph_agent.serve import create_app
from tests.serve.graphs import chain


def test_each_route_is_the_first_to_take_its_own_method_and_path() -> None:
    routes = [route for route in create_app([chain()]).routes if isinstance(route, Route)]
    for route in routes:
        path = re.sub(r"{(\w+)}", r"some-\1", route.path)
        for method in route.methods or ():
            scope = {"type": "http", "method": method, "path": path, "root_path": ""}
            taken = next(r for r in routes if r.matches(scope)[0] is Match.FULL)
            assert taken is route, f"{method} {path} reaches {taken.path}, not {route.path}"


def test_runs_come_first_those_without_a_thread_before_all() -> None:
    paths = [route.path for route in create_app([chain()]).routes if isinstance(route, Route)]
    assert paths[:2] == ["/runs/wait", "/runs/stream"]
    assert all("/runs" in path for path in paths[: paths.index("/ok")])
