"""``POST /runs/batch`` through ``langgraph_sdk``'s ``runs.create_batch``: stateless background
runs, each on a thread of its own, answered as LangGraph Server's run records; a batch with one
body that does not fit starts none of its runs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client

from tests.serve.conftest import Server
from tests.serve.servers import KINDS, Served, serving


@pytest.fixture(scope="module", params=KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with serving(request.param, tmp_path_factory.mktemp("batch")) as running:
        yield running


def test_a_batch_starts_each_run_on_a_thread_of_its_own(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    runs = client.runs.create_batch(
        [
            {"assistant_id": "chain", "input": {"x": 1}, "on_completion": "keep"},
            {"assistant_id": "chain", "input": {"x": 100}, "on_completion": "keep"},
            {"assistant_id": "approval", "input": {"question": "ok?"}, "on_completion": "keep"},
        ]
    )
    assert [run["assistant_id"] for run in runs] == ["chain", "chain", "approval"]
    assert len({run["thread_id"] for run in runs}) == 3
    assert len({run["run_id"] for run in runs}) == 3
    assert all(run["status"] in ("pending", "running", "success") for run in runs)
    joined = [client.runs.join(run["thread_id"], run["run_id"]) for run in runs]
    assert [joined[0]["x"], joined[1]["x"]] == [12, 111]
    assert joined[2]["__interrupt__"][0]["value"] == {"approve": "reply to ok?"}
    assert client.runs.get(runs[0]["thread_id"], runs[0]["run_id"])["status"] == "success"


def test_a_batch_run_without_on_completion_runs_and_leaves_no_thread(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    (run,) = client.runs.create_batch([{"assistant_id": "chain", "input": {"x": 1}}])
    assert run["assistant_id"] == "chain" and run["status"] in ("pending", "running", "success")
    # the thread is deleted with the run's end (on_completion defaults to delete, as LangGraph's)
    for _ in range(200):
        if httpx.get(f"{served.url}/threads/{run['thread_id']}").status_code == 404:
            break
        time.sleep(0.05)
    assert httpx.get(f"{served.url}/threads/{run['thread_id']}").status_code == 404


def test_one_body_that_does_not_fit_starts_none_and_names_it(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    before = len(client.threads.search(limit=1000))
    with pytest.raises(httpx.HTTPStatusError) as caught:
        client.runs.create_batch(
            [
                {"assistant_id": "chain", "input": {"x": 1}, "on_completion": "keep"},
                {"assistant_id": "chain", "input": {"x": 1}, "interrupt_before": ["nope"]},
            ]
        )
    assert caught.value.response.status_code == 422
    assert "run 1 of the batch" in caught.value.response.text
    assert "'nope'" in caught.value.response.text
    with pytest.raises(httpx.HTTPStatusError) as missing:
        client.runs.create_batch([{"assistant_id": "nobody"}])
    assert missing.value.response.status_code == 404
    assert "run 0 of the batch" in missing.value.response.text
    assert len(client.threads.search(limit=1000)) == before


def test_a_batch_must_be_an_array_of_objects_and_not_too_long(served: Served) -> None:
    url = f"{served.url}/runs/batch"
    assert httpx.post(url, json={"assistant_id": "chain"}).status_code == 422
    bad = httpx.post(url, json=[{"assistant_id": "chain"}, 3])
    assert bad.status_code == 422 and "item 1" in bad.json()["detail"]
    long = httpx.post(url, json=[{"assistant_id": "chain"}] * 101)
    assert long.status_code == 422 and "at most 100" in long.json()["detail"]
    assert httpx.post(url, json=[]).json() == []


def test_the_async_client_starts_a_batch(tmp_path: Path) -> None:
    async def go(url: str) -> list[int]:
        client = get_client(url=url, api_key=None)
        bodies = [
            {"assistant_id": "chain", "input": {"x": n}, "on_completion": "keep"} for n in (0, 5)
        ]
        runs = await client.runs.create_batch(bodies)  # type: ignore[arg-type]
        return [(await client.runs.join(r["thread_id"], r["run_id"]))["x"] for r in runs]

    with Server(tmp_path / "serve.db") as running:
        assert asyncio.run(go(running.url)) == [11, 16]
