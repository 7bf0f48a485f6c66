"""Where the server keeps each thread's TTL, and the records' side of a sweep: a table beside the
threads' records (``thread_ttl`` in the SQLite records file, ``graph_agent_serve_thread_ttl`` in
PostgreSQL), read and written only here (:mod:`graph_agent.serve.retention` drives it).

A row holds a thread's own TTL (``strategy``, ``ttl_minutes``; NULL: the server's default),
``swept_at`` (the thread's ``updated_at`` when ``keep_latest`` last cut it: not again until it
is used) and ``deleting`` (a tombstone: the thread's records are gone, its checkpoints may not
be yet). Deleting a thread removes its records and writes its tombstone in one transaction;
the checkpoints go next, then the tombstone: a crash between leaves the tombstone, and the
next sweep finishes the deletion.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from graph_agent.serve.pg_records import PostgresRecords
from graph_agent.serve.pg_schema import SCHEMA_LOCK, THREAD_LOCKS
from graph_agent.serve.records import Records

__all__ = ["PostgresTTLs", "SqliteTTLs", "TTLs", "ttls_of"]

_SQLITE_SCHEMA = """CREATE TABLE IF NOT EXISTS thread_ttl (
    thread_id TEXT PRIMARY KEY, strategy TEXT, ttl_minutes REAL, created_at TEXT, swept_at TEXT,
    deleting INTEGER NOT NULL DEFAULT 0)"""
_POSTGRES_SCHEMA = """CREATE TABLE IF NOT EXISTS graph_agent_serve_thread_ttl (
    thread_id TEXT PRIMARY KEY, strategy TEXT, ttl_minutes DOUBLE PRECISION, created_at TEXT,
    swept_at TEXT,
    deleting BOOLEAN NOT NULL DEFAULT false)"""


_OWN = (
    "x.thread_id = t.thread_id AND NOT x.deleting "
    "AND (x.created_at IS NULL OR x.created_at = t.created_at)"
)
"""The TTL row of a thread: a row for its id made for it (not for an earlier thread of that id,
deleted otherwise; a ``keep_latest`` mark names no creation time)."""


def _join(default: tuple[str, float | None]) -> str:
    """Every thread has a TTL with a server default; without one, only those with a row."""
    return "JOIN" if default[1] is None else "LEFT JOIN"


class TTLs:
    """The TTL table on one kind of records (:class:`SqliteTTLs`, :class:`PostgresTTLs`).

    ``default`` is the server's ``(strategy, ttl_minutes)`` for threads without their own
    (``ttl_minutes`` None: those never expire)."""

    table = "thread_ttl"
    threads = "threads"
    runs = "runs"
    events = "events"
    mark = "?"

    def _execute(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    @contextmanager
    def _transaction(self, thread_id: str) -> Iterator[Any]:
        """A transaction on the records holding the thread's lock (yields None if another
        process holds it), whose ``execute(sql, args)`` the body calls."""
        raise NotImplementedError
        yield

    def _sql(self, sql: str) -> str:
        return sql.format(
            t=self.table, threads=self.threads, runs=self.runs, events=self.events
        ).replace("?", self.mark)

    def set(self, thread_id: str, created_at: str, strategy: str, ttl_minutes: float) -> None:
        """Give the thread created at ``created_at`` its own TTL (a row left by an earlier
        thread of that id goes; one left and not replaced names another ``created_at``, and
        :data:`_OWN` ignores it)."""
        self._execute(self._sql("DELETE FROM {t} WHERE thread_id = ?"), (thread_id,))
        self._execute(
            self._sql(
                "INSERT INTO {t} (thread_id, strategy, ttl_minutes, created_at) VALUES (?, ?, ?, ?)"
            ),
            (thread_id, strategy, float(ttl_minutes), created_at),
        )

    def get(self, thread_id: str) -> tuple[str, float] | None:
        rows = self._execute(
            self._sql("SELECT strategy, ttl_minutes FROM {t} WHERE thread_id = ? AND NOT deleting"),
            (thread_id,),
        )
        if not rows or rows[0][1] is None:
            return None
        return str(rows[0][0]), float(rows[0][1])

    def expired(
        self, now: datetime, default: tuple[str, float | None], after: str, limit: int
    ) -> list[tuple[str, str]]:
        """Up to ``limit`` threads after ``after`` (by id) idle past their TTL as of ``now``,
        not busy, not already cut since they were last used: ``(thread id, strategy)``."""
        raise NotImplementedError

    def used_since(self, since: str, after: str, limit: int) -> list[str]:
        """Up to ``limit`` threads after ``after`` (by id), not busy, used at ``since`` or
        later (ISO time)."""
        rows = self._execute(
            self._sql(
                "SELECT thread_id FROM {threads} WHERE status <> 'busy' AND updated_at >= ? "
                "AND thread_id > ? ORDER BY thread_id LIMIT ?"
            ),
            (since, after, limit),
        )
        return [str(row[0]) for row in rows]

    def claim(
        self, thread_id: str, now: datetime, default: tuple[str, float | None], strategy: str
    ) -> str | None:
        """Check again, in one transaction holding the thread, that it is idle past its TTL
        and runs nothing; for ``delete``, delete its records and leave its tombstone. Returns
        the thread's ``updated_at`` (None: it is not to be swept now)."""
        with self._transaction(thread_id) as tx:
            if tx is None:
                return None
            rows = tx(
                self._sql(
                    "SELECT t.updated_at, t.status, x.ttl_minutes FROM {threads} AS t "
                    f"LEFT JOIN {{t}} AS x ON {_OWN} WHERE t.thread_id = ?"
                ),
                (thread_id,),
            )
            if not rows or rows[0][1] == "busy":
                return None
            updated_at, _, own = rows[0]
            ttl = own if own is not None else default[1]
            if ttl is None or datetime.fromisoformat(updated_at) + timedelta(minutes=ttl) > now:
                return None
            unfinished = tx(
                self._sql(
                    "SELECT 1 FROM {runs} WHERE thread_id = ? "
                    "AND status IN ('pending', 'running') LIMIT 1"
                ),
                (thread_id,),
            )
            if unfinished:
                return None
            if strategy == "delete":
                for sql in (
                    "DELETE FROM {events} WHERE run_id IN "
                    "(SELECT run_id FROM {runs} WHERE thread_id = ?)",
                    "DELETE FROM {runs} WHERE thread_id = ?",
                    "DELETE FROM {threads} WHERE thread_id = ?",
                    "DELETE FROM {t} WHERE thread_id = ?",
                ):
                    tx(self._sql(sql), (thread_id,))
                tx(
                    self._sql("INSERT INTO {t} (thread_id, deleting) VALUES (?, ?)"),
                    (thread_id, True),
                )
            return str(updated_at)

    def tombstones(self, limit: int) -> list[str]:
        """Threads whose records were deleted and whose checkpoints may not be yet."""
        rows = self._execute(
            self._sql("SELECT thread_id FROM {t} WHERE deleting ORDER BY thread_id LIMIT ?"),
            (limit,),
        )
        return [str(row[0]) for row in rows]

    def deleted(self, thread_id: str) -> bool:
        """The thread's checkpoints are gone too: its tombstone goes. Whether this call took
        it (of sweepers finishing one thread side by side, one does: the one that counts it)."""
        sql = "DELETE FROM {t} WHERE thread_id = ? AND deleting RETURNING thread_id"
        return bool(self._execute(self._sql(sql), (thread_id,)))

    def swept(self, thread_id: str, updated_at: str) -> None:
        """``keep_latest`` cut the thread as it was at ``updated_at``."""
        self._execute(
            self._sql(
                "INSERT INTO {t} (thread_id, swept_at) VALUES (?, ?) ON CONFLICT (thread_id) "
                "DO UPDATE SET swept_at = EXCLUDED.swept_at"
            ),
            (thread_id, updated_at),
        )

    def drop_orphans(self) -> None:
        """Rows of threads deleted otherwise (``DELETE /threads/{id}``)."""
        self._execute(
            self._sql(
                "DELETE FROM {t} WHERE NOT deleting AND NOT EXISTS "
                "(SELECT 1 FROM {threads} AS t WHERE t.thread_id = {t}.thread_id)"
            )
        )


