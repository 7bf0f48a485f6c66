"""Damage what a saver stored, as a crash, a bad disk or a hand-edited database would.

Each function writes past the saver's API into its storage (MemorySaver's dicts, the SQLite
file, the PostgreSQL tables), so tests can check that loading damaged rows fails clearly.
"""

from __future__ import annotations

from typing import Any

import psycopg

from graph_agent import MemorySaver
from graph_agent.checkpoint import postgres_plans
from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.checkpoint.postgres import PostgresSaver
from graph_agent.checkpoint.sqlite import SqliteSaver


def _postgres(saver: PostgresSaver, sql: str, params: dict[str, Any]) -> None:
    with psycopg.connect(saver.conninfo, autocommit=True) as conn:
        conn.execute(sql, params)


def _pg_name(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def set_blob_base(
    saver: CheckpointSaver, thread: str, key: str, version: str, base: str, ns: str = ""
) -> None:
    """Make the stored blob of ``key`` at ``version`` a delta appending to ``base``."""
    if isinstance(saver, MemorySaver):
        by_version = saver._threads[thread][ns].blobs[key]
        _, _, data = by_version[version]
        by_version[version] = ("delta", base, data)
    elif isinstance(saver, SqliteSaver):
        with saver._lock:
            saver._conn.execute(
                "UPDATE blobs SET kind = 'delta', base = ? WHERE thread_id = ? AND "
                "checkpoint_ns = ? AND key = ? AND version = ?",
                (base, thread, ns, key, version),
            )
    else:
        assert isinstance(saver, PostgresSaver)
        _postgres(
            saver,
            "UPDATE graph_agent_blobs SET kind = 'delta', base = %(base)s "
            "WHERE thread_key = %(thread)s AND checkpoint_ns = %(ns)s AND key = %(key)s "
            "AND version = %(version)s",
            {
                "base": base,
                "thread": postgres_plans.thread_key(thread),
                "ns": _pg_name(ns),
                "key": _pg_name(key),
                "version": version,
            },
        )


def add_write_row(
    saver: CheckpointSaver,
    thread: str,
    checkpoint_id: str,
    task_id: str,
    channel: str,
    data: bytes,
    ns: str = "",
) -> None:
    """Store ``data`` as the pending write ``channel`` of ``task_id``, bypassing put_writes."""
    if isinstance(saver, MemorySaver):
        writes = saver._threads[thread][ns].writes.setdefault(checkpoint_id, {})
        writes[(task_id, channel)] = data
    elif isinstance(saver, SqliteSaver):
        with saver._lock:
            saver._conn.execute(
                "INSERT OR REPLACE INTO writes VALUES (?, ?, ?, ?, ?, ?)",
                (thread, ns, checkpoint_id, task_id, channel, data),
            )
    else:
        assert isinstance(saver, PostgresSaver)
        _postgres(
            saver,
            "INSERT INTO graph_agent_writes "
            "(thread_key, checkpoint_ns, checkpoint_id, task_id, channel, data) "
            "VALUES (%(thread)s, %(ns)s, %(id)s, %(task)s, %(channel)s, %(data)s)",
            {
                "thread": postgres_plans.thread_key(thread),
                "ns": _pg_name(ns),
                "id": checkpoint_id,
                "task": task_id,
                "channel": _pg_name(channel),
                "data": data,
            },
        )


def set_header(saver: SqliteSaver | PostgresSaver, thread: str, checkpoint_id: str, header: bytes):
    """Replace the stored header bytes of a checkpoint (durable savers only: MemorySaver keeps
    headers as Python values)."""
    if isinstance(saver, SqliteSaver):
        with saver._lock:
            saver._conn.execute(
                "UPDATE checkpoints SET header = ? WHERE thread_id = ? AND checkpoint_id = ?",
                (header, thread, checkpoint_id),
            )
    else:
        _postgres(
            saver,
            "UPDATE graph_agent_checkpoints SET header = %(header)s "
            "WHERE thread_key = %(thread)s AND checkpoint_id = %(id)s",
            {"header": header, "thread": postgres_plans.thread_key(thread), "id": checkpoint_id},
        )
