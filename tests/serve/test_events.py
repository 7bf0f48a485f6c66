"""A run's stream events are kept: a client that reconnects with ``Last-Event-ID`` gets exactly
what it missed, while the run goes on and after it ended, also after a restart."""

from __future__ import annotations

import asyncio

import httpx
from langgraph_sdk import get_sync_client

from graph_agent.serve.records import RunRecord, now
from graph_agent.serve.runs import ActiveRun, RunRequest
from tests.serve.conftest import Server


def _sse(response: httpx.Response, limit: int | None = None) -> list[tuple[int, str, str]]:
    """The ``(id, event, data)`` of an SSE response, at most ``limit`` of them."""
    events: list[tuple[int, str, str]] = []
    fields: dict[str, str] = {}
    for line in response.iter_lines():
        if line:
            name, _, value = line.partition(": ")
            fields[name] = value
            continue
        events.append((int(fields["id"]), fields["event"], fields["data"]))
        fields = {}
        if limit is not None and len(events) == limit:
            break
    return events


def _replay(server: Server, thread_id: str, run_id: str, after: int | None = None) -> list:
    headers = {} if after is None else {"Last-Event-ID": str(after)}
    url = f"{server.url}/threads/{thread_id}/runs/{run_id}/stream"
    with httpx.stream("GET", url, headers=headers, timeout=10) as response:
        assert response.status_code == 200
        return _sse(response)


def test_a_finished_runs_events_are_replayed_as_they_were_streamed(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    live = list(client.runs.stream(thread_id, "chain", input={"x": 1}, stream_mode=["values"]))
    run_id = live[0].data["run_id"]
    again = list(client.runs.join_stream(thread_id, run_id))
    assert [(p.event, p.data) for p in again] == [(p.event, p.data) for p in live]
    assert [p.data["x"] for p in again[1:]] == [1, 2, 12]


def test_last_event_id_gets_exactly_the_events_after_it(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "chain", input={"x": 1}, stream_mode=["values", "updates"])
    client.runs.join(thread_id, run["run_id"])
    everything = _replay(server, thread_id, run["run_id"])
    assert [number for number, _, _ in everything] == list(range(len(everything)))
    assert _replay(server, thread_id, run["run_id"], after=2) == everything[3:]
    assert _replay(server, thread_id, run["run_id"], after=len(everything) - 1) == []
    parts = client.runs.join_stream(thread_id, run["run_id"], last_event_id="2")
    assert [p.event for p in parts] == [event for _, event, _ in everything[3:]]


def test_a_client_that_reconnects_mid_run_loses_and_repeats_nothing(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "slow", input={"n": 0}, stream_mode="values")
    url = f"{server.url}/threads/{thread_id}/runs/{run['run_id']}/stream"
    with httpx.stream("GET", url, timeout=10) as response:
        first = _sse(response, limit=3)  # then the connection drops
    assert client.runs.get(thread_id, run["run_id"])["status"] == "running"
    with httpx.stream("GET", url, headers={"Last-Event-ID": str(first[-1][0])}) as response:
        rest = _sse(response)
    seen = first + rest
    assert [number for number, _, _ in seen] == list(range(len(seen)))
    assert seen == _replay(server, thread_id, run["run_id"])
    assert seen[-1][2] == '{"n":10}'


def test_the_sdk_reconnects_a_resumable_stream_by_itself(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    parts = client.runs.stream(
        thread_id, "chain", input={"x": 1}, stream_mode="values", stream_resumable=True
    )
    assert [p.data for p in parts][1:] == [{"x": 1}, {"x": 2}, {"x": 12}]


def test_a_bad_last_event_id_is_a_400(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "chain", input={"x": 1})
    client.runs.join(thread_id, run["run_id"])
    url = f"{server.url}/threads/{thread_id}/runs/{run['run_id']}/stream"
    response = httpx.get(url, headers={"Last-Event-ID": "yesterday"})
    assert response.status_code == 400 and "Last-Event-ID" in response.json()["detail"]


def test_events_outlive_a_restart(tmp_path) -> None:
    with Server(tmp_path / "serve.db") as first:
        client = get_sync_client(url=first.url)
        thread_id = client.threads.create()["thread_id"]
        run_id = client.runs.create(thread_id, "chain", input={"x": 1})["run_id"]
        client.runs.join(thread_id, run_id)
        before = _replay(first, thread_id, run_id)
    with Server(tmp_path / "serve.db") as second:
        assert _replay(second, thread_id, run_id) == before
        assert _replay(second, thread_id, run_id, after=1) == before[2:]


async def test_every_follower_of_a_live_run_gets_every_event_once() -> None:
    record = RunRecord(
        run_id="r", thread_id="t", assistant_id="chain", created_at=now(), updated_at=now()
    )
    run = ActiveRun(record=record, request=RunRequest(assistant_id="chain"))

    async def follow(after: int) -> list[int]:
        return [number for number, _, _ in [item async for item in run.follow(after)]]

    followers = [asyncio.ensure_future(follow(after)) for after in (-1, -1, 1)]
    await asyncio.sleep(0)
    for n in range(5):
        run.emit("values", {"n": n})
        if n % 2:
            await asyncio.sleep(0)
    run.end()
    assert await asyncio.gather(*followers) == [[0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [2, 3, 4]]
