"""Thread and run records of the server: what LangGraph Server lists besides checkpoints.

A thread's record holds its id, metadata, status and which assistant ran on it; a run's record
its id, thread, assistant, status and the request's options; a run's events (numbered from 0,
their data as JSON text) are kept so a client that reconnects, or comes after the run ended,
gets them again (``Last-Event-ID``). They live in a small SQLite file
of their own next to the checkpoint database (the saver's file holds only its own tables), so a
restarted server still knows its threads and finished runs. Every call is a short statement
under one lock: cheap enough to make from the event loop.

A *temporary* thread (that of a stateless run, deleted when the run ends: LangGraph Server runs
those without a checkpointer at all) has its records in memory instead, in plain dicts: the API
finds it and its runs while it lives, and nothing of it is written to the file (nor left there
by a crash).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

__all__ = [
    "Execute",
    "Records",
    "RunRecord",
    "RunStatus",
    "ThreadRecord",
    "ThreadStatus",
    "now",
]

ThreadStatus = Literal["idle", "busy", "interrupted", "error"]
Execute = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
"""Runs one SQL statement with its parameters in a transaction (:meth:`Records.transaction`);
its rows."""
RunStatus = Literal["pending", "running", "error", "success", "timeout", "interrupted"]

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS threads (
        thread_id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
        metadata TEXT NOT NULL, status TEXT NOT NULL, assistant_id TEXT)""",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, assistant_id TEXT NOT NULL,
        created_at TEXT NOT NULL, updated_at TEXT NOT NULL, status TEXT NOT NULL,
        metadata TEXT NOT NULL, multitask_strategy TEXT NOT NULL, kwargs TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS runs_by_thread ON runs (thread_id, created_at)",
    """CREATE TABLE IF NOT EXISTS events (
        run_id TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL, data TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)) WITHOUT ROWID""",
)

_PUT_THREAD = "INSERT OR REPLACE INTO threads VALUES (?, ?, ?, ?, ?, ?)"
_SET_THREAD_STATUS = (
    "UPDATE threads SET status = ?, updated_at = ?, assistant_id = COALESCE(?, assistant_id) "
    "WHERE thread_id = ?"
)
_PUT_RUN = "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
_SET_RUN_STATUS = "UPDATE runs SET status = ?, updated_at = ? WHERE run_id = ?"
_ADD_EVENT = "INSERT INTO events VALUES (?, ?, ?, ?)"


def now() -> str:
    """The current time as the ISO text records carry (a seam tests can pin)."""
    return datetime.now(UTC).isoformat()


@dataclass(kw_only=True)
class ThreadRecord:
    thread_id: str
    created_at: str
    updated_at: str
    metadata: dict[str, Any] = field(default_factory=dict)
    status: ThreadStatus = "idle"
    assistant_id: str | None = None

    def row(self) -> tuple[Any, ...]:
        """The record as a table row (both stores' column order; :func:`_thread` reads it)."""
        return (
            self.thread_id,
            self.created_at,
            self.updated_at,
            json.dumps(self.metadata),
            self.status,
            self.assistant_id,
        )


@dataclass(kw_only=True)
class RunRecord:
    run_id: str
    thread_id: str
    assistant_id: str
    created_at: str
    updated_at: str
    status: RunStatus = "pending"
    metadata: dict[str, Any] = field(default_factory=dict)
    multitask_strategy: str = "reject"
    kwargs: dict[str, Any] = field(default_factory=dict)

    def json(self) -> dict[str, Any]:
        """The run as LangGraph's ``Run`` object."""
        return {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "assistant_id": self.assistant_id,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "status": self.status,
            "metadata": self.metadata,
            "multitask_strategy": self.multitask_strategy,
            "kwargs": self.kwargs,
        }

    def row(self, status: RunStatus | None = None) -> tuple[Any, ...]:
        """The record as a table row (both stores' column order; :func:`_run_record` reads
        it), with ``status`` instead of its own when given."""
        return (
            self.run_id,
            self.thread_id,
            self.assistant_id,
            self.created_at,
            self.updated_at,
            status or self.status,
            json.dumps(self.metadata),
            self.multitask_strategy,
            json.dumps(self.kwargs),
        )


