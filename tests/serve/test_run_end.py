"""A run whose end the records refuse to write ends as ``error`` all the same, never left
``running`` with its thread busy: on the in-process runner (SQLite records) and on the
PostgreSQL queue. Its clients are told so in fixed words (what the database said goes to the
log), and on PostgreSQL the events it had not written yet are kept with its end."""

from __future__ import annotations

import asyncio
import logging
import re
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from graph_agent import END, START, StateGraph
from graph_agent.serve import Records, queue, queue_events
from graph_agent.serve.pg_records import Ending, PostgresRecords
from graph_agent.serve.records import RunStatus
from graph_agent.serve.runs import END_NOT_RECORDED
from tests.serve.graphs import chain
from tests.serve.servers import KINDS, serving

SECRET = "row (secret-4711) violates"
"""What the database says, quoting a value of the server's: never shown to clients."""


class RefusingRecords(Records):
    """SQLite records whose disk fails as a run is recorded a success."""

    def set_run_status(self, run_id: str, status: RunStatus, **more: Any) -> None:
        if status == "success":
            raise sqlite3.OperationalError(f"disk I/O error: {SECRET}")
        super().set_run_status(run_id, status, **more)


class RefusingPostgresRecords(PostgresRecords):
    """PostgreSQL records that refuse a run's end as a success (as they refused an event a
    lone surrogate made unencodable)."""

    async def afinish_run(
        self, run_id: str, thread_id: str, status: RunStatus, *args: Any
    ) -> Ending:
        if status == "success":
            raise psycopg.DataError(f"PostgreSQL refused the end of the run: {SECRET}")
        return await super().afinish_run(run_id, thread_id, status, *args)


class RefusingEventsPostgresRecords(PostgresRecords):
    """PostgreSQL records that refuse every event but the error event of a failed end."""

    async def afinish_run(
        self,
        run_id: str,
        thread_id: str,
        status: RunStatus,
        result: Any,
        claim: Any,
        thread_status: Any,
        events: Sequence[tuple[int, str, str]] = (),
    ) -> Ending:
        if any(event != "error" for _, event, _ in events):
            raise psycopg.DataError("PostgreSQL refused an event")
        end = (run_id, thread_id, status, result, claim, thread_status, events)
        return await super().afinish_run(*end)


REFUSING = {"sqlite": RefusingRecords, "postgres": RefusingPostgresRecords}


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_whose_end_cannot_be_recorded_ends_as_an_error_and_frees_its_thread(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, "graph_agent")
    with serving(kind, tmp_path, records=REFUSING[kind]) as server:
        thread_id = httpx.post(f"{server.url}/threads", json={}).json()["thread_id"]
        runs = f"{server.url}/threads/{thread_id}/runs"
        body = {"assistant_id": "chain", "input": {"x": 1}}
        answer = httpx.post(f"{runs}/wait", json=body, timeout=30)
        assert answer.status_code == 200
        error = answer.json()["__error__"]
        assert error == {"error": "RunEndNotRecorded", "message": END_NOT_RECORDED}
        run_id = httpx.get(runs).json()[0]["run_id"]
        assert httpx.get(f"{runs}/{run_id}").json()["status"] == "error"
        assert httpx.get(f"{server.url}/threads/{thread_id}").json()["status"] == "error"
        streamed = httpx.get(f"{runs}/{run_id}/stream", timeout=30).text
        assert "event: error" in streamed
        assert SECRET not in streamed
        again = httpx.post(f"{runs}/wait", json=body, timeout=30)
        assert again.status_code == 200  # the thread is not left busy (a 409)
    assert SECRET in caplog.text  # the server's log says why


def _runs_of_new_thread(url: str) -> str:
    thread_id = httpx.post(f"{url}/threads", json={}).json()["thread_id"]
    return f"{url}/threads/{thread_id}/runs"


def _events(streamed: str) -> list[tuple[int, str]]:
    """The ``(id, event)`` pairs of an SSE stream's text."""
    ids = [int(found) for found in re.findall(r"^id: (\d+)$", streamed, re.MULTILINE)]
    return list(zip(ids, re.findall(r"^event: (.+)$", streamed, re.MULTILINE), strict=True))


