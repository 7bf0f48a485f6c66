"""The PostgreSQL savers' pure core: schema, SQL, and every operation as a *plan*.

A plan is a generator that yields :class:`Query` values and receives each one's rows, so one
implementation serves the sync driver (``psycopg.Connection``) and the async one
(``psycopg.AsyncConnection``) in :mod:`graph_agent.checkpoint.postgres`; plans do no I/O of
their own. All SQL is parameterised: thread ids, namespaces, keys and channels only ever travel
as parameters, as UTF-8 ``bytea`` (PostgreSQL ``text`` cannot hold NUL), and rows are keyed by
the SHA-256 of the thread id so that an id of any length fits an index.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import os
import socket
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from graph_agent.checkpoint.base import (
    Checkpoint,
    Lease,
    _show,
    compare_and_set,
    copy_target_taken,
    nothing_to_copy,
)
from graph_agent.checkpoint.codec import (
    DecodedBlobs,
    Link,
    LoadedLists,
    blobs_to_store,
    decode_header,
    decode_write,
    encode_blob,
    encode_header,
    encode_write,
    load_values,
    needed_versions,
    rebuild_value,
)
from graph_agent.graph.errors import SerializationError, ThreadBusyError
from graph_agent.graph.saver import COPY_TASK, IDS_THREAD, Blob

T = TypeVar("T")

SCHEMA_VERSION = 2

_LOCK_SPACE = 0x6761_6167  # first key of the two-key advisory locks graph_agent takes ("gaag")
_MIGRATION_LOCK = 1  # second key: the migration lock, taken inside the migration transaction

_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE graph_agent_heads (
            thread_key bytea NOT NULL, checkpoint_ns bytea NOT NULL,
            checkpoint_id text COLLATE "C" NOT NULL, thread_id bytea NOT NULL,
            PRIMARY KEY (thread_key, checkpoint_ns))""",
        """CREATE TABLE graph_agent_checkpoints (
            thread_key bytea NOT NULL, checkpoint_ns bytea NOT NULL,
            checkpoint_id text COLLATE "C" NOT NULL, parent_id text COLLATE "C",
            step integer NOT NULL, header bytea NOT NULL,
            PRIMARY KEY (thread_key, checkpoint_ns, checkpoint_id))""",
        """CREATE TABLE graph_agent_blobs (
            thread_key bytea NOT NULL, checkpoint_ns bytea NOT NULL, key bytea NOT NULL,
            version text COLLATE "C" NOT NULL, kind text NOT NULL CHECK (kind IN ('full', 'delta')),
            base text COLLATE "C", data bytea NOT NULL,
            PRIMARY KEY (thread_key, checkpoint_ns, key, version))""",
        """CREATE TABLE graph_agent_writes (
            thread_key bytea NOT NULL, checkpoint_ns bytea NOT NULL,
            checkpoint_id text COLLATE "C" NOT NULL, task_id text COLLATE "C" NOT NULL,
            channel bytea NOT NULL, seq bigint GENERATED ALWAYS AS IDENTITY, data bytea NOT NULL,
            PRIMARY KEY (thread_key, checkpoint_ns, checkpoint_id, task_id, channel))""",
        """CREATE TABLE graph_agent_leases (
            thread_key bytea NOT NULL, checkpoint_ns bytea NOT NULL, owner text NOT NULL,
            session_key bigint NOT NULL, host text NOT NULL, pid integer NOT NULL,
            expires_at timestamptz NOT NULL, acquired_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (thread_key, checkpoint_ns))""",
        "CREATE INDEX graph_agent_leases_by_session ON graph_agent_leases (session_key)",
    ),
    # the node cache (add_node(..., cache=CachePolicy(...))): results kept beside the threads
    2: (
        """CREATE TABLE graph_agent_node_cache (
            namespace bytea NOT NULL, key bytea NOT NULL, data bytea NOT NULL,
            expires_at double precision, PRIMARY KEY (namespace, key))""",
    ),
}

