"""A PostgreSQL worker's claims carry a heartbeat besides its session's advisory lock: a worker
that falls silent (frozen, hung behind a live connection, cut off before PostgreSQL noticed)
has its runs claimed again by another after ``worker_timeout``, and whatever it writes once
it wakes is refused.

The records' side on a fresh schema (a live connection stands for the silent worker's
session: its lock stays held throughout), then real ``graph-agent serve`` processes, one
frozen with SIGSTOP mid-run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psycopg
import pytest
from langgraph_sdk import get_sync_client

from graph_agent import END, START, CompileConfig, StateGraph
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.checkpoint.postgres import AsyncPostgresSaver
from graph_agent.cli.main import main
from graph_agent.graph.errors import GraphSetupError
from graph_agent.serve import pg_records, queue, queue_events
from graph_agent.serve.pg_records import Claim, PostgresRecords
from graph_agent.serve.queue import QueueRunner, RemoteRun, _LocalRun
from graph_agent.serve.queue_events import ATTEMPT_EVENT_IDS, first_event_id
from graph_agent.serve.records import ThreadRecord, now
from graph_agent.serve.runs import ActiveRun, RunRequest, new_run_record
from tests.checkpoint.postgres_db import admin, fresh_schema
from tests.serve.conftest import free_port, wait_until_up
from tests.serve.graphs import chain
from tests.serve.test_postgres_follow import notifier

ROOT = Path(__file__).resolve().parents[2]
SILENT, OTHER = 0x5151_0001, 0x5151_0002  # two workers' tokens (their advisory lock keys)
T = TypeVar("T")


@pytest.fixture
def dsn() -> Iterator[str]:
    with fresh_schema() as schema_dsn:
        yield schema_dsn


async def _within(seconds: float, awaitable: Awaitable[T], what: str) -> T:
    """What ``awaitable`` returns, or the test fails naming ``what`` did not happen. Awaited in
    a task of its own: a cancel (as a timeout's) reaching code that swallows it would let a
    hang pass unnoticed."""
    task = asyncio.ensure_future(awaitable)
    done, _ = await asyncio.wait([task], timeout=seconds)
    if not done:
        task.cancel()
        pytest.fail(f"waited {seconds} s for {what}: it did not happen")
    return task.result()


def _rows(dsn: str, sql: str, *args: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql, args).fetchall()


async def _claimed_by_silent_worker(records: PostgresRecords) -> str:
    """A run claimed by SILENT (attempt 1), whose session stays alive: its lock is held."""
    await records.aopen()
    stamp = now()
    thread = ThreadRecord(thread_id="t1", created_at=stamp, updated_at=stamp)
    run = new_run_record("t1", RunRequest(assistant_id="slow"))
    await records.astart_run(run, "{}", thread=thread)
    claimed = await records.aclaim(SILENT)
    assert claimed is not None and claimed[2] == 1
    return run.run_id


def test_a_silent_workers_claim_is_taken_over_although_its_session_lives(dsn: str) -> None:
    sessions = [psycopg.connect(dsn, autocommit=True) for _ in (SILENT, OTHER)]
    for session, key in zip(sessions, (SILENT, OTHER), strict=True):  # both alive throughout
        session.execute("SELECT pg_advisory_lock(%s)", (key,))

    async def scenario() -> dict[str, Any]:
        silent = PostgresRecords(dsn, worker_timeout=0.2)  # its claims say: 0.2 s per beat
        other = PostgresRecords(dsn)
        await other.aopen()
        try:
            run_id = await _claimed_by_silent_worker(silent)
            seen: dict[str, Any] = {"fresh": await other.aupkeep(OTHER, [])}
            await asyncio.sleep(0.3)  # past its heartbeat's deadline, and no beat came
            seen["stale"] = await other.aupkeep(OTHER, [])
            claimed = await other.aclaim(OTHER)
            seen["attempt"] = claimed[2] if claimed else None
            stale = Claim(worker=SILENT, attempt=1)  # what the silent worker writes on waking
            await silent.aadd_events(run_id, [(5, "values", '{"n":99}')], stale)
            seen["finished"] = await silent.afinish_run(
                run_id, "t1", "success", {"n": 99}, stale, "idle", [(6, "end", "{}")]
            )
            await silent.arolled_back(run_id, "t1", stale)
            seen["silent_beat"] = await silent.aupkeep(SILENT, [(run_id, 1)])
            seen["run_id"] = run_id
            return seen
        finally:
            for records in (silent, other):
                await records.aclose()
                records.close()

    try:
        seen = asyncio.run(scenario())
    finally:
        for session in sessions:
            session.close()
    run_id = seen["run_id"]
    assert seen["fresh"].orphans == []  # its heartbeat is recent: not taken
    assert seen["stale"].orphans == [run_id]  # silent past worker_timeout: back in the queue
    assert seen["attempt"] == 2
    assert seen["finished"] == "taken over"
    assert seen["silent_beat"].held == set()  # its heartbeat finds the claim gone
    assert seen["silent_beat"].orphans == []  # and the new claim is not its to take
    assert _rows(dsn, "SELECT status, worker, attempt, result FROM graph_agent_serve_runs") == [
        ("running", OTHER, 2, None)  # nothing of the silent worker's was written
    ]
    assert _rows(dsn, "SELECT count(*) FROM graph_agent_serve_events") == [(0,)]
    assert _rows(dsn, "SELECT status FROM graph_agent_serve_threads") == [("busy",)]


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_a_worker_that_lost_its_claim_announces_no_end(dsn: str, kind: str) -> None:
    """Followers end at ``d:``: a stale claim's end or rollback, refused, must not tell them
    the run ended (they would stop early, or read the new claimer's half-done run)."""
    session = psycopg.connect(dsn, autocommit=True)
    session.execute("SELECT pg_advisory_lock(%s)", (SILENT,))  # alive throughout

    async def scenario() -> tuple[str, list[str]]:
        silent = PostgresRecords(dsn, worker_timeout=0.2, notifier=notifier(kind))
        other = PostgresRecords(dsn, notifier=notifier(kind))
        await other.aopen()
        heard: list[str] = []
        listening = asyncio.Event()
        listener = asyncio.create_task(
            other.notifier.listen(other.channel, heard.append, listening)
        )
        try:
            run_id = await _claimed_by_silent_worker(silent)
            await asyncio.sleep(0.3)  # past its heartbeat's deadline
            assert (await other.aupkeep(OTHER, [])).orphans == [run_id]
            assert (await other.aclaim(OTHER)) is not None
            await asyncio.wait_for(listening.wait(), 10)
            stale = Claim(worker=SILENT, attempt=1)
            ended = await silent.afinish_run(run_id, "t1", "success", {}, stale, "idle")
            assert ended == "taken over"
            await silent.arolled_back(run_id, "t1", stale)
            await other.aannounce("sentinel")  # heard after anything announced before it
            async with asyncio.timeout(10):
                while "sentinel" not in heard:
                    await asyncio.sleep(0.01)
            return run_id, heard
        finally:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
            for records in (silent, other):
                await records.aclose()
                records.close()

    try:
        run_id, heard = asyncio.run(scenario())
    finally:
        session.close()
    assert f"d:{run_id}" not in heard
    assert _rows(dsn, "SELECT status, attempt FROM graph_agent_serve_runs") == [("running", 2)]


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_the_end_of_a_run_deleted_with_its_thread_meanwhile_is_announced(
    dsn: str, kind: str
) -> None:
    """Its followers elsewhere end at ``d:`` (and find it gone), as after a delete; the worker
    is told the run is gone, not that another worker took it over."""

    async def scenario() -> tuple[str, bool]:
        records = PostgresRecords(dsn, notifier=notifier(kind))
        heard: list[str] = []
        listening = asyncio.Event()
        listener = asyncio.create_task(
            records.notifier.listen(records.channel, heard.append, listening)
        )
        try:
            run_id = await _claimed_by_silent_worker(records)
            await asyncio.wait_for(listening.wait(), 10)
            records.delete_thread("t1")
            claim = Claim(worker=SILENT, attempt=1)
            ended = await records.afinish_run(run_id, "t1", "success", {}, claim, "idle")
            await records.aannounce("sentinel")  # heard after anything announced before it
            async with asyncio.timeout(10):
                while "sentinel" not in heard:
                    await asyncio.sleep(0.01)
            return ended, f"d:{run_id}" in heard
        finally:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
            await records.aclose()
            records.close()

    ended, announced = asyncio.run(scenario())
    assert ended == "deleted" and announced
    assert _rows(dsn, "SELECT run_id FROM graph_agent_serve_runs") == []


def test_a_workers_heartbeat_keeps_its_claims_and_a_dead_workers_go_back_at_once(
    dsn: str,
) -> None:
    session = psycopg.connect(dsn, autocommit=True)
    session.execute("SELECT pg_advisory_lock(%s)", (SILENT,))

    async def scenario() -> tuple[Any, ...]:
        records = PostgresRecords(dsn, worker_timeout=0.2)
        try:
            run_id = await _claimed_by_silent_worker(records)
            await asyncio.sleep(0.3)  # late, but it beats before anyone looks:
            beat = await records.aupkeep(SILENT, [(run_id, 1)])
            kept = await records.aupkeep(OTHER, [])
            session.close()  # now it dies: its lock goes with its session
            await asyncio.sleep(0.05)
            dead = await records.aupkeep(OTHER, [])
            return run_id, beat, kept, dead
        finally:
            await records.aclose()
            records.close()

    run_id, beat, kept, dead = asyncio.run(scenario())
    assert beat.held == {run_id} and kept.orphans == []
    assert dead.orphans == [run_id]


def test_a_worker_whose_lock_session_was_cut_locks_its_key_again_and_claims_again(
    dsn: str,
) -> None:
    def lock_holders(key: int) -> list[int]:
        return [
            pid
            for (pid,) in admin().execute(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = %s",
                (key,),
            )
        ]

    async def scenario() -> tuple[list[int], list[int], bool]:
        saver = AsyncPostgresSaver(dsn)
        records = PostgresRecords(dsn, worker_timeout=0.3)  # a beat every 0.1 s
        runner = QueueRunner({"chain": chain().compile(CompileConfig(saver=saver))}, records)
        await runner.open()
        try:
            before = lock_holders(runner.worker_key)
            admin().execute("SELECT pg_terminate_backend(%s)", (before[0],))
            async with asyncio.timeout(10):
                while not runner._locked or lock_holders(runner.worker_key) in ([], before):
                    await asyncio.sleep(0.02)
            after = lock_holders(runner.worker_key)
            stamp = now()
            thread = ThreadRecord(thread_id="t1", created_at=stamp, updated_at=stamp)
            request = RunRequest(assistant_id="chain", input={"x": 1})
            run = await runner.astart("t1", request, thread, new_thread=True)
            claimed_here = not isinstance(run, RemoteRun)
            await _within(30, run.wait(), "the run to end (run.wait())")
            return before, after, claimed_here
        finally:
            await _within(30, runner.close(), "the worker to close (QueueRunner.close())")
            records.close()
            await saver.aclose()

    before, after, claimed_here = asyncio.run(scenario())
    assert len(before) == 1 and len(after) == 1 and after != before  # a new session holds it
    assert claimed_here  # it claims the runs it receives again


def test_a_worker_whose_loop_lost_its_cancel_is_cancelled_again_when_it_closes(
    dsn: str,
) -> None:
    """On Python 3.11 a cancel can be lost: psycopg_pool waits for a free connection with
    ``asyncio.wait_for``, which returns the connection that comes in the moment its task is
    cancelled, and the task goes on (psycopg/psycopg#1345). A worker whose loop was cancelled
    so (closing as its upkeep got a connection, which a loaded machine makes likely) went on
    claiming forever, and ``close()`` waited on it forever. The upkeep here loses the first
    cancel it gets, as that wait does."""

    async def scenario() -> tuple[int, bool]:
        records = PostgresRecords(dsn, worker_timeout=0.3)
        runner = QueueRunner({}, records)
        upkeep, waiting, lost = records.aupkeep, asyncio.Event(), []

        async def upkeep_losing_a_cancel(*args: Any, **kwargs: Any) -> Any:
            if not lost:
                waiting.set()
                try:
                    await asyncio.Event().wait()  # as for a free connection in the pool
                except asyncio.CancelledError:
                    lost.append(True)  # ... which came just then: the cancel is lost
            return await upkeep(*args, **kwargs)

        records.aupkeep = upkeep_losing_a_cancel  # type: ignore[method-assign]
        await runner.open()
        try:
            await _within(10, waiting.wait(), "the worker's first upkeep")
        finally:
            closing = asyncio.create_task(runner.close())
            done, _ = await asyncio.wait([closing], timeout=10)
            if not done:  # without the fix: end the loop (a cancel not lost), to fail clean
                for task in runner._tasks:
                    task.cancel()
                await closing
            records.close()
        return len(lost), bool(done)

    lost, closed = asyncio.run(scenario())
    assert lost == 1  # the loop's cancel was lost once
    assert closed  # close() cancelled it again, and returned


def test_a_run_taken_over_from_this_worker_stops_its_running_node_at_once(dsn: str) -> None:
    """A run whose claim was taken stops here at once: the node it is awaiting (a model call
    that never answers) is cancelled when the heartbeat finds the claim gone, without waiting
    for a step boundary or for the worker to shut down."""
    started, seen = asyncio.Event(), []

    def hanging() -> StateGraph:
        graph = StateGraph("hanging")

        async def wait(state: dict[str, Any]) -> dict[str, Any]:
            started.set()
            try:
                await asyncio.Event().wait()  # a model call that never answers
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise
            return {}

        graph.add_node("wait", wait)
        graph.add_edge(START, "wait").add_edge("wait", END)
        return graph

    async def scenario() -> bool:
        saver = AsyncPostgresSaver(dsn)
        records = PostgresRecords(dsn, worker_timeout=0.3)  # a beat every 0.1 s
        runner = QueueRunner({"hanging": hanging().compile(CompileConfig(saver=saver))}, records)
        await runner.open()
        try:
            stamp = now()
            thread = ThreadRecord(thread_id="t1", created_at=stamp, updated_at=stamp)
            request = RunRequest(assistant_id="hanging", input={})
            run = await runner.astart("t1", request, thread, new_thread=True)
            assert run.task is not None
            async with asyncio.timeout(10):
                await started.wait()
            other.execute(  # another worker, alive, takes it over
                "UPDATE graph_agent_serve_runs SET worker = %s, attempt = 2, "
                "alive_until = clock_timestamp() + interval '1 hour'",
                (OTHER,),
            )
            async with asyncio.timeout(10):  # its heartbeat finds the claim gone
                while run.record.run_id in runner._claimed:
                    await asyncio.sleep(0.02)
            async with asyncio.timeout(5):  # and the node stops, the worker still open
                await asyncio.wait({run.task})
            stopped_while_open = run.task.done()
        finally:
            await runner.close()
            records.close()
            await saver.aclose()
        return stopped_while_open

    other = psycopg.connect(dsn, autocommit=True)
    other.execute("SELECT pg_advisory_lock(%s)", (OTHER,))
    try:
        stopped_while_open = asyncio.run(scenario())
    finally:
        other.close()
    assert stopped_while_open and seen == ["cancelled"]


@pytest.mark.parametrize("taken", ["before its rollback", "while it rolls back"])
def test_a_run_rolled_back_after_its_claim_was_taken_over_is_lost_here_not_rolled_back(
    dsn: str, taken: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rollback whose claim was taken over (before it took the thread back, or before it
    deleted the run) deletes no row: the run is the new claimer's (to roll back itself, the
    cancel being on the row), so here it is lost, not rolled back, and those waiting here turn
    to the new claimer."""
    gate = asyncio.Event()

    def gated() -> StateGraph:
        graph = StateGraph("gated")

        async def first(state: dict[str, Any]) -> dict[str, Any]:
            await gate.wait()
            return {}

        graph.add_node("first", first)
        graph.add_node("second", lambda state: {})
        graph.add_edge(START, "first").add_edge("first", "second").add_edge("second", END)
        return graph

    def take_over() -> None:  # another worker, alive, takes the run over
        other.execute(
            "UPDATE graph_agent_serve_runs SET worker = %s, attempt = 2, "
            "alive_until = clock_timestamp() + interval '1 hour'",
            (OTHER,),
        )

    rollback_thread, rolled = queue.rollback_thread, list[str]()

    def observed(*args: Any) -> None:
        rolled.append("thread taken back")
        if taken == "while it rolls back":
            take_over()
        rollback_thread(*args)

    monkeypatch.setattr(queue, "rollback_thread", observed)

    async def scenario() -> tuple[bool, bool]:
        records = PostgresRecords(dsn, worker_timeout=60)  # no heartbeat notices the takeover
        graph = gated().compile(CompileConfig(saver=MemorySaver()))
        runner = QueueRunner({"gated": graph}, records)
        await runner.open()
        try:
            stamp = now()
            thread = ThreadRecord(thread_id="t1", created_at=stamp, updated_at=stamp)
            run = await runner.astart("t1", RunRequest(assistant_id="gated", input={}), thread)
            assert isinstance(run, _LocalRun) and run.task is not None
            if taken == "before its rollback":
                take_over()
            runner._cancel_here(run.record.run_id, "rollback")  # heard before any heartbeat
            gate.set()
            await _within(10, asyncio.wait([run.task]), "the run to stop at its step boundary")
            return run.rolled_back, run.lost
        finally:
            await _within(30, runner.close(), "the worker to close (QueueRunner.close())")
            records.close()

    other = psycopg.connect(dsn, autocommit=True)
    other.execute("SELECT pg_advisory_lock(%s)", (OTHER,))
    try:
        rolled_back, lost = asyncio.run(scenario())
    finally:
        other.close()
    assert not rolled_back
    assert lost  # its waiters get the new claimer's result
    # taken over first, it leaves the thread (the new claimer's now) as it is
    assert rolled == ([] if taken == "before its rollback" else ["thread taken back"])
    assert _rows(dsn, "SELECT status, worker, attempt FROM graph_agent_serve_runs") == [
        ("running", OTHER, 2)  # nothing of it was deleted
    ]


async def test_an_attempts_events_are_numbered_above_any_an_earlier_attempt_told() -> None:
    request = RunRequest(assistant_id="slow")
    run = ActiveRun(record=new_run_record("t1", request), request=request)
    run.earlier = [(0, "metadata", "{}"), (1, "values", '{"n":1}')]  # what attempt 1 stored
    run.first_id = first_event_id(2)
    logged: list[int] = []
    run.log = lambda run_id, seq, event, data: logged.append(seq)
    run.emit("metadata", {"attempt": 2})
    run.emit("values", {"n": 1})
    run.end()

    async def ids(after: int) -> list[int]:
        return [seq for seq, _, _ in [item async for item in run.follow(after)]]

    second = [ATTEMPT_EVENT_IDS, ATTEMPT_EVENT_IDS + 1]
    assert logged == second
    assert await ids(-1) == [0, 1, *second]
    assert await ids(5) == second  # a client of attempt 1 that saw more than it stored
    assert await ids(second[0]) == second[1:]
    assert first_event_id(1) == 0


def test_an_events_table_made_with_32_bit_ids_takes_the_ids_of_later_attempts(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE graph_agent_serve_events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, "
            "event TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (run_id, seq))"
        )
        conn.execute("INSERT INTO graph_agent_serve_events VALUES ('r', 0, 'metadata', '{}')")
        PostgresRecords(dsn).close()
        conn.execute(
            "INSERT INTO graph_agent_serve_events VALUES ('r', %s, 'metadata', '{}')", (1 << 40,)
        )
    assert _rows(dsn, "SELECT seq FROM graph_agent_serve_events ORDER BY seq") == [(0,), (1 << 40,)]


def _narrow_events_table(dsn: str) -> None:
    """The tables as a server of before 64-bit event ids made them."""
    PostgresRecords(dsn).close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE graph_agent_serve_events ALTER COLUMN seq TYPE integer")


def test_a_busy_32_bit_events_table_is_left_as_it_is_and_later_attempts_fit_in_it(
    dsn: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _narrow_events_table(dsn)
    monkeypatch.setattr(pg_records, "WIDEN_LOCK_TIMEOUT", 0.2)
    with psycopg.connect(dsn) as worker:  # a live worker's transaction on the events
        worker.execute("INSERT INTO graph_agent_serve_events VALUES ('r', 0, 'metadata', '{}')")
        started: list[PostgresRecords] = []
        setup = threading.Thread(target=lambda: started.append(PostgresRecords(dsn)))
        setup.start()
        setup.join(10)
        beat = _rows(dsn, "UPDATE graph_agent_serve_runs SET status = status RETURNING 1")
        worker.rollback()
        setup.join(10)
    assert started and not started[0].wide_event_ids  # it started, the table left narrow
    started[0].close()
    assert beat == []  # the runs table was never held meanwhile
    assert "ALTER TABLE graph_agent_serve_events ALTER COLUMN seq TYPE BIGINT" in caplog.text
    assert _rows(
        dsn,
        "SELECT data_type FROM information_schema.columns WHERE table_schema = "
        "current_schema() AND table_name = 'graph_agent_serve_events' "
        "AND column_name = 'seq'",
    ) == [("integer",)]
    stored = [(0, "metadata", "{}"), (7, "values", "{}")]
    assert queue_events.narrow_first_event_id(1, stored) == 0
    assert (
        queue_events.narrow_first_event_id(3, stored)
        == 8 + queue_events.NARROW_ATTEMPT_GAP
        < 1 << 31
    )


def test_widening_the_events_ids_does_not_deadlock_with_a_run_deleted_meanwhile(
    dsn: str,
) -> None:
    _narrow_events_table(dsn)
    records = PostgresRecords(dsn)  # a live process; it widened the table: narrow it again
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE graph_agent_serve_events ALTER COLUMN seq TYPE integer")
    outcome: dict[str, str] = {}
    with psycopg.connect(dsn) as setup:  # an older server's setup: runs held, then the ALTER
        setup.execute("LOCK TABLE graph_agent_serve_runs IN SHARE MODE")

        def delete() -> None:
            records.delete_run("r")
            outcome["delete"] = "ok"

        deleting = threading.Thread(target=delete)
        deleting.start()
        time.sleep(0.3)  # the delete waits on the runs table
        try:
            setup.execute("ALTER TABLE graph_agent_serve_events ALTER COLUMN seq TYPE BIGINT")
            setup.commit()
            outcome["setup"] = "ok"
        except psycopg.errors.DeadlockDetected as exc:
            outcome["setup"] = str(exc).splitlines()[0]
        deleting.join(10)
    records.close()
    assert outcome == {"setup": "ok", "delete": "ok"}


def test_a_run_whose_workers_loop_hangs_is_finished_by_another_once_its_lease_lapses(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node's synchronous sleep blocks its worker's event loop, not the saver's lease
    heartbeat thread: the claim is taken over after ``worker_timeout``, and the lease, no longer
    extended, lapses after ``lease_ttl``, so the new claimer resumes the run instead of failing
    it after its lease wait. Two workers of one process, each on an event loop (and a saver,
    and records) of its own, the hanging one in a thread."""
    monkeypatch.setattr(queue, "LEASE_WAIT_SECONDS", 4.0)  # the lease lapses after 1 s
    timeout, ended, named = 1.0, threading.Event(), "hanging worker"
    found: dict[str, Any] = {}

    def hanging() -> StateGraph:
        graph = StateGraph("hanging")

        async def block(state: dict[str, Any]) -> dict[str, Any]:
            if threading.current_thread().name == named:
                ended.wait(60)  # the loop is blocked until the run ended elsewhere
            return {"done": True}

        graph.add_node("block", block)
        graph.add_edge(START, "block").add_edge("block", END)
        return graph

    async def worker(first: bool) -> None:
        saver = AsyncPostgresSaver(dsn, lease_ttl=timeout)
        records = PostgresRecords(dsn, worker_timeout=timeout)
        runner = QueueRunner({"hanging": hanging().compile(CompileConfig(saver=saver))}, records)
        await runner.open()
        try:
            if first:
                stamp = now()
                thread = ThreadRecord(thread_id="t1", created_at=stamp, updated_at=stamp)
                request = RunRequest(assistant_id="hanging", input={})
                run = await runner.astart("t1", request, thread, new_thread=True)
                found["here"], found["run_id"] = not isinstance(run, RemoteRun), run.record.run_id
                await asyncio.to_thread(ended.wait, 60)
                async with asyncio.timeout(10):  # awake, it finds its claim gone
                    while run.record.run_id in runner._claimed:
                        await asyncio.sleep(0.05)
                return
            async with asyncio.timeout(60):
                while "run_id" not in found:
                    await asyncio.sleep(0.05)
                while True:
                    row = await records.arun_by_id(found["run_id"])
                    if row is not None and row[0].status not in ("pending", "running"):
                        found["status"], found["result"] = row[0].status, row[1]
                        break
                    await asyncio.sleep(0.05)
        finally:
            ended.set()
            await runner.close()
            records.close()
            await saver.aclose()

    first = threading.Thread(target=lambda: asyncio.run(worker(True)), name=named)
    first.start()
    try:
        asyncio.run(worker(False))
    finally:
        ended.set()
        first.join(30)
    assert found["here"]  # the hanging worker claimed the run as it received it
    assert (found["status"], found["result"]) == ("success", {"done": True})
    assert _rows(dsn, "SELECT attempt FROM graph_agent_serve_runs") == [(2,)]


def test_a_worker_timeout_that_is_not_a_positive_number_is_refused(dsn: str) -> None:
    for wrong in (0, -1.0, float("nan")):
        with pytest.raises(GraphSetupError, match=r"worker_timeout=.*positive number of seconds"):
            PostgresRecords(dsn, worker_timeout=wrong)


def test_serve_refuses_a_worker_timeout_that_is_not_positive(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    command = ["serve", "tests/serve/graphs.py:chain", "--postgres", dsn]
    assert main([*command, "--worker-timeout", "0"]) != 0
    assert "--worker-timeout 0.0: give a positive number of seconds" in capsys.readouterr().err


def _serve(dsn: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [sys.executable, "-m", "graph_agent", "serve", "tests/serve/graphs.py:slow"]
    command += ["--port", str(port), "--postgres", dsn, "--worker-timeout", "2", "--debug"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with log.open("wb") as err:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err
        )
    return process, f"http://127.0.0.1:{port}"


def test_a_frozen_workers_run_is_finished_once_by_another_and_it_writes_nothing_on_waking(
    dsn: str, tmp_path: Path
) -> None:
    (frozen, frozen_url), (other, other_url) = (
        _serve(dsn, tmp_path / "frozen.log"),
        _serve(dsn, tmp_path / "other.log"),
    )
    schema = dsn.split("search_path=")[1].split("'")[0].split()[0]

    def rows(sql: str, *args: object) -> list[tuple[Any, ...]]:
        sql = sql.replace("graph_agent_serve_", f"{schema}.graph_agent_serve_")
        return admin().execute(sql, args).fetchall()

    try:
        wait_until_up(frozen_url)
        wait_until_up(other_url)
        frozen_key = httpx.get(f"{frozen_url}/ok").json()["worker"]
        other_key = httpx.get(f"{other_url}/ok").json()["worker"]
        client = get_sync_client(url=frozen_url)
        thread_id = client.threads.create()["thread_id"]
        run_id = client.runs.create(thread_id, "slow", input={"n": 0})["run_id"]
        assert rows("SELECT worker FROM graph_agent_serve_runs") == [(frozen_key,)]  # as written
        others = get_sync_client(url=other_url)
        with ThreadPoolExecutor(2) as pool:  # clients of the frozen process, waiting there
            joined = pool.submit(client.runs.join, thread_id, run_id)
            streamed = pool.submit(lambda: list(client.runs.join_stream(thread_id, run_id)))
            time.sleep(0.35)  # a few steps in
            frozen.send_signal(signal.SIGSTOP)  # its connections live on: its heartbeat stops
            assert others.runs.join(thread_id, run_id) == {"n": 10}
            reference = others.threads.create()["thread_id"]  # the same run, frozen by nobody
            others.runs.wait(reference, "slow", input={"n": 0})
            expected = [s["values"] for s in others.threads.get_history(reference, limit=100)]
            frozen.send_signal(signal.SIGCONT)
            deadline = time.monotonic() + 20
            while "was taken over by another worker" not in (tmp_path / "frozen.log").read_text():
                assert time.monotonic() < deadline, "the frozen worker never noticed its loss"
                time.sleep(0.05)
            # its clients get the other worker's result, and the rest of its events
            assert joined.result(timeout=30) == {"n": 10}
            parts = streamed.result(timeout=30)
        assert parts[-1].event == "values" and parts[-1].data == {"n": 10}
        ids = [int(p.id) for p in parts]
        assert ids == sorted(set(ids))  # no event id told twice
        # then every event of the attempt that finished it, although the frozen worker told
        # more events than it stored (those ids are not the new attempt's to reuse)
        taken = next(i for i, p in enumerate(parts) if p.event == "metadata" and i > 0)
        assert parts[taken].data["attempt"] == 2 and ids[taken] == ATTEMPT_EVENT_IDS
        resumed = [p.data["n"] for p in parts[taken + 1 :]]
        assert resumed == list(range(resumed[0], 11))
        told = [p.data["n"] for p in parts[1:taken]]  # the frozen worker's, before
        assert told == list(range(told[0], told[0] + len(told))) and resumed[0] <= told[-1] + 1
        # a client of the frozen worker that reconnects elsewhere gets them too
        again = list(others.runs.join_stream(thread_id, run_id, last_event_id=str(ids[taken - 1])))
        assert [(p.event, p.data, int(p.id)) for p in again] == [
            (p.event, p.data, int(p.id)) for p in parts[taken:]
        ]
        final = rows(
            "SELECT status, worker, attempt, result FROM graph_agent_serve_runs WHERE run_id = %s",
            run_id,
        )
        assert final == [("success", other_key, 2, json.dumps({"n": 10}))]
        history = [s["values"] for s in others.threads.get_history(thread_id, limit=100)]
        assert history == expected  # every step stored once: the woken worker wrote none
        assert others.threads.get(thread_id)["status"] == "idle"
        seqs = [
            seq
            for (seq,) in rows(
                "SELECT seq FROM graph_agent_serve_events WHERE run_id = %s ORDER BY seq", run_id
            )
        ]
        # what the frozen worker stored, then the new attempt's, nothing added after it
        stored_first = [seq for seq in seqs if seq < ATTEMPT_EVENT_IDS]
        assert stored_first == list(range(len(stored_first)))
        assert seqs[len(stored_first) :] == [
            ATTEMPT_EVENT_IDS + n for n in range(len(seqs) - len(stored_first))
        ]
        assert rows(
            "SELECT count(*) FROM graph_agent_serve_events WHERE run_id = %s AND event = 'error'",
            run_id,
        ) == [(0,)]
    finally:
        for process in (frozen, other):
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)
                process.terminate()
        for process in (frozen, other):
            process.wait(20)
