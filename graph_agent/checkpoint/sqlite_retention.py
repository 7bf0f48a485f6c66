"""The SQLite saver's retention primitives (see :mod:`graph_agent.checkpoint.retention`): a page
of threads with their last activity, found by index seeks, and the change of one thread inside
the caller's ``BEGIN IMMEDIATE`` transaction, which also serialises it with every process's
``acquire``."""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Callable
from datetime import datetime
from typing import Any

from graph_agent.checkpoint.codec import decode_header
from graph_agent.checkpoint.retention import Decide, Outcome
from graph_agent.checkpoint.sqlite_blobs import prune_thread
from graph_agent.checkpoint.sqlite_sql import _name_of, _sql_name

# the next threads after a cursor, one index seek each (never a scan of their checkpoints)
_PAGE = """
WITH RECURSIVE threads(thread_id, n) AS (
    SELECT ({first}), 1
    UNION ALL
    SELECT (SELECT MIN(c.thread_id) FROM checkpoints AS c WHERE c.thread_id > threads.thread_id),
        n + 1
    FROM threads WHERE threads.thread_id IS NOT NULL AND n <= ?
)
SELECT thread_id FROM threads WHERE thread_id IS NOT NULL"""
_FIRST = "SELECT MIN(thread_id) FROM checkpoints"
_AFTER = "SELECT MIN(thread_id) FROM checkpoints WHERE thread_id > ?"
_NEWEST_TOP = """SELECT header FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ''
ORDER BY checkpoint_id DESC LIMIT 1"""
_NEWEST_ANY = """SELECT header FROM checkpoints WHERE thread_id = ?
ORDER BY checkpoint_id DESC LIMIT 1"""


def retention_page(
    conn: sqlite3.Connection, after: Any, limit: int
) -> tuple[builtins.list[tuple[str, datetime | None]], Any]:
    """Up to ``limit`` threads after the stored id ``after`` with their last activity, and
    the next cursor (a stored id, text or blob: compared as SQLite orders them)."""
    if after is None:
        rows = conn.execute(_PAGE.format(first=_FIRST), (limit,)).fetchall()
    else:
        rows = conn.execute(_PAGE.format(first=_AFTER), (after, limit)).fetchall()
    stored = [row[0] for row in rows]
    page = [(_name_of(thread), _last_activity(conn, thread)) for thread in stored[:limit]]
    return page, (stored[limit - 1] if len(stored) > limit else None)


def _last_activity(conn: sqlite3.Connection, stored: str | bytes) -> datetime | None:
    row = conn.execute(_NEWEST_TOP, (stored,)).fetchone()
    if row is None:
        row = conn.execute(_NEWEST_ANY, (stored,)).fetchone()
    return None if row is None else decode_header(row[0]).created_at


def retain_thread(
    conn: sqlite3.Connection,
    thread_id: str,
    decide: Decide,
    binds: Callable[..., bool],
) -> tuple[Outcome, int]:
    """Delete or prune the thread as ``decide`` says, unless a lease row that ``binds`` (given
    its pid, expiry, host and process) holds it."""
    stored = _sql_name(thread_id)
    leases = conn.execute(
        "SELECT pid, expires_at, host, process FROM leases WHERE thread_id = ?", (stored,)
    ).fetchall()
    if any(binds(*lease) for lease in leases):
        return "busy", 0
    keep = decide(_last_activity(conn, stored))
    if keep is None:
        return "kept", 0
    if keep == 0:
        count = conn.execute("SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", (stored,))
        removed = int(count.fetchone()[0])
        for table in ("checkpoints", "blobs", "writes", "leases"):
            conn.execute(f"DELETE FROM {table} WHERE thread_id = ?", (stored,))
        return "deleted", removed
    removed = prune_thread(conn, thread_id, keep)
    return ("pruned" if removed else "kept"), removed
