"""The assistants clients create (``POST /assistants``): versioned configurations of a served
graph, kept beside the thread and run records.

An assistant names a served graph or agent (``graph_id``) with a ``config``, a ``context``
(see :mod:`graph_agent.serve.assistant_config`), ``metadata``, a ``name`` and a
``description``. Each change (``PATCH``) writes a new version, numbered on from the highest
one; the assistant shows one of them, its *current* version (the newest, or the one a client
set with ``POST /assistants/{id}/latest``). Two tables: ``assistants`` (the current version of
each, and its highest version number) and ``assistant_versions`` (every version), in the
records' SQLite file, or in PostgreSQL (``graph_agent_serve_`` prefixed) through the records'
pool. Every change is one transaction, so two processes patching one assistant at once get
two versions, never the same number twice.

The served targets themselves are the *system* assistants (id = the target's name,
``metadata.created_by = "system"``): not stored, never changed (see
:meth:`graph_agent.serve.api.Api.assistant`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from graph_agent.serve.assistant_config import run_settings
from graph_agent.serve.pg_records import PostgresRecords
from graph_agent.serve.records import Execute, Records, now

__all__ = ["AssistantRecord", "AssistantRecords"]

_FIELDS = "graph_id, name, description, config, context, metadata"
"""The columns of a version (besides its assistant, number and time)."""
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS {a} (
        assistant_id TEXT PRIMARY KEY, graph_id TEXT NOT NULL, name TEXT NOT NULL,
        description TEXT, config TEXT NOT NULL, context TEXT NOT NULL, metadata TEXT NOT NULL,
        version INTEGER NOT NULL, highest INTEGER NOT NULL, created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS {v} (
        assistant_id TEXT NOT NULL, version INTEGER NOT NULL, graph_id TEXT NOT NULL,
        name TEXT NOT NULL, description TEXT, config TEXT NOT NULL, context TEXT NOT NULL,
        metadata TEXT NOT NULL, created_at TEXT NOT NULL, PRIMARY KEY (assistant_id, version))""",
)
_COLUMNS = f"assistant_id, {_FIELDS}, version, created_at, updated_at"
_SCHEMA_LOCK = 0x6761_6173_7374  # two processes never create the tables at once (PostgreSQL)


@dataclass(kw_only=True)
class AssistantRecord:
    """An assistant as one of its versions has it (the current one, read from the records).

    ``system``: a served target itself (never stored, never changed)."""

    assistant_id: str
    graph_id: str
    name: str
    description: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    version: int = 1
    created_at: str
    updated_at: str
    system: bool = False

    def json(self) -> dict[str, Any]:
        """The assistant as LangGraph's ``Assistant`` object."""
        return {**self.version_json(), "updated_at": self.updated_at}

    def version_json(self) -> dict[str, Any]:
        """This version as LangGraph's ``AssistantVersion`` object (``created_at``: when the
        version was written, for a version read from ``versions``)."""
        return {
            "assistant_id": self.assistant_id,
            "graph_id": self.graph_id,
            "name": self.name,
            "description": self.description,
            "config": self.config,
            "context": self.context,
            "metadata": self.metadata,
            "version": self.version,
            "created_at": self.created_at,
        }

    def run_settings(
        self, config: Mapping[str, Any], context: Mapping[str, Any]
    ) -> tuple[dict[str, Any], int | None]:
        """The ``config.context`` and step limit of a run of this assistant asking ``config``
        and ``context`` (the run's keys over the assistant's: see
        :func:`~graph_agent.serve.assistant_config.run_settings`).

        Raises:
            ConfigProblem: the run's ``config.configurable`` is not a JSON object.
        """
        return run_settings(self.config, self.context, config, context)


