"""Crons through langgraph-sdk's ``client.crons`` (sync and async), on SQLite and PostgreSQL,
with the scheduler's clock moved by the test (``graph_agent.serve.crons_schedule.now``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from httpx import HTTPStatusError
from langgraph_sdk import get_client, get_sync_client

from graph_agent.serve import crons_schedule
from graph_agent.serve.records import RunRecord
from tests.serve.servers import KINDS, Served, serving

START = datetime(2030, 1, 7, 12, 0, 30, tzinfo=UTC)  # a Monday, half a minute past noon


class Clock:
    """The scheduler's clock, moved by hand."""

    def __init__(self) -> None:
        self.moment = START

    def __call__(self) -> datetime:
        return self.moment

    def advance(self, **delta: float) -> None:
        self.moment += timedelta(**delta)


@pytest.fixture(scope="module")
def clock() -> Iterator[Clock]:
    moved = Clock()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(crons_schedule, "now", moved)
        patch.setattr(crons_schedule, "CHECK_SECONDS", 0.05)
        yield moved


@pytest.fixture(scope="module", params=KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, clock: Clock
) -> Iterator[Served]:
    # the crons' webhooks go to loopback (a run refuses a host the server does not allow)
    folder = tmp_path_factory.mktemp("crons")
    with serving(request.param, folder, webhook_allow=["127.0.0.1"]) as running:
        yield running


def test_a_cron_whose_webhook_host_is_not_allowed_is_a_422(served: Served) -> None:
    client = get_sync_client(url=served.url)
    with pytest.raises(HTTPStatusError) as refused:
        client.crons.create("chain", schedule="*/5 * * * *", webhook="http://10.0.0.7/hook")
    assert refused.value.response.status_code == 422
    assert "10.0.0.7" in refused.value.response.text
    assert "--webhook-allow" in refused.value.response.text
    kept = client.crons.search(assistant_id="chain", limit=100)
    assert all(cron["payload"].get("webhook") != "http://10.0.0.7/hook" for cron in kept)


def cron_runs(served: Served, cron_id: str) -> list[RunRecord]:
    """The runs the cron started, on every thread the records hold."""
    return [
        run
        for thread in served.records.threads()
        for run in served.records.runs(thread.thread_id, limit=1000, offset=0)
        if run.metadata.get("cron_id") == cron_id
    ]


