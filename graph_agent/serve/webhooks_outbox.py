"""Where webhook deliveries wait: an outbox table next to the run records (the SQLite records'
file, or PostgreSQL beside ``graph_agent_serve_runs``), one row per run that has a webhook.

A row's ``state``:

- ``waiting``: written as the run is created; its run has not ended (or its end was not
  written here yet);
- ``due``: the run ended; ``payload`` holds what to send, from ``next_at`` on;
- ``sending``: claimed by a process delivering it, until ``next_at`` (a lease: a process killed
  while delivering leaves it to be claimed again once the lease lapsed, so a delivery is made
  at least once; receivers dedupe on the ``webhook-id`` header);
- ``delivered`` / ``failed``: done (failed: given up after the last attempt).

PostgreSQL claims rows with ``FOR UPDATE SKIP LOCKED``: any number of processes deliver, none
sends a row another holds. A ``waiting`` row whose run ended without its end being written here
(the process that ran it was killed in between) is filled from the run's record after
:data:`END_GRACE_SECONDS`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from graph_agent.serve.pg_records import PostgresRecords
from graph_agent.serve.records import Records, RunRecord, _run_record

__all__ = ["END_GRACE_SECONDS", "Due", "Orphan", "PostgresOutbox", "SqliteOutbox"]

END_GRACE_SECONDS = 5.0
"""How long after its run ended a ``waiting`` row is left for its end to be written, before it
is filled from the run's record."""
LOST_SECONDS = 3600.0
"""How long a ``waiting`` row whose run's record is gone (deleted with its thread) is kept."""


@dataclass(frozen=True, kw_only=True)
class Due:
    """A delivery claimed: the run's id, the URL, what to send and which attempt this is."""

    run_id: str
    url: str
    payload: dict[str, Any]
    attempt: int


@dataclass(frozen=True, kw_only=True)
class Orphan:
    """A ``waiting`` row whose run ended long ago (its record, and result where kept) or whose
    record is gone (``record`` None)."""

    run_id: str
    url: str
    record: RunRecord | None
    result: Any = None


_SQLITE_SCHEMA = """CREATE TABLE IF NOT EXISTS webhooks (
    run_id TEXT PRIMARY KEY, url TEXT NOT NULL, payload TEXT, state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0, next_at REAL NOT NULL, created_at REAL NOT NULL,
    last_error TEXT)"""


