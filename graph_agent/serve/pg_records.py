"""The server's records in PostgreSQL: threads, runs (a durable job queue) and their events,
shared by every server and worker process on the same database.

Same rows as :class:`~graph_agent.serve.records.Records` (tables prefixed
``graph_agent_serve_``, in the DSN's ``search_path`` schema), plus what a queue needs on a run:
``seq`` (its place in the queue), the request it carries, the ``worker`` process that claimed it
(a random key on which that process's session holds an advisory lock), ``attempt`` (so
``worker`` and ``attempt`` name one claim), ``alive_until`` (the claim's heartbeat: the
database's time until which its worker vouches for it), ``cancel`` (the action a client asked
for) and the ``result``. Every change a client may be waiting for is
announced through the notifier: ``NOTIFY`` sent by the very statement that commits it, or a
Redis message published once it is committed (see :mod:`graph_agent.serve.notify`).

Two faces on the same SQL: the API's reads and its rare writes are sync calls on a
``psycopg_pool.ConnectionPool`` (one short statement each, as the SQLite records' are); what a
run does while it runs (start, claim, events, end) is awaited on an ``AsyncConnectionPool``
opened in the server's event loop (:meth:`aopen`), so hundreds of runs wait on PostgreSQL's
commits at once instead of one after another on the loop. Each of those is one round trip: one
statement, or a pipelined transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from graph_agent.checkpoint.postgres_driver import ageneric_plans, generic_plans, has_rows
from graph_agent.graph.errors import GraphSetupError
from graph_agent.serve.notify import Notifier, PostgresNotifier
from graph_agent.serve.pg_schema import (
    RUN_COLUMNS,
    SCHEMA,
    SCHEMA_LOCK,
    START_RUN,
    THREAD_COLUMNS,
)
from graph_agent.serve.records import (
    Execute,
    RunRecord,
    RunStatus,
    ThreadRecord,
    ThreadStatus,
    _run_record,
    _thread,
    now,
)

__all__ = ["CHANNEL", "UNFINISHED", "WORKER_TIMEOUT", "Claim", "PostgresRecords", "StartedRun"]

CHANNEL = "graph_agent_serve"
"""The NOTIFY channel's prefix (see :attr:`PostgresRecords.channel`). Payloads: ``q`` (a run
to claim), ``e:<run_id>`` (new events of the run), ``d:<run_id>`` (its row changed: it ended,
was cancelled or deleted), ``c:<run_id>:<action>`` (a client asked to cancel it) and
``f:<run_id>`` (a client follows it from another process: write its events at once)."""

WORKER_TIMEOUT = 30.0
"""Seconds a claim outlives its worker's last heartbeat by default (the checkpoint saver's
default ``lease_ttl`` too): a worker that is alive renews its claims every third of that."""

_log = logging.getLogger(__name__)

_NARROW_EVENT_IDS = (
    # tables made before each attempt of a run numbered its events in a range of its own
    "SELECT EXISTS (SELECT FROM information_schema.columns WHERE "
    "table_schema = current_schema() AND table_name = 'graph_agent_serve_events' "
    "AND column_name = 'seq' AND data_type = 'integer')"
)
_WIDEN_EVENT_IDS = "ALTER TABLE graph_agent_serve_events ALTER COLUMN seq TYPE BIGINT"
WIDEN_LOCK_TIMEOUT = 5.0
"""Seconds the start-up migration of a 32-bit ``graph_agent_serve_events.seq`` waits for its
lock before it leaves the table as it is (it would otherwise queue every run's event writes
behind it for as long as the live processes hold the table)."""
UNFINISHED = ("pending", "running")

_UPSERT_THREAD = (
    f"INSERT INTO graph_agent_serve_threads ({THREAD_COLUMNS}) "
    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (thread_id) DO UPDATE SET "
    "updated_at = EXCLUDED.updated_at, metadata = EXCLUDED.metadata, "
    "status = EXCLUDED.status, assistant_id = EXCLUDED.assistant_id"
)
_UNFINISHED_RUNS = (
    "SELECT run_id FROM graph_agent_serve_runs WHERE thread_id = %s "
    "AND status IN ('pending', 'running') ORDER BY seq DESC"
)
_ALIVE_UNTIL = "clock_timestamp() + %s * interval '1 second'"
"""A claim's heartbeat deadline, on the database's clock (workers' clocks never compared);
NULL for a run nobody claims."""
_NOTIFY = "SELECT pg_notify(%s, %s)"
_CANCEL = (
    "UPDATE graph_agent_serve_runs SET status = CASE status WHEN 'pending' THEN "
    "'interrupted' ELSE status END, cancel = %s, updated_at = %s WHERE run_id = %s "
    "AND status IN ('pending', 'running')"
)
_DELETE_PENDING = "DELETE FROM graph_agent_serve_runs WHERE run_id = %s AND status = 'pending'"
_RUN_BY_ID = f"SELECT {RUN_COLUMNS}, result, cancel FROM graph_agent_serve_runs WHERE run_id = %s"
_EVENTS = (
    "SELECT seq, event, data FROM graph_agent_serve_events WHERE run_id = %s "
    "AND seq > %s ORDER BY seq"
)
_CLAIM = (
    "UPDATE graph_agent_serve_runs SET status = 'running', worker = %s, "
    f"attempt = attempt + 1, updated_at = %s, alive_until = {_ALIVE_UNTIL} WHERE run_id = ("
    " SELECT r.run_id FROM graph_agent_serve_runs r WHERE r.status = 'pending'"
    " AND NOT EXISTS (SELECT 1 FROM graph_agent_serve_runs e WHERE"
    "  e.thread_id = r.thread_id AND e.seq < r.seq AND e.status IN ('pending', 'running'))"
    " ORDER BY r.seq LIMIT 1 FOR UPDATE SKIP LOCKED)"
    f" RETURNING {RUN_COLUMNS}, request, attempt, cancel"
)
_HELD = (
    "SELECT run_id, attempt FROM unnest(%(runs)s::text[], %(attempts)s::int[]) AS h (run_id, "
    "attempt)"
)
_UPKEEP = (
    # the heartbeat: the claims this worker holds (and still runs) are renewed; those missing
    # from what it returns were taken over
    "WITH beat AS (UPDATE graph_agent_serve_runs r SET alive_until = clock_timestamp() + "
    "%(timeout)s * interval '1 second' "
    f"FROM ({_HELD}) h WHERE %(beat)s AND r.run_id = h.run_id AND r.attempt = h.attempt "
    "AND r.worker = %(worker)s AND r.status = 'running' RETURNING r.run_id), "
    # runs whose worker is gone (its session, and so its advisory lock, ended) or silent (no
    # heartbeat since the deadline it set: frozen, hung, or cut off by the network)
    "orphans AS (UPDATE graph_agent_serve_runs SET status = 'pending', updated_at = %(now)s "
    "WHERE status = 'running' AND worker IS NOT NULL "
    f"AND (worker, run_id, attempt) NOT IN (SELECT %(worker)s::bigint, * FROM ({_HELD}) h) "
    "AND (alive_until < clock_timestamp() OR pg_try_advisory_xact_lock(worker)) "
    "RETURNING run_id) "
    ", notified AS (SELECT pg_notify(%(channel)s, 'q') FROM (SELECT FROM orphans LIMIT 1) o "
    "WHERE %(in_band)s) "
    "SELECT 'held', run_id FROM beat UNION ALL SELECT 'orphan', run_id FROM orphans "
    "UNION ALL SELECT 'notified', count(*)::text FROM notified"
)
_INSERT_EVENTS = (
    "INSERT INTO graph_agent_serve_events (run_id, seq, event, data) "
    "SELECT %(run)s, e.seq, e.event, e.data "
    "FROM unnest(%(seqs)s::bigint[], %(events)s::text[], %(datas)s::text[]) "
    "AS e (seq, event, data) "
)
_ADD_EVENTS = (
    # only while the claim that ran them holds: a worker taken for dead writes nothing more.
    # The run's row is share-locked until they are in, so a claim made meanwhile waits for
    # them, and the new claimer reads them before it numbers its own
    f"WITH added AS ({_INSERT_EVENTS} WHERE EXISTS (SELECT FROM graph_agent_serve_runs "
    "WHERE run_id = %(run)s AND worker = %(worker)s AND attempt = %(attempt)s "
    "AND status = 'running' FOR SHARE) ON CONFLICT DO NOTHING) "
)
_FINISH_RUN = (
    # its commit waits for the disk, unlike the checkpoints' (the saver's durability="normal"):
    # it writes them to disk with it, so what a client is told of a run's end (the run's
    # record, its result, its thread's checkpoints) is all there after a crash of PostgreSQL
    "WITH finished AS (UPDATE graph_agent_serve_runs SET status = %(status)s, "
    "updated_at = %(now)s, result = %(result)s WHERE run_id = %(run)s AND worker = %(worker)s "
    "AND attempt = %(attempt)s AND status = 'running' RETURNING run_id), "
    # the last events, with the end (the claim still holds: the update locked its row)
    f"added AS ({_INSERT_EVENTS} WHERE EXISTS (SELECT FROM finished) ON CONFLICT DO NOTHING), "
    # the thread is busy while another of its runs is to come (this run still reads as
    # running here: the statement sees the rows as they were before it)
    "others AS (SELECT status FROM graph_agent_serve_runs WHERE thread_id = %(thread)s "
    "AND run_id <> %(run)s AND status IN ('pending', 'running')), "
    "thread AS (UPDATE graph_agent_serve_threads SET updated_at = %(now)s, status = CASE "
    "WHEN EXISTS (SELECT FROM others) THEN 'busy' ELSE %(thread_status)s END "
    "WHERE thread_id = %(thread)s AND EXISTS (SELECT FROM finished)) "
    # only the claim holder announces: a refused end tells followers nothing; but a run
    # deleted meanwhile (with its thread) is told gone to its followers elsewhere
    ", ended AS (SELECT EXISTS (SELECT FROM finished) AS finished, EXISTS (SELECT FROM finished) "
    "AND EXISTS (SELECT FROM others WHERE status = 'pending') AS waiting, NOT EXISTS (SELECT "
    "FROM graph_agent_serve_runs WHERE run_id = %(run)s) AS gone) "
    "SELECT finished, waiting, "
    "CASE WHEN %(in_band)s AND (finished OR gone) THEN pg_notify(%(channel)s, 'd:' || %(run)s) "
    "END, "
    "CASE WHEN %(in_band)s AND waiting THEN pg_notify(%(channel)s, 'q') END, gone FROM ended"
)
_ROLLED_BACK = (
    "WITH deleted AS (DELETE FROM graph_agent_serve_runs WHERE run_id = %(run)s "
    "AND worker = %(worker)s AND attempt = %(attempt)s RETURNING run_id), "
    "events AS (DELETE FROM graph_agent_serve_events WHERE run_id = %(run)s "
    "AND EXISTS (SELECT FROM deleted)), "
    "others AS (SELECT status FROM graph_agent_serve_runs WHERE thread_id = %(thread)s "
    "AND run_id <> %(run)s AND status IN ('pending', 'running')), "
    "thread AS (UPDATE graph_agent_serve_threads SET updated_at = %(now)s, status = CASE "
    "WHEN EXISTS (SELECT FROM others) THEN 'busy' ELSE 'idle' END "
    "WHERE thread_id = %(thread)s AND EXISTS (SELECT FROM deleted)) "
    ", ended AS (SELECT EXISTS (SELECT FROM deleted) AS deleted, EXISTS (SELECT FROM deleted) "
    "AND EXISTS (SELECT FROM others WHERE status = 'pending') AS waiting) "
    "SELECT deleted, waiting, "
    "CASE WHEN %(in_band)s AND deleted THEN pg_notify(%(channel)s, 'd:' || %(run)s) END, "
    "CASE WHEN %(in_band)s AND waiting THEN pg_notify(%(channel)s, 'q') END FROM ended"
)


Ending = Literal["ended", "taken over", "deleted"]
"""What recording a run's end did (see :meth:`PostgresRecords.afinish_run`)."""


@dataclass(frozen=True, kw_only=True)
class Claim:
    """One claim on a run: the worker process that holds it and the run's attempt it made.
    Whatever a run writes is refused once its claim no longer holds (another worker took the
    run over)."""

    worker: int
    attempt: int


@dataclass(kw_only=True)
class Upkept:
    """What :meth:`PostgresRecords.aupkeep` found."""

    held: set[str] = field(default_factory=set)
    """The runs whose claims were renewed (of those asked for)."""
    orphans: list[str] = field(default_factory=list)
    """The runs put back in the queue."""


@dataclass(kw_only=True)
class StartedRun:
    """What :meth:`PostgresRecords.astart_run` did."""

    before: list[str] = field(default_factory=list)
    """The ids of the thread's runs that were unfinished before it, newest first."""
    started: bool = False
    """Whether the run was written (not with ``reject`` while ``before`` is not empty)."""
    claimed: bool = False
    """Whether it was written already claimed by the worker that asked."""


class PostgresRecords:
    """Threads, runs and events in PostgreSQL.

    Args:
        dsn: A libpq connection string (``options=-c search_path=...`` picks the schema).
        pool_size: Most connections each pool (sync, async) opens.
        notifier: How processes tell each other of changes (default: ``LISTEN``/``NOTIFY``
            on this database; :class:`~graph_agent.serve.notify.RedisNotifier` for Redis).
        worker_timeout: Seconds after its worker's last heartbeat that a claimed run is taken
            for orphaned and claimed again by another worker, even while the worker's session
            lives (a frozen or hung process, a host cut off before PostgreSQL noticed). Give
            the checkpoint saver the same ``lease_ttl``: the run resumes once the silent
            worker's lease on its thread lapsed too.

    Raises:
        GraphSetupError: ``worker_timeout`` is not a positive number of seconds.
    """

    def __init__(
        self,
        dsn: str,
        *,
        pool_size: int = 10,
        notifier: Notifier | None = None,
        worker_timeout: float = WORKER_TIMEOUT,
    ) -> None:
        import psycopg
        import psycopg_pool

        if not (isinstance(worker_timeout, int | float) and math.isfinite(worker_timeout)) or (
            worker_timeout <= 0
        ):
            raise GraphSetupError(
                f"PostgresRecords(worker_timeout={worker_timeout!r}): give a positive number of "
                "seconds, e.g. 30"
            )
        self.dsn = dsn
        self.worker_timeout = float(worker_timeout)
        self.pool_size = pool_size
        self.notifier = notifier if notifier is not None else PostgresNotifier(dsn)
        self._in_band = self.notifier.in_band
        self._publishing: set[asyncio.Task[None]] = set()
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
                for statement in SCHEMA:
                    conn.execute(statement)
                found = conn.execute("SELECT coalesce(current_schema(), '')").fetchone()
            self.wide_event_ids = _widen_event_ids(conn)
            """Whether the events table holds 64-bit ids, as each attempt of a run numbering its
            events in a range of its own needs (see
            :func:`graph_agent.serve.queue_events.first_event_id`)."""
        schema = str(found[0]) if found else ""
        self.channel = f"{CHANNEL}_{hashlib.sha256(schema.encode()).hexdigest()[:12]}"
        """The NOTIFY channel of the processes on these tables (notifications are per database:
        a server on another schema of the same database never hears them)."""
        self._pool: psycopg_pool.ConnectionPool[Any] = psycopg_pool.ConnectionPool(
            dsn,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            configure=generic_plans,
            open=True,
        )
        self._apool: psycopg_pool.AsyncConnectionPool[Any] | None = None

    def close(self) -> None:
        self._pool.close()

    async def aopen(self) -> None:
        """Open the async pool, in the event loop that will await the ``a...`` methods."""
        import psycopg_pool

        if self._apool is None:
            self._apool = psycopg_pool.AsyncConnectionPool(
                self.dsn,
                min_size=1,
                max_size=self.pool_size,
                kwargs={"autocommit": True},
                configure=ageneric_plans,
                open=False,
                name="graph_agent-serve",
            )
            await self._apool.open()

    async def aclose(self) -> None:
        if self._publishing:
            await asyncio.wait(self._publishing)
        if self._apool is not None:
            await self._apool.close()
            self._apool = None
        await self.notifier.aclose()

    async def _publish(self, payloads: list[str]) -> None:
        """Announce ``payloads`` through a notifier that is not in band (the database's own
        notifications go with the statements that commit the changes)."""
        if payloads and not self._in_band:
            await self.notifier.publish(self.channel, payloads)

    def _run(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._pool.connection() as conn:
            cursor = conn.execute(sql, args)
            return cursor.fetchall() if has_rows(cursor) else []

    def aconnection(self) -> Any:
        """A connection of the async pool, for a transaction of another module's tables
        (``async with records.aconnection() as conn``; autocommit unless in
        ``conn.transaction()``): the crons' (:mod:`graph_agent.serve.crons_store`)."""
        if self._apool is None:
            raise RuntimeError("PostgresRecords.aopen() was not awaited: the async pool is shut")
        return self._apool.connection()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Execute]:
        """One transaction on a connection of the sync pool, for records of other kinds kept
        beside these (assistants): as :meth:`Records.transaction`, with ``%s`` parameters."""
        with self._pool.connection() as conn, conn.transaction():

            def execute(sql: str, args: Sequence[Any]) -> list[tuple[Any, ...]]:
                cursor = conn.execute(sql, args)
                return cursor.fetchall() if has_rows(cursor) else []

            yield execute

    async def _arun(self, sql: str, args: Any = ()) -> list[tuple[Any, ...]]:
        if self._apool is None:
            raise RuntimeError("PostgresRecords.aopen() was not awaited: the async pool is shut")
        async with self._apool.connection() as conn:
            cursor = await conn.execute(sql, args)
            return await cursor.fetchall() if has_rows(cursor) else []

    # threads
    def put_thread(self, thread: ThreadRecord) -> None:
        self._run(_UPSERT_THREAD, thread.row())

    def thread(self, thread_id: str) -> ThreadRecord | None:
        if _unstorable(thread_id):
            return None
        rows = self._run(
            f"SELECT {THREAD_COLUMNS} FROM graph_agent_serve_threads WHERE thread_id = %s",
            (thread_id,),
        )
        return _thread(rows[0]) if rows else None

    def threads(self) -> list[ThreadRecord]:
        """Every thread, newest first."""
        rows = self._run(
            f"SELECT {THREAD_COLUMNS} FROM graph_agent_serve_threads ORDER BY created_at DESC"
        )
        return [_thread(row) for row in rows]

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread, its runs and their events (one statement: all or nothing)."""
        self._run(
            "WITH runs AS (DELETE FROM graph_agent_serve_runs WHERE thread_id = %s "
            "RETURNING run_id), events AS (DELETE FROM graph_agent_serve_events "
            "WHERE run_id IN (SELECT run_id FROM runs)) "
            "DELETE FROM graph_agent_serve_threads WHERE thread_id = %s",
            (thread_id, thread_id),
        )

    # runs: the API's side
    async def astart_run(
        self,
        run: RunRecord,
        request: str,
        *,
        thread: ThreadRecord | None = None,
        worker: int | None = None,
    ) -> StartedRun:
        """Start a run on its thread, in one transaction under the thread's lock (so runs
        started at once on one thread, from any process, queue in order): one statement.

        The thread's record is written (``thread``, else its status and assistant) and the run
        queued, unless the run's ``multitask_strategy`` is ``reject`` and another run is still
        unfinished on the thread. With ``interrupt``/``rollback`` those others are asked to
        stop. With ``worker``, a run with nothing before it on its thread is written already
        claimed by that worker (``running``, attempt 1; it holds the worker's advisory lock, so
        it goes back to the queue if that process dies); otherwise it is announced to the
        workers. While another run is unfinished on the thread, ``thread`` is not written: the
        record stays that run's.
        """
        stamp = now()
        strategy = run.multitask_strategy
        written: tuple[Any, ...] = (False, None, None, None)
        if thread is not None:
            written = (True, thread.created_at, json.dumps(thread.metadata), thread.assistant_id)
        args = (
            *run.row(),
            request,
            *written,
            worker,
            self.worker_timeout,
            stamp,
            self._in_band,
            self.channel,
        )
        rows = await self._arun(START_RUN, args)
        before, claimed = list(rows[0][0]), bool(rows[0][1])
        started = StartedRun(before=before, claimed=claimed)
        if before and strategy == "reject":
            return started
        started.started = True
        if claimed:
            run.status = "running"
        if thread is not None and not before:
            thread.status, thread.updated_at = "busy", stamp
        payloads: list[str] = []
        if strategy in ("interrupt", "rollback"):
            for run_id in before:
                payloads += [f"c:{run_id}:{strategy}", f"d:{run_id}"]
        await self._publish(payloads if claimed else [*payloads, "q"])
        return started

    def run(self, thread_id: str, run_id: str) -> RunRecord | None:
        if _unstorable(thread_id, run_id):
            return None
        rows = self._run(
            f"SELECT {RUN_COLUMNS} FROM graph_agent_serve_runs "
            "WHERE run_id = %s AND thread_id = %s",
            (run_id, thread_id),
        )
        return _run_record(rows[0]) if rows else None

    def run_by_id(self, run_id: str) -> tuple[RunRecord, Any, str | None] | None:
        """A run's record, its result (None until it ended) and the cancel asked for it."""
        if _unstorable(run_id):
            return None
        return _with_result(self._run(_RUN_BY_ID, (run_id,)))

    async def arun_by_id(self, run_id: str) -> tuple[RunRecord, Any, str | None] | None:
        return _with_result(await self._arun(_RUN_BY_ID, (run_id,)))

    def runs(self, thread_id: str, *, limit: int, offset: int) -> list[RunRecord]:
        """A thread's runs, newest first."""
        rows = self._run(
            f"SELECT {RUN_COLUMNS} FROM graph_agent_serve_runs WHERE thread_id = %s "
            "ORDER BY seq DESC LIMIT %s OFFSET %s",
            (thread_id, limit, offset),
        )
        return [_run_record(row) for row in rows]

    def unfinished_runs(self, thread_id: str) -> list[str]:
        """The ids of the thread's runs still pending or running, newest first."""
        return [str(row[0]) for row in self._run(_UNFINISHED_RUNS, (thread_id,))]

    def delete_run(self, run_id: str) -> None:
        # the run's row locked before its events, as everywhere else: the other order
        # deadlocks with a statement that holds the runs table and waits on the events'
        self._run(
            "WITH runs AS (DELETE FROM graph_agent_serve_runs WHERE run_id = %s "
            "RETURNING run_id) DELETE FROM graph_agent_serve_events "
            "WHERE run_id IN (SELECT run_id FROM runs)",
            (run_id,),
        )
        if self._in_band:
            self._run(_NOTIFY, (self.channel, f"d:{run_id}"))
        else:  # called from the event loop: published as soon as it runs again
            task = asyncio.get_running_loop().create_task(self._publish([f"d:{run_id}"]))
            self._publishing.add(task)
            task.add_done_callback(self._publishing.discard)

    async def arequest_cancel(self, run_id: str, action: str) -> None:
        """Ask the run to stop: a pending one ends here (``interrupted``, or deleted for a
        rollback); the worker running one is told (``NOTIFY c:<run_id>:<action>``)."""
        if self._apool is None:
            raise RuntimeError("PostgresRecords.aopen() was not awaited: the async pool is shut")
        async with self._apool.connection() as conn, conn.pipeline(), conn.transaction():
            if action == "rollback":
                await conn.execute(_DELETE_PENDING, (run_id,))
            await conn.execute(_CANCEL, (action, now(), run_id))
            if self._in_band:
                await conn.execute(_NOTIFY, (self.channel, f"c:{run_id}:{action}"))
                await conn.execute(_NOTIFY, (self.channel, f"d:{run_id}"))
        await self._publish([f"c:{run_id}:{action}", f"d:{run_id}"])

    # runs: the workers' side
    async def aclaim(self, worker: int) -> tuple[RunRecord, str, int, str | None] | None:
        """Claim the oldest pending run whose thread has no earlier unfinished run, for
        ``worker``: its record, its request (JSON), its attempt (1 on the first claim) and the
        cancel asked for it meanwhile."""
        rows = await self._arun(_CLAIM, (worker, now(), self.worker_timeout))
        if not rows:
            return None
        row = rows[0]
        return _run_record(row[:9]), str(row[9]), int(row[10]), row[11]

    async def aupkeep(
        self, worker: int, held: Sequence[tuple[str, int]], *, beat: bool = True
    ) -> Upkept:
        """One round trip of a worker's upkeep. With ``beat``, renew the claims ``held`` by
        ``worker`` (``(run_id, attempt)`` pairs) for :attr:`worker_timeout`; and put back in the
        queue the runs of other claims whose worker is gone (its session, and so its advisory
        lock, ended) or silent (its heartbeat is past its deadline): they resume from their
        last checkpoint on whoever claims them. The claims ``held`` are never taken for
        orphans here, beat or not (this worker vouches for them by asking)."""
        rows = await self._arun(
            _UPKEEP,
            {
                "timeout": self.worker_timeout,
                "beat": beat,
                "runs": [run_id for run_id, _ in held],
                "attempts": [attempt for _, attempt in held],
                "worker": worker,
                "now": now(),
                "in_band": self._in_band,
                "channel": self.channel,
            },
        )
        found = Upkept()
        for kind, run_id in rows:
            if kind == "held":
                found.held.add(str(run_id))
            elif kind == "orphan":
                found.orphans.append(str(run_id))
        await self._publish(["q"] if found.orphans else [])
        return found

    async def aholds(self, run_id: str, claim: Claim) -> bool:
        """Whether ``claim`` still holds the run (no other worker took it over)."""
        rows = await self._arun(
            "SELECT EXISTS (SELECT FROM graph_agent_serve_runs WHERE run_id = %s "
            "AND worker = %s AND attempt = %s AND status = 'running')",
            (run_id, claim.worker, claim.attempt),
        )
        return bool(rows and rows[0][0])

    async def afinish_run(
        self,
        run_id: str,
        thread_id: str,
        status: RunStatus,
        result: Any,
        claim: Claim,
        thread_status: ThreadStatus,
        events: Sequence[tuple[int, str, str]] = (),
    ) -> Ending:
        """Record how a run ended under ``claim``, with its last events, and set its thread's
        status (``busy`` while another run is to come): ``"ended"``; ``"taken over"`` when the
        claim no longer holds (another worker took the run over), and nothing was written nor
        announced; ``"deleted"`` when the run's row is gone (its thread was deleted while it
        ran): nothing written, and its followers are told (``d:``). One statement; waiters are
        told (``d:``), and workers too if a run waits on the thread (``q``)."""
        rows = await self._arun(
            _FINISH_RUN,
            {
                **_event_arrays(run_id, events, claim),
                "status": status,
                "now": now(),
                "result": json.dumps(result),
                "thread": thread_id,
                "thread_status": thread_status,
                "in_band": self._in_band,
                "channel": self.channel,
            },
        )
        row = rows[0] if rows else (False,) * 5
        finished, waiting, gone = bool(row[0]), bool(row[1]), bool(row[4])
        if finished or gone:  # a lost claim wrote nothing: its followers go on with the new's
            await self._publish([f"d:{run_id}", *(["q"] if waiting else [])])
        return "ended" if finished else "deleted" if gone else "taken over"

    async def arolled_back(self, run_id: str, thread_id: str, claim: Claim) -> bool:
        """Delete a run that was rolled back under ``claim`` (if it still holds), with its
        events; its thread goes idle unless another run is to come. Announced (``d:``) only
        when the claim held; False when it no longer did (another worker took the run over),
        and nothing was deleted."""
        args: dict[str, Any] = {"run": run_id, "thread": thread_id, "now": now()}
        args |= {"worker": claim.worker, "attempt": claim.attempt}
        rows = await self._arun(
            _ROLLED_BACK, {**args, "in_band": self._in_band, "channel": self.channel}
        )
        deleted, waiting = (bool(rows[0][0]), bool(rows[0][1])) if rows else (False, False)
        if deleted:  # as for an end: only the claim holder announces it
            await self._publish([f"d:{run_id}", *(["q"] if waiting else [])])
        return deleted

    # events
    async def aadd_events(
        self, run_id: str, events: Sequence[tuple[int, str, str]], claim: Claim
    ) -> None:
        """Store a run's events ``(seq, event, data as JSON text)`` while ``claim`` holds, and
        announce them."""
        await self._arun(
            _ADD_EVENTS
            + "SELECT CASE WHEN %(in_band)s THEN pg_notify(%(channel)s, 'e:' || %(run)s) END",
            {
                **_event_arrays(run_id, events, claim),
                "in_band": self._in_band,
                "channel": self.channel,
            },
        )
        await self._publish([f"e:{run_id}"])

    async def aannounce(self, payload: str) -> None:
        """Notify every process on these tables (see :data:`CHANNEL` for the payloads)."""
        if self._in_band:
            await self._arun(_NOTIFY, (self.channel, payload))
        await self._publish([payload])

    def events(self, run_id: str, after: int = -1) -> list[tuple[int, str, str]]:
        """A run's events numbered above ``after``, in order: ``(seq, event, data)``."""
        return _events(self._run(_EVENTS, (run_id, after)))

    async def aevents(self, run_id: str, after: int = -1) -> list[tuple[int, str, str]]:
        return _events(await self._arun(_EVENTS, (run_id, after)))