# put: move the head (the compare-and-set), then store blobs and header only if it moved
_MOVE_HEAD_NEXT = """
WITH moved AS (
    UPDATE graph_agent_heads SET checkpoint_id = %(id)s
    WHERE thread_key = %(thread)s AND checkpoint_ns = %(ns)s AND checkpoint_id = %(parent)s
    RETURNING 1
)"""
_MOVE_HEAD_FIRST = """
WITH moved AS (
    INSERT INTO graph_agent_heads (thread_key, checkpoint_ns, checkpoint_id, thread_id)
    VALUES (%(thread)s, %(ns)s, %(id)s, %(thread_id)s)
    ON CONFLICT DO NOTHING
    RETURNING 1
)"""
_MOVE_HEAD_FORK = """
WITH moved AS (
    INSERT INTO graph_agent_heads AS h (thread_key, checkpoint_ns, checkpoint_id, thread_id)
    VALUES (%(thread)s, %(ns)s, %(id)s, %(thread_id)s)
    ON CONFLICT (thread_key, checkpoint_ns)
    DO UPDATE SET checkpoint_id = GREATEST(h.checkpoint_id, EXCLUDED.checkpoint_id)
    RETURNING 1
)"""
_STORE_CHECKPOINT = """, stored AS (
    INSERT INTO graph_agent_checkpoints
        (thread_key, checkpoint_ns, checkpoint_id, parent_id, step, header)
    SELECT %(thread)s, %(ns)s, %(id)s, %(parent)s, %(step)s, %(header)s
    WHERE EXISTS (SELECT FROM moved)
)
SELECT EXISTS (SELECT FROM moved)"""
_STORE_BLOBS = """, stored_blobs AS (
    INSERT INTO graph_agent_blobs (thread_key, checkpoint_ns, key, version, kind, base, data)
    SELECT %(thread)s, %(ns)s, b.key, %(id)s, b.kind, b.base, b.data
    FROM unnest(%(keys)s::bytea[], %(kinds)s::text[], %(bases)s::text[], %(datas)s::bytea[])
        AS b (key, kind, base, data)
    WHERE EXISTS (SELECT FROM moved)
)"""
# the usual checkpoint stores one key: plain parameters cost the client less than arrays
_STORE_ONE_BLOB = """, stored_blobs AS (
    INSERT INTO graph_agent_blobs (thread_key, checkpoint_ns, key, version, kind, base, data)
    SELECT %(thread)s, %(ns)s, %(key)s::bytea, %(id)s, %(kind)s, %(base)s, %(data)s::bytea
    WHERE EXISTS (SELECT FROM moved)
)"""
# a checked put (checked_put_plan) may also store blobs at versions other than its own id
_STORE_BLOBS_AT = """, stored_blobs AS (
    INSERT INTO graph_agent_blobs (thread_key, checkpoint_ns, key, version, kind, base, data)
    SELECT %(thread)s, %(ns)s, b.key, b.version, b.kind, b.base, b.data
    FROM unnest(%(keys)s::bytea[], %(versions)s::text[], %(kinds)s::text[], %(bases)s::text[],
        %(datas)s::bytea[]) AS b (key, version, kind, base, data)
    WHERE EXISTS (SELECT FROM moved)
)"""
# a run's last checkpoint lets go of the run's lease row in the same commit (put_plan's
# ``release``): the lease is still held in the process until the saver's release
_RELEASE_WITH = """, released AS (
    DELETE FROM graph_agent_leases
    WHERE thread_key = %(lease_thread)s AND checkpoint_ns = %(lease_ns)s AND owner = %(owner)s
        AND EXISTS (SELECT FROM moved)
)"""
_MOVE_HEAD = {"next": _MOVE_HEAD_NEXT, "first": _MOVE_HEAD_FIRST, "fork": _MOVE_HEAD_FORK}
_PUT = {
    (source, one_blob, releasing): move
    + (_STORE_ONE_BLOB if one_blob else _STORE_BLOBS)
    + (_RELEASE_WITH if releasing else "")
    + _STORE_CHECKPOINT
    for source, move in _MOVE_HEAD.items()
    for one_blob in (False, True)
    for releasing in (False, True)
}
_CHECKED_PUT = {
    source: move + _STORE_BLOBS_AT + _STORE_CHECKPOINT for source, move in _MOVE_HEAD.items()
}

_LOCK_HEAD = """SELECT checkpoint_id FROM graph_agent_heads
WHERE thread_key = %(thread)s AND checkpoint_ns = %(ns)s FOR UPDATE"""

_STORED_VERSIONS = """SELECT b.key, b.version FROM graph_agent_blobs AS b
JOIN unnest(%(keys)s::bytea[], %(versions)s::text[]) AS w (key, version)
    ON b.key = w.key AND b.version = w.version
WHERE b.thread_key = %(thread)s AND b.checkpoint_ns = %(ns)s"""

_ANY_CHECKPOINT = "SELECT FROM graph_agent_heads WHERE thread_key = %(thread)s LIMIT 1"

