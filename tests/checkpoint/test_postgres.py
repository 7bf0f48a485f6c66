"""PostgresSaver specifics against the real server: migrations, compare-and-set under real
concurrency, leases across processes, worker processes sharing threads (and killed among them),
connections dropped mid-write, and the async twin.

The shared conformance suite, ``test_threads.py`` and ``test_storage.py`` also run against
PostgreSQL through the ``saver`` fixture. Worker processes are forked by
``python -m tests.checkpoint.pg_workers``, which imported everything once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from graph_agent import (
    END,
    START,
    CompileConfig,
    RunnableConfig,
    SerializationError,
    StateGraph,
    ThreadBusyError,
)
from graph_agent.checkpoint import postgres_plans as plans
from graph_agent.checkpoint.base import Checkpoint, new_checkpoint_id
from graph_agent.checkpoint.postgres import (
    SCHEMA_VERSION,
    AsyncPostgresSaver,
    CheckpointStoreError,
    PostgresSaver,
)
from graph_agent.checkpoint.postgres_plans import thread_key
from graph_agent.graph.saver import Blob
from tests.checkpoint.pg_workers import LEDGER_TABLES, STEPS, create_threads
from tests.checkpoint.postgres_db import admin, fresh_schema

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def dsn() -> Iterator[str]:
    with fresh_schema() as schema_dsn:
        yield schema_dsn


def connect(dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=True)


def backends_of(dsn: str) -> list[int]:
    """Server pids of every connection a test made with ``dsn`` (its application_name)."""
    name = psycopg.conninfo.conninfo_to_dict(dsn)["application_name"]
    sql = "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND pid <> pg_backend_pid()"
    return [pid for (pid,) in admin().execute(sql, (name,)).fetchall()]


def terminate(pids: list[int]) -> None:
    for pid in pids:
        admin().execute("SELECT pg_terminate_backend(%s)", (pid,))


def wait_until(condition: Any, timeout: float = 10, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)


# setup and migrations


def test_setup_is_idempotent_and_records_each_migration_once(dsn):
    with PostgresSaver(dsn) as saver:
        saver.setup()
        saver.setup()
        assert saver.schema_version() == SCHEMA_VERSION
    with PostgresSaver(dsn) as again, connect(dsn) as conn:
        assert again.schema_version() == SCHEMA_VERSION
        rows = conn.execute("SELECT version FROM graph_agent_migrations ORDER BY 1").fetchall()
        assert rows == [(v,) for v in range(1, SCHEMA_VERSION + 1)]


def test_savers_made_at_once_in_eight_threads_apply_each_migration_once(dsn):
    results, errors = race(8, lambda i: PostgresSaver(dsn, pool_size=1).close())
    assert not errors and len(results) == 8
    with connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM graph_agent_migrations").fetchone() == (
            SCHEMA_VERSION,
        )


def test_a_schema_from_a_newer_version_is_refused(dsn):
    PostgresSaver(dsn).close()
    with connect(dsn) as conn:
        conn.execute("INSERT INTO graph_agent_migrations (version) VALUES (99)")
    with pytest.raises(SerializationError, match="schema version 99"):
        PostgresSaver(dsn)


def test_an_unreachable_server_fails_at_once_with_a_clear_error():
    started = time.monotonic()
    with pytest.raises(
        CheckpointStoreError, match=r"cannot use PostgreSQL database test at 127\.0\.0\.1:1"
    ) as caught:
        PostgresSaver("host=127.0.0.1 port=1 dbname=test user=postgres password=secret")
    assert time.monotonic() - started < 5
    assert "secret" not in str(caught.value)


def test_without_psycopg_the_error_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ImportError, match=r"pip install 'graph-agent\[postgres\]'"):
        PostgresSaver("host=127.0.0.1 dbname=test")


# compare-and-set and concurrency


def child_of(parent: Checkpoint | None, thread: str = "t", **metadata: Any) -> Checkpoint:
    cid = new_checkpoint_id()
    return Checkpoint(
        id=cid,
        thread_id=thread,
        parent_id=parent.id if parent else None,
        step=parent.step + 1 if parent else 0,
        blobs={"n": Blob("full", cid)},
        versions={"n": cid},
        metadata={"source": "loop", **metadata},
    )


def race(count: int, attempt: Any) -> tuple[list[Any], list[BaseException]]:
    """Run ``attempt(i)`` in ``count`` threads released at the same moment."""
    barrier = threading.Barrier(count)
    results: list[Any] = []
    errors: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait(timeout=10)
        try:
            results.append(attempt(i))
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    return results, errors


@pytest.mark.parametrize("first", [True, False], ids=["first-checkpoint", "next-checkpoint"])
def test_of_writers_racing_on_the_same_parent_exactly_one_succeeds(dsn, first):
    savers = [PostgresSaver(dsn, pool_size=1) for _ in range(8)]
    try:
        parent = None if first else child_of(None)
        if parent is not None:
            savers[0].put(parent)
        children = [child_of(parent) for _ in savers]
        results, errors = race(len(savers), lambda i: savers[i].put(children[i]))
        assert len(results) == 1 and len(errors) == len(savers) - 1
        assert all(isinstance(e, ThreadBusyError) for e in errors), errors
        history = list(savers[0].list("t"))
        assert len(history) == (1 if first else 2)
        assert savers[0].get("t").id in {c.id for c in children}
    finally:
        for saver in savers:
            saver.close()


def changed_after_the_header(saver: PostgresSaver, change: Any) -> Any:
    """``saver.get`` with ``change()`` made (and committed) right after its header was read,
    before its blobs are: the gap between its two statements."""
    from graph_agent.checkpoint import postgres_plans

    get_plan = postgres_plans.get_plan

    def plan(*args: Any, **kwargs: Any) -> Any:
        inner = get_plan(*args, **kwargs)
        rows = None
        for n in itertools.count():
            try:
                query = inner.send(rows)  # type: ignore[arg-type]
            except StopIteration as stop:
                return stop.value
            rows = yield query
            if n == 0:
                change()

    return plan


@pytest.mark.parametrize("change", ["delete", "prune", "move-and-prune"])
def test_a_get_meeting_a_delete_or_prune_between_its_statements_reads_a_whole_checkpoint(
    dsn, monkeypatch, change
):
    # get reads the header, then the blobs in a second statement (no transaction): what a
    # delete or prune committed in between must neither fail the load nor mix two states
    from graph_agent.checkpoint import postgres_plans

    with PostgresSaver(dsn) as saver, PostgresSaver(dsn) as other:
        first = child_of(None)
        saver.put(first)
        head = child_of(first)
        saver.put(head)
        newer = child_of(head)

        def make_change() -> None:
            if change == "delete":
                other.delete_thread("t")
            elif change == "prune":
                other.prune("t", 1)
            else:
                other.put(newer)
                other.prune("t", 1)

        planned = changed_after_the_header(saver, make_change)
        monkeypatch.setattr(postgres_plans, "get_plan", planned)
        loaded = saver.get("t")
        if change == "delete":
            assert loaded is None
        else:
            expected = head if change == "prune" else newer
            assert loaded is not None and loaded.id == expected.id
            assert loaded.values == {"n": expected.id}
        monkeypatch.undo()
        if change != "prune":
            assert saver.get("t", head.id) is None  # gone


def test_storage_calls_of_different_threads_run_in_parallel_up_to_the_pool_size(dsn):
    # LESSONS 25: no global lock in the saver. Every checkpoint insert takes 0.3 s here;
    # four threads' puts overlap instead of queueing
    with connect(dsn) as conn:
        PostgresSaver(dsn).close()
        conn.execute(
            "CREATE FUNCTION stall() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_sleep(0.3); RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER stall BEFORE INSERT ON graph_agent_checkpoints "
            "FOR EACH ROW EXECUTE FUNCTION stall()"
        )
    with PostgresSaver(dsn, pool_size=4) as saver:
        started = time.monotonic()
        results, errors = race(4, lambda i: saver.put(child_of(None, thread=f"t{i}")))
        elapsed = time.monotonic() - started
    assert not errors and len(results) == 4
    assert elapsed < 0.3 * 4 * 0.75, f"4 puts of 0.3 s took {elapsed:.2f} s: serialised"


# leases


def test_a_lease_binds_while_its_holders_session_lives(dsn):
    with PostgresSaver(dsn) as first, PostgresSaver(dsn) as second:
        lease = first.acquire("t")
        with pytest.raises(ThreadBusyError, match=rf"process {os.getpid()} on .* is running it"):
            second.acquire("t")
        first.release(lease)
        second.release(second.acquire("t"))


def test_a_lease_whose_session_is_gone_is_taken_over_at_once(dsn):
    with PostgresSaver(dsn) as saver, connect(dsn) as conn:
        conn.execute(  # a holder that died: nobody holds the advisory lock on its key
            "INSERT INTO graph_agent_leases (thread_key, checkpoint_ns, owner, session_key, "
            "host, pid, expires_at) VALUES (%s, '', 'dead', 12345, 'elsewhere', 1, "
            "now() + interval '1 hour')",
            (thread_key("t"),),
        )
        saver.release(saver.acquire("t"))


def test_an_expired_lease_is_taken_over_even_while_its_session_lives(dsn):
    with PostgresSaver(dsn) as holder, PostgresSaver(dsn) as other, connect(dsn) as conn:
        holder.acquire("t")
        conn.execute("UPDATE graph_agent_leases SET expires_at = now() - interval '1 second'")
        other.release(other.acquire("t"))  # a holder cut off from the server, say


def test_a_run_that_outlives_lease_ttl_keeps_its_thread(dsn):
    entered, release = threading.Event(), threading.Event()

    def slow(state):
        entered.set()
        release.wait(timeout=10)
        return {"done": True}

    g = StateGraph("slow")
    g.add_node("slow", slow).add_edge(START, "slow").add_edge("slow", END)
    cfg = RunnableConfig(thread_id="t")
    with PostgresSaver(dsn, lease_ttl=0.3) as saver, PostgresSaver(dsn) as other:
        app = g.compile(CompileConfig(saver=saver))
        worker = threading.Thread(target=app.invoke, args=({}, cfg))
        worker.start()
        try:
            assert entered.wait(timeout=10)
            time.sleep(1.0)  # three lease_ttl: the heartbeat keeps extending it
            with pytest.raises(ThreadBusyError, match="busy"):
                other.acquire("t")
        finally:
            release.set()
            worker.join(timeout=10)
        assert app.get_state(cfg).values == {"done": True}


def test_a_lost_release_is_retried_by_the_heartbeat(dsn):
    with PostgresSaver(dsn, lease_ttl=0.3) as saver, PostgresSaver(dsn) as other:
        lease = saver.acquire("t")
        saver._session.forget_later(lease.owner)  # what release does when its DELETE fails
        saver._leases.clear()
        wait_until(lambda: _acquired(other, "t"), timeout=5, what="the heartbeat's delete")


def _acquired(saver: PostgresSaver, thread: str) -> bool:
    try:
        saver.release(saver.acquire(thread))
    except ThreadBusyError:
        return False
    return True


# dropped connections


def test_a_connection_dropped_mid_write_raises_a_typed_error_and_the_run_resumes(dsn):
    ledger: list[str] = []
    g = StateGraph("steps")
    g.add_node("step", lambda s, config: ledger.append(config.task.id) or {"n": s["n"] + 1})
    g.add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: "step" if s["n"] < 8 else END)
    cfg = RunnableConfig(thread_id="t")
    with PostgresSaver(dsn) as saver, connect(dsn) as conn:
        conn.execute(  # the checkpoint of step 4 stalls inside its INSERT, until terminated
            "CREATE FUNCTION stall() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_sleep(30); RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER stall BEFORE INSERT ON graph_agent_checkpoints "
            "FOR EACH ROW WHEN (NEW.step = 4) EXECUTE FUNCTION stall()"
        )
        app = g.compile(CompileConfig(saver=saver))

        def stalled() -> list[int]:
            return [
                pid
                for (pid,) in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event = 'PgSleep' "
                    "AND application_name = current_setting('application_name') "
                    "AND query LIKE %s",
                    ("%graph_agent_heads%",),
                ).fetchall()
            ]

        killer = threading.Thread(target=lambda: (wait_until(stalled), terminate(stalled())))
        killer.start()
        with pytest.raises(
            CheckpointStoreError, match="lost the connection to PostgreSQL while saving"
        ):
            app.invoke({"n": 0}, cfg)
        killer.join(timeout=10)
        # nothing half-written: the head is step 3, and every blob belongs to a checkpoint
        assert saver.get("t").step == 3 and saver.get("t").values == {"n": 4}
        orphans = conn.execute(
            "SELECT count(*) FROM graph_agent_blobs AS b WHERE NOT EXISTS (SELECT FROM "
            "graph_agent_checkpoints AS c WHERE c.thread_key = b.thread_key AND "
            "c.checkpoint_id = b.version)"
        ).fetchone()
        assert orphans == (0,)
        committed = len(ledger) - 1  # the task of step 4 ran, its checkpoint did not land
        conn.execute("DROP TRIGGER stall ON graph_agent_checkpoints")
        assert app.invoke(None, cfg)["n"] == 8
        assert len(ledger) == len(set(ledger)) + 1  # only step 4's task ran twice
        assert ledger[committed] == ledger[committed + 1]
        assert [cp.step for cp in saver.list("t")] == list(range(7, -2, -1))


def test_the_pool_and_the_lease_session_recover_when_their_backends_are_terminated(dsn):
    with PostgresSaver(dsn, pool_size=3) as saver:
        saver.put(child_of(None))
        lease = saver.acquire("t")
        saver.release(lease)
        terminated = backends_of(dsn)
        assert len(terminated) >= 2  # the pool's connection(s) and the lease session
        terminate(terminated)
        wait_until(  # (the lease session's watcher reconnects at once: new backends may come)
            lambda: not set(terminated) & set(backends_of(dsn)), what="the backends to go"
        )
        started = time.monotonic()
        assert saver.get("t").step == 0  # a dead pooled connection is replaced on checkout
        saver.release(saver.acquire("t"))  # the lease session reconnects
        assert time.monotonic() - started < 2
        with PostgresSaver(dsn) as other, pytest.raises(ThreadBusyError):
            lease = saver.acquire("t")
            other.acquire("t")
        saver.release(lease)


# the async twin


async def test_the_async_saver_runs_storage_natively_on_its_event_loop(dsn):
    async with AsyncPostgresSaver(dsn) as saver:
        first = child_of(None)
        await saver.aput(first)
        second = child_of(first)
        await saver.aput(second)
        await saver.aput_writes("t", "", second.id, "task", [("out", {"x": 1})])
        loaded = await saver.aget("t")
        assert loaded.id == second.id and loaded.values == {"n": second.id}
        assert [(w.task_id, w.value) for w in loaded.pending_writes] == [("task", {"x": 1})]
        assert [cp.id for cp in await saver.alist("t", limit=1, before=second.id)] == [first.id]
        with pytest.raises(ThreadBusyError, match="moved on"):
            await saver.aput(child_of(first))
        lease = await saver.aacquire("t")
        with pytest.raises(ThreadBusyError, match="busy"):
            await saver.aacquire("t")
        await saver.arelease(lease)
        await saver.acopy_thread("t", "copy")
        assert (await saver.aget("copy")).values == loaded.values
        moved = dataclasses.replace(loaded, checkpoint_ns="child", parent_id=None)
        await saver.aput(moved)  # a checked put: its blob is not stored in "child"
        assert (await saver.aget("t", checkpoint_ns="child")).values == loaded.values
        assert saver._apool is not None and saver._apool.get_stats()["requests_num"] >= 12
        assert saver.get("t").id == second.id  # the sync face sees the same rows


def round_trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What async connections send from now on: each statement alone, or ``pipeline`` for a
    pipeline's statements (one round trip)."""
    sent: list[str] = []
    execute, pipeline = psycopg.AsyncConnection.execute, psycopg.AsyncConnection.pipeline

    async def counted_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if self._pipeline is None:
            sent.append(str(query).split()[0])
        return await execute(self, query, *args, **kwargs)

    def counted_pipeline(self: Any) -> Any:
        sent.append("pipeline")
        return pipeline(self)

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", counted_execute)
    monkeypatch.setattr(psycopg.AsyncConnection, "pipeline", counted_pipeline)
    return sent


