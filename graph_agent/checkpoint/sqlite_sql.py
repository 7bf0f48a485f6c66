"""The SQLite saver's SQL plumbing: names as SQL parameters, write transactions under the saver's
lock, and failures of SQLite itself as :class:`CheckpointStoreError` (shared with the SQLite
store)."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from graph_agent.graph.errors import CheckpointStoreError

_Doing = str | Callable[[Any], str]
"""What a saver call is doing, for the message of its error: text, or a function making it
from what the call is ``about`` (a checkpoint, a thread id) only on failure; text made for
every checkpoint would cost a step more than all the rest of the error handling."""


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error) under the saver's lock.

    A failure of SQLite itself (a full disk, a file locked too long, a read-only file) leaves
    nothing half-written and is raised as a :class:`CheckpointStoreError` saying what was
    being ``doing``.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        lock: threading.RLock,
        path: str,
        doing: _Doing,
        about: Any,
    ) -> None:
        self.conn = conn
        self.lock = lock
        self.path = path
        self.doing = doing
        self.about = about

    def __enter__(self) -> sqlite3.Connection:
        self.lock.acquire()
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            self.lock.release()
            raise _store_error(exc, self.path, self.doing, self.about) from exc
        except BaseException:
            self.lock.release()
            raise
        return self.conn

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        try:
            if exc is None:
                try:
                    self.conn.execute("COMMIT")
                    return
                except sqlite3.Error as failed:
                    exc = failed
            _roll_back(self.conn)
            if isinstance(exc, sqlite3.Error):
                raise _store_error(exc, self.path, self.doing, self.about) from exc
        finally:
            self.lock.release()


def _store_error(
    exc: sqlite3.Error, path: str, doing: _Doing, about: Any = None
) -> CheckpointStoreError:
    """A failure of SQLite itself, as the typed error a caller can handle."""
    what = doing if isinstance(doing, str) else doing(about)
    return CheckpointStoreError(
        f"SQLite failed while {what} ({path}): {exc}. Nothing was half-written: the thread "
        "stays at its last stored checkpoint; free disk space (or fix the file's permissions) "
        "and call again to resume from it"
    )


def _roll_back(conn: sqlite3.Connection) -> None:
    """End a failed transaction, if SQLite has not already (it does on a full disk)."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _sql_name(name: str) -> str | bytes:
    """A name (thread id, namespace, key, channel) as a SQL parameter: the text itself, or,
    when UTF-8 cannot encode it (a lone surrogate, as in an ``os.listdir()`` name), a blob of
    its UTF-8 with ``surrogatepass``. SQLite text must be valid UTF-8; a blob never equals a
    text, so the two forms cannot collide, and names stored before stay as they were."""
    if name.isascii():
        return name
    try:
        name.encode()
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogatepass")
    return name


def _name_of(stored: str | bytes) -> str:
    """A name read back from a column :func:`_sql_name` wrote."""
    return stored if isinstance(stored, str) else bytes(stored).decode("utf-8", "surrogatepass")