# copy_thread: each table's rows of the source thread, under the target's key (leases stay);
# pending writes in the order they were written
_COPY_THREAD = (
    """INSERT INTO graph_agent_heads (thread_key, checkpoint_ns, checkpoint_id, thread_id)
    SELECT %(dst)s, checkpoint_ns, checkpoint_id, %(dst_id)s FROM graph_agent_heads
    WHERE thread_key = %(src)s""",
    """INSERT INTO graph_agent_checkpoints
        (thread_key, checkpoint_ns, checkpoint_id, parent_id, step, header)
    SELECT %(dst)s, checkpoint_ns, checkpoint_id, parent_id, step, header
    FROM graph_agent_checkpoints WHERE thread_key = %(src)s""",
    # (leftovers of the target without a checkpoint, which nothing loads, give way)
    """INSERT INTO graph_agent_blobs (thread_key, checkpoint_ns, key, version, kind, base, data)
    SELECT %(dst)s, checkpoint_ns, key, version, kind, base, data FROM graph_agent_blobs
    WHERE thread_key = %(src)s
    ON CONFLICT (thread_key, checkpoint_ns, key, version) DO UPDATE
    SET kind = EXCLUDED.kind, base = EXCLUDED.base, data = EXCLUDED.data""",
    """INSERT INTO graph_agent_writes
        (thread_key, checkpoint_ns, checkpoint_id, task_id, channel, data)
    SELECT %(dst)s, checkpoint_ns, checkpoint_id, task_id, channel, data
    FROM graph_agent_writes WHERE thread_key = %(src)s ORDER BY seq
    ON CONFLICT (thread_key, checkpoint_ns, checkpoint_id, task_id, channel)
    DO UPDATE SET data = EXCLUDED.data""",
    # a copied checkpoint with pending writes names the thread their ids were derived for
    # (one it names already, from an earlier copy, stays)
    """INSERT INTO graph_agent_writes
        (thread_key, checkpoint_ns, checkpoint_id, task_id, channel, data)
    SELECT DISTINCT %(dst)s, checkpoint_ns, checkpoint_id, %(copy_task)s, %(ids_channel)s,
        %(ids_thread)s::bytea
    FROM graph_agent_writes WHERE thread_key = %(src)s
    ON CONFLICT (thread_key, checkpoint_ns, checkpoint_id, task_id, channel) DO NOTHING""",
)

_HEAD = """SELECT checkpoint_id FROM graph_agent_heads
WHERE thread_key = %(thread)s AND checkpoint_ns = %(ns)s"""

# the head's id as a value: a join was planned as a scan of the thread's every checkpoint
# (the key's first two columns) filtered on the id, slower the longer the thread
_HEAD_HEADER = """SELECT header FROM graph_agent_checkpoints
WHERE thread_key = %(thread)s AND checkpoint_ns = %(ns)s AND checkpoint_id = (
    SELECT checkpoint_id FROM graph_agent_heads
    WHERE thread_key = %(thread)s AND checkpoint_ns = %(ns)s)"""

_HEADER = """SELECT header FROM graph_agent_checkpoints
WHERE thread_key = %(thread)s AND checkpoint_ns = %(ns)s AND checkpoint_id = %(id)s"""

_HEADERS = """SELECT header FROM graph_agent_checkpoints
WHERE thread_key = %(thread)s AND checkpoint_ns = %(ns)s
    AND (%(before)s::text IS NULL OR checkpoint_id < %(before)s::text)
ORDER BY checkpoint_id DESC LIMIT %(limit)s"""

_IDS = _HEADERS.replace("SELECT header", "SELECT checkpoint_id", 1)

# every key's blob chain (newest first, back to its full copy) and the checkpoint's pending
# writes, in one round trip. Each link is a primary-key lookup (LATERAL ... LIMIT 1 keeps the
# planner from turning it into a scan of the thread's blobs). A delta's base is followed only
# when it sorts before the delta's own version (a base is an older checkpoint's id), so a chain
# that loops stops at once; the code reading it says why it stopped
_LOAD = """
WITH RECURSIVE chain (key, version, kind, base, data, n) AS (
    SELECT w.key, w.version COLLATE "C", b.kind, b.base, b.data, 0
    FROM unnest(%(keys)s::bytea[], %(versions)s::text[]) AS w (key, version)
    CROSS JOIN LATERAL (
        SELECT kind, base, data FROM graph_agent_blobs
        WHERE thread_key = %(thread)s AND checkpoint_ns = %(ns)s AND key = w.key
            AND version = w.version
        LIMIT 1
    ) AS b
    UNION ALL
    SELECT chain.key, chain.base, b.kind, b.base, b.data, chain.n + 1
    FROM chain CROSS JOIN LATERAL (
        SELECT kind, base, data FROM graph_agent_blobs
        WHERE thread_key = %(thread)s AND checkpoint_ns = %(ns)s AND key = chain.key
            AND version = chain.base
        LIMIT 1
    ) AS b
    WHERE chain.kind <> 'full' AND chain.base < chain.version
)
SELECT 0, key, kind, data, n::bigint, version, base FROM chain
UNION ALL
SELECT 1, channel, task_id, data, seq, NULL, NULL FROM graph_agent_writes
WHERE thread_key = %(thread)s AND checkpoint_ns = %(ns)s AND checkpoint_id = %(id)s
UNION ALL
SELECT 2, NULL, NULL, NULL, NULL, NULL, NULL FROM graph_agent_checkpoints
WHERE thread_key = %(thread)s AND checkpoint_ns = %(ns)s AND checkpoint_id = %(id)s"""

