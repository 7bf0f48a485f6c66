"""Thread TTLs on the server, through langgraph-sdk, on SQLite and PostgreSQL: ``ttl`` on
``threads.create``, the server's defaults, and the sweeper (run here as one round at a chosen
time: the clock is a seam) deleting threads with their runs and checkpoints, or cutting them
to their latest checkpoint, never one a run is using, and finishing a deletion a crash cut."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import NotFoundError

from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.checkpoint.retention import SweepResult
from graph_agent.serve import retention
from graph_agent.serve.retention import ServerRetention, Sweeper
from tests.serve.servers import KINDS, Served, serving


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def served(kind: str, tmp_path: Path) -> Iterator[Served]:
    with serving(kind, tmp_path) as running:
        yield running


def sweeper_of(served: Served) -> Sweeper:
    sweeper: Sweeper = served.server.config.app.state.retention
    return sweeper


def sweep(served: Served, hours: float) -> SweepResult:
    """One round of the server's sweeper, ``hours`` from now."""
    at = datetime.now(UTC) + timedelta(hours=hours)
    return asyncio.run(sweeper_of(served).sweep(at))


def checkpoints(saver: CheckpointSaver, thread_id: str) -> int:
    return len(list(saver.list(thread_id)))


def gone(client: Any, thread_id: str) -> bool:
    try:
        client.threads.get(thread_id)
    except NotFoundError:
        return True
    return False


def test_a_thread_created_with_a_ttl_is_deleted_with_its_runs_once_idle_past_it(served):
    client = get_sync_client(url=served.url)
    thread_id = client.threads.create(ttl={"ttl": 60, "strategy": "delete"})["thread_id"]
    run = client.runs.wait(thread_id, "chain", input={"x": 1})
    assert run["x"] == 12
    run_id = client.runs.list(thread_id)[0]["run_id"]
    kept = client.threads.create()["thread_id"]  # no TTL of its own, none by default
    client.runs.wait(kept, "chain", input={"x": 1})

    assert sweep(served, hours=0.5).threads_deleted == 0
    assert not gone(client, thread_id)

    result = sweep(served, hours=2)

    assert result.threads_deleted == 1 and result.checkpoints_removed == 3
    assert gone(client, thread_id)
    with pytest.raises(NotFoundError):
        client.runs.get(thread_id, run_id)
    assert served.saver.get(thread_id) is None
    assert client.threads.get_state(kept)["values"] == {"x": 12}


def test_an_sdk_ttl_in_minutes_means_delete(served):
    client = get_sync_client(url=served.url)
    thread_id = client.threads.create(ttl=30)["thread_id"]
    assert sweep(served, hours=1).threads_deleted == 1 and gone(client, thread_id)


def test_keep_latest_leaves_a_paused_thread_that_still_resumes(served):
    client = get_sync_client(url=served.url)
    ttl = {"ttl": 60, "strategy": "keep_latest"}
    thread_id = client.threads.create(ttl=ttl)["thread_id"]
    client.runs.wait(thread_id, "approval", input={"question": "q"})
    before = client.threads.get_state(thread_id)
    assert before["interrupts"] and checkpoints(served.saver, thread_id) > 1

    result = sweep(served, hours=2)

    assert result.threads_pruned == 1 and result.threads_deleted == 0
    assert checkpoints(served.saver, thread_id) == 1
    thread = client.threads.get(thread_id)
    assert thread["status"] == "interrupted"
    after = client.threads.get_state(thread_id)
    assert after["values"] == before["values"] and after["interrupts"] == before["interrupts"]
    final = client.runs.wait(thread_id, "approval", command={"resume": "yes"})
    assert final["answer"] == "yes"
    assert sweep(served, hours=0.5).checkpoints_removed == 0  # used since: not idle yet
    assert sweep(served, hours=2).checkpoints_removed == 1  # the resumed run's one more


def test_the_server_default_ttl_applies_to_threads_without_their_own(kind, tmp_path):
    defaults = ServerRetention(thread_ttl=60, strategy="delete")
    with serving(kind, tmp_path, retention=defaults) as served:
        client = get_sync_client(url=served.url)
        plain = client.threads.create()["thread_id"]
        client.runs.wait(plain, "chain", input={"x": 1})
        longer = client.threads.create(ttl={"ttl": 60 * 24})["thread_id"]

        assert sweep(served, hours=2).threads_deleted == 1
        assert gone(client, plain) and not gone(client, longer)
        assert served.saver.get(plain) is None
        assert sweep(served, hours=25).threads_deleted == 1 and gone(client, longer)


def test_checkpoint_keep_cuts_every_thread_used_since_the_last_round(kind, tmp_path):
    with serving(kind, tmp_path, retention=ServerRetention(checkpoint_keep=2)) as served:
        client = get_sync_client(url=served.url)
        thread_id = client.threads.create()["thread_id"]
        for x in range(3):
            client.runs.wait(thread_id, "chain", input={"x": x})
        assert len(client.threads.get_history(thread_id, limit=100)) == 9

        assert sweep(served, hours=0).checkpoints_removed == 7

        history = client.threads.get_history(thread_id, limit=100)
        assert len(history) == 2 and history[0]["values"] == {"x": 13}
        assert sweep(served, hours=0).checkpoints_removed == 0  # not used since


def test_a_thread_with_a_run_in_progress_is_left_alone(served):
    client = get_sync_client(url=served.url)
    thread_id = client.threads.create(ttl={"ttl": 1})["thread_id"]
    run = client.runs.create(thread_id, "slow", input={"n": 0})
    deadline = time.monotonic() + 10
    while client.threads.get(thread_id)["status"] != "busy" and time.monotonic() < deadline:
        time.sleep(0.02)

    result = sweep(served, hours=2)

    assert result.threads_deleted == 0 and not gone(client, thread_id)
    client.runs.join(thread_id, run["run_id"])
    assert client.threads.get_state(thread_id)["values"]["n"] == 10
    assert sweep(served, hours=2).threads_deleted == 1


