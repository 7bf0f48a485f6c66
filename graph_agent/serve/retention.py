"""Thread TTLs on the server: ``ttl`` on ``threads.create``, the server's defaults
(``--thread-ttl``, ``--checkpoint-keep``, ``checkpointer.ttl`` in the config file), and the
sweeper: one background job (``Api.add_periodic``) that deletes or prunes what has had its time.

A thread's age is measured from its record's ``updated_at`` (its last run, or its creation).
Each round of the sweeper:

1. finishes the deletions a crash interrupted (tombstones, see
   :mod:`graph_agent.serve.retention_records`);
2. takes the threads idle past their TTL (their own, else the server's ``thread_ttl``), a
   batch at a time; for each, in one transaction of the records that holds the thread (the
   lock that serialises runs started on it, in PostgreSQL), checks again that it is idle past
   it and runs nothing; then ``delete`` removes its records (thread, runs, their events) and
   then its checkpoints, ``keep_latest`` cuts its checkpoints to the latest;
3. with ``checkpoint_keep``, cuts every thread used since the last round to its N newest
   checkpoints.

The checkpoints are changed by the saver's retention primitive
(:mod:`graph_agent.checkpoint.retention`): one transaction per thread that also leaves alone a
thread whose lease a run holds. Several processes on one PostgreSQL database sweep at once
without tripping over each other: a thread another process holds is skipped this round.
"""

from __future__ import annotations

import logging
import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from graph_agent.checkpoint.retention import (
    RetentionStrategy,
    SweepResult,
    policy_problem,
)
from graph_agent.graph.concurrency import to_thread
from graph_agent.serve.api import Api
from graph_agent.serve.models import ThreadTTL
from graph_agent.serve.records import Records, ThreadRecord
from graph_agent.serve.records import now as records_now
from graph_agent.serve.retention_records import TTLs, ttls_of
from graph_agent.serve.tasks import Periodic

__all__ = ["DEFAULT_SWEEP_MINUTES", "ServerRetention", "Sweeper", "install", "now", "set_ttl"]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

DEFAULT_SWEEP_MINUTES = 5.0
"""Minutes between two rounds of the sweeper by default."""


def now() -> datetime:
    """The sweeper's clock (a seam tests pin)."""
    return datetime.now(UTC)


@dataclass(frozen=True, kw_only=True)
class ServerRetention:
    """The server's retention defaults.

    Args:
        thread_ttl: Minutes a thread without a TTL of its own may stay idle; None: forever.
        strategy: What happens to such a thread then (``delete`` or ``keep_latest``).
        checkpoint_keep: Keep only the N newest checkpoints of every thread; None: all.
        sweep_minutes: Minutes between two rounds of the sweeper.
        batch_size: Threads read per batch.

    Raises:
        ValueError: a setting that is not a positive number (naming it).
    """

    thread_ttl: float | None = None
    strategy: RetentionStrategy = "delete"
    checkpoint_keep: int | None = None
    sweep_minutes: float = DEFAULT_SWEEP_MINUTES
    batch_size: int = 100

    def __post_init__(self) -> None:
        problem = policy_problem(self.thread_ttl, self.strategy, self.checkpoint_keep)
        minutes = self.sweep_minutes
        if problem is None and not (
            isinstance(minutes, int | float) and math.isfinite(minutes) and minutes > 0
        ):
            problem = f"sweep_minutes must be a positive number of minutes, not {minutes!r}"
        if problem is not None:
            raise ValueError(problem)