_PUT_WRITES = """
INSERT INTO graph_agent_writes
    (thread_key, checkpoint_ns, checkpoint_id, task_id, channel, data)
SELECT %(thread)s, %(ns)s, %(id)s, %(task)s, n.channel, n.data
FROM unnest(%(channels)s::bytea[], %(datas)s::bytea[]) WITH ORDINALITY AS n (channel, data, i)
ORDER BY n.i
ON CONFLICT (thread_key, checkpoint_ns, checkpoint_id, task_id, channel)
DO UPDATE SET data = EXCLUDED.data"""

# a lease is taken when there is none, when it is this saver's own leftover, when it expired,
# or when its holder's session is gone (its advisory lock is free: trying it succeeds); and
# only while this saver's own session holds its lock, or the lease would not bind. Its commit
# does not wait for the disk: a lease binds only while its holder's session lives (a crash of
# the server ends it), and the run's next checkpoint, which does wait, writes it first
_ACQUIRE = """
WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true))
INSERT INTO graph_agent_leases AS l
    (thread_key, checkpoint_ns, owner, session_key, host, pid, expires_at)
SELECT %(thread)s, %(ns)s, %(owner)s, %(session)s::bigint, %(host)s, %(pid)s,
    now() + make_interval(secs => %(ttl)s)
FROM relaxed
WHERE NOT pg_try_advisory_xact_lock(%(session)s::bigint)
ON CONFLICT (thread_key, checkpoint_ns) DO UPDATE SET
    owner = EXCLUDED.owner, session_key = EXCLUDED.session_key, host = EXCLUDED.host,
    pid = EXCLUDED.pid, expires_at = EXCLUDED.expires_at, acquired_at = now()
WHERE l.session_key = EXCLUDED.session_key OR l.expires_at < now()
    OR pg_try_advisory_xact_lock(l.session_key)
RETURNING owner"""

_SESSION_ALIVE = "SELECT NOT pg_try_advisory_xact_lock(%(session)s::bigint)"

_HOLDER = """SELECT pid, host FROM graph_agent_leases
WHERE thread_key = %(thread)s AND checkpoint_ns = %(ns)s"""

_RELEASE = """DELETE FROM graph_agent_leases
WHERE thread_key = %(thread)s AND checkpoint_ns = %(ns)s AND owner = %(owner)s"""

# extends the saver's leases; those it does not return were taken by another run
HEARTBEAT = """UPDATE graph_agent_leases SET expires_at = now() + make_interval(secs => %(ttl)s)
WHERE session_key = %(session)s::bigint AND owner = ANY(%(owners)s::text[])
RETURNING owner"""

MOVE_LEASES = """UPDATE graph_agent_leases SET session_key = %(new)s::bigint
WHERE session_key = %(old)s::bigint AND owner = ANY(%(owners)s::text[])"""

FORGET = """DELETE FROM graph_agent_leases
WHERE session_key = %(session)s::bigint AND owner = ANY(%(owners)s::text[])"""

# one statement: all or nothing, in one round trip
_DELETE_THREAD = """
WITH heads AS (DELETE FROM graph_agent_heads WHERE thread_key = %(thread)s),
checkpoints AS (DELETE FROM graph_agent_checkpoints WHERE thread_key = %(thread)s),
blobs AS (DELETE FROM graph_agent_blobs WHERE thread_key = %(thread)s),
writes AS (DELETE FROM graph_agent_writes WHERE thread_key = %(thread)s)
DELETE FROM graph_agent_leases WHERE thread_key = %(thread)s"""


@dataclass(frozen=True, slots=True)
class Query:
    """One statement a plan asks its driver to run; the driver sends back its rows."""

    sql: str
    params: Mapping[str, Any]
    read: Query | None = None
    """A read sent with this statement, in one pipeline (one round trip); the driver appends
    its rows to ``read_rows``."""
    read_rows: builtins.list[builtins.list[tuple[Any, ...]]] | None = None


Plan = Generator[Query, builtins.list[tuple[Any, ...]], T]


def _name(text: str) -> bytes:
    """An opaque name (thread id, namespace, key, channel) as stored: UTF-8, lone surrogates
    kept."""
    return text.encode("utf-8", "surrogatepass")


@functools.lru_cache(maxsize=4096)  # a run computes it at each of its statements
def thread_key(thread_id: str) -> bytes:
    """What rows are keyed by: the SHA-256 of the thread id, so any id fits an index (a btree
    entry holds at most ~2.7 kB); ``graph_agent_heads.thread_id`` keeps the id itself."""
    return hashlib.sha256(_name(thread_id)).digest()


def _text(stored: bytes) -> str:
    return bytes(stored).decode("utf-8", "surrogatepass")