class SqliteOutbox:
    """The outbox in the SQLite records' file (one server process works on it)."""

    def __init__(self, records: Records) -> None:
        self.records = records
        # the records' own connection and lock: a ":memory:" file has no other
        self._sql = records._run
        self._sql(_SQLITE_SCHEMA)
        self._sql("UPDATE webhooks SET state = 'due' WHERE state = 'sending'")  # a killed server's

    async def add_waiting(self, run_id: str, url: str) -> None:
        self.add_waiting_now(run_id, url)

    def add_waiting_now(self, run_id: str, url: str) -> None:
        stamp = time.time()
        self._sql(
            "INSERT INTO webhooks (run_id, url, state, next_at, created_at) "
            "VALUES (?, ?, 'waiting', ?, ?) ON CONFLICT (run_id) DO NOTHING",
            (run_id, url, stamp, stamp),
        )

    def fill_now(self, run_id: str, url: str, payload: dict[str, Any]) -> None:
        """The run ended: its payload is due now."""
        stamp = time.time()
        self._sql(
            "INSERT INTO webhooks (run_id, url, payload, state, next_at, created_at) "
            "VALUES (?, ?, ?, 'due', ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
            "payload = excluded.payload, state = 'due', next_at = excluded.next_at "
            "WHERE webhooks.state = 'waiting'",
            (run_id, url, json.dumps(payload), stamp, stamp),
        )

    async def fill(self, run_id: str, url: str, payload: dict[str, Any]) -> None:
        self.fill_now(run_id, url, payload)

    async def claim(self, limit: int, lease: float) -> list[Due]:
        stamp = time.time()
        rows = self._sql(
            "UPDATE webhooks SET state = 'sending', attempts = attempts + 1, next_at = ? "
            "WHERE run_id IN (SELECT run_id FROM webhooks WHERE state IN ('due', 'sending') "
            "AND next_at <= ? ORDER BY next_at LIMIT ?) RETURNING run_id, url, payload, attempts",
            (stamp + lease, stamp, limit),
        )
        return [_due(row) for row in rows]

    async def orphans(self, limit: int) -> list[Orphan]:
        rows = self._sql(
            "SELECT w.run_id, w.url, w.created_at, r.* FROM webhooks w LEFT JOIN runs r "
            "ON r.run_id = w.run_id WHERE w.state = 'waiting' AND (r.run_id IS NULL OR "
            "r.status NOT IN ('pending', 'running'))"
        )
        found = []
        for run_id, url, created_at, *run in rows:
            record = _run_record(tuple(run)) if run[0] is not None else None
            if _orphaned(record, created_at):
                found.append(Orphan(run_id=run_id, url=url, record=record))
        return found[:limit]

    async def settle(
        self, run_id: str, state: str, next_at: float | None, error: str | None
    ) -> None:
        """Record an attempt's outcome: ``delivered``, ``failed``, or ``due`` again at
        ``next_at`` (seconds from now)."""
        self._sql(
            "UPDATE webhooks SET state = ?, next_at = ?, last_error = ? WHERE run_id = ?",
            (state, time.time() + (next_at or 0.0), error, run_id),
        )

    async def note(self, run_id: str, delivery: dict[str, Any]) -> None:
        """Show how the delivery went on the run's record (``metadata.webhook_delivery``)."""
        self._sql(
            "UPDATE runs SET metadata = json_set(metadata, '$.webhook_delivery', json(?)) "
            "WHERE run_id = ?",
            (json.dumps(delivery), run_id),
        )