def test_a_deletion_cut_by_a_crash_is_finished_by_the_next_round(served):
    client = get_sync_client(url=served.url)
    thread_id = client.threads.create(ttl={"ttl": 60})["thread_id"]
    client.runs.wait(thread_id, "chain", input={"x": 1})
    sweeper = sweeper_of(served)
    later = datetime.now(UTC) + timedelta(hours=2)
    # the records are deleted (and the tombstone written); the process dies before the rest
    assert sweeper.ttls.claim(thread_id, later, ("delete", None), "delete") is not None
    assert gone(client, thread_id) and served.saver.get(thread_id) is not None

    result = sweep(served, hours=0)

    assert result.threads_deleted == 1 and served.saver.get(thread_id) is None
    assert sweeper.ttls.tombstones(10) == []


@pytest.mark.parametrize("runs", [0, 1])
def test_a_deleted_thread_two_sweepers_finish_at_once_is_counted_once(served, runs):
    """Each sweeper read the tombstone before either ended it: both delete what is left of the
    thread (nothing, for the second), and only the one that takes the tombstone counts it."""
    client = get_sync_client(url=served.url)
    thread_id = client.threads.create(ttl={"ttl": 60})["thread_id"]
    for _ in range(runs):
        client.runs.wait(thread_id, "chain", input={"x": 1})
    stored = checkpoints(served.saver, thread_id)
    sweeper = sweeper_of(served)
    later = datetime.now(UTC) + timedelta(hours=2)
    assert sweeper.ttls.claim(thread_id, later, ("delete", None), "delete") is not None

    first, second = SweepResult(), SweepResult()
    asyncio.run(sweeper._delete_checkpoints(thread_id, first))
    asyncio.run(sweeper._delete_checkpoints(thread_id, second))

    assert (first.threads_deleted, second.threads_deleted) == (1, 0)
    assert (first.checkpoints_removed, second.checkpoints_removed) == (stored, 0)
    assert (stored > 0) == (runs > 0)
    assert served.saver.get(thread_id) is None and sweeper.ttls.tombstones(10) == []


def test_a_ttl_that_makes_no_sense_is_a_422_naming_it(served):
    for ttl, named in (
        ({"ttl": 0}, "ttl.ttl"),
        ({"ttl": "soon"}, "ttl.ttl"),
        ({"ttl": 5, "strategy": "archive"}, "ttl.strategy"),
        (5, "JSON object"),
    ):
        answer = httpx.post(f"{served.url}/threads", json={"ttl": ttl})
        assert answer.status_code == 422 and named in answer.json()["detail"]


def test_the_async_client_creates_threads_with_a_ttl(served):
    async def create() -> str:
        client = get_client(url=served.url)
        thread = await client.threads.create(ttl={"ttl": 5, "strategy": "keep_latest"})
        return str(thread["thread_id"])

    thread_id = asyncio.run(create())
    assert sweeper_of(served).ttls.get(thread_id) == ("keep_latest", 5.0)


def test_the_sweeper_runs_in_the_background_on_the_server_s_clock(kind, tmp_path, monkeypatch):
    later = datetime.now(UTC) + timedelta(hours=2)
    monkeypatch.setattr(retention, "now", lambda: later)
    often = ServerRetention(sweep_minutes=0.005)  # every 0.3 s
    with serving(kind, tmp_path, retention=often) as served:
        client = get_sync_client(url=served.url)
        thread_id = client.threads.create(ttl={"ttl": 60})["thread_id"]
        deadline = time.monotonic() + 20
        while not gone(client, thread_id) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gone(client, thread_id)


def test_two_processes_sweeping_at_once_delete_each_thread_once(tmp_path):
    from graph_agent.checkpoint.postgres import PostgresSaver
    from graph_agent.serve.pg_records import PostgresRecords

    with serving("postgres", tmp_path) as served:
        client = get_sync_client(url=served.url)
        threads = [client.threads.create(ttl={"ttl": 60})["thread_id"] for _ in range(12)]
        for thread_id in threads[:4]:
            client.runs.wait(thread_id, "chain", input={"x": 1})
        dsn = served.saver.conninfo
        with PostgresSaver(dsn, pool_size=2) as saver:
            records = PostgresRecords(dsn, pool_size=2)
            try:
                # another process's sweeper: its own records and saver on the same database
                other = Sweeper(SimpleNamespace(records=records, saver=saver), ServerRetention())
                results: list[SweepResult] = []
                at = datetime.now(UTC) + timedelta(hours=2)
                rounds = [
                    threading.Thread(
                        target=lambda s=s: results.append(asyncio.run(s.sweep(at)))  # type: ignore[misc]
                    )
                    for s in (sweeper_of(served), other)
                ]
                for each in rounds:
                    each.start()
                for each in rounds:
                    each.join(60)
            finally:
                records.close()
        assert len(results) == 2
        assert all(gone(client, thread_id) for thread_id in threads)
        assert all(served.saver.get(thread_id) is None for thread_id in threads)
        assert sum(r.threads_deleted for r in results) + sweep(served, 0).threads_deleted == 12


def test_a_thread_made_again_under_a_deleted_one_s_id_does_not_inherit_its_ttl(served):
    client = get_sync_client(url=served.url)
    thread_id = client.threads.create(ttl={"ttl": 60})["thread_id"]
    client.threads.delete(thread_id)
    client.threads.create(thread_id=thread_id)  # no TTL of its own, none by default

    assert sweep(served, hours=2).threads_deleted == 0
    assert not gone(client, thread_id)