def put_plan(
    checkpoint: Checkpoint,
    blobs: builtins.list[tuple[str, str, Blob]] | None = None,
    release: Lease | None = None,
) -> Plan[None]:
    """One statement: move the thread's head from the parent to this checkpoint (the
    compare-and-set) and, only if it moved, store the blobs and the header.

    ``blobs``: what :func:`checked_put_plan` found must be stored, as ``(key, version, blob)``;
    ``None`` for the engine's next step (:func:`stored_as_it_is`), which stores its own.
    ``release``: a lease whose row goes in the same commit (the engine's next step only)."""
    params: dict[str, Any] = {
        "thread": thread_key(checkpoint.thread_id),
        "thread_id": _name(checkpoint.thread_id),
        "ns": _name(checkpoint.checkpoint_ns),
        "id": checkpoint.id,
        "parent": checkpoint.parent_id,
        "step": checkpoint.step,
        "header": encode_header(checkpoint),
    }
    if checkpoint.metadata.get("source") == "fork":
        source = "fork"
    else:
        source = "first" if checkpoint.parent_id is None else "next"
    if blobs is None:
        keys, kinds, bases, datas = [], [], [], []
        for key, blob in checkpoint.blobs.items():
            keys.append(_name(key))
            kinds.append(blob.kind)
            bases.append(blob.base)
            datas.append(encode_blob(key, blob))
        one_blob = len(keys) == 1
        if one_blob:
            params.update(key=keys[0], kind=kinds[0], base=bases[0], data=datas[0])
        else:
            params.update(keys=keys, kinds=kinds, bases=bases, datas=datas)
        if release is not None:
            params.update(
                lease_thread=thread_key(release.thread_id),
                lease_ns=_name(release.checkpoint_ns),
                owner=release.owner,
            )
        sql = _PUT[(source, one_blob, release is not None)]
    else:
        params.update(
            keys=[_name(key) for key, _, _ in blobs],
            versions=[version for _, version, _ in blobs],
            kinds=[blob.kind for _, _, blob in blobs],
            bases=[blob.base for _, _, blob in blobs],
            datas=[encode_blob(key, blob) for key, _, blob in blobs],
        )
        sql = _CHECKED_PUT[source]
    for _ in range(3):
        rows = yield Query(sql, params)
        if rows[0][0]:
            return
        # refused: name the head it lost to; should the head be back at our parent by now (the
        # writer we waited for rolled back), try again
        rows = yield Query(_HEAD, params)
        compare_and_set(checkpoint, rows[0][0] if rows else None)
    raise ThreadBusyError(
        f"thread {_show(checkpoint.thread_id)} kept changing while checkpoint {checkpoint.id} "
        "was being saved: another writer is on it. Reload with get_state() and call again"
    )


def stored_as_it_is(checkpoint: Checkpoint) -> bool:
    """Whether :func:`put_plan` may store ``checkpoint`` with its own blobs alone: the engine's
    next step on its thread, whose statement's compare-and-set proves that its parent (and so
    every version it names) is there. Any other checkpoint goes through
    :func:`checked_put_plan`."""
    return checkpoint._engine_built and checkpoint.metadata.get("source") != "fork"


def checked_put_plan(checkpoint: Checkpoint) -> Plan[None]:
    """Store a checkpoint :func:`stored_as_it_is` refuses, with the blobs it names that its
    thread and namespace lack (see :func:`blobs_to_store`), or not at all. Run it in a
    transaction: the head row stays locked from the look-up to the put, as prune locks it."""
    where = {"thread": thread_key(checkpoint.thread_id), "ns": _name(checkpoint.checkpoint_ns)}
    head = yield Query(_LOCK_HEAD, where)
    compare_and_set(checkpoint, head[0][0] if head else None)  # raises, unless a fork
    named = list(checkpoint.versions.items())
    named += [(key, blob.base) for key, blob in checkpoint.blobs.items() if blob.base is not None]
    keys = [_name(key) for key, _ in named]
    rows = yield Query(_STORED_VERSIONS, {**where, "keys": keys, "versions": [v for _, v in named]})
    stored = {(_text(key), version) for key, version in rows}
    blobs = blobs_to_store(checkpoint, lambda key, version: (key, version) in stored)
    yield from put_plan(checkpoint, blobs)


def put_writes_plan(
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    task_id: str,
    writes: Sequence[tuple[str, Any]],
) -> Plan[None]:
    encoded = {_name(channel): encode_write(channel, value) for channel, value in writes}
    if not encoded:
        return
    yield Query(
        _PUT_WRITES,
        {
            "thread": thread_key(thread_id),
            "ns": _name(checkpoint_ns),
            "id": checkpoint_id,
            "task": task_id,
            "channels": list(encoded),
            "datas": list(encoded.values()),
        },
    )


