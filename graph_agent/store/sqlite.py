"""``SqliteStore``: a store in a SQLite file, which may be the checkpoint file of a
:class:`~graph_agent.checkpoint.sqlite.SqliteSaver`.

Its tables (``store_items``, ``store_vectors``) sit beside the saver's; WAL journal, so
processes sharing the file read while one writes. Only parameterised SQL; namespaces are
matched by range over their encoded text (see :mod:`graph_agent.store.base`), never by ``LIKE``.
Vectors are stored as float32 blobs and ranked in Python.
"""

from __future__ import annotations

import array
import contextlib
import functools
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from graph_agent.checkpoint.sqlite_schema import (
    _SCHEMA_VERSION_TABLE,
    _check_sqlite_header,
    _table_columns,
)
from graph_agent.checkpoint.sqlite_sql import _name_of, _roll_back, _sql_name
from graph_agent.graph.errors import SerializationError
from graph_agent.store.base import BaseStore, StoreError
from graph_agent.store.items import Row, Write
from graph_agent.store.values import prefix_end

__all__ = ["SqliteStore"]

_TABLES = (
    """CREATE TABLE IF NOT EXISTS store_items (
        namespace TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
        created_at REAL NOT NULL, updated_at REAL NOT NULL, expires_at REAL, ttl REAL,
        PRIMARY KEY (namespace, key)) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS store_items_expiry ON store_items (expires_at) "
    "WHERE expires_at IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS store_items_recent ON store_items "
    "(namespace, updated_at DESC, key)",
    """CREATE TABLE IF NOT EXISTS store_vectors (
        namespace TEXT NOT NULL, key TEXT NOT NULL, field TEXT NOT NULL, vector BLOB NOT NULL,
        PRIMARY KEY (namespace, key, field)) WITHOUT ROWID""",
)
_COLUMNS = {
    "store_items": (
        "namespace", "key", "value", "created_at", "updated_at", "expires_at", "ttl"
    ),
    "store_vectors": ("namespace", "key", "field", "vector"),
}  # fmt: skip

_LIVE = "(expires_at IS NULL OR expires_at > ?)"
_GET = (
    "SELECT value, created_at, updated_at, ttl FROM store_items "
    f"WHERE namespace = ? AND key = ? AND {_LIVE}"
)
_UPSERT = (
    "INSERT INTO store_items (namespace, key, value, created_at, updated_at, expires_at, ttl) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (namespace, key) DO UPDATE SET "
    "value = excluded.value, updated_at = excluded.updated_at, "
    "expires_at = excluded.expires_at, ttl = excluded.ttl"
)
_ITEM = "SELECT namespace, key, value, created_at, updated_at, ttl FROM store_items WHERE "
_SCAN = (
    # The items of the prefix's own namespace come newest first from store_items_recent (no
    # sort); those of deeper namespaces (usually none) are sorted, and SQLite merges the two.
    f"{_ITEM}namespace = ?1 AND (expires_at IS NULL OR expires_at > ?3){{holding}} UNION ALL "
    f"{_ITEM}namespace > ?1 AND namespace < ?2 AND (expires_at IS NULL OR expires_at > ?3)"
    "{holding} ORDER BY updated_at DESC, namespace, key LIMIT ?4 OFFSET ?5"
)
_VECTORS = (
    "SELECT v.namespace, v.key, v.vector FROM store_vectors AS v JOIN store_items AS i "
    "ON i.namespace = v.namespace AND i.key = v.key "
    "WHERE v.namespace >= ? AND v.namespace < ? AND (i.expires_at IS NULL OR i.expires_at > ?)"
)


class SqliteStore(BaseStore):
    """Items in a SQLite file (created with its folder if missing), shared by the processes
    that open it.

    Args:
        path: The database file (the checkpoint file is fine), or ``":memory:"``.
        index: See :class:`~graph_agent.store.base.BaseStore`.
        sweep_interval: See :class:`~graph_agent.store.base.BaseStore`.
        default_ttl: See :class:`~graph_agent.store.base.BaseStore`.
        refresh_on_read: See :class:`~graph_agent.store.base.BaseStore`.

    Raises:
        SerializationError: the file is not a SQLite database, or holds another program's
            tables.

    Example:
        >>> store = SqliteStore(":memory:")
        >>> store.put(("users", "u1"), "name", {"text": "Ada"})
        >>> store.get(("users", "u1"), "name").value["text"]
        'Ada'
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        index: Mapping[str, Any] | None = None,
        sweep_interval: float | None = None,
        default_ttl: float | None = None,
        refresh_on_read: bool = True,
    ) -> None:
        super().__init__(
            index=index,
            sweep_interval=sweep_interval,
            default_ttl=default_ttl,
            refresh_on_read=refresh_on_read,
        )
        self.path = str(path)
        self._lock = threading.RLock()
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                _check_sqlite_header(self.path)
            self._conn = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=30.0
            )
        except (OSError, sqlite3.Error) as exc:
            raise self._not_usable(exc) from exc
        try:
            self._setup()
            # runs the reads (under the lock): a new cursor per read costs a fifth of a get
            self._reader = self._conn.cursor()
        except sqlite3.Error as exc:
            self._conn.close()
            raise self._not_usable(exc) from exc
        except BaseException:
            self._conn.close()
            raise
        self._start_sweeper()

    def _not_usable(self, exc: BaseException) -> SerializationError:
        return SerializationError(
            f"{self.path} is not a usable SQLite database for a store ({exc}); point "
            "SqliteStore at another file or move this one away"
        )

    def _setup(self) -> None:
        conn = self._conn
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            found = _table_columns(conn)
            if found and "schema_version" not in found:
                raise SerializationError(
                    f"{self.path} holds another program's tables ({', '.join(sorted(found))}); "
                    "give SqliteStore a new file or a graph_agent checkpoint file (this one was "
                    "left untouched)"
                )
            for table, columns in _COLUMNS.items():
                if table in found and found[table] != columns:
                    raise SerializationError(
                        f"{self.path}: its {table} table has the columns "
                        f"({', '.join(found[table])}), not graph_agent's ({', '.join(columns)})"
                    )
            # the saver's version table too, so that a SqliteSaver takes the file later
            for statement in (*_SCHEMA_VERSION_TABLE, *_TABLES):
                conn.execute(statement)
            conn.execute("COMMIT")
        except BaseException:
            _roll_back(conn)
            raise

    def close(self) -> None:
        """Stop the sweep and close the connection (further use raises)."""
        super().close()
        with self._lock:
            self._conn.close()

    @contextlib.contextmanager
    def _using(self, doing: str, *, write: bool = False) -> Iterator[sqlite3.Connection]:
        """The connection under the store's lock; with ``write``, inside ``BEGIN IMMEDIATE``
        ... ``COMMIT`` (rolled back on error). SQLite's failures become :class:`StoreError`."""
        with self._lock:
            conn = self._conn
            try:
                if write:
                    conn.execute("BEGIN IMMEDIATE")
                yield conn
                if write:
                    conn.execute("COMMIT")
            except sqlite3.Error as exc:
                _roll_back(conn)
                raise self._failed(exc, doing) from exc
            except BaseException:
                _roll_back(conn)
                raise

    def _failed(self, exc: sqlite3.Error, doing: str) -> StoreError:
        return StoreError(
            f"SQLite failed while {doing} ({self.path}): {exc}. Nothing was half-written; free "
            "disk space (or fix the file's permissions) and try again"
        )

    def _read(self, ns: str, key: str, at: float) -> Row | None:
        with self._lock:  # no _using: a read needs no transaction, and a get is a third cheaper
            try:
                stored_key = key if key.isascii() else _sql_name(key)
                # fetchall, not fetchone: the statement ends, so no read transaction stays open
                found = self._reader.execute(_GET, (ns, stored_key, at)).fetchall()
            except sqlite3.Error as exc:
                raise self._failed(exc, "reading an item") from exc
        # the namespace and key are known: not read back (each column read costs)
        return Row._make((ns, key, *found[0])) if found else None

    def _write(self, writes: Sequence[Write]) -> None:
        with self._using("writing items", write=True) as conn:
            for write in writes:
                key = _sql_name(write.key)
                if write.data is None:
                    conn.execute(
                        "DELETE FROM store_items WHERE namespace = ? AND key = ?", (write.ns, key)
                    )
                else:
                    conn.execute(
                        _UPSERT,
                        (
                            write.ns,
                            key,
                            write.data,
                            write.at,
                            write.at,
                            write.expires_at,
                            write.ttl,
                        ),
                    )
                conn.execute(
                    "DELETE FROM store_vectors WHERE namespace = ? AND key = ?", (write.ns, key)
                )
                if write.vectors:
                    conn.executemany(
                        "INSERT INTO store_vectors (namespace, key, field, vector) "
                        "VALUES (?, ?, ?, ?)",
                        [
                            (write.ns, key, field, array.array("f", vector).tobytes())
                            for field, vector in write.vectors.items()
                        ],
                    )

    def _scan(
        self,
        prefix: str,
        at: float,
        limit: int | None,
        offset: int,
        needles: Sequence[bytes] = (),
    ) -> Sequence[Row]:
        sql = _scan_sql(len(needles))
        params = (prefix, prefix_end(prefix), at, -1 if limit is None else limit, offset, *needles)
        with self._lock:  # no _using: a read needs no transaction, and a search is that cheaper
            try:
                found = self._reader.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise self._failed(exc, "searching items") from exc
        return [_row(row) for row in found]

    def _vectors(self, prefix: str, at: float) -> Iterable[tuple[str, str, Sequence[float]]]:
        with self._using("ranking items") as conn:
            rows = conn.execute(_VECTORS, (prefix, prefix_end(prefix), at)).fetchall()
        return [(ns, _name_of(key), array.array("f", blob)) for ns, key, blob in rows]

    def _namespaces(self, prefix: str, at: float) -> Iterable[str]:
        with self._using("listing namespaces") as conn:
            rows = conn.execute(
                "SELECT DISTINCT namespace FROM store_items "
                f"WHERE namespace >= ? AND namespace < ? AND {_LIVE}",
                (prefix, prefix_end(prefix), at),
            ).fetchall()
        return [ns for (ns,) in rows]

    def _refresh(self, rows: Sequence[tuple[str, str, float]], at: float) -> None:
        with self._using("refreshing TTLs", write=True) as conn:
            conn.executemany(
                "UPDATE store_items SET expires_at = ? WHERE namespace = ? AND key = ?",
                [(at + ttl * 60, ns, _sql_name(key)) for ns, key, ttl in rows],
            )

    def _sweep(self, at: float) -> int:
        with self._using("sweeping expired items", write=True) as conn:
            conn.execute(
                "DELETE FROM store_vectors WHERE EXISTS (SELECT 1 FROM store_items AS i WHERE "
                "i.namespace = store_vectors.namespace AND i.key = store_vectors.key AND "
                "i.expires_at <= ?)",
                (at,),
            )
            return conn.execute("DELETE FROM store_items WHERE expires_at <= ?", (at,)).rowcount


@functools.cache
def _scan_sql(needles: int) -> str:
    """:data:`_SCAN` keeping only rows whose value holds each of ``needles`` parameters."""
    return _SCAN.format(holding="".join(f" AND instr(value, ?{6 + n}) > 0" for n in range(needles)))


def _row(found: tuple[Any, ...]) -> Row:
    if type(found[1]) is str:  # a key stored as text, as all but odd ones are (see _sql_name)
        return Row._make(found)
    ns, key, data, created_at, updated_at, ttl = found
    return Row(ns, _name_of(key), data, created_at, updated_at, ttl)
