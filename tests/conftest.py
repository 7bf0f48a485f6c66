"""Shared fixtures: every execution test runs through the sync and the async face."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from graph_agent import NodeOutput, OverAllState, RunnableConfig


class Caller:
    """Calls a compiled graph, an agent or a team through one face (``sync`` or ``async``)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def invoke(
        self, runnable: Any, input: Any, config: RunnableConfig | None = None
    ) -> OverAllState:
        if self.kind == "sync":
            return runnable.invoke(input, config)
        return asyncio.run(runnable.ainvoke(input, config))

    def stream(
        self,
        runnable: Any,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
    ) -> list[NodeOutput]:
        options = {"subgraphs": True} if subgraphs else {}
        if self.kind == "sync":
            return list(runnable.stream(input, config, **options))

        async def collect() -> list[NodeOutput]:
            return [item async for item in runnable.astream(input, config, **options)]

        return asyncio.run(collect())

    def __repr__(self) -> str:
        return self.kind


@pytest.fixture(params=["sync", "async"])
def driver(request: pytest.FixtureRequest) -> Iterator[Caller]:
    """Runs a graph through the sync or the async driver."""
    yield Caller(request.param)


@pytest.fixture(params=["sync", "async"])
def caller(request: pytest.FixtureRequest) -> Iterator[Caller]:
    """Calls a graph, an agent or a team through the sync or the async face."""
    yield Caller(request.param)


def _needs(nodeid: str, server: str) -> bool:
    """A test of ``server`` ("postgres" or "redis"): in a module named after it, or parametrised
    with it (one of its parameters' ids). Read from the node id, which the controller of a
    parallel run (pytest-xdist) has too, though it collects no items."""
    path, _, name = nodeid.partition("::")
    params = name[name.index("[") + 1 : -1].split("-") if name.endswith("]") else []
    return server in path.rpartition("/")[2] or server in params


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _needs(item.nodeid, "postgres"):
            item.add_marker(pytest.mark.postgres)
        if _needs(item.nodeid, "redis"):
            item.add_marker(pytest.mark.redis)


def pytest_collection_finish(session: pytest.Session) -> None:
    """When PostgreSQL or Redis is down, stop once, saying how to start it (not one error per
    test). In a parallel run the workers leave this to the controller (below): a worker that
    exits while collecting crashes the run instead."""
    if not hasattr(session.config, "workerinput"):
        _check_servers([item.nodeid for item in session.items])


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: run without xdist, it is never called
def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    """The controller of a parallel run checks the tests a worker collected (and selected)."""
    _check_servers(ids)


def _check_servers(nodeids: list[str]) -> None:
    _check_postgres(sum(1 for nodeid in nodeids if _needs(nodeid, "postgres")))
    _check_redis(sum(1 for nodeid in nodeids if _needs(nodeid, "redis")))


def _check_postgres(needing: int) -> None:
    if not needing:
        return
    from tests.checkpoint.postgres_db import DSN, unreachable

    reason = unreachable()
    if reason is not None:
        pytest.exit(
            f"{needing} selected tests need PostgreSQL, and {DSN!r} cannot be reached "
            f"({reason}).\nStart it with:  pg_ctlcluster --skip-systemctl-redirect "
            "$(ls /etc/postgresql) main start\nor point GRAPH_AGENT_TEST_POSTGRES at a server "
            "(a libpq DSN), or leave those tests out with:  pytest -m 'not postgres'",
            returncode=pytest.ExitCode.TESTS_FAILED,
        )


def _check_redis(needing: int) -> None:
    if not needing:
        return
    from tests.serve.redis_db import START, URL, unreachable

    reason = unreachable()
    if reason is not None:
        pytest.exit(
            f"{needing} selected tests need Redis, and {URL!r} cannot be reached ({reason}).\n"
            f"Start it with:  {START}\nor point GRAPH_AGENT_TEST_REDIS at a server (a redis:// "
            "URL), or leave those tests out with:  pytest -m 'not redis'",
            returncode=pytest.ExitCode.TESTS_FAILED,
        )
