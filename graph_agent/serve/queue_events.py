"""A run's events in PostgreSQL mode: how the worker running it writes them (in batches, or
at once while a client elsewhere follows it) and how each attempt of a run numbers them.

Split from :mod:`graph_agent.serve.queue`, which claims and runs the runs; see its docstring
for where events go (rows, notifications, memory).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection

from graph_agent.serve.pg_records import Claim, PostgresRecords

__all__ = [
    "ATTEMPT_EVENT_IDS",
    "EVENT_BATCH_SECONDS",
    "NARROW_ATTEMPT_GAP",
    "EventWriter",
    "first_event_id",
    "narrow_first_event_id",
]

_log = logging.getLogger("graph_agent.serve.queue")  # the queue's, as these were

EVENT_BATCH_SECONDS = 1.0
"""How long a run's events wait to be written with the next ones while no client in another
process follows it (see :class:`EventWriter`)."""


class EventWriter:
    """A running run's event log (``ActiveRun.log``). Clients of this process read the events
    from memory; the table is for clients elsewhere, who ask for them (:meth:`follow`), and
    for those who come back later. So events are written in batches: every
    :data:`EVENT_BATCH_SECONDS` while nobody elsewhere follows the run, at once (one statement
    in flight at a time) once someone does; what is left when the run ends goes with its end
    (see :meth:`drain`). A quick run nobody follows elsewhere writes its events in the
    statement that ends it."""

    def __init__(self, records: PostgresRecords, run_id: str, claim: Claim) -> None:
        self.records = records
        self.run_id = run_id
        self.claim = claim
        self.pending: list[tuple[int, str, str]] = []
        self.writing: asyncio.Task[None] | None = None
        self.waiting: asyncio.TimerHandle | None = None  # until the next batch is written
        self.followed = False
        self.stopped = False

    def __call__(self, run_id: str, seq: int, event: str, data: str) -> None:
        if self.stopped:
            return
        self.pending.append((seq, event, data))
        if self.writing is None and self.waiting is None:
            if self.followed:
                self._write_now()
            else:
                loop = asyncio.get_running_loop()
                self.waiting = loop.call_later(EVENT_BATCH_SECONDS, self._write_now)

    def follow(self) -> None:
        """A client in another process follows the run: write its events as they come."""
        self.followed = True
        self._write_now()

    def stop(self) -> None:
        """The run's claim was taken over: write nothing more (the records would refuse it)."""
        self.stopped = True
        self.pending.clear()
        if self.waiting is not None:
            self.waiting.cancel()
            self.waiting = None

    def _write_now(self) -> None:
        if self.waiting is not None:
            self.waiting.cancel()
            self.waiting = None
        if self.writing is None and self.pending:
            self.writing = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        try:
            while self.pending:
                batch, self.pending = self.pending, []
                try:
                    await self.records.aadd_events(self.run_id, batch, self.claim)
                except Exception as exc:  # kept: the run's end writes them (or tries again)
                    _log.warning("graph-agent serve: could not store events (%s)", exc)
                    self.pending[:0] = batch
                    return
        finally:
            self.writing = None

    async def drain(self) -> list[tuple[int, str, str]]:
        """The events not written yet, taken out (after the batch being written, if any)."""
        if self.waiting is not None:
            self.waiting.cancel()
            self.waiting = None
        while self.writing is not None:
            await asyncio.wait([self.writing])
        rest, self.pending = self.pending, []
        return rest


ATTEMPT_EVENT_IDS = 1 << 32
"""How many event ids each attempt of a run has (far more than a run emits)."""


def first_event_id(attempt: int) -> int:
    """The id of the first event of a run's ``attempt`` (1 for its first claim).

    A worker that loses its claim may have told its own clients events it never stored, under
    ids the new claimer cannot know; numbered on from the stored ones, the new attempt's
    events would take those ids again, and a client that saw them would skip (filter out, or
    resume past with ``Last-Event-ID``) as many of the new attempt's. So each attempt numbers
    its events in a range of its own, above every id an earlier attempt could have used."""
    return (attempt - 1) * ATTEMPT_EVENT_IDS


NARROW_ATTEMPT_GAP = 1 << 16
"""On a 32-bit events table, the ids a later attempt leaves unused after the stored ones."""


def narrow_first_event_id(attempt: int, stored: Collection[tuple[int, str, str]]) -> int:
    """:func:`first_event_id` on an events table still holding 32-bit ids (too busy to widen
    at start: see :attr:`PostgresRecords.wide_event_ids`), where an attempt's range of its own
    would overflow: a later attempt numbers its events after the stored ones, leaving
    :data:`NARROW_ATTEMPT_GAP` ids for those an earlier attempt told without storing (a
    client that saw more than that many unstored ones would skip some of the new attempt's)."""
    if attempt <= 1:
        return 0
    return max((seq for seq, _, _ in stored), default=-1) + 1 + NARROW_ATTEMPT_GAP
