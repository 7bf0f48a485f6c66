"""What a cron is, apart from where it is kept and who starts its runs: its schedule (a
standard 5-field cron expression read by ``cronsim``, in an IANA time zone), its record, the
due run a round records, and the scheduler's clock (:func:`now`, a seam tests set). The
scheduler is in :mod:`graph_agent.serve.crons`."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from graph_agent.serve.auth import OWNER_KEY

__all__ = [
    "BATCH",
    "CHECK_SECONDS",
    "CronRecord",
    "Due",
    "RecordedRun",
    "due_run",
    "end_time_of",
    "next_run",
    "now",
    "owned_metadata",
    "schedule_problem",
    "stamp",
]

CHECK_SECONDS = 2.0
"""How often each process looks for due crons (a cron's smallest step is a minute)."""
BATCH = 50
"""The most due crons one transaction claims."""
OnRunCompleted = Literal["delete", "keep"]


def now() -> datetime:
    """The scheduler's clock: the current time, aware, in UTC (a seam tests set)."""
    return datetime.now(UTC)


def stamp(moment: datetime) -> str:
    """``moment`` as the text the tables hold and the wire carries: ISO 8601 in UTC, always
    with microseconds (so that texts compare as the times do)."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _zone(timezone: str | None) -> ZoneInfo:
    if timezone is None:
        return ZoneInfo("UTC")
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(
            f"timezone {timezone!r} is no IANA time zone; give one such as 'Europe/Paris', "
            "'America/New_York' or 'UTC'"
        ) from None


def schedule_problem(schedule: str, timezone: str | None) -> str | None:
    """What is wrong with a cron's schedule or time zone (None: nothing)."""
    try:
        zone = _zone(timezone)
    except ValueError as exc:
        return str(exc)
    if len(schedule.split()) != 5:
        return (
            f"schedule {schedule!r:.80} is not a cron expression of 5 fields (minute hour "
            "day-of-month month day-of-week), e.g. '*/5 * * * *' or '0 9 * * 1-5'"
        )
    try:
        CronSim(schedule, datetime.now(zone))
    except CronSimError as exc:
        return f"schedule {schedule!r:.80} cannot be read: {exc}"
    return None


def next_run(schedule: str, timezone: str | None, after: datetime) -> datetime:
    """The first time of ``schedule`` (read in ``timezone``) strictly after ``after``."""
    zone = _zone(timezone)
    return next(CronSim(schedule, after.astimezone(zone))).astimezone(UTC)


def end_time_of(text: str) -> datetime:
    """An ``end_time`` as sent (ISO 8601; without an offset: UTC).

    Raises:
        ValueError: it is no date and time.
    """
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"end_time {text!r:.60} is no ISO 8601 date and time, e.g. '2030-01-31T18:00:00Z'"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(kw_only=True)
class CronRecord:
    """A cron as stored; :meth:`json` is LangGraph's ``Cron`` object."""

    cron_id: str
    assistant_id: str
    thread_id: str | None
    schedule: str
    timezone: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    on_run_completed: OnRunCompleted | None = None
    end_time: str | None = None
    next_run_date: str | None = None
    enabled: bool = True
    created_at: str = ""
    updated_at: str = ""

    def json(self) -> dict[str, Any]:
        return {
            "cron_id": self.cron_id,
            "assistant_id": self.assistant_id,
            "thread_id": self.thread_id,
            "user_id": self.metadata.get(OWNER_KEY),
            "schedule": self.schedule,
            "timezone": self.timezone,
            "payload": self.payload,
            "metadata": self.metadata,
            "on_run_completed": self.on_run_completed,
            "end_time": self.end_time,
            "next_run_date": self.next_run_date,
            "enabled": self.enabled,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }

    def plan(self, moment: datetime) -> str | None:
        """The next run time after ``moment`` (``None``: none before ``end_time``)."""
        following = next_run(self.schedule, self.timezone, moment)
        if self.end_time is not None and following > end_time_of(self.end_time):
            return None
        return stamp(following)


@dataclass(frozen=True, kw_only=True)
class Due:
    """What claiming a due cron decided: its next run time, and the run to record (None when
    its ``end_time`` passed before the due time)."""

    next_run_date: str | None
    run: RecordedRun | None


@dataclass(frozen=True, kw_only=True)
class RecordedRun:
    """A cron's due run, recorded as it was claimed: the ids it starts with and its body."""

    run_id: str
    cron_id: str
    thread_id: str
    due_at: str
    body: dict[str, Any]
    thread_metadata: dict[str, Any] | None
    """A stateless cron's new thread's metadata (None: the cron's own thread)."""
    delete_thread: bool

    def row(self) -> tuple[Any, ...]:
        metadata = None if self.thread_metadata is None else json.dumps(self.thread_metadata)
        return (
            self.run_id,
            self.cron_id,
            self.thread_id,
            self.due_at,
            json.dumps(self.body),
            metadata,
            int(self.delete_thread),
        )


def owned_metadata(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """``new`` metadata of a cron, its owner kept as ``old`` had it."""
    kept = {key: value for key, value in new.items() if key != OWNER_KEY}
    with contextlib.suppress(KeyError):
        kept[OWNER_KEY] = old[OWNER_KEY]
    return kept


def due_run(cron: CronRecord, moment: datetime) -> Due:
    """What claiming ``cron``, due, at ``moment`` decides: its next run time, and the run to
    record (its ids chosen now; a stateless cron's on a new thread owned as the cron is)."""
    assert cron.next_run_date is not None
    due_at = datetime.fromisoformat(cron.next_run_date)
    following = cron.plan(max(moment, due_at))  # runs missed while down: one, then on
    if cron.end_time is not None and due_at > end_time_of(cron.end_time):
        return Due(next_run_date=None, run=None)
    body = dict(cron.payload)
    body["metadata"] = {**dict(body.get("metadata") or {}), "cron_id": cron.cron_id}
    body["on_completion"] = "keep"  # a stateless cron's thread is deleted by a round
    stateless = cron.thread_id is None
    owner = cron.metadata.get(OWNER_KEY)
    run = RecordedRun(
        run_id=str(uuid.uuid4()),
        cron_id=cron.cron_id,
        thread_id=str(uuid.uuid4()) if stateless else str(cron.thread_id),
        due_at=cron.next_run_date,
        body=body,
        thread_metadata=({} if owner is None else {OWNER_KEY: owner}) if stateless else None,
        delete_thread=stateless and cron.on_run_completed != "keep",
    )
    return Due(next_run_date=following, run=run)
