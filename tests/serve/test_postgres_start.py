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
from graph_agent.serve.pg_records import Claim, PostgresRecords
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


def test_a_runs_end_is_the_commit_that_waits_for_the_disk(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The saver's checkpoints commit without waiting (``durability="normal"``); the run's
    end does wait, which writes them to disk with it: what a client is told of a run's end
    survives a crash of PostgreSQL. Its statement relaxes nothing, on connections that wait."""

    async def scenario() -> tuple[list[str], str]:
        records = PostgresRecords(dsn)
        await records.aopen()
        sent: list[str] = []
        execute = psycopg.AsyncConnection.execute

        async def seen(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            if query != GENERIC_PLANS:  # a new pooled connection's setup
                sent.append(str(query))
            return await execute(self, query, *args, **kwargs)

        try:
            monkeypatch.setattr(psycopg.AsyncConnection, "execute", seen)
            ending = await records.afinish_run(
                "r", "t", "success", {"x": 1}, Claim(worker=WORKER, attempt=1), "idle"
            )
            monkeypatch.undo()
            assert ending == "deleted"  # no such run: the statement ran all the same
            setting = (await records._arun("SHOW synchronous_commit"))[0][0]
        finally:
            await records.aclose()
            records.close()
        return sent, setting

    sent, setting = asyncio.run(scenario())
    assert len(sent) == 1 and "UPDATE graph_agent_serve_runs" in sent[0]
    assert "synchronous_commit" not in sent[0] and setting == "on"
