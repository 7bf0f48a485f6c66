"""Runs' webhooks through ``langgraph_sdk`` (``webhook=URL``) against a receiver on 127.0.0.1, on
SQLite and PostgreSQL: the final record is POSTed once the run ends, tried again after a 5xx,
given up after the last attempt (shown in the run's record), and a host the server does not
allow is a 422 naming it and ``--webhook-allow``. Deliveries survive the process making them: one
whose process was killed while sending (its row claimed, its lease lapsed) is sent again with
the same ``webhook-id``, and a run whose process was killed before it wrote its webhook's payload
has it filled from the run's record."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client

from graph_agent.serve import webhooks_outbox
from graph_agent.serve.pg_records import PostgresRecords
from graph_agent.serve.records import Records
from tests.serve.servers import KINDS, Served, serving
from tests.serve.webhook_receiver import Receiver, receiving


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with receiving() as running:
        yield running


@pytest.fixture(scope="module", params=KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    from graph_agent.serve.webhooks import WebhookRetry

    folder = tmp_path_factory.mktemp("webhooks")
    with serving(request.param, folder, webhook_allow=["127.0.0.1"]) as running:
        webhooks = running.app.state.api.webhooks
        webhooks.retry = WebhookRetry(attempts=3, first_delay=0.05, factor=1.0, timeout=5.0)
        yield running


@pytest.fixture(autouse=True)
def _fresh(receiver: Receiver) -> None:
    with receiver.lock:
        receiver.got.clear()
        receiver.statuses.clear()
        receiver.always = None


def _delivery(served: Served, thread_id: str, run_id: str, status: str) -> dict[str, Any]:
    """The run's ``metadata.webhook_delivery`` once it says ``status``."""
    client = get_sync_client(url=served.url, api_key=None)
    deadline = time.monotonic() + 20
    found: dict[str, Any] = {}
    while time.monotonic() < deadline:
        found = client.runs.get(thread_id, run_id)["metadata"].get("webhook_delivery", {})
        if found.get("status") == status:
            return found
        time.sleep(0.05)
    raise AssertionError(f"the run's webhook_delivery is {found}, not {status}")


def test_a_run_that_ends_posts_its_final_record_to_the_webhook(
    served: Served, receiver: Receiver
) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    thread = client.threads.create()
    run = client.runs.create(
        thread["thread_id"], "chain", input={"x": 1}, webhook=receiver.url + "?token=s3cret"
    )
    (got,) = receiver.wait_for(1)
    assert got.path == "/hook?token=s3cret"
    assert got.headers["webhook-id"] == run["run_id"]
    assert got.headers["content-type"] == "application/json"
    body = got.body
    assert body["run_id"] == run["run_id"] and body["thread_id"] == thread["thread_id"]
    assert body["assistant_id"] == "chain" and body["status"] == "success"
    assert body["values"] == {"x": 12}
    assert "error" not in body
    assert {"run_started_at", "run_ended_at", "webhook_sent_at", "kwargs"} <= set(body)
    delivery = _delivery(served, thread["thread_id"], run["run_id"], "delivered")
    assert delivery["attempts"] == 1 and delivery["http_status"] == 200
    assert "s3cret" not in delivery["url"]  # no query string in the record


def test_a_5xx_is_tried_again_with_the_same_id_until_it_is_taken(
    served: Served, receiver: Receiver
) -> None:
    receiver.statuses[:] = [500, 503]
    client = get_sync_client(url=served.url, api_key=None)
    thread = client.threads.create()
    run = client.runs.create(thread["thread_id"], "chain", input={"x": 5}, webhook=receiver.url)
    got = receiver.wait_for(3)
    assert len(got) == 3
    assert {item.headers["webhook-id"] for item in got} == {run["run_id"]}
    assert all(item.body["values"] == {"x": 16} for item in got)
    delivery = _delivery(served, thread["thread_id"], run["run_id"], "delivered")
    assert delivery["attempts"] == 3
    time.sleep(0.7)  # a delivered webhook is never sent again
    assert len(receiver.for_run(run["run_id"])) == 3


