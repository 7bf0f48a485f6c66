"""The SQLite saver's statements over whole threads: copying a thread under another id, and
the threads newest first for ``search_threads``, found by index seeks alone."""

from __future__ import annotations

import sqlite3

from graph_agent.checkpoint.base import copy_target_taken, nothing_to_copy
from graph_agent.checkpoint.codec import encode_write
from graph_agent.checkpoint.sqlite_sql import _sql_name
from graph_agent.graph.saver import COPY_TASK, IDS_THREAD

_ANY_CHECKPOINT = "SELECT 1 FROM checkpoints WHERE thread_id = ? LIMIT 1"

# copy_thread: each table's rows of the source thread, under the target's id (leases stay)
_COPY_THREAD = (
    "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_id, step, header) "
    "SELECT ?, checkpoint_ns, checkpoint_id, parent_id, step, header FROM checkpoints "
    "WHERE thread_id = ?",
    # (leftovers of the target without a checkpoint, which nothing loads, give way)
    "INSERT OR REPLACE INTO blobs (thread_id, checkpoint_ns, key, version, kind, base, data) "
    "SELECT ?, checkpoint_ns, key, version, kind, base, data FROM blobs WHERE thread_id = ?",
    "INSERT OR REPLACE INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, channel, "
    "data) SELECT ?, checkpoint_ns, checkpoint_id, task_id, channel, data FROM writes "
    "WHERE thread_id = ?",
)
_NAME_IDS_THREAD = (
    # a copied checkpoint with pending writes names the thread their ids were derived for
    # (one it names already, from an earlier copy, stays)
    "INSERT OR IGNORE INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, channel, "
    "data) SELECT DISTINCT ?, checkpoint_ns, checkpoint_id, ?, ?, ? FROM writes "
    "WHERE thread_id = ?"
)

# search_threads. Each thread's newest top-level checkpoint id, found by index seeks alone (the
# primary key starts with thread_id, checkpoint_ns): the threads one after another (each the
# least id past the last: a seek, not a scan of their checkpoints), then each one's newest.
# A thread with only subgraph checkpoints has none (NULL: last, newest first, and joined to no
# row). Never a GROUP BY over the checkpoints: that reads every one of them.
_HEADS = """
WITH RECURSIVE threads(thread_id) AS (
    SELECT MIN(thread_id) FROM checkpoints
    UNION ALL
    SELECT (SELECT MIN(c.thread_id) FROM checkpoints AS c WHERE c.thread_id > threads.thread_id)
    FROM threads WHERE threads.thread_id IS NOT NULL
), heads(thread_id, newest) AS (
    SELECT thread_id, (
        SELECT c.checkpoint_id FROM checkpoints AS c WHERE c.thread_id = threads.thread_id
        AND c.checkpoint_ns = '' ORDER BY c.checkpoint_id DESC LIMIT 1)
    FROM threads WHERE thread_id IS NOT NULL
)"""
# a page of threads, newest first: headers are read for the page's threads only, the newest
# and the oldest one, both by the primary key
_THREAD_HEADS = f"""{_HEADS}, page(thread_id, newest) AS (
    SELECT thread_id, newest FROM heads ORDER BY newest DESC, thread_id LIMIT ? OFFSET ?)
SELECT p.thread_id, n.header, (
    SELECT o.header FROM checkpoints AS o WHERE o.thread_id = p.thread_id
    AND o.checkpoint_ns = '' ORDER BY o.checkpoint_id LIMIT 1)
FROM page AS p JOIN checkpoints AS n ON n.thread_id = p.thread_id AND n.checkpoint_ns = ''
    AND n.checkpoint_id = p.newest
ORDER BY p.newest DESC, p.thread_id"""
# a filter's one pass: every thread, newest first (ids only), then the header of its newest
# or oldest top-level checkpoint as it is needed
_THREAD_ORDER = f"""{_HEADS}
SELECT thread_id FROM heads WHERE newest IS NOT NULL ORDER BY newest DESC, thread_id"""
_NEWEST_HEADER = """SELECT header FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ''
ORDER BY checkpoint_id DESC LIMIT 1"""
_OLDEST_HEADER = """SELECT header FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ''
ORDER BY checkpoint_id LIMIT 1"""


def copy_thread_rows(conn: sqlite3.Connection, src_thread_id: str, dst_thread_id: str) -> None:
    """Copy every row of a thread under another id, in the caller's transaction (refused if
    the source has no checkpoint or the target has one)."""
    src, dst = _sql_name(src_thread_id), _sql_name(dst_thread_id)
    if conn.execute(_ANY_CHECKPOINT, (src,)).fetchone() is None:
        raise nothing_to_copy(src_thread_id)
    if conn.execute(_ANY_CHECKPOINT, (dst,)).fetchone() is not None:
        raise copy_target_taken(dst_thread_id)
    for sql in _COPY_THREAD:
        conn.execute(sql, (dst, src))
    ids_thread = encode_write(IDS_THREAD, src_thread_id)
    conn.execute(_NAME_IDS_THREAD, (dst, COPY_TASK, _sql_name(IDS_THREAD), ids_thread, src))
