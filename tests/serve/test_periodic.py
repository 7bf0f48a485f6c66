"""The server's background jobs (``Api.add_periodic``): run at start and then every interval,
a failing round is logged and the job goes on, and they stop with the server."""

from __future__ import annotations

import asyncio
import logging

import pytest

from graph_agent.serve.tasks import Periodic, cancel_and_await, run_periodically


async def test_a_failing_round_is_logged_and_the_job_runs_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rounds: list[int] = []
    done = asyncio.Event()

    async def job() -> None:
        rounds.append(len(rounds))
        if len(rounds) == 1:
            raise RuntimeError("first round breaks")
        if len(rounds) == 3:
            done.set()

    task = asyncio.create_task(run_periodically(Periodic("flaky", 0.01, job)))
    with caplog.at_level(logging.ERROR):
        await asyncio.wait_for(done.wait(), 5)
        await cancel_and_await([task])
    assert rounds[:3] == [0, 1, 2]
    assert "background job flaky failed" in caplog.text
    assert "first round breaks" in caplog.text
    assert task.cancelled()


async def test_wake_runs_the_job_before_its_interval() -> None:
    calls = 0
    wake = asyncio.Event()
    second = asyncio.Event()

    async def job() -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            second.set()

    task = asyncio.create_task(run_periodically(Periodic("slow", 3600, job), wake))
    await asyncio.sleep(0)
    wake.set()
    await asyncio.wait_for(second.wait(), 5)
    await cancel_and_await([task])
    assert calls == 2


def test_a_served_app_runs_its_jobs_while_it_serves() -> None:
    from starlette.testclient import TestClient

    from graph_agent import END, START, StateGraph
    from graph_agent.serve.app import create_app

    graph = StateGraph("inc")
    graph.add_node("inc", lambda state: {"x": state["x"] + 1})
    graph.add_edge(START, "inc").add_edge("inc", END)
    app = create_app([graph])
    ran = asyncio.Event()

    async def job() -> None:
        ran.set()

    app.state.api.add_periodic(Periodic("probe", 3600, job))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        assert client.get("/ok").status_code == 200
    assert ran.is_set()
