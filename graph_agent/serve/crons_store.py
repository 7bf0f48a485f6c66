"""The crons' tables: in the SQLite file of the server's records, or in PostgreSQL beside
them (through :class:`~graph_agent.serve.pg_records.PostgresRecords`' pool).

Two tables: ``graph_agent_serve_crons`` (a cron each) and ``graph_agent_serve_cron_runs`` (a
cron's due run, recorded as it is claimed and kept until a run of its id exists, or, for a
stateless run whose thread is to be deleted, until that is done). How they make each due run
start exactly once is in :mod:`graph_agent.serve.crons`. Times are ISO texts in UTC with
microseconds (:func:`~graph_agent.serve.crons.stamp`), which compare as the times do.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any, Protocol

from graph_agent.serve.crons_schedule import CronRecord, Due, RecordedRun, stamp
from graph_agent.serve.pg_records import PostgresRecords
from graph_agent.serve.records import Records

__all__ = ["CronStore", "Held", "PostgresCrons", "SqliteCrons"]

_CRON_COLUMNS = (
    "cron_id, assistant_id, thread_id, schedule, timezone, payload, metadata, "
    "on_run_completed, end_time, next_run_date, enabled, created_at, updated_at"
)
_RUN_COLUMNS = "run_id, cron_id, thread_id, due_at, body, thread_metadata, delete_thread"
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS graph_agent_serve_crons (
        cron_id TEXT PRIMARY KEY, assistant_id TEXT NOT NULL, thread_id TEXT,
        schedule TEXT NOT NULL, timezone TEXT, payload TEXT NOT NULL, metadata TEXT NOT NULL,
        on_run_completed TEXT, end_time TEXT, next_run_date TEXT, enabled INTEGER NOT NULL,
        created_at TEXT NOT NULL, updated_at TEXT NOT NULL)""",
    """CREATE INDEX IF NOT EXISTS graph_agent_serve_crons_due
        ON graph_agent_serve_crons (next_run_date) WHERE enabled = 1""",
    """CREATE TABLE IF NOT EXISTS graph_agent_serve_cron_runs (
        run_id TEXT PRIMARY KEY, cron_id TEXT NOT NULL, thread_id TEXT NOT NULL,
        due_at TEXT NOT NULL, body TEXT NOT NULL, thread_metadata TEXT,
        delete_thread INTEGER NOT NULL, started INTEGER NOT NULL DEFAULT 0)""",
    """CREATE INDEX IF NOT EXISTS graph_agent_serve_cron_runs_unstarted
        ON graph_agent_serve_cron_runs (due_at) WHERE started = 0""",
)
_SCHEMA_LOCK = 0x6761_6372  # "gacr": one process at a time makes the tables
_PUT = (
    f"INSERT INTO graph_agent_serve_crons ({_CRON_COLUMNS}) VALUES "
    "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (cron_id) DO UPDATE SET "
    "schedule = excluded.schedule, timezone = excluded.timezone, payload = excluded.payload, "
    "metadata = excluded.metadata, on_run_completed = excluded.on_run_completed, "
    "end_time = excluded.end_time, enabled = excluded.enabled, updated_at = excluded.updated_at, "
    # a round may have claimed the cron since it was read: its next run time is written only
    # when the cron's timing changed
    "next_run_date = CASE WHEN %s = 1 THEN excluded.next_run_date "
    "ELSE graph_agent_serve_crons.next_run_date END"
)
_GET = f"SELECT {_CRON_COLUMNS} FROM graph_agent_serve_crons WHERE cron_id = %s"
_DELETE_UNSTARTED = "DELETE FROM graph_agent_serve_cron_runs WHERE cron_id = %s AND started = 0"
_DELETE = "DELETE FROM graph_agent_serve_crons WHERE cron_id = %s"
_DUE = (
    f"SELECT {_CRON_COLUMNS} FROM graph_agent_serve_crons WHERE enabled = 1 "
    "AND next_run_date <= %s ORDER BY next_run_date LIMIT %s"
)
_SET_NEXT = "UPDATE graph_agent_serve_crons SET next_run_date = %s WHERE cron_id = %s"
_RECORD_RUN = (
    f"INSERT INTO graph_agent_serve_cron_runs ({_RUN_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)"
)
_UNSTARTED = (
    f"SELECT {_RUN_COLUMNS} FROM graph_agent_serve_cron_runs WHERE started = 0 "
    "ORDER BY due_at LIMIT 1"
)
_MARK_STARTED = "UPDATE graph_agent_serve_cron_runs SET started = 1 WHERE run_id = %s"
_FORGET_RUN = "DELETE FROM graph_agent_serve_cron_runs WHERE run_id = %s"
_TO_FORGET = (
    "SELECT run_id, thread_id FROM graph_agent_serve_cron_runs WHERE started = 1 "
    "ORDER BY due_at LIMIT %s"
)


