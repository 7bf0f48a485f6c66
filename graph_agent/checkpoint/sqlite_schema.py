"""The SQLite saver's schema: its migrations, and the checks that refuse a file another program
made before anything is written to it.

A file with no tables is new; anything else must hold graph_agent's ``schema_version`` table and
the tables (with their columns) its version should have. :func:`migrate` brings a file to
:data:`SCHEMA_VERSION` in one write transaction, safe when processes open the file at once.
"""

from __future__ import annotations

import functools
import sqlite3
import time

from graph_agent.graph.errors import SerializationError

SCHEMA_VERSION = 4

_SQLITE_HEADER = b"SQLite format 3\x00"

_SCHEMA_VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_version "
    "(version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)",
)

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
    # who holds the lease, beyond its pid: see graph_agent.checkpoint.liveness
    3: ("ALTER TABLE leases ADD COLUMN process TEXT NOT NULL DEFAULT ''",),
    # the node cache (add_node(..., cache=CachePolicy(...))): results kept beside the threads
    4: (
        """CREATE TABLE IF NOT EXISTS node_cache (
            namespace TEXT NOT NULL, key TEXT NOT NULL, data BLOB NOT NULL, expires_at REAL,
            PRIMARY KEY (namespace, key)) WITHOUT ROWID""",
    ),
}


def check_schema(conn: sqlite3.Connection, path: str, *, for_reading: bool = False) -> int:
    """The file's schema version, after making sure its tables are graph_agent's.

    A file with no tables is new (version 0). Anything else must have the ``schema_version``
    table, and each table its version should have, with the columns it should have: a file
    another program made (LangGraph's ``checkpoints`` table, an application's own tables)
    is refused before anything is written to it.

    Raises:
        SerializationError: the tables are someone else's, or from a newer graph_agent; or,
            ``for_reading``, the file holds no checkpoint tables at all.
    """
    found = _table_columns(conn)
    if not found:
        if for_reading:
            raise _not_ours(path, "it is empty (no tables)")
        return 0
    expected_version_columns = _expected_tables(0)["schema_version"]
    if found.get("schema_version") != expected_version_columns:
        tables = ", ".join(sorted(found))
        raise _not_ours(
            path,
            f"it holds another program's tables ({tables}) and no graph_agent schema_version table",
        )
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    current = int(row[0] or 0)
    if current > SCHEMA_VERSION:
        raise SerializationError(
            f"{path} has schema version {current}, newer than this "
            f"graph_agent understands ({SCHEMA_VERSION}); upgrade graph_agent"
        )
    for table, columns in _expected_tables(current).items():
        if table not in found:
            raise _not_ours(path, f"it is at schema version {current} but has no {table} table")
        if found[table] != columns:
            raise _not_ours(
                path,
                f"its {table} table has the columns ({', '.join(found[table])}), not "
                f"graph_agent's ({', '.join(columns)})",
            )
    if for_reading and current == 0:
        raise _not_ours(path, "it holds no checkpoint tables yet")
    return current


def migrate(conn: sqlite3.Connection, path: str) -> None:
    """Bring the file's tables to :data:`SCHEMA_VERSION`, in one ``BEGIN IMMEDIATE``
    transaction (under the saver's lock, which the caller holds)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Checked again inside the write lock: another process may have created the
        # tables since the first look.
        current = check_schema(conn, path)
        for statement in _SCHEMA_VERSION_TABLE:
            conn.execute(statement)
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


def _check_sqlite_header(path: str) -> None:
    """Refuse a file that is neither empty nor a SQLite database, as SQLite itself does.

    SQLite says "file is not a database" for a longer file, but takes one shorter than a page
    (a stray byte, a line of text) for an empty database and overwrites it.
    """
    try:
        with open(path, "rb") as file:
            start = file.read(len(_SQLITE_HEADER))
    except FileNotFoundError:
        return
    if start and start != _SQLITE_HEADER:
        raise sqlite3.DatabaseError("file is not a database")


def _not_ours(path: str, reason: str) -> SerializationError:
    return SerializationError(
        f"{path} is not a graph_agent checkpoint database: {reason}; use a new file or one "
        "graph_agent made (this one was left untouched)"
    )


def _table_columns(conn: sqlite3.Connection) -> dict[str, tuple[str, ...]]:
    """Each table of the database and its column names, in order."""
    names = [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    return {
        name: tuple(row[1] for row in conn.execute("SELECT * FROM pragma_table_info(?)", (name,)))
        for name in names
    }


@functools.cache
def _expected_tables(version: int) -> dict[str, tuple[str, ...]]:
    """The tables and columns a graph_agent database at ``version`` has: the migrations up to
    it, applied to an empty database in memory."""
    conn = sqlite3.connect(":memory:")
    try:
        for statement in _SCHEMA_VERSION_TABLE:
            conn.execute(statement)
        for step in range(1, version + 1):
            for statement in _MIGRATIONS[step]:
                conn.execute(statement)
        return _table_columns(conn)
    finally:
        conn.close()
