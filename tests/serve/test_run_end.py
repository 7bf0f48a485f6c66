"""A run whose end the records refuse to write ends as ``error`` all the same, never left
``running`` with its thread busy: on the in-process runner (SQLite records) and on the
PostgreSQL queue."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from graph_agent.serve import Records
from graph_agent.serve.pg_records import Ending, PostgresRecords
from graph_agent.serve.records import RunStatus
from tests.serve.servers import KINDS, serving


class RefusingRecords(Records):
    """SQLite records whose disk fails as a run is recorded a success."""

    def set_run_status(self, run_id: str, status: RunStatus) -> None:
        if status == "success":
            raise sqlite3.OperationalError("disk I/O error")
        super().set_run_status(run_id, status)


class RefusingPostgresRecords(PostgresRecords):
    """PostgreSQL records that refuse a run's end as a success (as they refused an event a
    lone surrogate made unencodable)."""

    async def afinish_run(
        self, run_id: str, thread_id: str, status: RunStatus, *args: Any
    ) -> Ending:
        if status == "success":
            raise psycopg.DataError("PostgreSQL refused the end of the run")
        return await super().afinish_run(run_id, thread_id, status, *args)


REFUSING = {"sqlite": RefusingRecords, "postgres": RefusingPostgresRecords}


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_whose_end_cannot_be_recorded_ends_as_an_error_and_frees_its_thread(
    tmp_path: Path, kind: str
) -> None:
    with serving(kind, tmp_path, records=REFUSING[kind]) as server:
        thread_id = httpx.post(f"{server.url}/threads", json={}).json()["thread_id"]
        runs = f"{server.url}/threads/{thread_id}/runs"
        body = {"assistant_id": "chain", "input": {"x": 1}}
        answer = httpx.post(f"{runs}/wait", json=body, timeout=30)
        assert answer.status_code == 200
        assert "could not record how this run ended" in answer.json()["__error__"]["message"]
        run_id = httpx.get(runs).json()[0]["run_id"]
        assert httpx.get(f"{runs}/{run_id}").json()["status"] == "error"
        assert httpx.get(f"{server.url}/threads/{thread_id}").json()["status"] == "error"
        streamed = httpx.get(f"{runs}/{run_id}/stream", timeout=30).text
        assert "event: error" in streamed
        again = httpx.post(f"{runs}/wait", json=body, timeout=30)
        assert again.status_code == 200  # the thread is not left busy (a 409)