class Held:
    """A recorded run not started yet, held (locked, in PostgreSQL) while it starts."""

    def __init__(self, run: RecordedRun, settle: Callable[[bool], Any]) -> None:
        self.run = run
        self._settle = settle

    async def settle(self, keep: bool) -> None:
        """Mark it started (kept to delete its thread later), or forget it (``keep=False``)."""
        await self._settle(keep)


Decide = Callable[[CronRecord, datetime], Due]


class CronStore(Protocol):
    """Where crons and their due runs are kept (:class:`SqliteCrons`, :class:`PostgresCrons`)."""

    async def put(self, cron: CronRecord, *, next_too: bool = True) -> None:
        """Write ``cron`` (a new one, or changes: its next run time only with ``next_too``)."""
        ...

    async def get(self, cron_id: str) -> CronRecord | None: ...
    async def delete(self, cron_id: str) -> bool: ...
    async def search(self, assistant_id: str | None, thread_id: str | None) -> list[CronRecord]:
        """The crons of the assistant and thread (either None: any), oldest first."""
        ...

    async def claim_due(self, moment: datetime, limit: int, decide: Decide) -> int:
        """Claim up to ``limit`` crons due at ``moment``, ``decide`` telling each one's next
        run time and the run to record; how many were claimed."""
        ...

    def next_unstarted(self) -> contextlib.AbstractAsyncContextManager[Held | None]: ...
    async def started_to_forget(self, limit: int) -> list[tuple[str, str]]: ...
    async def forget_run(self, run_id: str) -> None: ...


def _search_sql(assistant_id: str | None, thread_id: str | None) -> tuple[str, tuple[Any, ...]]:
    where, args = [], []
    if assistant_id is not None:
        where.append("assistant_id = %s")
        args.append(assistant_id)
    if thread_id is not None:
        where.append("thread_id = %s")
        args.append(thread_id)
    sql = f"SELECT {_CRON_COLUMNS} FROM graph_agent_serve_crons"
    if where:
        sql += " WHERE " + " AND ".join(where)
    return sql + " ORDER BY created_at, cron_id", tuple(args)


def _cron_row(cron: CronRecord) -> tuple[Any, ...]:
    return (
        cron.cron_id,
        cron.assistant_id,
        cron.thread_id,
        cron.schedule,
        cron.timezone,
        json.dumps(cron.payload),
        json.dumps(cron.metadata),
        cron.on_run_completed,
        cron.end_time,
        cron.next_run_date,
        int(cron.enabled),
        cron.created_at,
        cron.updated_at,
    )


def _cron(row: tuple[Any, ...]) -> CronRecord:
    return CronRecord(
        cron_id=row[0],
        assistant_id=row[1],
        thread_id=row[2],
        schedule=row[3],
        timezone=row[4],
        payload=json.loads(row[5]),
        metadata=json.loads(row[6]),
        on_run_completed=row[7],
        end_time=row[8],
        next_run_date=row[9],
        enabled=bool(row[10]),
        created_at=row[11],
        updated_at=row[12],
    )


def _recorded(row: tuple[Any, ...]) -> RecordedRun:
    return RecordedRun(
        run_id=row[0],
        cron_id=row[1],
        thread_id=row[2],
        due_at=row[3],
        body=json.loads(row[4]),
        thread_metadata=None if row[5] is None else json.loads(row[5]),
        delete_thread=bool(row[6]),
    )


def _settled(keep: bool) -> str:
    return _MARK_STARTED if keep else _FORGET_RUN