def test_a_webhook_that_keeps_failing_is_given_up_and_shown_on_the_run(
    served: Served, receiver: Receiver
) -> None:
    receiver.always = 500
    client = get_sync_client(url=served.url, api_key=None)
    thread = client.threads.create()
    run = client.runs.create(thread["thread_id"], "chain", input={"x": 1}, webhook=receiver.url)
    delivery = _delivery(served, thread["thread_id"], run["run_id"], "failed")
    assert delivery["attempts"] == 3
    assert delivery["error"] == "answered HTTP 500"
    time.sleep(0.7)
    assert len(receiver.for_run(run["run_id"])) == 3  # the retry plan's attempts, no more


def test_a_4xx_is_not_tried_again(served: Served, receiver: Receiver) -> None:
    receiver.always = 404
    client = get_sync_client(url=served.url, api_key=None)
    thread = client.threads.create()
    run = client.runs.create(thread["thread_id"], "chain", input={"x": 1}, webhook=receiver.url)
    delivery = _delivery(served, thread["thread_id"], run["run_id"], "failed")
    assert delivery["attempts"] == 1 and delivery["http_status"] == 404


def test_a_failed_run_sends_its_error(served: Served, receiver: Receiver) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    thread = client.threads.create()
    run = client.runs.create(thread["thread_id"], "chain", input={"x": "1"}, webhook=receiver.url)
    (got,) = receiver.wait_for(1)
    assert got.body["run_id"] == run["run_id"] and got.body["status"] == "error"
    assert got.body["values"] is None
    assert got.body["error"]["error"] == "TypeError"


def test_stateless_runs_and_an_interrupted_run_send_theirs(
    served: Served, receiver: Receiver
) -> None:
    async def scenario() -> None:
        client = get_client(url=served.url, api_key=None)
        answer = await client.runs.wait(None, "chain", input={"x": 2}, webhook=receiver.url)
        assert answer == {"x": 13}
        background = await client.runs.create(
            None, "chain", input={"x": 3}, webhook=receiver.url, on_completion="keep"
        )
        thread = await client.threads.create()
        paused = await client.runs.create(
            thread["thread_id"], "approval", input={"question": "ok?"}, webhook=receiver.url
        )
        got = receiver.wait_for(3)
        by_run = {item.body["run_id"]: item.body for item in got}
        assert by_run[background["run_id"]]["values"] == {"x": 14}
        assert any(body["values"] == {"x": 13} for body in by_run.values())  # runs.wait's
        interrupted = by_run[paused["run_id"]]
        assert interrupted["status"] == "success"
        assert interrupted["values"]["__interrupt__"][0]["value"] == {"approve": "reply to ok?"}

    asyncio.run(scenario())


def test_each_run_of_a_batch_sends_its_own(served: Served, receiver: Receiver) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    runs = client.runs.create_batch(
        [
            {"assistant_id": "chain", "input": {"x": 1}, "webhook": receiver.url},
            {"assistant_id": "chain", "input": {"x": 2}, "webhook": receiver.url},
        ]
    )
    got = receiver.wait_for(2)
    assert {item.body["run_id"] for item in got} == {run["run_id"] for run in runs}
    assert sorted(item.body["values"]["x"] for item in got) == [12, 13]


