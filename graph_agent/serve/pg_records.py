"""The server's records in PostgreSQL: threads, runs (a durable job queue) and their events,
shared by every server and worker process on the same database.

Same rows as :class:`~graph_agent.serve.records.Records` (tables prefixed
``graph_agent_serve_``, in the DSN's ``search_path`` schema), plus what a queue needs on a run:
``seq`` (its place in the queue), the request it carries, the ``worker`` process that claimed it
(a random key on which that process's session holds an advisory lock), ``attempt``, ``cancel``
(the action a client asked for) and the ``result``. Every change a client may be waiting for is
announced with ``NOTIFY graph_agent_serve`` (see :mod:`graph_agent.serve.queue`).

Calls are short parameterised statements on a ``psycopg_pool.ConnectionPool`` in autocommit
mode, made from the event loop as the SQLite records' are: one round trip each.
"""

from __future__ import annotations

import json
from typing import Any

from graph_agent.serve.records import (
    RunRecord,
    RunStatus,
    ThreadRecord,
    ThreadStatus,
    _run_record,
    _thread,
    now,
)

__all__ = ["CHANNEL", "PostgresRecords"]

CHANNEL = "graph_agent_serve"
"""The NOTIFY channel: ``q`` (a run to claim), ``e:<run_id>`` (its events or status changed),
``c:<run_id>`` (a client asked to cancel it)."""