async def test_an_async_run_reads_its_thread_with_its_lease_and_never_that_read_after_a_write(
    dsn, monkeypatch
):
    g = StateGraph("one")
    g.add_node("add", lambda state: {"n": state["n"] + 1}).add_edge(START, "add")
    g.add_edge("add", END)
    cfg = RunnableConfig(thread_id="t")
    async with AsyncPostgresSaver(dsn) as saver:
        app = g.compile(CompileConfig(saver=saver))
        assert (await app.ainvoke({"n": 0}, cfg))["n"] == 1
        sent = round_trips(monkeypatch)
        assert (await app.ainvoke({"n": 5}, cfg))["n"] == 6
        # the lease with the thread's header; its blobs; two checkpoints, the last one with
        # the release
        assert sent == ["pipeline", "WITH", "WITH", "WITH"], sent
        assert saver._heads == {}
        monkeypatch.undo()

        # a read made with a lease is used by the first aget only, and never after a write
        lease = await saver.aacquire("t")
        head = await saver.aget("t")
        assert head is not None and head.values == {"n": 6}
        await saver.aput(child_of(head))
        assert (await saver.aget("t")).parent_id == head.id
        await saver.arelease(lease)
        lease = await saver.aacquire("t")
        newest = saver.get("t")  # (the sync face: the read made with the lease stays)
        await saver.aput(child_of(newest))
        assert (await saver.aget("t")).parent_id == newest.id
        await saver.arelease(lease)
        # the thread deleted between the lease and the read: not there
        lease = await saver.aacquire("t")
        saver.delete_thread("t")
        assert await saver.aget("t") is None
        await saver.arelease(lease)