SNAPSHOT_BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
"""Begins a read that takes several statements: all of them see one snapshot, so a prune or
delete committed meanwhile (by any process) is seen whole or not at all. A plan yields it
itself; the driver ends the transaction when the plan returns (or fails)."""


def get_plan(
    thread_id: str,
    checkpoint_id: str | None,
    checkpoint_ns: str,
    decoded: DecodedBlobs | None = None,
    loaded: LoadedLists | None = None,
    read: builtins.list[tuple[Any, ...]] | None = None,
) -> Plan[Checkpoint | None]:
    """One checkpoint (the newest for ``None``). ``decoded``: the blobs a listing has decoded
    so far (see :class:`DecodedBlobs`); ``loaded``: the lists the saver's loads rebuilt (see
    :class:`LoadedLists`); ``read``: the newest's header, already read (:func:`head_read`).

    Two statements and no transaction: the header, then its blobs and pending writes in one
    statement that also tells whether the checkpoint is still there. One statement sees one
    snapshot, and a prune or delete commits whole: a checkpoint there has every blob it names
    (a prune keeps, or stores whole, those of the checkpoints it keeps). One deleted in between
    reads as not there; the newest is then looked up again (a prune may have left a newer
    one)."""
    params = {"thread": thread_key(thread_id), "ns": _name(checkpoint_ns), "id": checkpoint_id}
    header = Query(_HEAD_HEADER if checkpoint_id is None else _HEADER, params)
    for attempt in range(3):
        rows = read if attempt == 0 and read is not None else (yield header)
        if not rows:
            return None
        checkpoint = decode_header(rows[0][0], thread_id, checkpoint_ns)
        chains, writes, there = yield from _chains_plan(thread_id, checkpoint_ns, checkpoint)
        if there:
            return _loaded(checkpoint, chains, writes, decoded, loaded)
        if checkpoint_id is not None:
            return None
    raise ThreadBusyError(
        f"thread {_show(thread_id)} kept losing its newest checkpoint while it was being read "
        "(deleted or pruned meanwhile); call again"
    )


def ids_plan(
    thread_id: str, limit: int | None, before: str | None, checkpoint_ns: str
) -> Plan[builtins.list[str]]:
    """The ids of a thread's checkpoints, newest first."""
    rows = yield Query(_IDS, _listing(thread_id, limit, before, checkpoint_ns))
    return [row[0] for row in rows]


def list_plan(
    thread_id: str, limit: int | None, before: str | None, checkpoint_ns: str
) -> Plan[builtins.list[Checkpoint]]:
    """A thread's checkpoints, newest first, from one snapshot."""
    yield Query(SNAPSHOT_BEGIN, {})
    rows = yield Query(_HEADERS, _listing(thread_id, limit, before, checkpoint_ns))
    headers = [row[0] for row in rows]
    checkpoints, decoded = [], DecodedBlobs()
    for header in headers:
        checkpoints.append((yield from load_plan(thread_id, checkpoint_ns, header, decoded)))
    return checkpoints


def _listing(
    thread_id: str, limit: int | None, before: str | None, checkpoint_ns: str
) -> dict[str, Any]:
    return {
        "thread": thread_key(thread_id),
        "ns": _name(checkpoint_ns),
        "before": before,
        "limit": limit,
    }


def load_plan(
    thread_id: str,
    checkpoint_ns: str,
    header: bytes,
    decoded: DecodedBlobs | None = None,
    loaded: LoadedLists | None = None,
) -> Plan[Checkpoint]:
    """The checkpoint of ``header`` with its values and pending writes."""
    checkpoint = decode_header(header, thread_id, checkpoint_ns)
    chains, writes, _ = yield from _chains_plan(thread_id, checkpoint_ns, checkpoint)
    return _loaded(checkpoint, chains, writes, decoded, loaded)


def _loaded(
    checkpoint: Checkpoint,
    chains: _Chains,
    writes: _Writes,
    decoded: DecodedBlobs | None,
    loaded: LoadedLists | None,
) -> Checkpoint:
    load_values(checkpoint, lambda key, _: chains.get(key, []), decoded, loaded)
    checkpoint.pending_writes = tuple(
        decode_write(checkpoint, task_id, channel, data) for task_id, channel, data in writes
    )
    return checkpoint


_Chains = dict[str, builtins.list[Link]]  # key -> its blobs, newest first
_Writes = builtins.list[tuple[str, str, bytes]]  # [(task id, channel, data)], in write order