class SqliteTTLs(TTLs):
    """The TTL table in the SQLite records' file, on their connection and lock."""

    def __init__(self, records: Records) -> None:
        self.records = records
        self._execute(_SQLITE_SCHEMA)

    def _execute(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.records._run(sql, args)

    @contextmanager
    def _transaction(self, thread_id: str) -> Iterator[Any]:
        with self.records.transaction() as execute:
            yield execute

    def expired(
        self, now: datetime, default: tuple[str, float | None], after: str, limit: int
    ) -> list[tuple[str, str]]:
        rows = self._execute(
            "SELECT t.thread_id, COALESCE(x.strategy, ?) FROM threads AS t "
            f"{_join(default)} thread_ttl AS x ON {_OWN} "
            "WHERE t.status <> 'busy' AND t.thread_id > ? "
            "AND julianday(t.updated_at) + COALESCE(x.ttl_minutes, ?) / 1440.0 <= julianday(?) "
            "AND (x.swept_at IS NULL OR x.swept_at <> t.updated_at) "
            "ORDER BY t.thread_id LIMIT ?",
            (default[0], after, default[1], now.isoformat(), limit),
        )
        return [(str(thread), str(strategy)) for thread, strategy in rows]


class PostgresTTLs(TTLs):
    """The TTL table in PostgreSQL, on the records' pool; a thread is held by the same
    transaction lock that serialises the runs started on it."""

    table = "graph_agent_serve_thread_ttl"
    threads = "graph_agent_serve_threads"
    runs = "graph_agent_serve_runs"
    events = "graph_agent_serve_events"
    mark = "%s"

    def __init__(self, records: PostgresRecords) -> None:
        self.records = records
        with records._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            conn.execute(_POSTGRES_SCHEMA)

    def _execute(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.records._run(sql, args)

    @contextmanager
    def _transaction(self, thread_id: str) -> Iterator[Any]:
        with self.records.transaction() as execute:
            held = execute(
                "SELECT pg_try_advisory_xact_lock(%s, hashtext(%s))", (THREAD_LOCKS, thread_id)
            )
            # no: another process starts a run on it, or sweeps it
            yield execute if held and held[0][0] else None

    def expired(
        self, now: datetime, default: tuple[str, float | None], after: str, limit: int
    ) -> list[tuple[str, str]]:
        rows = self._execute(
            "SELECT t.thread_id, COALESCE(x.strategy, %s) FROM graph_agent_serve_threads AS t "
            f"{_join(default)} graph_agent_serve_thread_ttl AS x ON {_OWN} "
            "WHERE t.status <> 'busy' AND t.thread_id > %s "
            "AND t.updated_at::timestamptz + COALESCE(x.ttl_minutes, %s) * interval '1 minute' "
            "<= %s::timestamptz AND (x.swept_at IS NULL OR x.swept_at <> t.updated_at) "
            "ORDER BY t.thread_id LIMIT %s",
            (default[0], after, default[1], now.isoformat(), limit),
        )
        return [(str(thread), str(strategy)) for thread, strategy in rows]


def ttls_of(records: Records | PostgresRecords) -> TTLs:
    """The TTL table beside ``records``."""
    if isinstance(records, PostgresRecords):
        return PostgresTTLs(records)
    return SqliteTTLs(records)