def test_a_read_sent_with_a_lease_that_was_refused_is_dropped():
    # taken at the second try (its holder let go between two statements): what was read
    # while the other held the thread may be stale by now
    from graph_agent.checkpoint import postgres_plans
    from graph_agent.checkpoint.base import Lease

    read = postgres_plans.head_read("t", "")
    plan = postgres_plans.acquire_plan(Lease("t", "", "owner"), 1, 30.0, read)
    first = next(plan)
    assert first.read is read
    read.read_rows.append([(b"header",)])  # as the driver does
    plan.send([])  # refused
    plan.send([(True,)])  # our session is alive
    again = plan.send([])  # nobody holds it now
    assert again.read is None and read.read_rows == []
    with pytest.raises(StopIteration) as stop:
        plan.send([("owner",)])
    assert stop.value.value is True


async def test_the_async_saver_serves_graph_runs_and_refuses_a_second_run(dsn):
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(state):
        entered.set()
        await release.wait()
        return {"n": state["n"] + 1}

    g = StateGraph("slow")
    g.add_node("slow", slow).add_edge(START, "slow").add_edge("slow", END)
    cfg = RunnableConfig(thread_id="t")
    async with AsyncPostgresSaver(dsn) as saver:
        app = g.compile(CompileConfig(saver=saver))
        first = asyncio.ensure_future(app.ainvoke({"n": 0}, cfg))
        await asyncio.wait_for(entered.wait(), 10)
        with pytest.raises(ThreadBusyError, match="busy"):
            await app.ainvoke({"n": 0}, cfg)
        release.set()
        assert (await asyncio.wait_for(first, 10))["n"] == 1
        assert (await app.ainvoke({"n": 5}, cfg))["n"] == 6
        assert len(await saver.alist("t")) == 4