class Records:
    """The server's thread and run records in one SQLite file (``":memory:"`` for none).

    Args:
        path: The file; its folder is created when missing.
        serving: Whether this process serves from the file: it then ends the runs a server
            that stopped left running. Another process (``graph-agent threads delete``)
            passes ``False`` and leaves a live server's runs alone.
    """

    def __init__(self, path: str = ":memory:", *, serving: bool = True) -> None:
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        if path != ":memory:":
            self._conn.execute("PRAGMA journal_mode=WAL")
            # a power cut may lose the last events; never the file's consistency
            self._conn.execute("PRAGMA synchronous=NORMAL")
        for statement in _SCHEMA:
            self._conn.execute(statement)
        if serving:  # runs a previous server left running cannot finish: they stopped with it
            self._conn.execute(
                "UPDATE runs SET status = 'error' WHERE status IN ('pending', 'running')"
            )
            self._conn.execute("UPDATE threads SET status = 'idle' WHERE status = 'busy'")
        self._temporary: dict[str, _Temporary] = {}
        """The temporary threads, by id (see the module docstring)."""
        self._temporary_runs: dict[str, _Temporary] = {}
        """The same, by the id of each of their runs."""

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _run(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    def _transaction(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """Run ``statements`` (``(sql, args)``; a list of argument rows runs the statement once
        per row, with one ``executemany``) in one transaction: one commit where each alone
        would make its own."""
        with self._begun() as conn:
            for sql, args in statements:
                if args and isinstance(args, list):
                    conn.executemany(sql, args)
                else:
                    conn.execute(sql, args)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Execute]:
        """One transaction on the records' file, for records of other kinds kept beside these
        (assistants): ``execute(sql, args)`` runs a statement (``?`` parameters) and returns
        its rows; committed at the end, rolled back if the block raises."""
        with self._begun() as conn:
            yield lambda sql, args: conn.execute(sql, args).fetchall()

    @contextlib.contextmanager
    def _begun(self) -> Iterator[sqlite3.Connection]:
        """The records' connection in a transaction of its own, under their lock: committed
        at the end, rolled back if the block raises."""
        conn = self._conn
        with self._lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    # threads
    def put_thread(self, thread: ThreadRecord, *, temporary: bool = False) -> None:
        """Store a thread's record (``temporary``: a new thread's, in memory only)."""
        kept = self._temporary.get(thread.thread_id)
        if kept is not None:
            kept.thread = _copy(thread)
        elif temporary:
            self._temporary[thread.thread_id] = _Temporary(_copy(thread))
        else:
            self._run(_PUT_THREAD, thread.row())

    def thread(self, thread_id: str) -> ThreadRecord | None:
        kept = self._temporary.get(thread_id)
        if kept is not None:
            return _copy(kept.thread)
        rows = self._run("SELECT * FROM threads WHERE thread_id = ?", (thread_id,))
        return _thread(rows[0]) if rows else None

    def threads(self) -> list[ThreadRecord]:
        """Every thread but the temporary ones, newest first."""
        return [_thread(row) for row in self._run("SELECT * FROM threads ORDER BY created_at DESC")]

    def set_thread_status(
        self, thread_id: str, status: ThreadStatus, assistant_id: str | None = None
    ) -> None:
        kept = self._temporary.get(thread_id)
        if kept is not None:
            kept.thread.status, kept.thread.updated_at = status, now()
            kept.thread.assistant_id = assistant_id or kept.thread.assistant_id
            return
        self._run(_SET_THREAD_STATUS, (status, now(), assistant_id, thread_id))

    def delete_thread(self, thread_id: str) -> None:
        kept = self._temporary.pop(thread_id, None)
        if kept is not None:
            for run_id in kept.runs:
                del self._temporary_runs[run_id]
            return
        self._run(
            "DELETE FROM events WHERE run_id IN (SELECT run_id FROM runs WHERE thread_id = ?)",
            (thread_id,),
        )
        self._run("DELETE FROM runs WHERE thread_id = ?", (thread_id,))
        self._run("DELETE FROM threads WHERE thread_id = ?", (thread_id,))

    # runs
    def put_run(self, run: RunRecord) -> None:
        kept = self._temporary.get(run.thread_id)
        if kept is not None:
            kept.runs[run.run_id] = _copy(run)
            self._temporary_runs[run.run_id] = kept
            return
        self._run(_PUT_RUN, run.row())

    def start_run(
        self, run: RunRecord, thread: ThreadRecord | None = None, *, running: bool = False
    ) -> None:
        """Store a new run's record (as ``running`` with ``running``: a run that starts at
        once) and mark its thread ``busy`` with the run's assistant (after writing ``thread``,
        its record, when given), in one transaction. The thread is stamped with the run's
        ``updated_at``: it changed as the run was made."""
        if run.thread_id in self._temporary:
            if thread is not None:
                self.put_thread(thread)
            self.put_run(dataclasses.replace(run, status="running") if running else run)
            self.set_thread_status(run.thread_id, "busy", run.assistant_id)
            return
        statements: list[tuple[str, Sequence[Any]]] = []
        if thread is not None:
            statements.append((_PUT_THREAD, thread.row()))
        statements.append((_PUT_RUN, run.row("running" if running else None)))
        busy = ("busy", run.updated_at, run.assistant_id, run.thread_id)
        statements.append((_SET_THREAD_STATUS, busy))
        self._transaction(statements)

    def set_run_status(
        self,
        run_id: str,
        status: RunStatus,
        *,
        events: Sequence[tuple[int, str, str]] = (),
        thread: tuple[str, ThreadStatus] | None = None,
    ) -> None:
        """Set a run's status; with the run's ``events`` not stored yet (see
        :meth:`add_events`) and its ``thread``'s new status (``(thread_id, status)``), all in
        one transaction."""
        kept = self._temporary_runs.get(run_id)
        if kept is not None:
            for seq, event, data in events:
                self.add_event(run_id, seq, event, data)
            kept.runs[run_id].status, kept.runs[run_id].updated_at = status, now()
            if thread is not None:
                self.set_thread_status(*thread)
            return
        stamp = now()
        statements: list[tuple[str, Sequence[Any]]] = []
        if events:
            statements.append((_ADD_EVENT, [(run_id, *event) for event in events]))
        statements.append((_SET_RUN_STATUS, (status, stamp, run_id)))
        if thread is not None:
            statements.append((_SET_THREAD_STATUS, (thread[1], stamp, None, thread[0])))
        if len(statements) == 1:
            self._run(*statements[0])  # type: ignore[arg-type]
        else:
            self._transaction(statements)

    def delete_run(self, run_id: str) -> None:
        kept = self._temporary_runs.pop(run_id, None)
        if kept is not None:
            del kept.runs[run_id]
            kept.events.pop(run_id, None)
            return
        self._run("DELETE FROM events WHERE run_id = ?", (run_id,))
        self._run("DELETE FROM runs WHERE run_id = ?", (run_id,))

    # events
    def add_event(self, run_id: str, seq: int, event: str, data: str) -> None:
        """Store event number ``seq`` of a run, its data as JSON text."""
        kept = self._temporary_runs.get(run_id)
        if kept is not None:
            kept.events.setdefault(run_id, []).append((seq, event, data))
            return
        self._run(_ADD_EVENT, (run_id, seq, event, data))

    def add_events(self, run_id: str, events: Sequence[tuple[int, str, str]]) -> None:
        """Store a run's ``events`` ``(seq, event, data as JSON text)`` in one transaction."""
        if self._temporary_runs.get(run_id) is not None:
            for seq, event, data in events:
                self.add_event(run_id, seq, event, data)
        elif events:
            self._transaction([(_ADD_EVENT, [(run_id, *event) for event in events])])

    def events(self, run_id: str, after: int = -1) -> list[tuple[int, str, str]]:
        """A run's events numbered above ``after``, in order: ``(seq, event, data)``."""
        kept = self._temporary_runs.get(run_id)
        if kept is not None:
            return [item for item in kept.events.get(run_id, ()) if item[0] > after]
        rows = self._run(
            "SELECT seq, event, data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq",
            (run_id, after),
        )
        return [(int(seq), str(event), str(data)) for seq, event, data in rows]

    def run(self, thread_id: str, run_id: str) -> RunRecord | None:
        kept = self._temporary.get(thread_id)
        if kept is not None:
            found = kept.runs.get(run_id)
            return _copy(found) if found is not None else None
        rows = self._run(
            "SELECT * FROM runs WHERE run_id = ? AND thread_id = ?", (run_id, thread_id)
        )
        return _run_record(rows[0]) if rows else None

    def runs(self, thread_id: str, *, limit: int, offset: int) -> list[RunRecord]:
        """A thread's runs, newest first."""
        kept = self._temporary.get(thread_id)
        if kept is not None:
            newest = sorted(kept.runs.values(), key=lambda run: run.created_at, reverse=True)
            return [_copy(run) for run in newest[offset : offset + limit]]
        rows = self._run(
            "SELECT * FROM runs WHERE thread_id = ? ORDER BY created_at DESC LIMIT ? OFFSET ?",
            (thread_id, limit, offset),
        )
        return [_run_record(row) for row in rows]


@dataclass
class _Temporary:
    """A temporary thread's record, its runs' and their events (all in memory)."""

    thread: ThreadRecord
    runs: dict[str, RunRecord] = field(default_factory=dict)
    events: dict[str, list[tuple[int, str, str]]] = field(default_factory=dict)


_Record = TypeVar("_Record", ThreadRecord, RunRecord)


def _copy(record: _Record) -> _Record:
    """A record of its own, as one read from the file is (its dicts are copied too)."""
    if isinstance(record, ThreadRecord):
        return dataclasses.replace(record, metadata=dict(record.metadata))
    return dataclasses.replace(record, metadata=dict(record.metadata), kwargs=dict(record.kwargs))


def _thread(row: tuple[Any, ...]) -> ThreadRecord:
    return ThreadRecord(
        thread_id=row[0],
        created_at=row[1],
        updated_at=row[2],
        metadata=json.loads(row[3]),
        status=row[4],
        assistant_id=row[5],
    )


def _run_record(row: tuple[Any, ...]) -> RunRecord:
    return RunRecord(
        run_id=row[0],
        thread_id=row[1],
        assistant_id=row[2],
        created_at=row[3],
        updated_at=row[4],
        status=row[5],
        metadata=json.loads(row[6]),
        multitask_strategy=row[7],
        kwargs=json.loads(row[8]),
    )


def matches(metadata: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether ``metadata`` holds every key of ``wanted`` with the same value."""
    return all(key in metadata and metadata[key] == value for key, value in wanted.items())