def _widen_event_ids(conn: Any) -> bool:
    """Widen a 32-bit events table to 64-bit ids (a rewrite of the table), in a transaction of
    its own that waits at most :data:`WIDEN_LOCK_TIMEOUT` for the table: whether the ids are
    64-bit now. On a busy table it is left as it is, with a warning saying how to widen it
    offline; runs go on with 32-bit ids (see
    :func:`graph_agent.serve.queue_events.first_event_id`)."""
    import psycopg

    if not conn.execute(_NARROW_EVENT_IDS).fetchone()[0]:
        return True
    try:
        with conn.transaction():
            conn.execute(
                "SELECT set_config('lock_timeout', %s, true)", (f"{WIDEN_LOCK_TIMEOUT * 1000:.0f}",)
            )
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            if conn.execute(_NARROW_EVENT_IDS).fetchone()[0]:  # not done meanwhile
                conn.execute(_WIDEN_EVENT_IDS)
    except psycopg.errors.LockNotAvailable:
        _log.warning(
            "graph-agent serve: the table graph_agent_serve_events has 32-bit event ids and was "
            "too busy to widen within %s s; runs go on with 32-bit ids. Widen it while no "
            "server or worker runs on it: %s;",
            WIDEN_LOCK_TIMEOUT,
            _WIDEN_EVENT_IDS,
        )
        return False
    return True


def _unstorable(*ids: str) -> bool:
    """Whether an id a client sent (a path's ``%00``) holds NUL, which PostgreSQL's text never
    holds: no row has it (asking would be an error, not an answer)."""
    return any("\x00" in text for text in ids)


def _with_result(rows: list[tuple[Any, ...]]) -> tuple[RunRecord, Any, str | None] | None:
    if not rows:
        return None
    row = rows[0]
    return _run_record(row[:9]), json.loads(row[9]) if row[9] else None, row[10]


def _events(rows: list[tuple[Any, ...]]) -> list[tuple[int, str, str]]:
    return [(int(seq), str(event), str(data)) for seq, event, data in rows]


def _event_arrays(
    run_id: str, events: Sequence[tuple[int, str, str]], claim: Claim
) -> dict[str, Any]:
    return {
        "run": run_id,
        "worker": claim.worker,
        "attempt": claim.attempt,
        "seqs": [seq for seq, _, _ in events],
        "events": [event for _, event, _ in events],
        "datas": [data for _, _, data in events],
    }