class SqliteCrons:
    """The crons in the SQLite file of the server's records, in their transactions. One
    process owns the file, so its rounds need no locks; statements are short, as the
    records' are, and made from the event loop."""

    def __init__(self, records: Records) -> None:
        self.records = records
        with records.transaction() as execute:
            for statement in _SCHEMA:
                execute(statement, ())

    def _run(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self.records.transaction() as execute:
            return execute(sql.replace("%s", "?"), args)

    async def put(self, cron: CronRecord, *, next_too: bool = True) -> None:
        self._run(_PUT, (*_cron_row(cron), int(next_too)))

    async def get(self, cron_id: str) -> CronRecord | None:
        rows = self._run(_GET, (cron_id,))
        return _cron(rows[0]) if rows else None

    async def delete(self, cron_id: str) -> bool:
        with self.records.transaction() as execute:
            found = execute(_GET.replace("%s", "?"), (cron_id,))
            execute(_DELETE_UNSTARTED.replace("%s", "?"), (cron_id,))
            execute(_DELETE.replace("%s", "?"), (cron_id,))
        return bool(found)

    async def search(self, assistant_id: str | None, thread_id: str | None) -> list[CronRecord]:
        return [_cron(row) for row in self._run(*_search_sql(assistant_id, thread_id))]

    async def claim_due(self, moment: datetime, limit: int, decide: Decide) -> int:
        with self.records.transaction() as execute:
            rows = execute(_DUE.replace("%s", "?"), (stamp(moment), limit))
            crons = [_cron(row) for row in rows]
            for cron in crons:
                due = decide(cron, moment)
                execute(_SET_NEXT.replace("%s", "?"), (due.next_run_date, cron.cron_id))
                if due.run is not None:
                    execute(_RECORD_RUN.replace("%s", "?"), due.run.row())
        return len(crons)

    @contextlib.asynccontextmanager
    async def next_unstarted(self) -> AsyncIterator[Held | None]:
        rows = self._run(_UNSTARTED)
        if not rows:
            yield None
            return
        run = _recorded(rows[0])

        async def settle(keep: bool) -> None:
            self._run(_settled(keep), (run.run_id,))

        yield Held(run, settle)

    async def started_to_forget(self, limit: int) -> list[tuple[str, str]]:
        return [(row[0], row[1]) for row in self._run(_TO_FORGET, (limit,))]

    async def forget_run(self, run_id: str) -> None:
        self._run(_FORGET_RUN, (run_id,))


class PostgresCrons:
    """The crons in PostgreSQL, on the records' pool: any number of processes schedule them,
    each due run claimed by one (see :mod:`graph_agent.serve.crons`)."""

    def __init__(self, records: PostgresRecords) -> None:
        self.records = records
        self._made = False

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        async with self.records.aconnection() as conn:
            if not self._made:
                async with conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                    for statement in _SCHEMA:
                        await conn.execute(statement)
                self._made = True
            yield conn

    async def _run(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        async with self._connection() as conn:
            cursor = await conn.execute(sql, args)
            return await cursor.fetchall() if cursor.description is not None else []

    async def put(self, cron: CronRecord, *, next_too: bool = True) -> None:
        await self._run(_PUT, (*_cron_row(cron), int(next_too)))

    async def get(self, cron_id: str) -> CronRecord | None:
        rows = await self._run(_GET, (cron_id,))
        return _cron(rows[0]) if rows else None

    async def delete(self, cron_id: str) -> bool:
        async with self._connection() as conn, conn.transaction():
            await conn.execute(_DELETE_UNSTARTED, (cron_id,))
            cursor = await conn.execute(_DELETE, (cron_id,))
            return bool(cursor.rowcount)

    async def search(self, assistant_id: str | None, thread_id: str | None) -> list[CronRecord]:
        return [_cron(row) for row in await self._run(*_search_sql(assistant_id, thread_id))]

    async def claim_due(self, moment: datetime, limit: int, decide: Decide) -> int:
        claimed = 0
        async with self._connection() as conn, conn.transaction():
            cursor = await conn.execute(_DUE + " FOR UPDATE SKIP LOCKED", (stamp(moment), limit))
            for row in await cursor.fetchall():
                cron = _cron(row)
                due = decide(cron, moment)
                await conn.execute(_SET_NEXT, (due.next_run_date, cron.cron_id))
                if due.run is not None:
                    await conn.execute(_RECORD_RUN, due.run.row())
                claimed += 1
        return claimed

    @contextlib.asynccontextmanager
    async def next_unstarted(self) -> AsyncIterator[Held | None]:
        async with self._connection() as conn, conn.transaction():
            cursor = await conn.execute(_UNSTARTED + " FOR UPDATE SKIP LOCKED")
            rows = await cursor.fetchall()
            if not rows:
                yield None
                return
            run = _recorded(rows[0])

            async def settle(keep: bool) -> None:
                await conn.execute(_settled(keep), (run.run_id,))

            yield Held(run, settle)

    async def started_to_forget(self, limit: int) -> list[tuple[str, str]]:
        return [(row[0], row[1]) for row in await self._run(_TO_FORGET, (limit,))]

    async def forget_run(self, run_id: str) -> None:
        await self._run(_FORGET_RUN, (run_id,))
