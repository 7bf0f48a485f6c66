"""Webhook deliveries survive the process that was making them, on SQLite and PostgreSQL: a
delivery whose process was killed while sending (its row claimed, its lease lapsed) is sent again
by the server with the same ``webhook-id``, and a run whose process was killed before it wrote
its webhook's payload has it filled from the run's record."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph_sdk import get_sync_client

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
    folder = tmp_path_factory.mktemp("durable-webhooks")
    with serving(request.param, folder, webhook_allow=["127.0.0.1"]) as running:
        yield running


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


def _delivery(served: Served, thread_id: str, run_id: str) -> dict[str, Any]:
    client = get_sync_client(url=served.url, api_key=None)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = client.runs.get(thread_id, run_id)["metadata"].get("webhook_delivery", {})
        if found.get("status") == "delivered":
            return dict(found)
        time.sleep(0.05)
    raise AssertionError("the webhook was not delivered")


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
    delivery = _delivery(served, thread_id, run_id)
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
    assert _delivery(served, thread_id, run_id)["attempts"] == 1
    (got,) = receiver.for_run(run_id)
    assert got.body["thread_id"] == thread_id and got.body["status"] == "success"
    if isinstance(served.records, PostgresRecords):  # the run's row keeps its result
        assert got.body["values"] == {"x": 12}