def test_a_host_not_allowed_is_refused_at_creation_naming_it(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    thread = client.threads.create()
    for call in (
        lambda hook: client.runs.create(thread["thread_id"], "chain", input={"x": 1}, webhook=hook),
        lambda hook: client.runs.wait(None, "chain", input={"x": 1}, webhook=hook),
        lambda hook: list(client.runs.stream(None, "chain", input={"x": 1}, webhook=hook)),
    ):
        with pytest.raises(httpx.HTTPStatusError) as caught:
            call("http://169.254.169.254/latest/meta-data")
        assert caught.value.response.status_code == 422
        detail = caught.value.response.json()["detail"]
        assert "'169.254.169.254'" in detail and "--webhook-allow" in detail
    with pytest.raises(httpx.HTTPStatusError) as scheme:
        client.runs.create(thread["thread_id"], "chain", input={"x": 1}, webhook="file:///etc")
    assert scheme.value.response.status_code == 422
    assert client.runs.list(thread["thread_id"]) == []  # nothing was started


@pytest.mark.parametrize("kind", ["sqlite"])
def test_a_server_allowing_no_host_refuses_every_webhook(kind: str, tmp_path: Path) -> None:
    with serving(kind, tmp_path) as running:
        assert running.app.state.api.webhooks is None  # no outbox, no job
        client = get_sync_client(url=running.url, api_key=None)
        with pytest.raises(httpx.HTTPStatusError) as caught:
            client.runs.wait(None, "chain", input={"x": 1}, webhook="http://127.0.0.1:9/hook")
        assert caught.value.response.status_code == 422
        assert "--webhook-allow" in caught.value.response.json()["detail"]
        assert client.runs.wait(None, "chain", input={"x": 1}) == {"x": 12}


def _sql(served: Served, sqlite: str, postgres: str, args: tuple[Any, ...]) -> None:
    """Write the outbox behind the server's back, as a killed process left it."""
    records = served.records
    if isinstance(records, Records):
        records._run(sqlite, args)
        return
    import psycopg

    assert isinstance(records, PostgresRecords)
    with psycopg.connect(records.dsn, autocommit=True) as conn:
        conn.execute(postgres, args)


def _ended_run(served: Served) -> tuple[str, str]:
    client = get_sync_client(url=served.url, api_key=None)
    thread = client.threads.create()
    run = client.runs.create(thread["thread_id"], "chain", input={"x": 1})
    client.runs.join(thread["thread_id"], run["run_id"])
    return thread["thread_id"], run["run_id"]


def test_a_delivery_cut_by_a_killed_process_is_sent_again(
    served: Served, receiver: Receiver
) -> None:
    thread_id, run_id = _ended_run(served)
    payload = json.dumps({"run_id": run_id, "thread_id": thread_id, "status": "success"})
    # claimed for its first attempt by a process killed while sending: its lease lapsed
    _sql(
        served,
        "INSERT INTO webhooks (run_id, url, payload, state, attempts, next_at, created_at) "
        "VALUES (?, ?, ?, 'sending', 1, 0, 0)",
        "INSERT INTO graph_agent_serve_webhooks (run_id, url, payload, state, attempts, "
        "next_at, created_at) VALUES (%s, %s, %s, 'sending', 1, now() - interval '1 minute', "
        "now())",
        (run_id, receiver.url, payload),
    )
    delivery = _delivery(served, thread_id, run_id, "delivered")
    assert delivery["attempts"] == 2
    (got,) = receiver.for_run(run_id)
    assert got.headers["webhook-id"] == run_id and got.body["status"] == "success"


def test_a_run_ended_without_its_payload_has_it_filled_from_its_record(
    served: Served, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(webhooks_outbox, "END_GRACE_SECONDS", 0.0)
    thread_id, run_id = _ended_run(served)
    # written as the run was created; the process running it was killed before its end
    _sql(
        served,
        "INSERT INTO webhooks (run_id, url, state, next_at, created_at) "
        "VALUES (?, ?, 'waiting', 0, 0)",
        "INSERT INTO graph_agent_serve_webhooks (run_id, url, state, next_at, created_at) "
        "VALUES (%s, %s, 'waiting', now(), now())",
        (run_id, receiver.url),
    )
    assert _delivery(served, thread_id, run_id, "delivered")["attempts"] == 1
    (got,) = receiver.for_run(run_id)
    assert got.body["thread_id"] == thread_id and got.body["status"] == "success"
    if isinstance(served.records, PostgresRecords):  # the run's row keeps its result
        assert got.body["values"] == {"x": 12}