def test_a_refused_end_is_written_with_the_events_not_written_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that rejoins the run (or follows it from another process) reads every event
    from the table: the run's last ones, written with its end, are not lost with it."""
    monkeypatch.setattr(queue_events, "EVENT_BATCH_SECONDS", 3600.0)  # all wait for the end
    with serving("postgres", tmp_path, records=RefusingPostgresRecords) as server:
        runs = _runs_of_new_thread(server.url)
        body = {"assistant_id": "chain", "input": {"x": 1}, "stream_mode": ["values", "updates"]}
        answer = httpx.post(f"{runs}/wait", json=body, timeout=30)
        run_id = httpx.get(runs).json()[0]["run_id"]
        events = _events(httpx.get(f"{runs}/{run_id}/stream", timeout=30).text)
    kinds = [event for _, event in events]
    assert kinds[0] == "metadata" and kinds[-1] == "error"
    assert {"values", "updates"} <= set(kinds)
    assert [number for number, _ in events] == list(range(len(events)))  # no gap
    assert answer.json()["__error__"]["message"] == END_NOT_RECORDED


def test_events_the_records_refuse_do_not_keep_the_run_from_ending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_events, "EVENT_BATCH_SECONDS", 3600.0)
    with serving("postgres", tmp_path, records=RefusingEventsPostgresRecords) as server:
        runs = _runs_of_new_thread(server.url)
        body = {"assistant_id": "chain", "input": {"x": 1}}
        answer = httpx.post(f"{runs}/wait", json=body, timeout=30)
        assert answer.json()["__error__"]["message"] == END_NOT_RECORDED
        run_id = httpx.get(runs).json()[0]["run_id"]
        assert httpx.get(f"{runs}/{run_id}").json()["status"] == "error"
        streamed = httpx.get(f"{runs}/{run_id}/stream", timeout=30).text
    assert [event for _, event in _events(streamed)] == ["error"]


def stuck() -> StateGraph:
    """One node that awaits for 30 s: a run of it is cancelled while it runs."""
    graph = StateGraph("stuck")

    async def wait(state: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(30)
        return {"done": True}

    graph.add_node("wait", wait)
    graph.add_edge(START, "wait").add_edge("wait", END)
    return graph


def _failing(*args: object) -> Any:
    raise RuntimeError("the saver is gone")


@pytest.mark.parametrize(
    ("action", "broken"), [("interrupt", "thread_values"), ("rollback", "rollback_thread")]
)
def test_a_cancelled_run_whose_stop_fails_ends_as_an_error_and_frees_its_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, action: str, broken: str
) -> None:
    """On the PostgreSQL queue, stopping a cancelled run reads the thread (or takes it back):
    should that fail, the run is recorded ``error``, never left ``running``."""
    monkeypatch.setattr(queue, broken, _failing)
    with serving("postgres", tmp_path, targets=[stuck(), chain()]) as server:
        thread_id = httpx.post(f"{server.url}/threads", json={}).json()["thread_id"]
        runs = f"{server.url}/threads/{thread_id}/runs"
        run_id = httpx.post(runs, json={"assistant_id": "stuck", "input": {}}).json()["run_id"]
        deadline = time.monotonic() + 30
        while httpx.get(f"{runs}/{run_id}").json()["status"] != "running":
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.05)
        started = time.monotonic()
        cancel = httpx.post(f"{runs}/{run_id}/cancel?wait=1&action={action}", timeout=30)
        assert cancel.status_code in (200, 202, 204)
        assert time.monotonic() - started < 10
        assert httpx.get(f"{runs}/{run_id}").json()["status"] == "error"
        assert httpx.get(f"{server.url}/threads/{thread_id}").json()["status"] == "error"
        body = {"assistant_id": "chain", "input": {"x": 1}}
        assert httpx.post(f"{runs}/wait", json=body, timeout=30).json() == {"x": 12}
