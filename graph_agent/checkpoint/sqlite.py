"""``SqliteSaver``: checkpoints in one SQLite file, the embedded default.

WAL journal with ``synchronous=NORMAL`` by default: a committed checkpoint survives a crash of
the process (``durability="full"`` also survives power loss, at an fsync per commit). A
checkpoint and its blobs are one transaction. Only parameterised SQL: thread ids and keys never
become SQL text. One run per thread across processes: a lease row taken under
``BEGIN IMMEDIATE``; the lease of a crashed process (dead pid, or expired) is taken over.
"""

from __future__ import annotations

import builtins
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from graph_agent.checkpoint.base import (
    Checkpoint,
    CheckpointSaver,
    Lease,
    PendingWrite,
    _show,
    check_keep_last,
    compare_and_set,
)
from graph_agent.checkpoint.codec import (
    decode_header,
    encode_blob,
    encode_header,
    encode_write,
    rebuild_value,
)
from graph_agent.checkpoint.serde import loads
from graph_agent.graph.engine import Blob
from graph_agent.graph.errors import GraphRuntimeError, SerializationError, ThreadBusyError

SCHEMA_VERSION = 2

_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE IF NOT EXISTS checkpoints (
            thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL,
            parent_id TEXT, step INTEGER NOT NULL, header BLOB NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)) WITHOUT ROWID""",
        """CREATE TABLE IF NOT EXISTS blobs (
            thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, key TEXT NOT NULL,
            version TEXT NOT NULL, kind TEXT NOT NULL, base TEXT, data BLOB NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns, key, version)) WITHOUT ROWID""",
        """CREATE TABLE IF NOT EXISTS writes (
            thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL,
            task_id TEXT NOT NULL, channel TEXT NOT NULL, data BLOB NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, channel))
            WITHOUT ROWID""",
        """CREATE TABLE IF NOT EXISTS leases (
            thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, owner TEXT NOT NULL,
            pid INTEGER NOT NULL, expires_at REAL NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns)) WITHOUT ROWID""",
    ),
    2: ("ALTER TABLE leases ADD COLUMN host TEXT NOT NULL DEFAULT ''",),
}

_CHAIN_SQL = """
WITH RECURSIVE chain(kind, base, data, n) AS (
    SELECT kind, base, data, 0 FROM blobs
    WHERE thread_id = ? AND checkpoint_ns = ? AND key = ? AND version = ?
    UNION ALL
    SELECT b.kind, b.base, b.data, chain.n + 1 FROM blobs AS b JOIN chain
    ON b.thread_id = ? AND b.checkpoint_ns = ? AND b.key = ? AND b.version = chain.base
    WHERE chain.kind != 'full'
)
SELECT kind, data FROM chain ORDER BY n
"""


class SqliteSaver(CheckpointSaver):
    """Checkpoints in a SQLite file (created with its folder if missing).

    Args:
        path: The database file, or ``":memory:"``.
        durability: ``"normal"`` (survives process crashes) or ``"full"`` (also power loss).
        lease_ttl: Seconds a lease taken on another host lasts without a checkpoint (the file
            is shared over a network); on this host a lease binds while its process lives and
            is taken over at once when it died.

    Example:
        >>> from graph_agent import SqliteSaver, CompileConfig
        >>> saver = SqliteSaver(":memory:")
        >>> config = CompileConfig(saver=saver)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Literal["normal", "full"] = "normal",
        lease_ttl: float = 60.0,
    ) -> None:
        super().__init__()
        self.path = str(path)
        self.lease_ttl = lease_ttl
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._lease_refreshed: dict[tuple[str, str], float] = {}
        try:
            self._conn = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=30.0
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            synchronous = "FULL" if durability == "full" else "NORMAL"
            self._conn.execute(f"PRAGMA synchronous={synchronous}")
            self._migrate()
        except sqlite3.OperationalError as exc:
            message = f"cannot open the checkpoint database {self.path}: {exc}"
            raise GraphRuntimeError(message) from exc
        except sqlite3.DatabaseError as exc:
            raise SerializationError(
                f"{self.path} is not a usable graph_agent SQLite database ({exc}); point "
                "SqliteSaver at another file or move this one away"
            ) from exc

    def close(self) -> None:
        """Close the connection (further use raises)."""
        with self._lock:
            self._conn.close()

    def _migrate(self) -> None:
        with self._lock:
            conn = self._conn
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version "
                "(version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
            )
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
                current = row[0] or 0
                if current > SCHEMA_VERSION:
                    raise SerializationError(
                        f"{self.path} has schema version {current}, newer than this "
                        f"graph_agent understands ({SCHEMA_VERSION}); upgrade graph_agent"
                    )
                for version in range(current + 1, SCHEMA_VERSION + 1):
                    for statement in _MIGRATIONS[version]:
                        conn.execute(statement)
                    conn.execute(
                        "INSERT INTO schema_version (version, applied_at) VALUES (?, ?)",
                        (version, time.time()),
                    )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def schema_version(self) -> int:
        with self._lock:
            row = self._conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
        return int(row[0] or 0)

    def _transaction(self) -> _Transaction:
        return _Transaction(self._conn, self._lock)

    # storage
    def put(self, checkpoint: Checkpoint) -> None:
        header = encode_header(checkpoint)
        thread, ns, checkpoint_id = (
            checkpoint.thread_id,
            checkpoint.checkpoint_ns,
            checkpoint.id,
        )
        blob_rows = [
            (thread, ns, key, checkpoint_id, blob.kind, blob.base, encode_blob(key, blob))
            for key, blob in checkpoint.blobs.items()
        ]
        with self._transaction() as conn:
            head = conn.execute(
                "SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = ? "
                "AND checkpoint_ns = ?",
                (thread, ns),
            ).fetchone()[0]
            compare_and_set(checkpoint, head)
            conn.executemany("INSERT OR REPLACE INTO blobs VALUES (?, ?, ?, ?, ?, ?, ?)", blob_rows)
            conn.execute(
                "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?)",
                (thread, ns, checkpoint_id, checkpoint.parent_id, checkpoint.step, header),
            )
            self._refresh_lease(conn, thread, ns)

    def put_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        writes: Sequence[tuple[str, Any]],
    ) -> None:
        rows = [
            (thread_id, checkpoint_ns, checkpoint_id, task_id, channel, encode_write(channel, v))
            for channel, v in writes
        ]
        with self._transaction() as conn:
            conn.executemany("INSERT OR REPLACE INTO writes VALUES (?, ?, ?, ?, ?, ?)", rows)

    def get(
        self, thread_id: str, checkpoint_id: str | None = None, checkpoint_ns: str = ""
    ) -> Checkpoint | None:
        with self._lock:
            if checkpoint_id is None:
                row = self._conn.execute(
                    "SELECT header FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
                    "ORDER BY checkpoint_id DESC LIMIT 1",
                    (thread_id, checkpoint_ns),
                ).fetchone()
            else:
                row = self._conn.execute(
                    "SELECT header FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
                    "AND checkpoint_id = ?",
                    (thread_id, checkpoint_ns, checkpoint_id),
                ).fetchone()
            if row is None:
                return None
            return self._load(thread_id, checkpoint_ns, row[0])

    def list(
        self,
        thread_id: str,
        limit: int | None = None,
        before: str | None = None,
        checkpoint_ns: str = "",
    ) -> Iterator[Checkpoint]:
        sql = "SELECT header FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?"
        params: builtins.list[Any] = [thread_id, checkpoint_ns]
        if before is not None:
            sql += " AND checkpoint_id < ?"
            params.append(before)
        sql += " ORDER BY checkpoint_id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._lock:
            headers = [row[0] for row in self._conn.execute(sql, params).fetchall()]
        for header in headers:
            with self._lock:
                checkpoint = self._load(thread_id, checkpoint_ns, header)
            yield checkpoint  # never while holding the lock: the caller may pause here

    def delete_thread(self, thread_id: str) -> None:
        with self._transaction() as conn:
            for table in ("checkpoints", "blobs", "writes", "leases"):
                conn.execute(f"DELETE FROM {table} WHERE thread_id = ?", (thread_id,))

    def prune(self, thread_id: str, keep_last: int) -> int:
        check_keep_last(keep_last)
        removed = 0
        with self._transaction() as conn:
            namespaces = [
                row[0]
                for row in conn.execute(
                    "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = ?",
                    (thread_id,),
                )
            ]
            for ns in namespaces:
                removed += self._prune_namespace(conn, thread_id, ns, keep_last)
        return removed

    def _prune_namespace(
        self, conn: sqlite3.Connection, thread: str, ns: str, keep_last: int
    ) -> int:
        rows = conn.execute(
            "SELECT checkpoint_id, header FROM checkpoints WHERE thread_id = ? AND "
            "checkpoint_ns = ? ORDER BY checkpoint_id DESC",
            (thread, ns),
        ).fetchall()
        kept, dropped = rows[:keep_last], rows[keep_last:]
        if not dropped:
            return 0
        if kept:
            self._materialize(conn, thread, ns, kept[-1][1])
        bases = {
            (key, version): (kind, base)
            for key, version, kind, base in conn.execute(
                "SELECT key, version, kind, base FROM blobs WHERE thread_id = ? AND "
                "checkpoint_ns = ?",
                (thread, ns),
            )
        }
        needed: set[tuple[str, str]] = set()
        for _, header in kept:
            for key, version in decode_header(header).versions.items():
                current: str | None = version
                while current is not None and (key, current) not in needed:
                    needed.add((key, current))
                    kind, base = bases[(key, current)]
                    current = base if kind != "full" else None
        conn.executemany(
            "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND "
            "checkpoint_id = ?",
            [(thread, ns, checkpoint_id) for checkpoint_id, _ in dropped],
        )
        conn.executemany(
            "DELETE FROM writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
            [(thread, ns, checkpoint_id) for checkpoint_id, _ in dropped],
        )
        conn.executemany(
            "DELETE FROM blobs WHERE thread_id = ? AND checkpoint_ns = ? AND key = ? AND "
            "version = ?",
            [(thread, ns, key, version) for key, version in bases if (key, version) not in needed],
        )
        return len(dropped)

    def _materialize(self, conn: sqlite3.Connection, thread: str, ns: str, header: bytes) -> None:
        """Store every key of this checkpoint whole, so the deltas behind it can go."""
        for key, version in decode_header(header).versions.items():
            chain = conn.execute(_CHAIN_SQL, (thread, ns, key, version, thread, ns, key)).fetchall()
            if len(chain) <= 1:
                continue
            value = rebuild_value(key, [(kind, bytes(data)) for kind, data in chain])
            conn.execute(
                "UPDATE blobs SET kind = 'full', base = NULL, data = ? WHERE thread_id = ? AND "
                "checkpoint_ns = ? AND key = ? AND version = ?",
                (encode_blob(key, Blob("full", value)), thread, ns, key, version),
            )

    def threads(self) -> builtins.list[str]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id"
            ).fetchall()
        return [row[0] for row in rows]

    def stored_bytes(self, thread_id: str) -> int:
        """Bytes of checkpoint data stored for a thread (headers, blobs and pending writes)."""
        with self._lock:
            total = 0
            for sql in (
                "SELECT SUM(LENGTH(header)) FROM checkpoints WHERE thread_id = ?",
                "SELECT SUM(LENGTH(data)) FROM blobs WHERE thread_id = ?",
                "SELECT SUM(LENGTH(data)) FROM writes WHERE thread_id = ?",
            ):
                total += self._conn.execute(sql, (thread_id,)).fetchone()[0] or 0
        return total

    def _load(self, thread: str, ns: str, header: bytes) -> Checkpoint:
        checkpoint = decode_header(header, thread, ns)
        values = {}
        for key, version in checkpoint.versions.items():
            chain = self._conn.execute(
                _CHAIN_SQL, (thread, ns, key, version, thread, ns, key)
            ).fetchall()
            values[key] = rebuild_value(key, [(kind, bytes(data)) for kind, data in chain])
        checkpoint.values = values
        rows = self._conn.execute(
            "SELECT task_id, channel, data FROM writes WHERE thread_id = ? AND checkpoint_ns = ? "
            "AND checkpoint_id = ?",
            (thread, ns, checkpoint.id),
        ).fetchall()
        checkpoint.pending_writes = tuple(
            PendingWrite(task_id, channel, loads(bytes(data))) for task_id, channel, data in rows
        )
        return checkpoint

    # one run per thread, across processes
    def acquire(self, thread_id: str, checkpoint_ns: str = "") -> Lease:
        lease = super().acquire(thread_id, checkpoint_ns)
        try:
            with self._transaction() as conn:
                row = conn.execute(
                    "SELECT owner, pid, expires_at, host FROM leases WHERE thread_id = ? AND "
                    "checkpoint_ns = ?",
                    (thread_id, checkpoint_ns),
                ).fetchone()
                if row is not None and _lease_alive(row[1], row[2], row[3]):
                    raise ThreadBusyError(
                        f"thread {_show(thread_id)} is busy: process {row[1]} is running it "
                        f"({self.path}); wait for it to finish, or use another thread_id"
                    )
                conn.execute(
                    "INSERT OR REPLACE INTO leases (thread_id, checkpoint_ns, owner, pid, "
                    "expires_at, host) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        thread_id,
                        checkpoint_ns,
                        lease.owner,
                        os.getpid(),
                        self._expiry(),
                        _HOST,
                    ),
                )
        except BaseException:
            super().release(lease)
            raise
        self._lease_refreshed[(thread_id, checkpoint_ns)] = time.monotonic()
        return lease

    def release(self, lease: Lease) -> None:
        try:
            with self._transaction() as conn:
                conn.execute(
                    "DELETE FROM leases WHERE thread_id = ? AND checkpoint_ns = ? AND owner = ?",
                    (lease.thread_id, lease.checkpoint_ns, lease.owner),
                )
        finally:
            self._lease_refreshed.pop((lease.thread_id, lease.checkpoint_ns), None)
            super().release(lease)

    async def aacquire(self, thread_id: str, checkpoint_ns: str = "") -> Lease:
        import asyncio

        return await asyncio.to_thread(self.acquire, thread_id, checkpoint_ns)

    async def arelease(self, lease: Lease) -> None:
        import asyncio

        await asyncio.to_thread(self.release, lease)

    def _expiry(self) -> float:
        return time.time() + self.lease_ttl

    def _refresh_lease(self, conn: sqlite3.Connection, thread: str, ns: str) -> None:
        """Extend a held lease, at most twice per ``lease_ttl`` (it rides on a commit)."""
        key = (thread, ns)
        refreshed = self._lease_refreshed.get(key)
        if refreshed is None or time.monotonic() - refreshed < self.lease_ttl / 2:
            return
        conn.execute(
            "UPDATE leases SET expires_at = ? WHERE thread_id = ? AND checkpoint_ns = ? "
            "AND pid = ?",
            (self._expiry(), thread, ns, os.getpid()),
        )
        self._lease_refreshed[key] = time.monotonic()


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error) under the saver's lock."""

    def __init__(self, conn: sqlite3.Connection, lock: threading.RLock) -> None:
        self.conn = conn
        self.lock = lock

    def __enter__(self) -> sqlite3.Connection:
        self.lock.acquire()
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self.lock.release()
            raise
        return self.conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            self.conn.execute("ROLLBACK" if exc_type is not None else "COMMIT")
        finally:
            self.lock.release()


def _lease_alive(pid: int, expires_at: float, host: str) -> bool:
    """Whether a lease still binds.

    On this host it binds while its process lives, however long its run takes (a crashed
    process's lease is taken over at once). A lease written on another host binds until it
    expires; its run extends it with each checkpoint.
    """
    if host != _HOST:
        return expires_at >= time.time()
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_HOST = socket.gethostname()
