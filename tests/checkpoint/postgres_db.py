"""The test PostgreSQL server: its DSN, and a fresh schema per test.

CI runs PostgreSQL on 127.0.0.1:5432 with trust auth and a database ``test`` (role ``postgres``,
else the current user's); ``GRAPH_AGENT_TEST_POSTGRES`` points the tests elsewhere. Each test gets its own schema (named
in the DSN's ``search_path``), dropped afterwards, so tests never see each other's rows.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

_CANDIDATES = (
    "host=127.0.0.1 port=5432 dbname=test user=postgres",
    "host=127.0.0.1 port=5432 dbname=test",  # as the current user
)


def _default_dsn() -> str:
    """The first candidate the server accepts (the tests then fail loudly if none does)."""
    for candidate in _CANDIDATES:
        try:
            psycopg.connect(candidate, connect_timeout=3).close()
        except psycopg.Error:
            continue
        return candidate
    return _CANDIDATES[0]


DSN = os.environ.get("GRAPH_AGENT_TEST_POSTGRES") or _default_dsn()


def unreachable() -> str | None:
    """Why the test server cannot be used, or None when it answers."""
    try:
        psycopg.connect(DSN, connect_timeout=3).close()
    except psycopg.Error as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return None


_admin: psycopg.Connection[Any] | None = None


def admin() -> psycopg.Connection[Any]:
    """One autocommit connection per test process for setup and inspection."""
    global _admin
    if _admin is None or _admin.closed or _admin.broken:
        _admin = psycopg.connect(DSN, autocommit=True)
    return _admin


def schema_dsn(schema: str) -> str:
    """A DSN whose tables live in ``schema``; its connections are named after it too."""
    return make_conninfo(DSN, options=f"-c search_path={schema}", application_name=schema)


@contextmanager
def fresh_schema() -> Iterator[str]:
    """A new empty schema for one test; yields a DSN whose tables live in it."""
    schema = f"test_{uuid.uuid4().hex[:16]}"
    admin().execute(f"CREATE SCHEMA {schema}")
    try:
        yield schema_dsn(schema)
    finally:
        admin().execute(f"DROP SCHEMA {schema} CASCADE")