_PG_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS graph_agent_serve_webhooks (
        run_id TEXT PRIMARY KEY, url TEXT NOT NULL, payload TEXT, state TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0, next_at TIMESTAMPTZ NOT NULL,
        created_at TIMESTAMPTZ NOT NULL, last_error TEXT)""",
    """CREATE INDEX IF NOT EXISTS graph_agent_serve_webhooks_due
        ON graph_agent_serve_webhooks (next_at) WHERE state IN ('due', 'sending')""",
    """CREATE INDEX IF NOT EXISTS graph_agent_serve_webhooks_waiting
        ON graph_agent_serve_webhooks (created_at) WHERE state = 'waiting'""",
)
_PG_SCHEMA_LOCK = 0x6761_7765_6268  # an advisory lock: two processes never create it at once
_PG_FILL = (
    "INSERT INTO graph_agent_serve_webhooks (run_id, url, payload, state, next_at, created_at) "
    "VALUES (%s, %s, %s, 'due', clock_timestamp(), clock_timestamp()) ON CONFLICT (run_id) DO "
    "UPDATE SET payload = EXCLUDED.payload, state = 'due', next_at = EXCLUDED.next_at "
    "WHERE graph_agent_serve_webhooks.state = 'waiting'"
)
_PG_CLAIM = (
    "UPDATE graph_agent_serve_webhooks w SET state = 'sending', attempts = w.attempts + 1, "
    "next_at = clock_timestamp() + %s * interval '1 second' FROM (SELECT run_id FROM "
    "graph_agent_serve_webhooks WHERE state IN ('due', 'sending') AND next_at <= "
    "clock_timestamp() ORDER BY next_at LIMIT %s FOR UPDATE SKIP LOCKED) d "
    "WHERE w.run_id = d.run_id RETURNING w.run_id, w.url, w.payload, w.attempts"
)
_RUN_COLUMNS = (
    "r.run_id, r.thread_id, r.assistant_id, r.created_at, r.updated_at, r.status, r.metadata, "
    "r.multitask_strategy, r.kwargs"
)
_PG_ORPHANS = (
    f"SELECT w.run_id, w.url, extract(epoch FROM w.created_at), {_RUN_COLUMNS}, r.result "
    "FROM graph_agent_serve_webhooks w LEFT JOIN graph_agent_serve_runs r ON r.run_id = "
    "w.run_id WHERE w.state = 'waiting' AND ((r.run_id IS NULL AND w.created_at < "
    "clock_timestamp() - %(lost)s * interval '1 second') OR (r.status NOT IN ('pending', "
    "'running') AND r.updated_at::timestamptz < clock_timestamp() - %(grace)s * "
    "interval '1 second')) ORDER BY w.created_at LIMIT %(limit)s"
)


class PostgresOutbox:
    """The outbox in PostgreSQL, on the records' connection pools (any number of processes
    deliver from it)."""

    def __init__(self, records: PostgresRecords) -> None:
        import psycopg

        self.records = records
        connect = psycopg.connect(records.dsn, autocommit=True, connect_timeout=10)
        with connect as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_SCHEMA_LOCK,))
            for statement in _PG_SCHEMA:
                conn.execute(statement)

    async def _sql(self, sql: str, args: Any = ()) -> list[tuple[Any, ...]]:
        # the records' async pool, opened and closed with the server (QueueRunner.open/close)
        return await self.records._arun(sql, args)

    async def add_waiting(self, run_id: str, url: str) -> None:
        await self._sql(
            "INSERT INTO graph_agent_serve_webhooks (run_id, url, state, next_at, created_at) "
            "VALUES (%s, %s, 'waiting', clock_timestamp(), clock_timestamp()) "
            "ON CONFLICT (run_id) DO NOTHING",
            (run_id, url),
        )

    async def fill(self, run_id: str, url: str, payload: dict[str, Any]) -> None:
        await self._sql(_PG_FILL, (run_id, url, json.dumps(payload)))

    async def claim(self, limit: int, lease: float) -> list[Due]:
        return [_due(row) for row in await self._sql(_PG_CLAIM, (lease, limit))]

    async def orphans(self, limit: int) -> list[Orphan]:
        args = {"lost": LOST_SECONDS, "grace": END_GRACE_SECONDS, "limit": limit}
        found = []
        for run_id, url, _, *run in await self._sql(_PG_ORPHANS, args):
            record = _run_record(tuple(run[:9])) if run[0] is not None else None
            result = json.loads(run[9]) if run[9] else None
            found.append(Orphan(run_id=run_id, url=url, record=record, result=result))
        return found

    async def settle(
        self, run_id: str, state: str, next_at: float | None, error: str | None
    ) -> None:
        await self._sql(
            "UPDATE graph_agent_serve_webhooks SET state = %s, next_at = clock_timestamp() + "
            "%s * interval '1 second', last_error = %s WHERE run_id = %s",
            (state, next_at or 0.0, error, run_id),
        )

    async def note(self, run_id: str, delivery: dict[str, Any]) -> None:
        await self._sql(
            "UPDATE graph_agent_serve_runs SET metadata = (metadata::jsonb || "
            "jsonb_build_object('webhook_delivery', %s::jsonb))::text WHERE run_id = %s",
            (json.dumps(delivery), run_id),
        )


def _due(row: tuple[Any, ...]) -> Due:
    payload = json.loads(row[2]) if row[2] else {}
    return Due(run_id=str(row[0]), url=str(row[1]), payload=payload, attempt=int(row[3]))


def _orphaned(record: RunRecord | None, created_at: float) -> bool:
    """Whether a ``waiting`` row is to be filled from its run's record (ended more than
    :data:`END_GRACE_SECONDS` ago) or given up (its record gone for :data:`LOST_SECONDS`)."""
    if record is None:
        return time.time() - created_at > LOST_SECONDS
    try:
        ended = datetime.fromisoformat(record.updated_at).timestamp()
    except ValueError:
        return True
    return time.time() - ended > END_GRACE_SECONDS
