"""How a run executing in PostgreSQL mode writes its events (``EventWriter``): the statement
that ends a quick run nobody follows from elsewhere carries them all; once a client in another
process follows the run, they are written as they come; nothing is lost or written twice."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from graph_agent.serve.pg_records import Claim
from graph_agent.serve.queue_events import EventWriter


class Rows:
    """Stands for PostgresRecords: the event rows ``aadd_events`` wrote, by batch."""

    def __init__(self, delay: float = 0.0) -> None:
        self.batches: list[list[tuple[int, str, str]]] = []
        self.delay = delay

    async def aadd_events(
        self, run_id: str, events: Sequence[tuple[int, str, str]], claim: Claim
    ) -> None:
        await asyncio.sleep(self.delay)
        self.batches.append(list(events))


def writer_on(rows: Rows) -> EventWriter:
    records: Any = rows
    return EventWriter(records, "run-1", Claim(worker=1, attempt=1))


def test_a_quick_run_nobody_follows_elsewhere_leaves_its_events_to_its_end() -> None:
    async def run() -> tuple[list[Any], list[Any]]:
        rows = Rows()
        log = writer_on(rows)
        for seq in range(3):
            log("run-1", seq, "values", f'{{"x":{seq}}}')
            await asyncio.sleep(0.01)
        return rows.batches, await log.drain()

    batches, left = asyncio.run(run())
    assert batches == []  # no statement while it ran
    assert [seq for seq, _, _ in left] == [0, 1, 2]  # the run's end writes them


def test_once_followed_from_elsewhere_events_are_written_as_they_come() -> None:
    async def run() -> tuple[list[Any], list[Any]]:
        rows = Rows(delay=0.02)
        log = writer_on(rows)
        log("run-1", 0, "metadata", "{}")
        log.follow()  # a client in another process asked
        await asyncio.sleep(0.05)
        log("run-1", 1, "values", "{}")
        log("run-1", 2, "values", "{}")  # while the first write may be in flight
        left = await log.drain()  # waits for the write in flight
        return rows.batches, left

    batches, left = asyncio.run(run())
    written = [seq for batch in batches for seq, _, _ in batch]
    assert batches[0] == [(0, "metadata", "{}")]
    assert sorted(written + [seq for seq, _, _ in left]) == [0, 1, 2]  # each once
    assert len(set(written)) == len(written)