def _chains_plan(
    thread_id: str, checkpoint_ns: str, checkpoint: Checkpoint
) -> Plan[tuple[_Chains, _Writes, bool]]:
    """Each key's blob chain (newest first), the pending writes (in the order written), and
    whether the checkpoint's row is there, all read by one statement (one snapshot)."""
    versions = checkpoint.versions
    rows = yield Query(
        _LOAD,
        {
            "thread": thread_key(thread_id),
            "ns": _name(checkpoint_ns),
            "id": checkpoint.id,
            "keys": [_name(key) for key in versions],
            "versions": list(versions.values()),
        },
    )
    links: dict[str, builtins.list[tuple[int, Link]]] = {}
    writes: builtins.list[tuple[int, str, str, bytes]] = []
    there = False
    for part, name, kind_or_task, data, order, version, base in rows:
        if part == 0:
            links.setdefault(_text(name), []).append((order, (version, kind_or_task, base, data)))
        elif part == 1:
            writes.append((order, kind_or_task, _text(name), data))
        else:
            there = True
    chains = {key: [link for _, link in sorted(chain)] for key, chain in links.items()}
    writes.sort()
    return chains, [(task_id, channel, data) for _, task_id, channel, data in writes], there


def copy_thread_plan(src_thread_id: str, dst_thread_id: str) -> Plan[None]:
    """Copy a thread's rows under another thread id, from one snapshot; run it in a
    transaction."""
    yield Query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", {})
    params = {
        "src": thread_key(src_thread_id),
        "dst": thread_key(dst_thread_id),
        "dst_id": _name(dst_thread_id),
        "copy_task": COPY_TASK,
        "ids_channel": _name(IDS_THREAD),
        "ids_thread": encode_write(IDS_THREAD, src_thread_id),
    }
    if not (yield Query(_ANY_CHECKPOINT, {"thread": params["src"]})):
        raise nothing_to_copy(src_thread_id)
    if (yield Query(_ANY_CHECKPOINT, {"thread": params["dst"]})):
        raise copy_target_taken(dst_thread_id)
    for sql in _COPY_THREAD:
        yield Query(sql, params)


def delete_thread_plan(thread_id: str) -> Plan[None]:
    """One statement: needs no transaction of its own."""
    yield Query(_DELETE_THREAD, {"thread": thread_key(thread_id)})


def prune_plan(thread_id: str, keep_last: int) -> Plan[int]:
    """Runs in one transaction; locks the thread's head rows, so puts on it wait meanwhile."""
    thread = thread_key(thread_id)
    rows = yield Query(
        "SELECT checkpoint_ns FROM graph_agent_heads WHERE thread_key = %(thread)s "
        "ORDER BY checkpoint_ns FOR UPDATE",
        {"thread": thread},
    )
    removed = 0
    for (ns,) in rows:
        removed += yield from _prune_namespace_plan(thread_id, _text(ns), keep_last)
    return removed


def _prune_namespace_plan(thread_id: str, checkpoint_ns: str, keep_last: int) -> Plan[int]:
    params: dict[str, Any] = {"thread": thread_key(thread_id), "ns": _name(checkpoint_ns)}
    rows = yield Query(
        "SELECT checkpoint_id, header FROM graph_agent_checkpoints WHERE thread_key = %(thread)s "
        "AND checkpoint_ns = %(ns)s ORDER BY checkpoint_id DESC",
        params,
    )
    kept, dropped = rows[:keep_last], rows[keep_last:]
    if not dropped:
        return 0
    if kept:
        yield from _materialize_plan(thread_id, checkpoint_ns, kept[-1][1])
    bases = {
        (_text(key), version): (kind, base)
        for key, version, kind, base in (
            yield Query(
                "SELECT key, version, kind, base FROM graph_agent_blobs "
                "WHERE thread_key = %(thread)s AND checkpoint_ns = %(ns)s",
                params,
            )
        )
    }
    wanted = [pair for _, header in kept for pair in decode_header(header).versions.items()]
    needed = needed_versions(wanted, lambda key, version: bases.get((key, version)))
    unneeded = [pair for pair in bases if pair not in needed]
    params["dropped"] = [checkpoint_id for checkpoint_id, _ in dropped]
    params["keys"] = [_name(key) for key, _ in unneeded]
    params["versions"] = [version for _, version in unneeded]
    yield Query(
        "DELETE FROM graph_agent_checkpoints WHERE thread_key = %(thread)s "
        "AND checkpoint_ns = %(ns)s AND checkpoint_id = ANY(%(dropped)s::text[])",
        params,
    )
    yield Query(
        "DELETE FROM graph_agent_writes WHERE thread_key = %(thread)s "
        "AND checkpoint_ns = %(ns)s AND checkpoint_id = ANY(%(dropped)s::text[])",
        params,
    )
    yield Query(
        "DELETE FROM graph_agent_blobs AS b "
        "USING unnest(%(keys)s::bytea[], %(versions)s::text[]) AS d (key, version) "
        "WHERE b.thread_key = %(thread)s AND b.checkpoint_ns = %(ns)s "
        "AND b.key = d.key AND b.version = d.version",
        params,
    )
    if not kept:
        yield Query(
            "DELETE FROM graph_agent_heads WHERE thread_key = %(thread)s "
            "AND checkpoint_ns = %(ns)s",
            params,
        )
    return len(dropped)