_THREAD_COLUMNS = "thread_id, created_at, updated_at, metadata, status, assistant_id"
_RUN_COLUMNS = (
    "run_id, thread_id, assistant_id, created_at, updated_at, status, metadata, "
    "multitask_strategy, kwargs"
)
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS graph_agent_serve_threads (
        thread_id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
        metadata TEXT NOT NULL, status TEXT NOT NULL, assistant_id TEXT)""",
    """CREATE TABLE IF NOT EXISTS graph_agent_serve_runs (
        seq BIGSERIAL, run_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL,
        assistant_id TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
        status TEXT NOT NULL, metadata TEXT NOT NULL, multitask_strategy TEXT NOT NULL,
        kwargs TEXT NOT NULL, request TEXT NOT NULL, result TEXT, attempt INTEGER NOT NULL
        DEFAULT 0, worker BIGINT, cancel TEXT)""",
    """CREATE INDEX IF NOT EXISTS graph_agent_serve_runs_by_thread
        ON graph_agent_serve_runs (thread_id, seq)""",
    """CREATE INDEX IF NOT EXISTS graph_agent_serve_runs_unfinished
        ON graph_agent_serve_runs (seq) WHERE status IN ('pending', 'running')""",
    """CREATE TABLE IF NOT EXISTS graph_agent_serve_events (
        run_id TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL, data TEXT NOT NULL,
        PRIMARY KEY (run_id, seq))""",
)
_SCHEMA_LOCK = 0x6761_7365_7276  # an advisory lock: two processes never create tables at once

UNFINISHED = ("pending", "running")


class PostgresRecords:
    """Threads, runs and events in PostgreSQL.

    Args:
        dsn: A libpq connection string (``options=-c search_path=...`` picks the schema).
        pool_size: Most connections the pool opens.
    """

    def __init__(self, dsn: str, *, pool_size: int = 10) -> None:
        import psycopg
        import psycopg_pool

        self.dsn = dsn
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            for statement in _SCHEMA:
                conn.execute(statement)
        self._pool: psycopg_pool.ConnectionPool[Any] = psycopg_pool.ConnectionPool(
            dsn, min_size=1, max_size=pool_size, kwargs={"autocommit": True}, open=True
        )

    def close(self) -> None:
        self._pool.close()

    def _run(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._pool.connection() as conn:
            cursor = conn.execute(sql, args)
            return cursor.fetchall() if cursor.description is not None else []

    # threads
    def put_thread(self, thread: ThreadRecord) -> None:
        self._run(
            f"INSERT INTO graph_agent_serve_threads ({_THREAD_COLUMNS}) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (thread_id) DO UPDATE SET "
            "updated_at = EXCLUDED.updated_at, metadata = EXCLUDED.metadata, "
            "status = EXCLUDED.status, assistant_id = EXCLUDED.assistant_id",
            thread.row(),
        )

    def thread(self, thread_id: str) -> ThreadRecord | None:
        rows = self._run(
            f"SELECT {_THREAD_COLUMNS} FROM graph_agent_serve_threads WHERE thread_id = %s",
            (thread_id,),
        )
        return _thread(rows[0]) if rows else None

    def threads(self) -> list[ThreadRecord]:
        """Every thread, newest first."""
        rows = self._run(
            f"SELECT {_THREAD_COLUMNS} FROM graph_agent_serve_threads ORDER BY created_at DESC"
        )
        return [_thread(row) for row in rows]

    def set_thread_status(
        self, thread_id: str, status: ThreadStatus, assistant_id: str | None = None
    ) -> None:
        self._run(
            "UPDATE graph_agent_serve_threads SET status = %s, updated_at = %s, "
            "assistant_id = COALESCE(%s, assistant_id) WHERE thread_id = %s",
            (status, now(), assistant_id, thread_id),
        )

    def finish_thread(self, thread_id: str, status: ThreadStatus) -> None:
        """Set the thread's status after a run, unless another run is still to come on it."""
        self._run(
            "UPDATE graph_agent_serve_threads SET updated_at = %s, status = CASE WHEN EXISTS "
            "(SELECT 1 FROM graph_agent_serve_runs WHERE thread_id = %s AND status IN "
            "('pending', 'running')) THEN 'busy' ELSE %s END WHERE thread_id = %s",
            (now(), thread_id, status, thread_id),
        )

    def delete_thread(self, thread_id: str) -> None:
        self._run(
            "DELETE FROM graph_agent_serve_events WHERE run_id IN "
            "(SELECT run_id FROM graph_agent_serve_runs WHERE thread_id = %s)",
            (thread_id,),
        )
        self._run("DELETE FROM graph_agent_serve_runs WHERE thread_id = %s", (thread_id,))
        self._run("DELETE FROM graph_agent_serve_threads WHERE thread_id = %s", (thread_id,))

    # runs
    def put_run(self, run: RunRecord, request: str = "{}") -> None:
        """Queue a run (``request``: what it is to do, as JSON) and announce it."""
        self._run(
            f"INSERT INTO graph_agent_serve_runs ({_RUN_COLUMNS}, request) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (*run.row(), request),
        )
        self.announce_queue()

    def announce_queue(self) -> None:
        """Tell the workers there may be a run to claim."""
        self._run("SELECT pg_notify(%s, 'q')", (CHANNEL,))

    def set_run_status(self, run_id: str, status: RunStatus) -> None:
        self._run(
            "UPDATE graph_agent_serve_runs SET status = %s, updated_at = %s WHERE run_id = %s",
            (status, now(), run_id),
        )
        self.announce(run_id)

    def finish_run(self, run_id: str, status: RunStatus, result: Any, worker: int) -> bool:
        """Record how a run claimed by ``worker`` ended; False when another worker holds it
        now (this one was taken for dead), and nothing was written."""
        rows = self._run(
            "UPDATE graph_agent_serve_runs SET status = %s, updated_at = %s, result = %s "
            "WHERE run_id = %s AND worker = %s AND status = 'running' RETURNING run_id",
            (status, now(), json.dumps(result), run_id, worker),
        )
        self.announce(run_id)
        return bool(rows)

    def announce(self, run_id: str) -> None:
        self._run("SELECT pg_notify(%s, %s)", (CHANNEL, f"e:{run_id}"))

    def run(self, thread_id: str, run_id: str) -> RunRecord | None:
        rows = self._run(
            f"SELECT {_RUN_COLUMNS} FROM graph_agent_serve_runs "
            "WHERE run_id = %s AND thread_id = %s",
            (run_id, thread_id),
        )
        return _run_record(rows[0]) if rows else None

    def run_by_id(self, run_id: str) -> tuple[RunRecord, Any, str | None] | None:
        """A run's record, its result (None until it ended) and the cancel asked for it."""
        rows = self._run(
            f"SELECT {_RUN_COLUMNS}, result, cancel FROM graph_agent_serve_runs WHERE run_id = %s",
            (run_id,),
        )
        if not rows:
            return None
        row = rows[0]
        return _run_record(row[:9]), json.loads(row[9]) if row[9] else None, row[10]

    def runs(self, thread_id: str, *, limit: int, offset: int) -> list[RunRecord]:
        """A thread's runs, newest first."""
        rows = self._run(
            f"SELECT {_RUN_COLUMNS} FROM graph_agent_serve_runs WHERE thread_id = %s "
            "ORDER BY seq DESC LIMIT %s OFFSET %s",
            (thread_id, limit, offset),
        )
        return [_run_record(row) for row in rows]

    def unfinished_runs(self, thread_id: str) -> list[str]:
        """The ids of the thread's runs still pending or running, newest first."""
        rows = self._run(
            "SELECT run_id FROM graph_agent_serve_runs WHERE thread_id = %s "
            "AND status IN ('pending', 'running') ORDER BY seq DESC",
            (thread_id,),
        )
        return [str(row[0]) for row in rows]

    def delete_run(self, run_id: str) -> None:
        self._run("DELETE FROM graph_agent_serve_events WHERE run_id = %s", (run_id,))
        self._run("DELETE FROM graph_agent_serve_runs WHERE run_id = %s", (run_id,))
        self.announce(run_id)

    def request_cancel(self, run_id: str, action: str) -> None:
        """Ask the run to stop: a pending one ends here (``interrupted``, or deleted for a
        rollback); the worker running one is told (``NOTIFY c:<run_id>``)."""
        if action == "rollback":
            self._run(
                "DELETE FROM graph_agent_serve_runs WHERE run_id = %s AND status = 'pending'",
                (run_id,),
            )
        self._run(
            "UPDATE graph_agent_serve_runs SET status = CASE status WHEN 'pending' THEN "
            "'interrupted' ELSE status END, cancel = %s, updated_at = %s WHERE run_id = %s "
            "AND status IN ('pending', 'running')",
            (action, now(), run_id),
        )
        self._run("SELECT pg_notify(%s, %s)", (CHANNEL, f"c:{run_id}"))
        self.announce(run_id)

    def claim(self, worker: int) -> tuple[RunRecord, str, int] | None:
        """Claim the oldest pending run whose thread has no earlier unfinished run, for
        ``worker``: its record, its request (JSON) and its attempt (1 on the first claim)."""
        rows = self._run(
            "UPDATE graph_agent_serve_runs SET status = 'running', worker = %s, "
            "attempt = attempt + 1, updated_at = %s WHERE run_id = ("
            " SELECT r.run_id FROM graph_agent_serve_runs r WHERE r.status = 'pending'"
            " AND NOT EXISTS (SELECT 1 FROM graph_agent_serve_runs e WHERE"
            "  e.thread_id = r.thread_id AND e.seq < r.seq AND e.status IN ('pending', 'running'))"
            " ORDER BY r.seq LIMIT 1 FOR UPDATE SKIP LOCKED)"
            f" RETURNING {_RUN_COLUMNS}, request, attempt",
            (worker, now()),
        )
        if not rows:
            return None
        row = rows[0]
        return _run_record(row[:9]), str(row[9]), int(row[10])

    def requeue_orphans(self) -> list[str]:
        """Put back in the queue the runs whose worker is gone (its session, and so its
        advisory lock, ended); they resume from their last checkpoint on whoever claims them."""
        rows = self._run(
            "UPDATE graph_agent_serve_runs SET status = 'pending', updated_at = %s "
            "WHERE status = 'running' AND worker IS NOT NULL "
            "AND pg_try_advisory_xact_lock(worker) RETURNING run_id",
            (now(),),
        )
        if rows:
            self.announce_queue()
        return [str(row[0]) for row in rows]

    # events
    def add_event(self, run_id: str, seq: int, event: str, data: str) -> None:
        """Store event number ``seq`` of a run and announce it."""
        self._run(
            "WITH added AS (INSERT INTO graph_agent_serve_events VALUES (%s, %s, %s, %s)) "
            "SELECT pg_notify(%s, %s)",
            (run_id, seq, event, data, CHANNEL, f"e:{run_id}"),
        )

    def events(self, run_id: str, after: int = -1) -> list[tuple[int, str, str]]:
        """A run's events numbered above ``after``, in order: ``(seq, event, data)``."""
        rows = self._run(
            "SELECT seq, event, data FROM graph_agent_serve_events WHERE run_id = %s "
            "AND seq > %s ORDER BY seq",
            (run_id, after),
        )
        return [(int(seq), str(event), str(data)) for seq, event, data in rows]
