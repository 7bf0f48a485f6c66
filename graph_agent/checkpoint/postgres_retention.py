"""The PostgreSQL savers' retention plans (see :mod:`graph_agent.checkpoint.retention`): a page
of threads with their last activity, and the change of one thread in one transaction; and the
other reads across threads (the thread ids, ``search_threads``' page, a thread's size).

A run's ``acquire`` and a sweep meet on the thread's top-level lease row: the sweep takes it
for its transaction (unless a lease that binds is there: the thread is busy), so an
``acquire`` made meanwhile waits for the sweep's commit and then finds the thread as the sweep
left it; the row is gone again at the commit. Two sweepers on one thread queue the same way.
"""

from __future__ import annotations

import builtins
import os
import socket
from datetime import datetime
from typing import Any

from graph_agent.checkpoint.codec import decode_header, decode_thread_heads
from graph_agent.checkpoint.postgres_plans import Plan, Query, _name, _text, prune_plan, thread_key
from graph_agent.checkpoint.retention import Decide, Outcome
from graph_agent.checkpoint.thread_search import ThreadHeads

# the next threads after a cursor (a thread key), each with its newest top-level checkpoint's
# header (else its newest one's): the keys by the primary key's index, then a head each
_PAGE = """
SELECT k.thread_key, h.thread_id, (
    SELECT c.header FROM graph_agent_checkpoints AS c WHERE c.thread_key = h.thread_key
    AND c.checkpoint_ns = h.checkpoint_ns AND c.checkpoint_id = h.checkpoint_id)
FROM (SELECT DISTINCT thread_key FROM graph_agent_heads WHERE thread_key > %(after)s
      ORDER BY thread_key LIMIT %(limit)s) AS k
CROSS JOIN LATERAL (
    SELECT thread_key, thread_id, checkpoint_ns, checkpoint_id FROM graph_agent_heads AS h
    WHERE h.thread_key = k.thread_key
    ORDER BY (h.checkpoint_ns = %(top)s) DESC, h.checkpoint_id DESC LIMIT 1) AS h
ORDER BY k.thread_key"""

_NEWEST = """
SELECT c.header FROM graph_agent_heads AS h JOIN graph_agent_checkpoints AS c
    ON c.thread_key = h.thread_key AND c.checkpoint_ns = h.checkpoint_ns
    AND c.checkpoint_id = h.checkpoint_id
WHERE h.thread_key = %(thread)s
ORDER BY (h.checkpoint_ns = %(top)s) DESC, h.checkpoint_id DESC LIMIT 1"""

# the top-level lease row, taken for this transaction unless a lease that binds holds it (its
# holder's session lives and it has not expired): an acquire meanwhile waits on the row
_CLAIM = """
INSERT INTO graph_agent_leases AS l
    (thread_key, checkpoint_ns, owner, session_key, host, pid, expires_at)
VALUES (%(thread)s, %(top)s, %(owner)s, 0, %(host)s, %(pid)s, now())
ON CONFLICT (thread_key, checkpoint_ns) DO UPDATE SET
    owner = EXCLUDED.owner, session_key = 0, host = EXCLUDED.host, pid = EXCLUDED.pid,
    expires_at = EXCLUDED.expires_at
WHERE l.expires_at < now() OR pg_try_advisory_xact_lock(l.session_key)
RETURNING 1"""

_OTHER_LEASE_BINDS = """
SELECT 1 FROM graph_agent_leases WHERE thread_key = %(thread)s AND checkpoint_ns <> %(top)s
    AND expires_at >= now() AND NOT pg_try_advisory_xact_lock(session_key)
LIMIT 1"""

_UNCLAIM = """DELETE FROM graph_agent_leases
WHERE thread_key = %(thread)s AND checkpoint_ns = %(top)s AND owner = %(owner)s"""

_DELETE_COUNTING = """
WITH heads AS (DELETE FROM graph_agent_heads WHERE thread_key = %(thread)s),
checkpoints AS (DELETE FROM graph_agent_checkpoints WHERE thread_key = %(thread)s RETURNING 1),
blobs AS (DELETE FROM graph_agent_blobs WHERE thread_key = %(thread)s),
writes AS (DELETE FROM graph_agent_writes WHERE thread_key = %(thread)s),
leases AS (DELETE FROM graph_agent_leases WHERE thread_key = %(thread)s)
SELECT count(*) FROM checkpoints"""