def test_the_async_saver_is_bound_to_the_event_loop_that_first_used_it(dsn):
    saver = AsyncPostgresSaver(dsn)
    first_loop = asyncio.new_event_loop()
    try:
        first_loop.run_until_complete(saver.aput(child_of(None)))
        with pytest.raises(CheckpointStoreError, match="bound to the event loop"):
            asyncio.run(saver.aget("t"))
        assert saver.get("t") is not None  # the sync face works from anywhere
    finally:
        first_loop.run_until_complete(saver.aclose())
        first_loop.close()


# worker processes


class ForkServer:
    """Talks to ``python -m tests.checkpoint.pg_workers``; every read has a timeout."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.checkpoint.pg_workers"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
        )
        self._buffer = b""
        assert self._read(30) == {"ready": True}

    def _read(self, timeout: float) -> dict[str, Any]:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            readable, _, _ = select.select([self.process.stdout], [], [], max(0.0, remaining))
            if not readable:
                raise AssertionError(f"the fork server said nothing for {timeout} s")
            chunk = os.read(self.process.stdout.fileno(), 65536)
            assert chunk, "the fork server died"
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def _ask(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        return self._read(timeout)

    def spawn(self, task: str, **args: Any) -> int:
        return self._ask({"op": "spawn", "task": task, **args}, timeout=30)["pid"]

    def wait(self, pid: int, timeout: float = 30) -> int:
        code = self._ask({"op": "wait", "pid": pid, "timeout": timeout}, timeout=timeout + 5)[
            "code"
        ]
        assert code is not None, f"worker {pid} still running after {timeout} s"
        return code

    def kill(self, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):  # it may have finished already
            os.kill(pid, signal.SIGKILL)

    def close(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    fork_server = ForkServer()
    yield fork_server
    fork_server.close()


def prepare(dsn: str, count: int) -> list[str]:
    threads = [f"thread-{i:02d}" for i in range(count)]
    PostgresSaver(dsn, pool_size=1).close()
    with connect(dsn) as conn:
        for statement in LEDGER_TABLES:
            conn.execute(statement)
    create_threads(dsn, threads)
    return threads


def check_threads(dsn: str, threads: list[str], killed: set[int]) -> dict[str, Any]:
    """Every thread finished once: its 21 checkpoints form one chain (nothing lost, no fork),
    and no step whose checkpoint was committed ran again. Returns figures for the test."""
    with PostgresSaver(dsn, pool_size=1) as saver, connect(dsn) as conn:
        for thread in threads:
            history = list(saver.list(thread))
            assert len(history) == STEPS + 1, (thread, len(history))
            parents = [cp.parent_id for cp in history]
            assert len(set(parents)) == len(parents), f"{thread} forked"
            assert parents[:-1] == [cp.id for cp in history[1:]], f"{thread} is not one chain"
            assert history[0].values == {"n": STEPS} and history[0].next == ()
        ledger = conn.execute("SELECT thread, task_id, after, head, pid FROM ledger").fetchall()
        completions = conn.execute("SELECT thread, pid FROM completions").fetchall()
    stale = [row for row in ledger if row[2] != row[3]]
    assert not stale, f"steps ran after their result was committed: {stale[:3]}"
    runs_by_task: dict[str, list[int]] = {}
    for _, task_id, _, _, pid in ledger:
        runs_by_task.setdefault(task_id, []).append(pid)
    assert len(runs_by_task) == len(threads) * STEPS
    for task_id, pids in runs_by_task.items():
        survivors = [pid for pid in pids if pid not in killed]
        assert len(survivors) <= 1, f"task {task_id} ran {len(pids)} times: {pids}"
    finished = Counter(thread for thread, _ in completions)
    assert all(count == 1 for count in finished.values()), finished
    return {
        "completions": len(completions),
        "reruns": sum(len(pids) - 1 for pids in runs_by_task.values()),
        "resumed": sum(
            1 for t in threads if len({pid for thread, _, _, _, pid in ledger if thread == t}) > 1
        ),
    }


def test_setup_from_two_processes_at_once_is_safe(server, dsn):
    start_at = time.time() + 0.3
    pids = [server.spawn("setup", dsn=dsn, start_at=start_at) for _ in range(2)]
    assert [server.wait(pid) for pid in pids] == [0, 0]
    with PostgresSaver(dsn) as saver, connect(dsn) as conn:
        assert saver.schema_version() == SCHEMA_VERSION
        migrations = conn.execute("SELECT count(*) FROM graph_agent_migrations").fetchone()
        assert migrations == (SCHEMA_VERSION,)


def test_a_second_process_gets_thread_busy_until_the_holder_dies(server, dsn):
    PostgresSaver(dsn).close()
    pid = server.spawn("hold", dsn=dsn, thread="t", seconds=30)
    with PostgresSaver(dsn) as saver:
        g = StateGraph("hold")
        g.add_node("sleep", lambda s: {"slept": True}).add_edge(START, "sleep").add_edge(
            "sleep", END
        )
        app = g.compile(CompileConfig(saver=saver))
        cfg = RunnableConfig(thread_id="t")
        wait_until(lambda: saver.get("t") is not None, what="the holder's first checkpoint")
        with pytest.raises(ThreadBusyError, match=f"process {pid} on"):
            app.invoke(None, cfg)
        server.kill(pid)
        assert server.wait(pid) == -signal.SIGKILL
        # its lease_ttl is 60 s, but its session died with it: the thread is free at once
        wait_until(lambda: _acquired(saver, "t"), timeout=5, what="the dead holder's lease")
        assert app.invoke(None, cfg)["slept"] is True


def test_four_workers_finish_fifty_threads_exactly_once_without_losing_or_forking(server, dsn):
    threads = prepare(dsn, 50)
    pids = [server.spawn("work", dsn=dsn, threads=threads, seed=i) for i in range(4)]
    assert [server.wait(pid, timeout=45) for pid in pids] == [0, 0, 0, 0]
    figures = check_threads(dsn, threads, killed=set())
    assert figures["completions"] == 50 and figures["reruns"] == 0


def steps_run(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM ledger").fetchone()
    return row[0] if row else 0


def test_workers_killed_at_random_moments_hand_their_threads_to_the_others(server, dsn):
    threads = prepare(dsn, 50)
    rng = random.Random(20261130)
    live = {server.spawn("work", dsn=dsn, threads=threads, seed=i) for i in range(4)}
    killed: set[int] = set()
    # kill when the workers have run so many steps (of 1000): moments tied to progress, not to
    # the machine's speed
    with connect(dsn) as conn:
        for progress in sorted(rng.sample(range(20, 700), 10)):
            wait_until(
                lambda steps=progress: steps_run(conn) >= steps,
                timeout=30,
                what=f"{progress} steps",
            )
            victim = rng.choice(sorted(live))
            server.kill(victim)
            assert server.wait(victim) == -signal.SIGKILL
            live.discard(victim)
            killed.add(victim)
            live.add(server.spawn("work", dsn=dsn, threads=threads, seed=len(killed) + 10))
    codes = [server.wait(pid, timeout=45) for pid in sorted(live)]
    assert codes == [0] * len(codes)
    figures = check_threads(dsn, threads, killed)
    assert figures["resumed"] >= 3, f"too few kills landed mid-run: {figures}"


def test_a_worker_dying_right_after_a_commit_is_resumed_without_rerunning_that_step(server, dsn):
    threads = prepare(dsn, 1)
    crashed = server.spawn("work", dsn=dsn, threads=threads, seed=0, crash_after=7)
    assert server.wait(crashed) == 137
    with PostgresSaver(dsn, pool_size=1) as saver:
        assert saver.get(threads[0]).values == {"n": 7}
    resumer = server.spawn("work", dsn=dsn, threads=threads, seed=1)
    assert server.wait(resumer) == 0
    figures = check_threads(dsn, threads, killed=set())  # even the crashed worker ran each once
    assert figures["reruns"] == 0 and figures["resumed"] == 1


# what a statement costs the server


def _plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", ()):
        yield from _plan_nodes(child)


def test_the_newest_header_is_read_by_its_whole_key_however_long_the_thread(dsn):
    """A run's first read (sent with its lease) finds the newest checkpoint by its key: a
    join of the head with the checkpoints was planned as a scan of the thread's every
    checkpoint, filtered on the head's id, so a run started slower the longer its thread."""
    with PostgresSaver(dsn) as saver, saver._pool.connection() as conn:
        parent = None
        for _ in range(30):
            parent = child_of(parent)
            saver.put(parent)
        query = plans.head_read("t", "")
        explained = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + query.sql, query.params)
        plan = explained.fetchone()[0][0]["Plan"]
        read = [n for n in _plan_nodes(plan) if n.get("Relation Name") == "graph_agent_checkpoints"]
        assert [node["Actual Rows"] for node in read] == [1], plan


