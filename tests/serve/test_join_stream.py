"""``GET /threads/{id}/stream`` through ``langgraph_sdk``'s ``threads.join_stream``, on SQLite and
PostgreSQL: a client joined to a thread gets the events of the run running on it and of each
run started on it afterwards, each closed by LangGraph's ``run_done`` metadata event; it resumes
from ``last_event_id``; ``lifecycle`` gives only the runs' starts and ends."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client

from tests.serve.servers import KINDS, Served, serving

TIMEOUT = 30.0


@pytest.fixture(scope="module", params=KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with serving(request.param, tmp_path_factory.mktemp("join")) as running:
        yield running


async def _until_done(stream: Any, runs: int) -> list[Any]:
    """The parts of ``stream`` (the async client's, awaited first) up to the ``runs``-th
    ``run_done``."""
    stream = await stream
    parts = []
    async for part in stream:
        parts.append(part)
        if part.event == "metadata" and part.data.get("status") == "run_done":
            runs -= 1
            if runs == 0:
                break
    return parts


def _done(parts: list[Any]) -> list[str]:
    return [
        p.data["run_id"]
        for p in parts
        if p.event == "metadata" and p.data.get("status") == "run_done"
    ]


def test_a_joined_client_gets_every_run_started_on_the_thread(served: Served) -> None:
    async def scenario() -> None:
        client = get_client(url=served.url, api_key=None)
        thread = await client.threads.create()
        stream = client.threads.join_stream(thread["thread_id"])
        joined = asyncio.create_task(_until_done(stream, 2))
        await asyncio.sleep(0.5)  # joined before the runs start
        first = await client.runs.create(thread["thread_id"], "chain", input={"x": 1})
        second = await client.runs.create(
            thread["thread_id"], "chain", input={"x": 5}, multitask_strategy="enqueue"
        )
        parts = await asyncio.wait_for(joined, TIMEOUT)
        assert _done(parts) == [first["run_id"], second["run_id"]]
        values = [p.data for p in parts if p.event == "values"]
        assert values[-1] == {"x": 16} and {"x": 12} in values
        starts = [p.data["run_id"] for p in parts if p.event == "metadata" and "attempt" in p.data]
        assert starts == [first["run_id"], second["run_id"]]

    asyncio.run(scenario())


def test_joining_during_a_run_streams_it_from_its_first_event(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    thread = client.threads.create()
    run = client.runs.create(thread["thread_id"], "slow", input={"n": 0}, stream_mode="updates")
    parts = []
    for part in client.threads.join_stream(thread["thread_id"]):
        parts.append(part)
        if part.event == "metadata" and part.data.get("status") == "run_done":
            break
    assert parts[0].event == "metadata" and parts[0].data["run_id"] == run["run_id"]
    updates = [p.data for p in parts if p.event == "updates"]
    assert len(updates) == 10 and updates[-1] == {"step": {"n": 10}}
    assert _done(parts) == [run["run_id"]]


def test_a_client_resumes_after_the_last_event_it_got(served: Served) -> None:
    async def scenario() -> None:
        client = get_client(url=served.url, api_key=None)
        thread = await client.threads.create()
        joined = asyncio.create_task(
            _until_done(client.threads.join_stream(thread["thread_id"]), 1)
        )
        await asyncio.sleep(0.5)
        first = await client.runs.wait(thread["thread_id"], "chain", input={"x": 1})
        assert first == {"x": 12}
        parts = await asyncio.wait_for(joined, TIMEOUT)
        last_id = parts[-1].id
        assert last_id is not None and last_id.endswith(":done")
        second = await client.runs.wait(thread["thread_id"], "chain", input={"x": 2})
        assert second == {"x": 13}
        again = client.threads.join_stream(thread["thread_id"], last_event_id=last_id)
        resumed = await asyncio.wait_for(_until_done(again, 1), TIMEOUT)
        assert [p.data for p in resumed if p.event == "values"][-1] == {"x": 13}
        assert all(p.data.get("run_id") != parts[0].data["run_id"] for p in resumed)
        # from the middle of a run: its events after that one, then its end
        middle = parts[1].id
        replayed = client.threads.join_stream(thread["thread_id"], last_event_id=middle)
        rest = await asyncio.wait_for(_until_done(replayed, 2), TIMEOUT)
        assert [p.id for p in rest[: len(parts) - 2]] == [p.id for p in parts[2:]]

    asyncio.run(scenario())


def test_lifecycle_gives_only_the_runs_starts_and_ends(served: Served) -> None:
    async def scenario() -> None:
        client = get_client(url=served.url, api_key=None)
        thread = await client.threads.create()
        stream = client.threads.join_stream(thread["thread_id"], stream_mode="lifecycle")
        joined = asyncio.create_task(_until_done(stream, 1))
        await asyncio.sleep(0.5)
        run = await client.runs.create(thread["thread_id"], "chain", input={"x": 1})
        parts = await asyncio.wait_for(joined, TIMEOUT)
        assert [p.event for p in parts] == ["metadata", "metadata"]
        assert parts[0].data == {"run_id": run["run_id"], "attempt": 1}
        assert parts[1].data == {"status": "run_done", "run_id": run["run_id"]}

    asyncio.run(scenario())


def test_a_mode_not_served_an_unknown_thread_and_a_bad_id_are_refused(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    thread = client.threads.create()
    url = f"{served.url}/threads/{thread['thread_id']}/stream"
    answer = httpx.get(url, params={"stream_mode": "state_update"})
    assert answer.status_code == 422
    assert "run_modes" in answer.json()["detail"] and "lifecycle" in answer.json()["detail"]
    assert httpx.get(f"{served.url}/threads/nope/stream").status_code == 404
    bad = httpx.get(url, headers={"last-event-id": "garbage"})
    assert bad.status_code == 400 and "Last-Event-ID" in bad.json()["detail"]


def test_the_stream_of_a_thread_deleted_ends(served: Served) -> None:
    async def scenario() -> None:
        client = get_client(url=served.url, api_key=None)
        thread = await client.threads.create()
        joined = asyncio.create_task(
            _until_done(client.threads.join_stream(thread["thread_id"]), 1)
        )
        await asyncio.sleep(0.5)
        await client.threads.delete(thread["thread_id"])
        assert await asyncio.wait_for(joined, TIMEOUT) == []

    asyncio.run(scenario())


def test_a_stateless_background_run_through_runs_create(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    run = client.runs.create(None, "chain", input={"x": 1}, on_completion="keep")
    assert run["assistant_id"] == "chain" and run["status"] in ("pending", "running", "success")
    assert client.runs.join(run["thread_id"], run["run_id"]) == {"x": 12}