class Sweeper:
    """The sweeper of one server process: :meth:`sweep` is one round (the periodic job)."""

    def __init__(self, api: Api, retention: ServerRetention) -> None:
        self.api = api
        self.retention = retention
        self.ttls: TTLs = ttls_of(api.records)
        self.local = isinstance(api.records, Records)
        """SQLite records: read and written on the event loop, as the runner does (so no run
        starts on a thread between the check and the deletion of its records)."""
        self._kept_since = ""
        """``checkpoint_keep``: threads used since then (ISO time) are cut next round."""

    @property
    def periodic(self) -> Periodic:
        return Periodic("retention", self.retention.sweep_minutes * 60.0, self.job)

    async def job(self) -> None:
        result = await self.sweep()
        if result.threads_deleted or result.checkpoints_removed:
            _log.info(
                "graph-agent serve: retention deleted %d threads and %d checkpoints",
                result.threads_deleted,
                result.checkpoints_removed,
            )

    async def sweep(self, at: datetime | None = None) -> SweepResult:
        """One round, as of ``at`` (default: :func:`now`)."""
        when = at if at is not None else now()
        result = SweepResult()
        for thread_id in await self._records(self.ttls.tombstones, 1000):
            await self._delete_checkpoints(thread_id, result)
        await self._expire(when, result)
        if self.retention.checkpoint_keep is not None:
            await self._keep_newest(self.retention.checkpoint_keep, result)
        await self._records(self.ttls.drop_orphans)
        return result

    async def _expire(self, when: datetime, result: SweepResult) -> None:
        default = (self.retention.strategy, self.retention.thread_ttl)
        after = ""
        while True:
            batch = await self._records(
                self.ttls.expired, when, default, after, self.retention.batch_size
            )
            if not batch:
                return
            after = batch[-1][0]
            for thread_id, strategy in batch:
                result.threads_seen += 1
                if self.local and self.api.runner.active(thread_id) is not None:
                    result.threads_busy += 1
                    continue
                claimed = await self._records(self.ttls.claim, thread_id, when, default, strategy)
                if claimed is None:
                    result.threads_busy += 1
                elif strategy == "delete":
                    await self._delete_checkpoints(thread_id, result)
                else:
                    outcome, removed = await self._retain(thread_id, 1)
                    result.count(outcome, removed)
                    if outcome != "busy":
                        await self._records(self.ttls.swept, thread_id, claimed)

    async def _delete_checkpoints(self, thread_id: str, result: SweepResult) -> None:
        """The checkpoints of a thread whose records were deleted, then its tombstone (not if
        a client made a thread of that id again meanwhile: its tombstone just goes). The thread
        counts as deleted in the sweep that took its tombstone: another process's sweeper may
        be finishing it too."""
        if await self._records(self.api.records.thread, thread_id) is not None:
            await self._records(self.ttls.deleted, thread_id)
            return
        outcome, removed = await self._retain(thread_id, 0)
        if outcome == "busy":
            result.threads_busy += 1
            return  # its tombstone stays: deleted next round
        result.checkpoints_removed += removed
        if await self._records(self.ttls.deleted, thread_id):
            result.threads_deleted += 1

    async def _keep_newest(self, keep: int, result: SweepResult) -> None:
        since, self._kept_since = self._kept_since, records_now()
        after = ""
        while True:
            batch = await self._records(
                self.ttls.used_since, since, after, self.retention.batch_size
            )
            if not batch:
                return
            after = batch[-1]
            for thread_id in batch:
                if self.local and self.api.runner.active(thread_id) is not None:
                    continue
                result.count(*await self._retain(thread_id, keep))

    async def _retain(self, thread_id: str, keep: int) -> tuple[Any, int]:
        def decide(last_activity: datetime | None) -> int:
            return keep

        return await to_thread(self.api.saver._retain_thread, thread_id, decide)

    async def _records(self, call: Callable[..., _T], *args: Any) -> _T:
        """A call of the records: at once on SQLite, in a worker thread on PostgreSQL."""
        if self.local:
            return call(*args)
        return await to_thread(call, *args)


_SWEEPERS: weakref.WeakKeyDictionary[Api, Sweeper] = weakref.WeakKeyDictionary()


def install(api: Api, retention: ServerRetention | None = None) -> Sweeper:
    """Give ``api`` its sweeper (a background job from the server's start) and TTL table."""
    sweeper = Sweeper(api, retention if retention is not None else ServerRetention())
    api.add_periodic(sweeper.periodic)
    _SWEEPERS[api] = sweeper
    return sweeper


def set_ttl(api: Api, thread: ThreadRecord, ttl: ThreadTTL | None) -> None:
    """Record a new thread's own TTL (None: nothing to write, the server's default applies)."""
    sweeper = _SWEEPERS.get(api)
    if sweeper is not None and ttl is not None:
        sweeper.ttls.set(thread.thread_id, thread.created_at, ttl.strategy, ttl.ttl)