SWEEP_OWNER = "retention-sweep"
"""The owner a sweep writes in the lease row it holds for its transaction."""


def retention_page_plan(
    after: bytes | None, limit: int
) -> Plan[tuple[builtins.list[tuple[str, datetime | None]], Any]]:
    params = {"after": after or b"", "limit": limit + 1, "top": _name("")}
    rows = yield Query(_PAGE, params)
    page = [
        (_text(thread_id), None if header is None else decode_header(header).created_at)
        for _, thread_id, header in rows[:limit]
    ]
    return page, (bytes(rows[limit - 1][0]) if len(rows) > limit else None)


def retain_thread_plan(thread_id: str, decide: Decide) -> Plan[tuple[Outcome, int]]:
    """Run in one transaction (see the module docstring)."""
    params = {
        "thread": thread_key(thread_id),
        "top": _name(""),
        "owner": SWEEP_OWNER,
        "host": _HOST,
        "pid": os.getpid(),
    }
    if not (yield Query(_CLAIM, params)):
        return "busy", 0
    if (yield Query(_OTHER_LEASE_BINDS, params)):
        yield Query(_UNCLAIM, params)
        return "busy", 0
    rows = yield Query(_NEWEST, params)
    keep = decide(decode_header(rows[0][0]).created_at if rows else None)
    if keep == 0:
        counted = yield Query(_DELETE_COUNTING, params)
        return "deleted", int(counted[0][0])
    removed = 0 if keep is None else (yield from prune_plan(thread_id, keep))
    yield Query(_UNCLAIM, params)
    return ("pruned" if removed else "kept"), removed


_HOST = socket.gethostname()


# search_threads: a page of the threads' heads (their newest top-level checkpoints), newest
# first, then for those only the headers of the head and of the oldest checkpoint, each by
# the primary key (a join of the heads with the checkpoints, planned as a hash join, read
# every checkpoint of every thread)
_THREAD_HEADS = """
SELECT p.thread_id, (
    SELECT c.header FROM graph_agent_checkpoints AS c WHERE c.thread_key = p.thread_key
    AND c.checkpoint_ns = p.checkpoint_ns AND c.checkpoint_id = p.checkpoint_id), (
    SELECT o.header FROM graph_agent_checkpoints AS o WHERE o.thread_key = p.thread_key
    AND o.checkpoint_ns = p.checkpoint_ns ORDER BY o.checkpoint_id LIMIT 1)
FROM (SELECT thread_key, checkpoint_ns, checkpoint_id, thread_id FROM graph_agent_heads
      WHERE checkpoint_ns = %(ns)s
      ORDER BY checkpoint_id DESC, thread_id LIMIT %(limit)s OFFSET %(offset)s) AS p
ORDER BY p.checkpoint_id DESC, p.thread_id"""

_STORED_BYTES = """SELECT
    (SELECT coalesce(sum(octet_length(header)), 0) FROM graph_agent_checkpoints
        WHERE thread_key = %(thread)s)
    + (SELECT coalesce(sum(octet_length(data)), 0) FROM graph_agent_blobs
        WHERE thread_key = %(thread)s)
    + (SELECT coalesce(sum(octet_length(data)), 0) FROM graph_agent_writes
        WHERE thread_key = %(thread)s)"""


def threads_plan() -> Plan[builtins.list[str]]:
    rows = yield Query("SELECT DISTINCT thread_id FROM graph_agent_heads ORDER BY thread_id", {})
    return [_text(row[0]) for row in rows]


def thread_heads_plan(limit: int, offset: int) -> Plan[builtins.list[ThreadHeads]]:
    """search_threads' read: see :meth:`CheckpointSaver._thread_heads`."""
    rows = yield Query(_THREAD_HEADS, {"ns": _name(""), "limit": limit, "offset": offset})
    return [
        decode_thread_heads(_text(thread), newest, oldest)
        for thread, newest, oldest in rows
        if newest is not None  # (a head is stored with its checkpoint: never, in one snapshot)
    ]


def stored_bytes_plan(thread_id: str) -> Plan[int]:
    rows = yield Query(_STORED_BYTES, {"thread": thread_key(thread_id)})
    return int(rows[0][0])