def _materialize_plan(thread_id: str, checkpoint_ns: str, header: bytes) -> Plan[None]:
    """Store every key of this checkpoint whole, so the deltas behind it can go."""
    checkpoint = decode_header(header, thread_id, checkpoint_ns)
    chains, _, _ = yield from _chains_plan(thread_id, checkpoint_ns, checkpoint)
    for key, version in checkpoint.versions.items():
        chain = chains.get(key, [])
        if len(chain) == 1 and chain[0][1] == "full":
            continue
        value = rebuild_value(key, version, chain, thread_id, checkpoint_ns)
        yield Query(
            "UPDATE graph_agent_blobs SET kind = 'full', base = NULL, data = %(data)s "
            "WHERE thread_key = %(thread)s AND checkpoint_ns = %(ns)s AND key = %(key)s "
            "AND version = %(version)s",
            {
                "data": encode_blob(key, Blob("full", value)),
                "thread": thread_key(thread_id),
                "ns": _name(checkpoint_ns),
                "key": _name(key),
                "version": version,
            },
        )


def acquire_plan(
    lease: Lease, session_key: int, ttl: float, read: Query | None = None
) -> Plan[bool]:
    """Take the lease row; False when this saver's own session was lost (reconnect, retry).
    ``read``: a read sent with the first attempt, in one round trip (see :func:`head_read`)."""
    params = {
        "thread": thread_key(lease.thread_id),
        "ns": _name(lease.checkpoint_ns),
        "owner": lease.owner,
        "session": session_key,
        "host": _HOST,
        "pid": os.getpid(),
        "ttl": ttl,
    }
    while True:
        if (yield Query(_ACQUIRE, params, read)):
            return True
        if read is not None and read.read_rows:  # read while another held it: stale once taken
            read.read_rows.clear()
        read = None
        if not (yield Query(_SESSION_ALIVE, params))[0][0]:
            return False
        holder = yield Query(_HOLDER, params)
        if holder:
            pid, host = holder[0]
            raise ThreadBusyError(
                f"thread {_show(lease.thread_id)} is busy: process {pid} on {host} is running it "
                "(it holds the thread's PostgreSQL lease while it lives); wait for it to finish, "
                "or use another thread_id"
            )
        # released between the two statements: try again


def head_read(thread_id: str, checkpoint_ns: str) -> Query:
    """The newest checkpoint's header, as :func:`get_plan` reads it first: sent with a run's
    lease (:func:`acquire_plan`), whose holder alone writes the thread until it lets go, so
    that the run's first ``get`` starts from it, one round trip fewer."""
    params = {"thread": thread_key(thread_id), "ns": _name(checkpoint_ns), "id": None}
    return Query(_HEAD_HEADER, params, read_rows=[])


def release_plan(lease: Lease) -> Plan[None]:
    yield Query(
        _RELEASE,
        {
            "thread": thread_key(lease.thread_id),
            "ns": _name(lease.checkpoint_ns),
            "owner": lease.owner,
        },
    )


def migrate_plan(where: str) -> Plan[None]:
    """Bring the schema to :data:`SCHEMA_VERSION`; runs in one transaction."""
    rows = yield Query("SELECT to_regclass('graph_agent_migrations') IS NOT NULL", {})
    if rows[0][0]:
        current = yield from version_plan()
        if current == SCHEMA_VERSION:
            return  # the usual case: no DDL, no lock
    # two processes may get here at once: the advisory lock makes the second wait for the
    # first's commit, after which it sees the migrations recorded and applies none
    yield Query(
        "SELECT pg_advisory_xact_lock(%(space)s, %(key)s)",
        {"space": _LOCK_SPACE, "key": _MIGRATION_LOCK},
    )
    yield Query(
        "CREATE TABLE IF NOT EXISTS graph_agent_migrations ("
        "version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
        {},
    )
    current = yield from version_plan()
    if current > SCHEMA_VERSION:
        raise SerializationError(
            f"{where} has graph_agent schema version {current}, newer than this graph_agent "
            f"understands ({SCHEMA_VERSION}); upgrade graph_agent"
        )
    for version in range(current + 1, SCHEMA_VERSION + 1):
        for statement in _MIGRATIONS[version]:
            yield Query(statement, {})
        yield Query(
            "INSERT INTO graph_agent_migrations (version) VALUES (%(version)s)",
            {"version": version},
        )


def version_plan() -> Plan[int]:
    rows = yield Query("SELECT coalesce(max(version), 0) FROM graph_agent_migrations", {})
    return int(rows[0][0])


_HOST = socket.gethostname()