class AssistantRecords:
    """The created assistants and their versions, in the database of ``records``."""

    def __init__(self, records: Records | PostgresRecords) -> None:
        self._records = records
        self._postgres = isinstance(records, PostgresRecords)
        prefix = "graph_agent_serve_" if self._postgres else ""
        self._names = {"a": f"{prefix}assistants", "v": f"{prefix}assistant_versions"}
        with records.transaction() as execute:
            if self._postgres:
                execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            for statement in _SCHEMA:
                execute(statement.format(**self._names), ())

    def _sql(self, text: str) -> str:
        """``text`` with the tables' names, in the database's parameter style."""
        sql = text.format(**self._names)
        return sql.replace("?", "%s") if self._postgres else sql

    def create(self, record: AssistantRecord) -> tuple[AssistantRecord, bool]:
        """Store ``record`` as version 1 of a new assistant: ``(record, True)``; or, when its
        id is taken, ``(the assistant there, False)``."""
        with self._records.transaction() as execute:
            inserted = execute(
                self._sql(
                    f"INSERT INTO {{a}} ({_COLUMNS}, highest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, "
                    "?, ?) ON CONFLICT (assistant_id) DO NOTHING RETURNING assistant_id"
                ),
                (*_row(record), record.version),
            )
            if inserted:
                self._add_version(execute, record)
                return record, True
            found = self._current(execute, record.assistant_id)
        assert found is not None  # the insert found it: deleting takes the same lock
        return found, False

    def get(self, assistant_id: str) -> AssistantRecord | None:
        with self._records.transaction() as execute:
            return self._current(execute, assistant_id)

    def all(self) -> list[AssistantRecord]:
        """Every assistant, as its current version has it, oldest first."""
        with self._records.transaction() as execute:
            rows = execute(self._sql(f"SELECT {_COLUMNS} FROM {{a}} ORDER BY created_at"), ())
        return [_record(row) for row in rows]

    def update(
        self, assistant_id: str, change: Callable[[AssistantRecord], AssistantRecord]
    ) -> AssistantRecord | None:
        """Write ``change(current)`` as the assistant's new version (numbered after its highest)
        and make it current; None when there is no such assistant. Should ``change`` raise, the
        assistant stays as it was."""
        lock = " FOR UPDATE" if self._postgres else ""
        with self._records.transaction() as execute:
            rows = execute(
                self._sql(f"SELECT {_COLUMNS}, highest FROM {{a}} WHERE assistant_id = ?{lock}"),
                (assistant_id,),
            )
            if not rows:
                return None
            current = _record(rows[0])
            new = dataclasses.replace(change(current), version=int(rows[0][-1]) + 1)
            self._add_version(execute, new)
            self._make_current(execute, new)
        return new

    def set_latest(self, assistant_id: str, version: int) -> AssistantRecord | None:
        """Make version ``version`` the assistant's current one (as it was written); None when
        it has no such version."""
        with self._records.transaction() as execute:
            found = self._version(execute, assistant_id, version)
            if found is None:
                return None
            current = self._current(execute, assistant_id)
            assert current is not None  # its version is there: the two go together
            chosen = dataclasses.replace(found, created_at=current.created_at, updated_at=now())
            self._make_current(execute, chosen)
        return chosen

    def versions(self, assistant_id: str) -> list[AssistantRecord]:
        """The assistant's versions, newest first (``created_at``: when each was written)."""
        with self._records.transaction() as execute:
            rows = execute(
                self._sql(
                    f"SELECT assistant_id, {_FIELDS}, version, created_at, created_at FROM {{v}} "
                    "WHERE assistant_id = ? ORDER BY version DESC"
                ),
                (assistant_id,),
            )
        return [_record(row) for row in rows]

    def delete(self, assistant_id: str) -> bool:
        """Delete the assistant and every version of it; False when there was none."""
        with self._records.transaction() as execute:
            execute(self._sql("DELETE FROM {v} WHERE assistant_id = ?"), (assistant_id,))
            gone = execute(
                self._sql("DELETE FROM {a} WHERE assistant_id = ? RETURNING assistant_id"),
                (assistant_id,),
            )
        return bool(gone)

    def _current(self, execute: Execute, assistant_id: str) -> AssistantRecord | None:
        rows = execute(
            self._sql(f"SELECT {_COLUMNS} FROM {{a}} WHERE assistant_id = ?"), (assistant_id,)
        )
        return _record(rows[0]) if rows else None

    def _version(self, execute: Execute, assistant_id: str, version: int) -> AssistantRecord | None:
        rows = execute(
            self._sql(
                f"SELECT assistant_id, {_FIELDS}, version, created_at, created_at FROM {{v}} "
                "WHERE assistant_id = ? AND version = ?"
            ),
            (assistant_id, version),
        )
        return _record(rows[0]) if rows else None

    def _add_version(self, execute: Execute, record: AssistantRecord) -> None:
        execute(
            self._sql(
                f"INSERT INTO {{v}} (assistant_id, {_FIELDS}, version, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            (*_row(record)[:8], record.updated_at),  # the version's time: when it was written
        )

    def _make_current(self, execute: Execute, record: AssistantRecord) -> None:
        """Write ``record`` as the assistant's current version (its highest number, when it is
        above the highest so far)."""
        execute(
            self._sql(
                "UPDATE {a} SET graph_id = ?, name = ?, description = ?, config = ?, context = ?, "
                "metadata = ?, version = ?, updated_at = ?, "
                "highest = CASE WHEN highest < ? THEN ? ELSE highest END WHERE assistant_id = ?"
            ),
            (*_row(record)[1:-2], record.updated_at, *(record.version,) * 2, record.assistant_id),
        )


def _row(record: AssistantRecord) -> tuple[Any, ...]:
    """The record's columns in :data:`_COLUMNS` order (``created_at`` then ``updated_at``
    last)."""
    return (
        record.assistant_id,
        record.graph_id,
        record.name,
        record.description,
        json.dumps(record.config),
        json.dumps(record.context),
        json.dumps(record.metadata),
        record.version,
        record.created_at,
        record.updated_at,
    )


def _record(row: tuple[Any, ...]) -> AssistantRecord:
    """A record from a row in :data:`_COLUMNS` order."""
    return AssistantRecord(
        assistant_id=row[0],
        graph_id=row[1],
        name=row[2],
        description=row[3],
        config=json.loads(row[4]),
        context=json.loads(row[5]),
        metadata=json.loads(row[6]),
        version=int(row[7]),
        created_at=row[8],
        updated_at=row[9],
    )
