"""A run on a busy thread with ``multitask_strategy="interrupt"`` or ``"rollback"``, and cancel
with ``action="rollback"``, as LangGraph Server does them."""

from __future__ import annotations

import time

import httpx
import pytest
from langgraph_sdk import get_sync_client

from tests.serve.conftest import Server


def _busy_thread(server: Server) -> tuple[str, str, str]:
    """A thread that finished one run (``n`` = 10) and runs ``slow`` again from 0."""
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    done = client.runs.create(thread_id, "slow", input={"n": 9})
    client.runs.join(thread_id, done["run_id"])
    running = client.runs.create(thread_id, "slow", input={"n": 0})
    time.sleep(0.25)  # two or three steps
    return thread_id, done["run_id"], running["run_id"]


def _runs_of(server: Server, thread_id: str, run_id: str) -> list:
    client = get_sync_client(url=server.url)
    history = client.threads.get_history(thread_id, limit=100)
    return [s["values"]["n"] for s in history if s["metadata"].get("run_id") == run_id]


def test_interrupt_stops_the_running_run_keeps_its_progress_and_starts_the_new(
    server: Server,
) -> None:
    client = get_sync_client(url=server.url)
    thread_id, _, running = _busy_thread(server)
    new = client.runs.create(thread_id, "slow", input=None, multitask_strategy="interrupt")
    assert client.runs.join(thread_id, new["run_id"]) == {"n": 10}
    assert client.runs.get(thread_id, running)["status"] == "interrupted"
    kept = _runs_of(server, thread_id, running)
    assert kept and 0 < max(kept) < 10  # the interrupted run's steps stay in the thread
    assert min(_runs_of(server, thread_id, new["run_id"])) > max(kept)  # and the new goes on


def test_rollback_deletes_the_running_run_and_starts_from_before_it(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id, done, running = _busy_thread(server)
    new = client.runs.create(thread_id, "slow", input={"n": 8}, multitask_strategy="rollback")
    assert client.runs.join(thread_id, new["run_id"]) == {"n": 10}
    with pytest.raises(httpx.HTTPStatusError) as gone:
        client.runs.get(thread_id, running)
    assert gone.value.response.status_code == 404
    assert {r["run_id"] for r in client.runs.list(thread_id)} == {done, new["run_id"]}
    assert sorted(_runs_of(server, thread_id, new["run_id"])) == [8, 9, 10]
    # resuming finds nothing to continue: the thread is back at the end of the first run
    thread_id, _, running = _busy_thread(server)
    new = client.runs.create(thread_id, "slow", input=None, multitask_strategy="rollback")
    assert "nothing to continue" in str(client.runs.join(thread_id, new["run_id"]))


def test_cancel_with_rollback_takes_the_thread_back(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id, _, running = _busy_thread(server)
    client.runs.cancel(thread_id, running, wait=True, action="rollback")
    state = client.threads.get_state(thread_id)
    assert state["values"] == {"n": 10} and state["next"] == []
    assert client.threads.get(thread_id)["status"] == "idle"
    with pytest.raises(httpx.HTTPStatusError):
        client.runs.get(thread_id, running)


def test_cancel_with_rollback_of_a_first_run_empties_the_thread(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "slow", input={"n": 0})
    time.sleep(0.25)
    client.runs.cancel(thread_id, run["run_id"], wait=True, action="rollback")
    assert client.threads.get_state(thread_id)["values"] == {}
    assert client.threads.get(thread_id)["status"] == "idle"


def test_an_unknown_cancel_action_is_a_422(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "chain", input={"x": 1})
    client.runs.join(thread_id, run["run_id"])
    url = f"{server.url}/threads/{thread_id}/runs/{run['run_id']}/cancel?action=explode"
    assert httpx.post(url).status_code == 422
