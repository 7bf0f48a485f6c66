"""A run's start on PostgreSQL is one statement (one round trip), whatever the thread holds:
the thread's lock, its unfinished runs read under it, the thread's record, the runs a
multitask strategy stops and the run itself, in one transaction."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from graph_agent.checkpoint.postgres_driver import GENERIC_PLANS
from graph_agent.serve.pg_records import PostgresRecords
from graph_agent.serve.records import ThreadRecord, now
from graph_agent.serve.runs import RunRequest, new_run_record
from tests.checkpoint.postgres_db import fresh_schema

WORKER = 0x5151_0003


@pytest.fixture
def dsn() -> Iterator[str]:
    with fresh_schema() as schema_dsn:
        yield schema_dsn


def _statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The first word of each statement async connections send from now on (a pipeline's
    statements each count), but for the ``SET`` that configures a new pooled connection."""
    sent: list[str] = []
    execute = psycopg.AsyncConnection.execute

    async def counted(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if query != GENERIC_PLANS:
            sent.append(str(query).split()[0])
        return await execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", counted)
    return sent


def test_a_runs_start_is_one_statement_on_a_new_thread_and_behind_another_run(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        records = PostgresRecords(dsn)
        await records.aopen()
        try:
            sent = _statements(monkeypatch)
            stamp = now()
            thread = ThreadRecord(thread_id="t", created_at=stamp, updated_at=stamp)
            first = new_run_record("t", RunRequest(assistant_id="a"))
            started = await records.astart_run(first, "{}", thread=thread, worker=WORKER)
            assert (started.started, started.claimed, started.before) == (True, True, [])
            assert first.status == "running" and thread.status == "busy"
            assert sent == ["SELECT"]

            queued = new_run_record("t", RunRequest(assistant_id="a", multitask_strategy="enqueue"))
            started = await records.astart_run(queued, "{}", worker=WORKER)
            assert (started.started, started.claimed) == (True, False)
            assert started.before == [first.run_id]
            refused = new_run_record("t", RunRequest(assistant_id="a"))
            started = await records.astart_run(refused, "{}", worker=WORKER)
            assert not started.started and started.before == [queued.run_id, first.run_id]
            assert sent == ["SELECT"] * 3
            monkeypatch.undo()
            assert records.run("t", refused.run_id) is None
            stored = records.run("t", queued.run_id)
            assert stored is not None and stored.status == "pending"
            assert records.unfinished_runs("t") == [queued.run_id, first.run_id]
            stored_thread = records.thread("t")
            assert stored_thread is not None and stored_thread.status == "busy"
        finally:
            await records.aclose()
            records.close()

    asyncio.run(scenario())


def test_the_records_connections_plan_a_statement_once_not_at_each_execution(dsn: str) -> None:
    async def modes() -> list[str]:
        records = PostgresRecords(dsn)
        await records.aopen()
        try:
            found = [records._run("SHOW plan_cache_mode")[0][0]]
            found.append((await records._arun("SHOW plan_cache_mode"))[0][0])
        finally:
            await records.aclose()
            records.close()
        return found

    assert asyncio.run(modes()) == ["force_generic_plan", "force_generic_plan"]
