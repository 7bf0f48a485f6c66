"""``SqliteSaver``: checkpoints in one SQLite file, the embedded default.

WAL journal with ``synchronous=NORMAL`` by default: a committed checkpoint survives a crash of
the process (``durability="full"`` also survives power loss, at an fsync per commit). A
checkpoint and its blobs are one transaction. Only parameterised SQL: thread ids and keys never
become SQL text.

One run per thread across processes: a lease row taken under ``BEGIN IMMEDIATE``. Whether its
holder lives is never judged from its PID (a restarted container's app is PID 1 again, a zombie
still answers signals): a process taking leases holds a lock on one byte of the database's
``-lease`` file, which the kernel drops when the process ends, and its lease rows name that
byte (:mod:`~graph_agent.checkpoint.liveness`). So on the same machine a lease binds exactly
while its process lives, however long its run takes, in any PID namespace or container sharing
the file, and a crashed process's lease is taken over at once. Leave the ``-lease`` file in
place, like the ``-wal`` and ``-shm`` files, while processes use the database. A lease written
on another host (a file shared over the network), or where no lock can be taken (Windows),
binds until it expires: ``lease_ttl`` after the run's last checkpoint; a run whose lease
expired and was taken stops at its next commit.

The schema and its migrations are in :mod:`~graph_agent.checkpoint.sqlite_schema`, transactions
and names as SQL parameters in :mod:`~graph_agent.checkpoint.sqlite_sql`, blob chains and
pruning in :mod:`~graph_agent.checkpoint.sqlite_blobs`, statements over whole threads in
:mod:`~graph_agent.checkpoint.sqlite_threads`.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import os
import socket
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from graph_agent.checkpoint import liveness
from graph_agent.checkpoint.base import (
    Checkpoint,
    CheckpointSaver,
    Lease,
    _show,
    check_keep_last,
    compare_and_set,
    lease_lost,
)
from graph_agent.checkpoint.codec import (
    DecodedBlobs,
    LoadedLists,
    blobs_to_store,
    decode_header,
    decode_thread_heads,
    decode_write,
    encode_blob,
    encode_header,
    encode_write,
    load_values,
)
from graph_agent.checkpoint.sqlite_blobs import _chain, _data_of, prune_thread
from graph_agent.checkpoint.sqlite_retention import retain_thread, retention_page
from graph_agent.checkpoint.sqlite_schema import (
    SCHEMA_VERSION,
    _check_sqlite_header,
    check_schema,
    migrate,
)
from graph_agent.checkpoint.sqlite_sql import (
    _Doing,
    _name_of,
    _roll_back,
    _sql_name,
    _store_error,
    _Transaction,
)
from graph_agent.checkpoint.sqlite_threads import (
    _NEWEST_HEADER,
    _OLDEST_HEADER,
    _THREAD_HEADS,
    _THREAD_ORDER,
    copy_thread_rows,
)
from graph_agent.checkpoint.thread_search import ThreadHeads
from graph_agent.graph.concurrency import to_thread
from graph_agent.graph.errors import (
    GraphRuntimeError,
    SerializationError,
    ThreadBusyError,
)

if TYPE_CHECKING:
    from graph_agent.checkpoint.retention import Decide, Outcome

__all__ = ["SCHEMA_VERSION", "SqliteSaver"]


class SqliteSaver(CheckpointSaver):
    """Checkpoints in a SQLite file (created with its folder if missing).

    A file another program made (one with tables that are not graph_agent's, or one that is
    not a SQLite database) is refused with a :class:`SerializationError` before anything is
    written to it.

    Args:
        path: The database file, or ``":memory:"``.
        durability: ``"normal"`` (survives process crashes) or ``"full"`` (also power loss).
        lease_ttl: Seconds a lease taken on another host (the file is shared over a network),
            or where no lock can be taken (Windows), lasts after its run's last checkpoint; on
            this host a lease binds while its process lives and is taken over at once when it
            died (see the module docstring).
        read_only: Open an existing graph_agent database only to read it (``get``, ``list``,
            ``threads``): nothing is created or migrated, and a file without graph_agent's
            tables is refused. Writing through such a saver fails.

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
        read_only: bool = False,
    ) -> None:
        super().__init__()
        self.path = str(path)
        self.lease_ttl = lease_ttl
        self.read_only = read_only
        if read_only and self.path == ":memory:":
            raise ValueError("read_only=True needs a database file, not ':memory:'")
        self._lock = threading.RLock()
        self._loaded = LoadedLists()
        self._lease_refreshed: dict[tuple[str, str], float] = {}
        self._liveness: tuple[int, tuple[int, int] | None, str] | None = None
        """(pid, liveness lock key, identity) once this saver took a lease: see _identity()."""
        self._let_go: weakref.finalize[Any, Any] | None = None
        try:
            if self.path != ":memory:" and not read_only:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = self._connect()
        except OSError as exc:
            message = f"cannot open the checkpoint database {self.path}: {exc}"
            raise GraphRuntimeError(message) from exc
        try:
            self._prepare(durability)
        except (OSError, sqlite3.OperationalError) as exc:
            self._conn.close()
            message = f"cannot open the checkpoint database {self.path}: {exc}"
            raise GraphRuntimeError(message) from exc
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise SerializationError(
                f"{self.path} is not a usable graph_agent SQLite database ({exc}); point "
                "SqliteSaver at another file or move this one away"
            ) from exc
        except BaseException:
            self._conn.close()
            raise

    def _prepare(self, durability: Literal["normal", "full"]) -> None:
        """Check that the file is ours; then (unless read-only) WAL mode and migrations."""
        if self.path != ":memory:":
            _check_sqlite_header(self.path)
        with self._reading():  # one consistent view of the tables, and no write
            check_schema(self._conn, self.path, for_reading=self.read_only)
        if self.read_only:
            return
        # Only now: switching to WAL already writes to the file's header.
        self._conn.execute("PRAGMA journal_mode=WAL")
        synchronous = "FULL" if durability == "full" else "NORMAL"
        self._conn.execute(f"PRAGMA synchronous={synchronous}")
        self._migrate()

    def _connect(self) -> sqlite3.Connection:
        try:
            if self.read_only:
                uri = f"{Path(self.path).resolve().as_uri()}?mode=ro"
                return sqlite3.connect(
                    uri, uri=True, check_same_thread=False, isolation_level=None, timeout=30.0
                )
            return sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=30.0
            )
        except sqlite3.Error as exc:
            raise GraphRuntimeError(
                f"cannot open the checkpoint database {self.path}: {exc}"
            ) from exc

    def close(self) -> None:
        """Close the connection (further use raises)."""
        with self._lock:
            self._conn.close()
            if self._let_go is not None:
                self._let_go()

    def _migrate(self) -> None:
        with self._lock:
            migrate(self._conn, self.path)

    def schema_version(self) -> int:
        with self._lock:
            row = self._conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
        return int(row[0] or 0)

    @contextlib.contextmanager
    def _reading(self, doing: _Doing | None = None, about: Any = None) -> Iterator[None]:
        """A read transaction under the saver's lock: one snapshot of the file. A read that
        fails rolls back, never hiding its error behind a failed COMMIT. A failure of SQLite
        itself (a disk error, a file locked too long) while ``doing`` something is a
        :class:`CheckpointStoreError`; without ``doing`` (opening the file) it stays as it is."""
        with self._lock:
            try:
                self._conn.execute("BEGIN")
                try:
                    yield
                except BaseException:
                    _roll_back(self._conn)
                    raise
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                _roll_back(self._conn)
                if doing is None:
                    raise
                raise _store_error(exc, self.path, doing, about) from exc

    def _transaction(self, doing: _Doing = "writing", about: Any = None) -> _Transaction:
        return _Transaction(self._conn, self._lock, self.path, doing, about)

    # storage
    def put(self, checkpoint: Checkpoint) -> None:
        self._put(checkpoint, None)

    def put_releasing(self, checkpoint: Checkpoint, lease: Lease) -> None:
        """``put(checkpoint)`` for a run's last checkpoint, its ``lease``'s row deleted in the
        same commit (one transaction fewer per run: the drivers call it). The lease is still
        held in this process until :meth:`release`, which then has nothing to write. If the
        commit fails, the row stays and ``release`` deletes it as usual. A subclass that
        overrides ``put`` (a hook, a wrapper) gets its ``put`` called instead."""
        if type(self).put is not SqliteSaver.put:
            self.put(checkpoint)
            return
        self._put(checkpoint, lease)
        self._rows_gone.add(lease.owner)

    def _put(self, checkpoint: Checkpoint, lease: Lease | None) -> None:
        header = encode_header(checkpoint)
        # names as SQL parameters (_sql_name), checked inline: this runs once per step, and a
        # call per name would cost 1% of it
        thread: str | bytes = checkpoint.thread_id
        ns: str | bytes = checkpoint.checkpoint_ns
        if not (checkpoint.thread_id.isascii() and checkpoint.checkpoint_ns.isascii()):
            thread, ns = _sql_name(checkpoint.thread_id), _sql_name(checkpoint.checkpoint_ns)
        checkpoint_id = checkpoint.id
        blob_rows = [
            (
                thread,
                ns,
                key if key.isascii() else _sql_name(key),
                checkpoint_id,
                blob.kind,
                blob.base,
                encode_blob(key, blob),
            )
            for key, blob in checkpoint.blobs.items()
        ]
        with self._transaction(_saving, checkpoint) as conn:
            head = conn.execute(
                "SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = ? "
                "AND checkpoint_ns = ?",
                (thread, ns),
            ).fetchone()[0]
            if checkpoint.parent_id != head or not checkpoint._engine_built:
                compare_and_set(checkpoint, head)  # raises, unless it is an explicit fork
                blob_rows = self._blob_rows_to_store(conn, checkpoint)
            conn.executemany("INSERT OR REPLACE INTO blobs VALUES (?, ?, ?, ?, ?, ?, ?)", blob_rows)
            conn.execute(
                "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?)",
                (thread, ns, checkpoint_id, checkpoint.parent_id, checkpoint.step, header),
            )
            self._refresh_lease(conn, checkpoint.thread_id, checkpoint.checkpoint_ns)
            if lease is not None:
                names = (_sql_name(lease.thread_id), _sql_name(lease.checkpoint_ns))
                conn.execute(_DELETE_LEASE, (*names, lease.owner))

    @staticmethod
    def _blob_rows_to_store(
        conn: sqlite3.Connection, checkpoint: Checkpoint
    ) -> builtins.list[tuple[Any, ...]]:
        """What a checkpoint other than the engine's next step stores (see
        :func:`blobs_to_store`), as rows."""
        thread, ns = _sql_name(checkpoint.thread_id), _sql_name(checkpoint.checkpoint_ns)

        def is_stored(key: str, version: str) -> bool:
            row = conn.execute(
                "SELECT 1 FROM blobs WHERE thread_id = ? AND checkpoint_ns = ? AND key = ? "
                "AND version = ?",
                (thread, ns, _sql_name(key), version),
            ).fetchone()
            return row is not None

        return [
            (thread, ns, _sql_name(key), version, blob.kind, blob.base, encode_blob(key, blob))
            for key, version, blob in blobs_to_store(checkpoint, is_stored)
        ]

    def put_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        writes: Sequence[tuple[str, Any]],
    ) -> None:
        thread: str | bytes = thread_id
        ns: str | bytes = checkpoint_ns
        if not (thread_id.isascii() and checkpoint_ns.isascii()):  # (inline, as in put)
            thread, ns = _sql_name(thread_id), _sql_name(checkpoint_ns)
        rows = [
            (
                thread,
                ns,
                checkpoint_id,
                task_id,
                channel if channel.isascii() else _sql_name(channel),
                encode_write(channel, value),
            )
            for channel, value in writes
        ]
        with self._transaction(_saving_writes, thread_id) as conn:
            conn.executemany("INSERT OR REPLACE INTO writes VALUES (?, ?, ?, ?, ?, ?)", rows)

    def get(
        self, thread_id: str, checkpoint_id: str | None = None, checkpoint_ns: str = ""
    ) -> Checkpoint | None:
        return self._read(thread_id, checkpoint_ns, checkpoint_id)

    def list(
        self,
        thread_id: str,
        limit: int | None = None,
        before: str | None = None,
        checkpoint_ns: str = "",
    ) -> Iterator[Checkpoint]:
        sql = "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?"
        params: builtins.list[Any] = [_sql_name(thread_id), _sql_name(checkpoint_ns)]
        if before is not None:
            sql += " AND checkpoint_id < ?"
            params.append(before)
        sql += " ORDER BY checkpoint_id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._lock:
            ids = [row[0] for row in self._conn.execute(sql, params).fetchall()]
        decoded = DecodedBlobs()
        for checkpoint_id in ids:
            checkpoint = self._read(thread_id, checkpoint_ns, checkpoint_id, decoded)
            if checkpoint is not None:  # None: pruned or deleted since the listing began
                yield checkpoint  # never while holding the lock: the caller may pause here

    def _read(
        self,
        thread: str,
        ns: str,
        checkpoint_id: str | None,
        decoded: DecodedBlobs | None = None,
    ) -> Checkpoint | None:
        """One checkpoint (the newest for ``None``), read in one transaction: a prune or
        delete committed meanwhile (by any process) is seen whole or not at all."""
        where = (_sql_name(thread), _sql_name(ns))
        with self._reading(_loading, thread):
            if checkpoint_id is None:
                row = self._conn.execute(_NEWEST, where).fetchone()
            else:
                row = self._conn.execute(
                    "SELECT header FROM checkpoints WHERE thread_id = ? "
                    "AND checkpoint_ns = ? AND checkpoint_id = ?",
                    (*where, checkpoint_id),
                ).fetchone()
            return None if row is None else self._load(thread, ns, row[0], decoded)

    def _cache_read(self, namespace: str, key: str, now: float) -> bytes | None:
        with self._reading("reading the node cache"):
            row = self._conn.execute(
                "SELECT data FROM node_cache WHERE namespace = ? AND key = ? "
                "AND (expires_at IS NULL OR expires_at > ?)",
                (_sql_name(namespace), _sql_name(key), now),
            ).fetchone()
        return None if row is None else bytes(row[0])

    def _cache_write(self, namespace: str, key: str, data: bytes, expires_at: float | None) -> None:
        with self._transaction("writing the node cache") as conn:
            conn.execute(
                "INSERT OR REPLACE INTO node_cache (namespace, key, data, expires_at) "
                "VALUES (?, ?, ?, ?)",
                (_sql_name(namespace), _sql_name(key), data, expires_at),
            )

    def _cache_delete(self, namespace: str | None) -> None:
        with self._transaction("clearing the node cache") as conn:
            if namespace is None:
                conn.execute("DELETE FROM node_cache")
            else:
                conn.execute("DELETE FROM node_cache WHERE namespace = ?", (_sql_name(namespace),))

    def delete_thread(self, thread_id: str) -> None:
        with self._transaction(f"deleting thread {_show(thread_id)}") as conn:
            for table in ("checkpoints", "blobs", "writes", "leases"):
                conn.execute(f"DELETE FROM {table} WHERE thread_id = ?", (_sql_name(thread_id),))

    def copy_thread(self, src_thread_id: str, dst_thread_id: str) -> None:
        doing = f"copying thread {_show(src_thread_id)} to {_show(dst_thread_id)}"
        with self._transaction(doing) as conn:
            copy_thread_rows(conn, src_thread_id, dst_thread_id)

    def prune(self, thread_id: str, keep_last: int) -> int:
        check_keep_last(keep_last)
        with self._transaction(f"pruning thread {_show(thread_id)}") as conn:
            removed = prune_thread(conn, thread_id, keep_last)
        return removed

    def _retention_page(
        self, after: Any, limit: int
    ) -> tuple[builtins.list[tuple[str, datetime | None]], Any]:
        with self._reading("sweeping threads"):
            return retention_page(self._conn, after, limit)

    def _retain_thread(self, thread_id: str, decide: Decide) -> tuple[Outcome, int]:
        key, _ = self._identity()
        with self._transaction(f"sweeping thread {_show(thread_id)}") as conn:
            return retain_thread(conn, thread_id, decide, functools.partial(_lease_binds, key))

    def threads(self) -> builtins.list[str]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id"
            ).fetchall()
        return [_name_of(row[0]) for row in rows]

    def _thread_heads(self, limit: int, offset: int) -> builtins.list[ThreadHeads]:
        with self._reading("searching threads"):
            rows = self._conn.execute(_THREAD_HEADS, (limit, offset)).fetchall()
        return [decode_thread_heads(_name_of(thread), *headers) for thread, *headers in rows]

    def _scan_thread_heads(self, batch: int) -> Iterator[ThreadHeads]:
        """The threads' order read once (ids only), then their newest headers a growing batch
        at a time, each batch under the lock for its own short while (the filter runs between
        them); a thread's oldest header is read if it makes the page."""
        with self._reading("searching threads"):
            order = [thread for (thread,) in self._conn.execute(_THREAD_ORDER)]
        start = 0
        while start < len(order):
            chunk, start, batch = order[start : start + batch], start + batch, 2 * batch
            with self._reading("searching threads"):
                found = [(t, self._conn.execute(_NEWEST_HEADER, (t,)).fetchone()) for t in chunk]
            for thread, row in found:
                if row is not None:  # (deleted since the order was read)
                    name = _name_of(thread)
                    newest = decode_header(row[0], name)
                    yield ThreadHeads(name, newest, functools.partial(self._oldest, thread, newest))

    def _oldest(self, thread: str | bytes, newest: Checkpoint) -> Checkpoint:
        """A thread's oldest top-level checkpoint header (``newest``: if it was deleted)."""
        with self._reading("searching threads"):
            row = self._conn.execute(_OLDEST_HEADER, (thread,)).fetchone()
        return newest if row is None else decode_header(row[0], newest.thread_id)

    def stored_bytes(self, thread_id: str) -> int:
        """Bytes of checkpoint data stored for a thread (headers, blobs and pending writes)."""
        with self._lock:
            total = 0
            for sql in (
                "SELECT SUM(LENGTH(header)) FROM checkpoints WHERE thread_id = ?",
                "SELECT SUM(LENGTH(data)) FROM blobs WHERE thread_id = ?",
                "SELECT SUM(LENGTH(data)) FROM writes WHERE thread_id = ?",
            ):
                total += self._conn.execute(sql, (_sql_name(thread_id),)).fetchone()[0] or 0
        return total

    def _load(
        self, thread: str, ns: str, header: bytes, decoded: DecodedBlobs | None = None
    ) -> Checkpoint:
        checkpoint = decode_header(header, thread, ns)
        conn = self._conn
        chain_of = functools.partial(_chain, conn, thread, ns)
        data_of = functools.partial(_data_of, conn, thread, ns)
        loaded = self._loaded if decoded is None else None
        load_values(checkpoint, chain_of, decoded, loaded, data_of)
        rows = self._conn.execute(
            "SELECT task_id, channel, data FROM writes WHERE thread_id = ? AND checkpoint_ns = ? "
            "AND checkpoint_id = ?",
            (_sql_name(thread), _sql_name(ns), checkpoint.id),
        ).fetchall()
        checkpoint.pending_writes = tuple(
            decode_write(checkpoint, task_id, _name_of(channel), bytes(data))
            for task_id, channel, data in rows
        )
        return checkpoint

    # one run per thread, across processes
    def acquire(self, thread_id: str, checkpoint_ns: str = "") -> Lease:
        return self._acquire(thread_id, checkpoint_ns, None)

    def acquire_loading(
        self, thread_id: str, checkpoint_ns: str = ""
    ) -> tuple[Lease, tuple[Checkpoint | None] | None]:
        """``acquire``, and the thread's newest checkpoint (``get(thread_id)``) read in the
        same transaction: one transaction fewer per run (the sync driver calls it). The
        checkpoint comes in a 1-tuple (``(None,)``: the thread has none); ``None`` instead if
        reading it failed (the run's own ``get`` then reads it, and raises what it raises), or
        when a subclass overrides ``acquire`` or ``get`` (they are then called, as usual)."""
        kind = type(self)
        if kind.acquire is not SqliteSaver.acquire or kind.get is not SqliteSaver.get:
            return self.acquire(thread_id, checkpoint_ns), None
        loaded: builtins.list[Checkpoint | None] = []
        lease = self._acquire(thread_id, checkpoint_ns, loaded)
        return lease, (loaded[0],) if loaded else None

    def _acquire(
        self, thread_id: str, checkpoint_ns: str, loaded: builtins.list[Checkpoint | None] | None
    ) -> Lease:
        lease = super().acquire(thread_id, checkpoint_ns)
        try:
            key, identity = self._identity()
            with self._transaction() as conn:
                row = conn.execute(
                    "SELECT pid, expires_at, host, process FROM leases WHERE thread_id = ? AND "
                    "checkpoint_ns = ?",
                    (_sql_name(thread_id), _sql_name(checkpoint_ns)),
                ).fetchone()
                if row is not None and _lease_binds(key, *row):
                    raise ThreadBusyError(
                        f"thread {_show(thread_id)} is busy: process {row[0]} on {row[2]} is "
                        f"running it ({self.path}); wait for it to finish, or use another "
                        "thread_id"
                    )
                conn.execute(
                    "INSERT OR REPLACE INTO leases (thread_id, checkpoint_ns, owner, pid, "
                    "expires_at, host, process) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        _sql_name(thread_id),
                        _sql_name(checkpoint_ns),
                        lease.owner,
                        os.getpid(),
                        self._expiry(),
                        _HOST,
                        identity,
                    ),
                )
                if loaded is not None:
                    self._load_newest(thread_id, checkpoint_ns, loaded)
        except BaseException:
            super().release(lease)
            raise
        self._lease_refreshed[(thread_id, checkpoint_ns)] = time.monotonic()
        return lease

    def _load_newest(self, thread: str, ns: str, loaded: builtins.list[Checkpoint | None]) -> None:
        """The thread's newest checkpoint, appended to ``loaded``, in the caller's transaction;
        nothing is appended if it cannot be read (a damaged row: ``get`` tells)."""
        try:
            row = self._conn.execute(_NEWEST, (_sql_name(thread), _sql_name(ns))).fetchone()
            loaded.append(None if row is None else self._load(thread, ns, row[0]))
        except Exception:
            return

    def _identity(self) -> tuple[tuple[int, int] | None, str]:
        """This process's liveness lock on the database's ``-lease`` file (taken on the first
        lease, again in a forked child) and the identity its lease rows carry."""
        pid = os.getpid()
        with self._lock:
            if self._liveness is None or self._liveness[0] != pid:
                if self.path == ":memory:":  # no other process sees this database
                    key, identity = None, liveness.process_token()
                else:
                    key, identity = liveness.hold(self.path + "-lease")
                self._liveness = (pid, key, identity)
                if self._let_go is not None:  # the parent's, in a forked child: not ours
                    self._let_go.detach()
                self._let_go = weakref.finalize(self, liveness.let_go, key) if key else None
            return self._liveness[1], self._liveness[2]

    def release(self, lease: Lease) -> None:
        try:
            if self._row_gone(lease):  # deleted with the run's last checkpoint
                return
            with self._transaction() as conn:
                conn.execute(
                    _DELETE_LEASE,
                    (_sql_name(lease.thread_id), _sql_name(lease.checkpoint_ns), lease.owner),
                )
        finally:
            self._lease_refreshed.pop((lease.thread_id, lease.checkpoint_ns), None)
            super().release(lease)

    async def aacquire(self, thread_id: str, checkpoint_ns: str = "") -> Lease:
        return await to_thread(self.acquire, thread_id, checkpoint_ns)

    async def arelease(self, lease: Lease) -> None:
        await to_thread(self.release, lease)

    def _expiry(self) -> float:
        return time.time() + self.lease_ttl

    def _refresh_lease(self, conn: sqlite3.Connection, thread: str, ns: str) -> None:
        """Extend a held lease, at most twice per ``lease_ttl`` (it rides on a commit). A lease
        found taken meanwhile (it bound only by its expiry, which passed) stops the run: the
        commit is rolled back."""
        key = (thread, ns)
        refreshed = self._lease_refreshed.get(key)
        if refreshed is None or time.monotonic() - refreshed < self.lease_ttl / 2:
            return
        owner = self._leases.get(key)
        extended = conn.execute(
            "UPDATE leases SET expires_at = ? WHERE thread_id = ? AND checkpoint_ns = ? "
            "AND owner = ?",
            (self._expiry(), _sql_name(thread), _sql_name(ns), owner),
        ).rowcount
        if owner is not None and not extended:
            raise lease_lost(thread, "it expired and another process took the thread")
        self._lease_refreshed[key] = time.monotonic()


_NEWEST = (
    "SELECT header FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
    "ORDER BY checkpoint_id DESC LIMIT 1"
)
_DELETE_LEASE = "DELETE FROM leases WHERE thread_id = ? AND checkpoint_ns = ? AND owner = ?"


def _saving(checkpoint: Checkpoint) -> str:
    return f"saving checkpoint {checkpoint.id} of thread {_show(checkpoint.thread_id)}"


def _loading(thread_id: str) -> str:
    return f"loading thread {_show(thread_id)}"


def _saving_writes(thread_id: str) -> str:
    return f"saving pending writes of thread {_show(thread_id)}"


def _lease_binds(
    liveness_key: tuple[int, int] | None, pid: int, expires_at: float, host: str, process: str
) -> bool:
    """Whether a lease row still binds, as seen by a process holding ``liveness_key``.

    On this host it binds while its process lives (its liveness lock is held), however long
    its run takes. A lease written on another host, or one naming no lock, binds until it
    expires (unless, on this host, no process has its PID).
    """
    if host == _HOST:
        alive = liveness.holder_alive(liveness_key, process, pid)
        if alive != "unknown":
            return alive == "alive"
    return expires_at >= time.time()


_HOST = socket.gethostname()