def test_the_savers_connections_plan_a_statement_once_not_at_each_execution(dsn):
    async def modes() -> list[str]:
        async with AsyncPostgresSaver(dsn) as saver:
            with saver._pool.connection() as conn:
                found = [conn.execute("SHOW plan_cache_mode").fetchone()[0]]
            assert saver._apool is not None
            async with saver._apool.connection() as aconn:
                cursor = await aconn.execute("SHOW plan_cache_mode")
                found.append((await cursor.fetchone())[0])
        return found

    assert asyncio.run(modes()) == ["force_generic_plan", "force_generic_plan"]


@pytest.mark.parametrize(("durability", "setting"), [("normal", "off"), ("full", "on")])
def test_a_savers_commits_wait_for_the_disk_only_with_full_durability(dsn, durability, setting):
    """``durability="normal"`` (the default, as SqliteSaver's) sets ``synchronous_commit`` off
    on every connection of the saver, sync and async; ``"full"`` leaves PostgreSQL's default."""

    async def settings() -> list[str]:
        async with AsyncPostgresSaver(dsn, durability=durability) as saver:
            with saver._pool.connection() as conn:
                found = [conn.execute("SHOW synchronous_commit").fetchone()[0]]
                found.append(conn.execute("SHOW plan_cache_mode").fetchone()[0])
            assert saver._apool is not None
            async with saver._apool.connection() as aconn:
                cursor = await aconn.execute("SHOW synchronous_commit")
                found.append((await cursor.fetchone())[0])
        return found

    assert asyncio.run(settings()) == [setting, "force_generic_plan", setting]
    assert PostgresSaver.__init__.__kwdefaults__["durability"] == "normal"


def test_an_unknown_durability_is_refused_naming_the_choices(dsn):
    with pytest.raises(ValueError, match=r"durability='fsync'.*'normal' or 'full'"):
        PostgresSaver(dsn, durability="fsync")  # type: ignore[arg-type]


def test_taking_a_lease_commits_without_waiting_for_the_disk(dsn):
    """A lease binds only while its holder's session lives (a crash of the server ends every
    session), so its commit need not wait for the disk (~0.2 ms of the server's CPU each):
    its transaction says so, and only its own (with ``durability="full"``: with the default,
    no commit of the saver waits)."""
    with PostgresSaver(dsn, durability="full") as saver, saver._pool.connection() as conn:
        lease = saver.acquire("t")
        query = next(plans.acquire_plan(lease, saver._session.key, saver.lease_ttl))
        with conn.transaction():
            assert conn.execute(query.sql, query.params).fetchall() == [(lease.owner,)]
            inside = conn.execute("SHOW synchronous_commit").fetchone()
        after = conn.execute("SHOW synchronous_commit").fetchone()
        saver.release(lease)
    assert (inside, after) == (("off",), ("on",))
