"""The SQLite saver's blob chains: reading the blobs that rebuild a key (a full copy and the deltas
after it), and pruning a thread's old checkpoints without breaking the chains the kept ones
need."""

from __future__ import annotations

import builtins
import sqlite3

from graph_agent.checkpoint.codec import (
    Link,
    decode_header,
    encode_blob,
    needed_versions,
    rebuild_value,
)
from graph_agent.checkpoint.sqlite_sql import _name_of, _sql_name
from graph_agent.graph.saver import Blob

# A key's blobs from one version back to its full copy, newest first. A delta's base is
# followed only when it sorts before the delta's own version (a base is an older checkpoint's
# id), so a chain that loops stops at once; the code reading it says why it stopped.
_CHAIN_SQL = """
WITH RECURSIVE chain(version, kind, base, n) AS (
    SELECT version, kind, base, 0 FROM blobs
    WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND key = ?3 AND version = ?4
    UNION ALL
    SELECT b.version, b.kind, b.base, chain.n + 1 FROM blobs AS b JOIN chain
    ON b.thread_id = ?1 AND b.checkpoint_ns = ?2 AND b.key = ?3 AND b.version = chain.base
    WHERE chain.kind != 'full' AND chain.base < chain.version
)
SELECT version, kind, base FROM chain ORDER BY n
"""
"""A key's blobs from a version back to its full copy, newest first, without their data:
:func:`_data_of` reads it for those a load decodes (a load that goes on from a list it kept
decodes only the newest few)."""


def _chain(
    conn: sqlite3.Connection, thread: str, ns: str, key: str, version: str
) -> builtins.list[Link]:
    """The blobs that rebuild ``key`` at ``version``, newest first (see :func:`load_values`)."""
    where = (_sql_name(thread), _sql_name(ns), _sql_name(key))
    rows = conn.execute(_CHAIN_SQL, (*where, version)).fetchall()
    return [(at, kind, base, b"") for at, kind, base in rows]


def _data_of(
    conn: sqlite3.Connection, thread: str, ns: str, key: str, versions: builtins.list[str]
) -> dict[str, bytes]:
    """The data of ``key``'s blobs at ``versions`` (read 500 at a time: a chain stored before
    parts were merged may be thousands long, more than a statement takes parameters)."""
    where = (_sql_name(thread), _sql_name(ns), _sql_name(key))
    data: dict[str, bytes] = {}
    for first in range(0, len(versions), 500):
        batch = versions[first : first + 500]
        marks = ", ".join("?" * len(batch))
        rows = conn.execute(
            "SELECT version, data FROM blobs WHERE thread_id = ? AND checkpoint_ns = ? AND "
            f"key = ? AND version IN ({marks})",
            (*where, *batch),
        ).fetchall()
        data.update((version, bytes(blob)) for version, blob in rows)
    return data


def prune_thread(conn: sqlite3.Connection, thread: str, keep_last: int) -> int:
    """Keep the newest ``keep_last`` checkpoints of each namespace of the thread, in the
    caller's transaction; returns how many went."""
    rows = conn.execute(
        "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = ?", (_sql_name(thread),)
    )
    namespaces = [_name_of(row[0]) for row in rows]
    return sum(prune_namespace(conn, thread, ns, keep_last) for ns in namespaces)


def prune_namespace(conn: sqlite3.Connection, thread: str, ns: str, keep_last: int) -> int:
    where = (_sql_name(thread), _sql_name(ns))
    rows = conn.execute(
        "SELECT checkpoint_id, header FROM checkpoints WHERE thread_id = ? AND "
        "checkpoint_ns = ? ORDER BY checkpoint_id DESC",
        where,
    ).fetchall()
    kept, dropped = rows[:keep_last], rows[keep_last:]
    if not dropped:
        return 0
    if kept:
        materialize(conn, thread, ns, kept[-1][1])
    bases = {
        (_name_of(key), version): (kind, base)
        for key, version, kind, base in conn.execute(
            "SELECT key, version, kind, base FROM blobs WHERE thread_id = ? AND checkpoint_ns = ?",
            where,
        )
    }
    wanted = [pair for _, header in kept for pair in decode_header(header).versions.items()]
    needed = needed_versions(wanted, lambda key, version: bases.get((key, version)))
    conn.executemany(
        "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
        [(*where, checkpoint_id) for checkpoint_id, _ in dropped],
    )
    conn.executemany(
        "DELETE FROM writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
        [(*where, checkpoint_id) for checkpoint_id, _ in dropped],
    )
    conn.executemany(
        "DELETE FROM blobs WHERE thread_id = ? AND checkpoint_ns = ? AND key = ? AND version = ?",
        [
            (*where, _sql_name(key), version)
            for key, version in bases
            if (key, version) not in needed
        ],
    )
    return len(dropped)


def materialize(conn: sqlite3.Connection, thread: str, ns: str, header: bytes) -> None:
    """Store every key of this checkpoint whole, so the deltas behind it can go."""
    for key, version in decode_header(header, thread, ns).versions.items():
        chain = _chain(conn, thread, ns, key, version)
        if len(chain) == 1 and chain[0][1] == "full":
            continue
        data = _data_of(conn, thread, ns, key, [link[0] for link in chain])
        chain = [(v, kind, base, data.get(v, b"")) for v, kind, base, _ in chain]
        value = rebuild_value(key, version, chain, thread, ns)
        conn.execute(
            "UPDATE blobs SET kind = 'full', base = NULL, data = ? WHERE thread_id = ? AND "
            "checkpoint_ns = ? AND key = ? AND version = ?",
            (
                encode_blob(key, Blob("full", value)),
                *(_sql_name(name) for name in (thread, ns, key)),
                version,
            ),
        )