def wait_for(check: Callable[[], Any], timeout: float = 20.0) -> Any:
    """``check()``'s first true value, asked until ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"not so after {timeout} s")


def test_a_stateless_cron_is_answered_in_langgraphs_shape(served: Served, clock: Clock) -> None:
    client = get_sync_client(url=served.url)
    cron = client.crons.create(
        "chain",
        schedule="*/5 * * * *",
        input={"x": 1},
        metadata={"team": "a"},
        webhook="http://127.0.0.1:9/hook",
        interrupt_after=["first"],
        multitask_strategy="enqueue",
    )
    assert set(cron) >= {
        "cron_id",
        "assistant_id",
        "thread_id",
        "user_id",
        "schedule",
        "timezone",
        "payload",
        "metadata",
        "on_run_completed",
        "end_time",
        "next_run_date",
        "enabled",
        "created_at",
        "updated_at",
    }
    assert cron["assistant_id"] == "chain" and cron["thread_id"] is None
    assert cron["on_run_completed"] == "delete" and cron["enabled"] is True
    assert cron["metadata"] == {"team": "a"}
    assert cron["payload"]["input"] == {"x": 1}
    assert cron["payload"]["webhook"] == "http://127.0.0.1:9/hook"
    assert cron["payload"]["interrupt_after"] == ["first"]
    assert cron["payload"]["multitask_strategy"] == "enqueue"
    nxt = datetime.fromisoformat(cron["next_run_date"])
    minute = clock.moment.replace(second=0, microsecond=0)
    assert nxt == minute + timedelta(minutes=5 - minute.minute % 5)
    client.crons.delete(cron["cron_id"])


def test_a_thread_cron_starts_one_run_per_due_time(served: Served, clock: Clock) -> None:
    client = get_sync_client(url=served.url)
    thread_id = client.threads.create()["thread_id"]
    cron = client.crons.create_for_thread(
        thread_id, "chain", schedule="* * * * *", input={"x": 1}, multitask_strategy="enqueue"
    )
    assert cron["thread_id"] == thread_id and cron["on_run_completed"] is None
    time.sleep(0.3)  # rounds that find nothing due start nothing
    assert cron_runs(served, cron["cron_id"]) == []
    clock.advance(minutes=1)
    first = wait_for(lambda: cron_runs(served, cron["cron_id"]))
    client.runs.join(thread_id, first[0].run_id)
    assert client.threads.get_state(thread_id)["values"] == {"x": 12}
    time.sleep(0.3)
    assert len(cron_runs(served, cron["cron_id"])) == 1
    clock.advance(minutes=1)
    wait_for(lambda: len(cron_runs(served, cron["cron_id"])) == 2)
    time.sleep(0.3)
    runs = cron_runs(served, cron["cron_id"])
    assert len(runs) == 2 and {run.thread_id for run in runs} == {thread_id}
    client.crons.delete(cron["cron_id"])


def test_a_stateless_crons_thread_is_deleted_after_its_run_or_kept(
    served: Served, clock: Clock
) -> None:
    client = get_sync_client(url=served.url)
    gone = client.crons.create("slow", schedule="* * * * *", input={"n": 0})
    kept = client.crons.create(
        "chain", schedule="* * * * *", input={"x": 5}, on_run_completed="keep"
    )
    clock.advance(minutes=1)
    running = wait_for(lambda: cron_runs(served, gone["cron_id"]))
    kept_run = wait_for(lambda: cron_runs(served, kept["cron_id"]))[0]
    client.crons.delete(gone["cron_id"])
    client.crons.delete(kept["cron_id"])
    wait_for(lambda: not cron_runs(served, gone["cron_id"]))
    with pytest.raises(HTTPStatusError) as missing:
        client.threads.get(running[0].thread_id)
    assert missing.value.response.status_code == 404
    client.runs.join(kept_run.thread_id, kept_run.run_id)
    assert client.threads.get_state(kept_run.thread_id)["values"] == {"x": 16}


def test_search_count_update_and_delete_through_the_async_client(
    served: Served, clock: Clock
) -> None:
    async def scenario() -> None:
        client = get_client(url=served.url)
        thread_id = (await client.threads.create())["thread_id"]
        made = [
            await client.crons.create("chain", schedule="0 9 * * *", metadata={"n": n})
            for n in range(3)
        ]
        on_thread = await client.crons.create_for_thread(
            thread_id, "chain", schedule="0 10 * * *", input={"x": 0}
        )
        ids = {cron["cron_id"] for cron in [*made, on_thread]}
        found = await client.crons.search(limit=100)
        assert ids <= {cron["cron_id"] for cron in found}
        assert [c["cron_id"] for c in await client.crons.search(thread_id=thread_id)] == [
            on_thread["cron_id"]
        ]
        assert await client.crons.count(thread_id=thread_id) == 1
        assert await client.crons.count(metadata={"n": 1}) == 1
        page = await client.crons.search(
            metadata={"n": 2}, select=["schedule"], sort_by="created_at", sort_order="asc"
        )
        assert page == [{"cron_id": made[2]["cron_id"], "schedule": "0 9 * * *"}]
        updated = await client.crons.update(
            made[0]["cron_id"],
            schedule="30 8 * * *",
            timezone="Europe/Paris",
            enabled=False,
            input={"x": 3},
        )
        assert updated["schedule"] == "30 8 * * *" and updated["timezone"] == "Europe/Paris"
        assert updated["enabled"] is False and updated["payload"]["input"] == {"x": 3}
        # 08:30 in Paris (UTC+1 in January) is 07:30 UTC, the next morning after 12:00 UTC
        nxt = datetime.fromisoformat(updated["next_run_date"])
        assert nxt == (clock.moment + timedelta(days=1)).replace(hour=7, minute=30, second=0)
        assert made[0]["cron_id"] not in {
            c["cron_id"] for c in await client.crons.search(enabled=True, limit=100)
        }
        for cron_id in ids:
            await client.crons.delete(cron_id)
        assert await client.crons.count(thread_id=thread_id) == 0
        with pytest.raises(HTTPStatusError) as missing:
            await client.crons.delete(on_thread["cron_id"])
        assert missing.value.response.status_code == 404

    asyncio.run(scenario())


def test_a_cron_in_a_time_zone_follows_its_local_time(served: Served, clock: Clock) -> None:
    client = get_sync_client(url=served.url)
    cron = client.crons.create("chain", schedule="0 9 * * 1-5", timezone="America/New_York")
    # Monday 12:00 UTC is 07:00 in New York: today 09:00 there, 14:00 UTC
    assert datetime.fromisoformat(cron["next_run_date"]) == clock.moment.replace(
        hour=14, minute=0, second=0
    )
    client.crons.delete(cron["cron_id"])


def test_end_time_stops_the_runs(served: Served, clock: Clock) -> None:
    client = get_sync_client(url=served.url)
    thread_id = client.threads.create()["thread_id"]
    cron = client.crons.create_for_thread(
        thread_id,
        "chain",
        schedule="* * * * *",
        input={"x": 0},
        multitask_strategy="enqueue",
        end_time=clock.moment + timedelta(seconds=45),
    )
    clock.advance(minutes=1)
    wait_for(lambda: cron_runs(served, cron["cron_id"]))
    found = wait_for(lambda: client.crons.search(thread_id=thread_id))
    assert found[0]["next_run_date"] is None
    clock.advance(minutes=1)
    time.sleep(0.3)
    assert len(cron_runs(served, cron["cron_id"])) == 1
    client.crons.delete(cron["cron_id"])


@pytest.mark.parametrize(
    ("fields", "detail"),
    [
        ({"schedule": "* * * *"}, "is not a cron expression of 5 fields"),
        ({"schedule": "61 * * * *"}, "cannot be read: Bad minute"),
        ({"schedule": "* * * * *", "timezone": "Mars/Olympus"}, "'Mars/Olympus' is no IANA"),
        ({"schedule": "* * * * *", "end_time": "tomorrow"}, "end_time 'tomorrow' is no ISO"),
        ({"schedule": "* * * * *", "end_time": "2000-01-01T00:00:00Z"}, "is not in the future"),
        ({"schedule": 5}, "schedule must be a string"),
        ({"schedule": "* * * * *", "on_run_completed": "drop"}, "on_run_completed must be"),
        ({"schedule": "* * * * *", "interrupt_before": ["nowhere"]}, "nowhere"),
    ],
)
def test_a_bad_cron_is_a_422_naming_what_is_wrong(
    served: Served, fields: dict[str, Any], detail: str
) -> None:
    http = get_sync_client(url=served.url).http
    with pytest.raises(HTTPStatusError) as refused:
        http.post("/runs/crons", json={"assistant_id": "chain", **fields})
    assert refused.value.response.status_code == 422
    assert detail in refused.value.response.json()["detail"]


def test_a_cron_of_an_unknown_assistant_or_thread_is_a_404(served: Served) -> None:
    client = get_sync_client(url=served.url)
    with pytest.raises(HTTPStatusError) as unknown:
        client.crons.create("nope", schedule="* * * * *")
    assert unknown.value.response.status_code == 404
    with pytest.raises(HTTPStatusError) as no_thread:
        client.crons.create_for_thread("no-such-thread", "chain", schedule="* * * * *")
    assert no_thread.value.response.status_code == 404


def test_a_bad_update_is_a_422_and_changes_nothing(served: Served) -> None:
    client = get_sync_client(url=served.url)
    cron = client.crons.create("chain", schedule="0 9 * * *")
    for change in ({"schedule": "nope"}, {"timezone": "Nowhere/Land"}):
        with pytest.raises(HTTPStatusError) as refused:
            client.crons.update(cron["cron_id"], **change)
        assert refused.value.response.status_code == 422
    assert (
        client.crons.search(select=["schedule", "timezone"], limit=100).count(
            {"cron_id": cron["cron_id"], "schedule": "0 9 * * *", "timezone": None}
        )
        == 1
    )
    client.crons.delete(cron["cron_id"])


@pytest.fixture(scope="module", params=KINDS)
def keyed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, clock: Clock
) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("crons-keyed")
    with serving(request.param, folder, api_keys=["key-a", "key-b"]) as running:
        yield running


def test_a_key_never_sees_nor_changes_another_keys_crons_and_their_threads(
    keyed: Served, clock: Clock
) -> None:
    alice = get_sync_client(url=keyed.url, api_key="key-a")
    bob = get_sync_client(url=keyed.url, api_key="key-b")
    cron = alice.crons.create(
        "chain", schedule="* * * * *", input={"x": 1}, on_run_completed="keep"
    )
    assert cron["user_id"] is not None
    assert cron["cron_id"] in {c["cron_id"] for c in alice.crons.search(limit=100)}
    assert cron["cron_id"] not in {c["cron_id"] for c in bob.crons.search(limit=100)}
    assert bob.crons.count() == 0
    for attempt in (
        lambda: bob.crons.delete(cron["cron_id"]),
        lambda: bob.crons.update(cron["cron_id"], enabled=False),
    ):
        with pytest.raises(HTTPStatusError) as hidden:
            attempt()
        assert hidden.value.response.status_code == 404
    thread_id = alice.threads.create()["thread_id"]
    with pytest.raises(HTTPStatusError) as not_bobs:
        bob.crons.create_for_thread(thread_id, "chain", schedule="* * * * *")
    assert not_bobs.value.response.status_code == 404
    clock.advance(minutes=1)
    (run,) = wait_for(lambda: cron_runs(keyed, cron["cron_id"]))
    assert alice.threads.get(run.thread_id)["thread_id"] == run.thread_id
    with pytest.raises(HTTPStatusError) as hidden_thread:
        bob.threads.get(run.thread_id)
    assert hidden_thread.value.response.status_code == 404
    alice.crons.delete(cron["cron_id"])


def test_a_disabled_cron_starts_nothing_until_enabled(served: Served, clock: Clock) -> None:
    client = get_sync_client(url=served.url)
    thread_id = client.threads.create()["thread_id"]
    cron = client.crons.create_for_thread(
        thread_id, "chain", schedule="* * * * *", input={"x": 0}, enabled=False
    )
    clock.advance(minutes=1)
    time.sleep(0.3)
    assert cron_runs(served, cron["cron_id"]) == []
    client.crons.update(cron["cron_id"], enabled=True)
    clock.advance(minutes=1)
    wait_for(lambda: cron_runs(served, cron["cron_id"]))
    client.crons.delete(cron["cron_id"])


def test_a_crons_thread_deleted_takes_the_cron_with_it_at_its_due_time(
    served: Served, clock: Clock
) -> None:
    client = get_sync_client(url=served.url)
    thread_id = client.threads.create()["thread_id"]
    cron = client.crons.create_for_thread(thread_id, "chain", schedule="* * * * *")
    client.threads.delete(thread_id)
    clock.advance(minutes=1)
    wait_for(lambda: client.crons.count(thread_id=thread_id) == 0)
    assert cron_runs(served, cron["cron_id"]) == []
