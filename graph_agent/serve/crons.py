"""Crons: runs the server starts on a schedule, as LangGraph Server's ``client.crons`` makes
them (the routes are in :mod:`graph_agent.serve.routes.crons`, the tables in
:mod:`graph_agent.serve.crons_store`; what a cron is in :mod:`graph_agent.serve.crons_schedule`).

A cron holds a standard 5-field schedule (``"*/5 * * * *"``; read by ``cronsim``), an optional
IANA time zone the schedule is read in (UTC without one; daylight saving time as cron does it),
an optional ``end_time``, and the body of the run to start (``payload``: input, config,
context, metadata, webhook, breakpoints, multitask strategy...). A cron on a thread runs on
that thread each time; a stateless one (``POST /runs/crons``) on a new thread each time, which
is deleted once the run ended (``on_run_completed="delete"``, the default) or kept (``"keep"``).

**Each due run starts exactly once, across every process and machine.** The scheduler is one
:class:`~graph_agent.serve.tasks.Periodic` job per process (``Api.add_periodic``), every
:data:`~graph_agent.serve.crons_schedule.CHECK_SECONDS`. A round has two steps, each its own
transaction:

1. *Claim.* The due crons (``next_run_date <= now``) are locked ``FOR UPDATE SKIP LOCKED``;
   for each, in the same transaction, the next run time is written and the due run is
   *recorded* as a row of its own (``cron_runs``: a run id and thread id chosen now, the body).
   Two processes never claim one cron's due time: the second skips the locked row and, once
   the first committed, no longer sees it due. A crash before the commit undoes both: the cron
   is still due, and the next round (of any process) claims it.
2. *Start.* Each recorded run not started yet is locked ``FOR UPDATE SKIP LOCKED`` and, while
   the lock is held, started through the very function the runs routes use
   (:func:`~graph_agent.serve.routes.runs.start_from_body`), with the run id recorded in step
   1; then it is marked started and the transaction commits. The run's own row is written by
   another transaction, so a crash can fall between the two: then the lock is gone with the
   session, the recorded run is still "not started", and whoever takes it next first looks
   for a run with its id, and only marks it started when there is one. A run's id is the
   runs table's primary key: even a process cut off from the database while it starts a run
   (its lock lost, the start still on its way) cannot make a second run of that id.

Nothing is lost (the recorded run stays until a run of its id exists) and nothing starts
twice (the run id is fixed before the start). The thread of a stateless run is made by the
scheduler with the recorded thread id, owned as the cron is; it is deleted by a later round
once the run ended (not by a task of the process that started it, which may die first).

A run the server refuses as it would a client's (a thread busy under ``reject``, an assistant
no longer served) is logged, naming the cron, and skipped; a cron whose thread was deleted is
deleted at its next due time. Due times missed while no server ran make one run, then the
schedule goes on from the present.

On SQLite one process owns the file: the same steps run there without the locks (a crash
takes the process's runs with it; a recorded run whose run exists is not started again, and
the restarted server ends that run as it ends every run it left running). Times come from
:func:`~graph_agent.serve.crons_schedule.now`, a seam tests set to move the clock.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from graph_agent.graph.concurrency import to_thread
from graph_agent.serve import crons_schedule
from graph_agent.serve.api import Api, ApiError
from graph_agent.serve.crons_schedule import BATCH, RecordedRun, stamp
from graph_agent.serve.crons_store import CronStore, PostgresCrons, SqliteCrons
from graph_agent.serve.pg_records import PostgresRecords
from graph_agent.serve.records import ThreadRecord
from graph_agent.serve.tasks import Periodic

__all__ = ["Crons", "StartRun", "install_crons"]

_log = logging.getLogger(__name__)

StartRun = Callable[..., Awaitable[Any]]
"""How a cron's run starts: ``start(api, body, thread_id, run_id=...)``, the function the runs
routes start a run from a request body with
(:func:`graph_agent.serve.routes.runs.start_from_body`)."""


class Crons:
    """The crons of one server: their table (SQLite beside the records, or PostgreSQL) and
    the scheduler's round (:meth:`tick`)."""

    def __init__(self, api: Api, store: CronStore, start: StartRun) -> None:
        self.api = api
        self.store = store
        self._start_run = start

    async def tick(self) -> None:
        """One round of the scheduler: claim the due crons, start the runs recorded and not
        started, delete the threads of stateless runs that ended."""
        await self.store.claim_due(crons_schedule.now(), BATCH, crons_schedule.due_run)
        while True:
            async with self.store.next_unstarted() as held:
                if held is None:
                    break
                outcome = await self._start(held.run)
                await held.settle(outcome == "started" and held.run.delete_thread)
            if outcome == "thread gone":  # the cron goes with its thread (once unlocked)
                await self.store.delete(held.run.cron_id)
        await self._forget_ended()

    async def _start(self, run: RecordedRun) -> Literal["started", "refused", "thread gone"]:
        """Start ``run`` unless a run of its id exists."""
        if not await self._exists(run):
            try:
                await self._start_now(run)
            except ApiError as exc:  # the cron asks what cannot be: said, and skipped
                _log.warning(
                    "graph-agent serve: cron %s could not start its run due at %s: %s",
                    run.cron_id,
                    run.due_at,
                    exc.detail,
                )
                if run.thread_metadata is not None:
                    await self._delete_thread(run.thread_id)
                elif await to_thread(self.api.records.thread, run.thread_id) is None:
                    return "thread gone"
                return "refused"
        return "started"

    async def _exists(self, run: RecordedRun) -> bool:
        records = self.api.records
        if isinstance(records, PostgresRecords):
            return await records.arun_by_id(run.run_id) is not None
        return records.run(run.thread_id, run.run_id) is not None

    async def _start_now(self, run: RecordedRun) -> None:
        if run.thread_metadata is not None:  # a stateless cron's: a new thread, the cron's owner's
            moment = stamp(crons_schedule.now())
            thread = ThreadRecord(
                thread_id=run.thread_id,
                created_at=moment,
                updated_at=moment,
                metadata=dict(run.thread_metadata),
            )
            await to_thread(self.api.records.put_thread, thread)
        await self._start_run(self.api, run.body, run.thread_id, run_id=run.run_id)

    async def _forget_ended(self) -> None:
        """Delete the threads of the stateless runs that ended (``on_run_completed="delete"``)."""
        for run_id, thread_id in await self.store.started_to_forget(BATCH):
            if await self._still_running(run_id, thread_id):
                continue
            await self._delete_thread(thread_id)
            await self.store.forget_run(run_id)

    async def _still_running(self, run_id: str, thread_id: str) -> bool:
        records = self.api.records
        if isinstance(records, PostgresRecords):
            found = await records.arun_by_id(run_id)
            return found is not None and found[0].status in ("pending", "running")
        record = records.run(thread_id, run_id)
        return record is not None and record.status in ("pending", "running")

    async def _delete_thread(self, thread_id: str) -> None:
        def forget() -> None:
            self.api.saver.delete_thread(thread_id)
            self.api.records.delete_thread(thread_id)

        await to_thread(forget)


def install_crons(api: Api, start: StartRun, every: float | None = None) -> Crons:
    """Give ``api`` its crons (``api.crons``) and their scheduler (a periodic job every
    ``every`` seconds, :data:`~graph_agent.serve.crons_schedule.CHECK_SECONDS` by default),
    whose runs start with ``start``."""
    records = api.records
    store: CronStore = (
        PostgresCrons(records) if isinstance(records, PostgresRecords) else SqliteCrons(records)
    )
    crons = Crons(api, store, start)
    api.crons = crons
    api.add_periodic(Periodic("crons", every or crons_schedule.CHECK_SECONDS, crons.tick))
    return crons
