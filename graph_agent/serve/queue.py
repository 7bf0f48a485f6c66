"""Runs as durable jobs in PostgreSQL, claimed by any number of worker processes.

Why a queue table rather than procrastinate: a run is already a row the API reads (status,
result, events), so claiming that very row (``UPDATE ... WHERE run_id = (SELECT ... FOR UPDATE
SKIP LOCKED)``) keeps one source of truth and one round trip per claim, with no second schema
and no job/row mapping to keep in step; what procrastinate would add (retries, periodic tasks)
a run does not need.

- **Claiming.** A worker claims the oldest pending run whose thread has no earlier unfinished
  run, so runs on one thread go one at a time in order (``enqueue``), and runs on different
  threads in parallel, on any worker. A process that works and receives a run with nothing
  before it on its thread claims it as it writes it (same row, same worker key, one round trip):
  no NOTIFY, no claim, and its clients follow it from memory; the others queue for any worker.
- **A worker that dies is noticed at once.** Each worker process holds a session advisory lock
  on a random key (its token), on a connection of its own, and writes that key on the runs it
  claims. When the process dies (``kill -9`` included) PostgreSQL ends its session and drops the
  lock; every worker polls ``pg_try_advisory_xact_lock(key)`` over the running runs and puts
  back in the queue those whose lock is free. The next claim resumes such a run from the
  thread's last checkpoint (the checkpoint saver's own lease, also bound to the dead session,
  is free too): input ``None`` when the thread's newest checkpoint is the run's own, its input
  otherwise. Liveness is never judged from a PID. A worker whose own lock session is cut
  while it lives claims nothing until it holds its key again on a new session (its runs were
  taken for a dead worker's: its heartbeat finds them gone and stops them).
- **A worker that falls silent is noticed after ``worker_timeout``.** A session can outlive its
  usefulness: a process frozen (``SIGSTOP``) or hung behind a live connection, a host cut off
  before PostgreSQL noticed its TCP connection is dead. So a claim also carries a heartbeat
  (``alive_until``, on the database's clock) that its worker renews every third of
  :attr:`PostgresRecords.worker_timeout`; a claim past it is put back in the queue like a dead
  worker's. The claim (worker token and attempt) guards every write the run makes on the
  records: once taken over, the silent worker's late events and end are refused in SQL, its
  heartbeat finds the claim gone and stops the run (as a cancel does), and the
  checkpoint saver's lease, which lapses after its own ``lease_ttl`` without heartbeats,
  refuses its next checkpoint (the new claimer waits for that lease before resuming; a
  PostgreSQL saver's heartbeat thread extends no lease while the worker's event loop does not
  answer). Only the node running when the worker froze may finish twice, as with a lost
  lease. The new attempt numbers its events above any id the silent worker may have told
  its clients without storing it (:func:`~graph_agent.serve.queue_events.first_event_id`).
- **Events reach every process.** Events are rows (``seq`` per run), written in batches (each
  batch while the run goes on, the last with the run's end, in one statement) and announced
  through the notifier (``NOTIFY``, or Redis pub/sub: :mod:`graph_agent.serve.notify`); one
  subscription per process wakes the clients streaming there from another process, who read
  the rows after the last they sent. Clients of the process running the run read its events
  from memory, and ``runs/wait`` wakes once, at the end. A client in another process asks for
  the events at once (``f:``); a worker remembers such asks for runs it has not claimed yet,
  so a run followed before it was claimed writes its events live from its first. A
  reconnecting client (``Last-Event-ID``) reads from the table: nothing is lost or sent twice,
  whichever process ran or runs the run.
- **Cancel** marks the row and notifies; the worker running it stops it at once, its running
  node's writes dropped (``rollback``: it also takes the thread back and deletes the run),
  before the next run on the thread may be claimed.

Everything a run does on the records is awaited on an async pool: no process blocks its event
loop on PostgreSQL while its runs run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from graph_agent.graph.concurrency import to_thread
from graph_agent.graph.errors import GraphCancelledError, ThreadBusyError
from graph_agent.graph.types import RunnableConfig
from graph_agent.runnable import Runnable
from graph_agent.runnable_traits import saver_of
from graph_agent.serve.pg_records import UNFINISHED, Claim, Ending, PostgresRecords
from graph_agent.serve.queue_events import EventWriter, first_event_id, narrow_first_event_id
from graph_agent.serve.records import RunRecord, RunStatus, ThreadRecord, ThreadStatus
from graph_agent.serve.runs import (
    ActiveRun,
    CancelAction,
    Runner,
    RunRequest,
    end_not_recorded_error,
    new_run_record,
    rollback_thread,
    streamed_to_end,
    thread_busy,
    thread_values,
)
from graph_agent.serve.tasks import cancel_and_await, wait_at_most
from graph_agent.serve.wire import error_json, to_json

__all__ = ["QueueRunner", "RemoteRun", "work_forever"]

_log = logging.getLogger(__name__)

POLL_SECONDS = 0.5
"""How often a worker looks for runs without being told (and for the runs of dead workers)."""
CLAIM_DELAY_SECONDS = 0.002
"""How long a worker waits, per run it is running, before it claims a queued run: every
worker hears of a run at once, and so the least busy one gets it."""
FOLLOW_ASK_SECONDS = POLL_SECONDS * 20
"""How long a worker remembers a client's ask to follow a run it has not claimed (a follower
asks again after each :data:`POLL_SECONDS` ``* 4`` without news)."""
LEASE_WAIT_SECONDS = 30.0
"""Least time a worker that took a run over waits for the previous worker's lease on its thread
(at least twice ``worker_timeout``) before the run fails."""


@dataclass(kw_only=True)
class RemoteRun(ActiveRun):
    """A run as the API sees it in PostgreSQL mode when another process runs it (or none yet):
    its rows, re-read when that process announces a change."""

    runner: QueueRunner
    status: RunStatus = "pending"
    last_result: Any = None

    @property
    def finished(self) -> bool:
        return self.status not in UNFINISHED

    async def _refresh(self) -> bool:
        """Read the run's row; False when it is gone (deleted, or rolled back)."""
        found = await self.runner.records.arun_by_id(self.record.run_id)
        if found is None:
            self.status = "interrupted"
            return False
        self.record, self.last_result, _ = found
        self.status = self.record.status
        return True

    async def wait(self) -> Any:
        while True:
            wake = self.runner.wake_for(self.record.run_id, events=False)
            if not await self._refresh() or self.finished:
                return self.last_result
            await wait_at_most(wake, POLL_SECONDS * 4)

    async def follow(self, after: int = -1) -> AsyncIterator[tuple[int, str, str]]:
        run_id, asked = self.record.run_id, False
        while True:
            wake = self.runner.wake_for(run_id, events=True)
            if not asked and not self.finished:
                # its worker writes events at once; a worker that has yet to claim it
                # remembers, so it does from the run's first event
                await self.runner.records.aannounce(f"f:{run_id}")
                asked = True
            ended = not await self._refresh() or self.finished  # read before the events
            for item in await self.runner.records.aevents(run_id, after):
                yield item
                after = item[0]
            if ended:
                return
            if not await wait_at_most(wake, POLL_SECONDS * 4):
                asked = False  # it may have moved to another worker meanwhile: ask again


@dataclass(kw_only=True)
class _LocalRun(ActiveRun):
    """A run this process claimed, followed here from memory. Should another worker take it
    over (this one was silent too long), those waiting here get that worker's result, and
    those following here go on with its events from the table: every event of its attempt,
    numbered above any this one told (see
    :func:`~graph_agent.serve.queue_events.first_event_id`)."""

    runner: QueueRunner
    lost: bool = False

    def emit(self, event: str, data: Any) -> None:
        if not self.lost:
            super().emit(event, data)

    async def wait(self) -> Any:
        result = await super().wait()
        if self.lost:
            return await self.runner._handle(self.record).wait()
        return result

    async def follow(self, after: int = -1) -> AsyncIterator[tuple[int, str, str]]:
        async for item in super().follow(after):
            yield item
            after = item[0]
        if self.lost:
            async for item in self.runner._handle(self.record).follow(after):
                yield item


@dataclass(kw_only=True)
class _Claimed:
    run: _LocalRun
    claim: Claim
    writer: EventWriter
    since: float = field(default_factory=time.monotonic)
    cancel_action: list[str] = field(default_factory=list)
    ending: bool = False  # its end is being written: its claim is no longer renewed


class QueueRunner(Runner):
    """Queues runs in PostgreSQL and, when ``work`` is set, works on them in this process.

    Args:
        assistants: Each runnable by its assistant id.
        records: The PostgreSQL records shared by every process.
        work: Whether this process claims runs (an API-only process does not).
        concurrency: Most runs this process runs at once (those it claims as it receives
            them included); the rest wait in the queue for any worker.
    """

    sync_in_thread = False  # its PostgreSQL saver is natively async: astream pays there

    def __init__(
        self,
        assistants: Mapping[str, Runnable],
        records: PostgresRecords,
        *,
        work: bool = True,
        concurrency: int = 64,
    ) -> None:
        super().__init__(assistants, records)  # type: ignore[arg-type]
        self.records: PostgresRecords = records  # type: ignore[assignment]
        self.work = work
        self.concurrency = concurrency
        self.worker_key = secrets.randbits(62)
        self._claimed: dict[str, _Claimed] = {}
        self._follow_asks: dict[str, float] = {}  # runs not claimed here: when last asked
        self._event_wakes: dict[str, asyncio.Event] = {}
        self._end_wakes: dict[str, asyncio.Event] = {}
        self._queue_wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._lock_conn: Any = None
        self._locked = False  # whether this worker's session holds its lock (it claims only then)
        self._loop_seen = time.monotonic()  # when the event loop last ran its tick
        self._ticking: asyncio.TimerHandle | None = None
        self._guarded: list[Any] = []  # the savers whose lease heartbeats ask _loop_answers

    # lifecycle
    async def open(self) -> None:
        """Listen for notifications and, as a worker, start claiming runs."""
        import psycopg

        await self.records.notifier.check()
        await self.records.aopen()
        self._queue_wake = asyncio.Event()
        if self.work:
            self._lock_conn = await psycopg.AsyncConnection.connect(
                self.records.dsn, autocommit=True
            )
            await self._lock_conn.execute("SELECT pg_advisory_lock(%s)", (self.worker_key,))
            self._locked = True
        listening = asyncio.Event()
        notifier, channel = self.records.notifier, self.records.channel
        self._tasks.append(asyncio.create_task(notifier.listen(channel, self._dispatch, listening)))
        await wait_at_most(listening, 10)
        if self.work:
            self._guard_leases()
            self._tasks.append(asyncio.create_task(self._work()))

    async def close(self) -> None:
        """Stop listening and claiming, and cancel (and await) every run task of this process,
        those whose claims were taken over included, before the pools close under them."""
        await cancel_and_await(self._tasks)
        self._tasks.clear()
        self._unguard_leases()
        await cancel_and_await(list(self._running))
        if self._lock_conn is not None:
            await self._lock_conn.close()
        await self.records.aclose()

    def _guard_leases(self) -> None:
        """Have the lease heartbeats of the PostgreSQL savers this worker runs on ask whether
        its event loop answers. A loop blocked (a node's synchronous sleep, a hung call) stops
        this worker's claim heartbeats, and another worker takes its runs over; but the
        savers' heartbeat threads would go on extending its leases on their threads, and the
        new claimer, waiting for a lease, would fail the run. Unrenewed, the leases lapse after
        ``lease_ttl`` as the claims do after ``worker_timeout``."""
        from graph_agent.checkpoint.postgres import PostgresSaver

        self._tick()
        for runnable in self.assistants.values():
            saver = saver_of(runnable)
            if isinstance(saver, PostgresSaver) and saver.lease_holder_answers is None:
                saver.lease_holder_answers = self._loop_answers
                self._guarded.append(saver)

    def _unguard_leases(self) -> None:
        for saver in self._guarded:
            if saver.lease_holder_answers == self._loop_answers:
                saver.lease_holder_answers = None
        self._guarded.clear()
        if self._ticking is not None:
            self._ticking.cancel()
            self._ticking = None

    def _tick(self) -> None:
        """Note that the event loop runs, and again a moment later."""
        self._loop_seen = time.monotonic()
        every = min(POLL_SECONDS, self.records.worker_timeout / 6)
        self._ticking = asyncio.get_running_loop().call_later(every, self._tick)

    def _loop_answers(self) -> bool:
        """Whether the event loop ran lately (within a third of ``worker_timeout``, the claims'
        heartbeat interval); called from the savers' lease heartbeat threads."""
        return time.monotonic() - self._loop_seen < self.records.worker_timeout / 3

    def _dispatch(self, payload: str) -> None:
        kind, _, about = payload.partition(":")
        if not payload:  # (re)subscribed: what was announced meanwhile was missed
            self._wake_everyone()
        elif kind == "q":
            self._queue_wake.set()
        elif kind == "e":
            _set(self._event_wakes.pop(about, None))
        elif kind == "d":
            _set(self._event_wakes.pop(about, None))
            _set(self._end_wakes.pop(about, None))
        elif kind == "c":
            run_id, _, action = about.partition(":")
            self._cancel_here(run_id, action)
        elif kind == "f":
            claimed = self._claimed.get(about)
            if claimed is not None:
                claimed.writer.follow()
            elif self.work:
                self._remember_follow_ask(about)

    def _remember_follow_ask(self, run_id: str) -> None:
        """A client elsewhere follows a run this worker has not claimed (it may never): kept
        for :data:`FOLLOW_ASK_SECONDS`, so that the run writes its events at once if claimed
        here meanwhile."""
        asked = time.monotonic()
        self._follow_asks.pop(run_id, None)
        self._follow_asks[run_id] = asked  # the oldest asks come first
        for old_id, old in list(self._follow_asks.items()):
            if asked - old <= FOLLOW_ASK_SECONDS:
                break
            del self._follow_asks[old_id]

    def _wake_everyone(self) -> None:
        self._queue_wake.set()
        for wakes in (self._event_wakes, self._end_wakes):
            for wake in wakes.values():
                wake.set()
            wakes.clear()

    def _cancel_here(self, run_id: str, action: str) -> None:
        claimed = self._claimed.get(run_id)
        if claimed is not None:
            claimed.cancel_action.append(action)
            claimed.run.cancel.set()

    def wake_for(self, run_id: str, *, events: bool) -> asyncio.Event:
        """An event set at the next announcement that ``run_id`` changed: any (``events``), or
        only that its row did (it ended, was cancelled or deleted)."""
        wakes = self._event_wakes if events else self._end_wakes
        wake = wakes.get(run_id)
        if wake is None:
            wake = wakes[run_id] = asyncio.Event()
        return wake

    # the API's side
    def active(self, thread_id: str) -> ActiveRun | None:
        unfinished = self.records.unfinished_runs(thread_id)
        return self.find(unfinished[0]) if unfinished else None

    def find(self, run_id: str) -> ActiveRun | None:
        claimed = self._claimed.get(run_id)
        if claimed is not None:
            return claimed.run
        found = self.records.run_by_id(run_id)
        if found is None:
            return None
        record, result, _ = found
        return self._handle(record, result)

    def _handle(self, record: RunRecord, result: Any = None) -> RemoteRun:
        return RemoteRun(
            record=record,
            request=_request_from_json(record.kwargs.get("request", {}), record),
            runner=self,
            status=record.status,
            last_result=result,
        )

    def start(self, thread_id: str, request: RunRequest) -> ActiveRun:
        """Not in PostgreSQL mode: starting a run waits on the database, so it is awaited."""
        raise NotImplementedError("a QueueRunner starts runs with `await runner.astart(...)`")

    async def astart(
        self,
        thread_id: str,
        request: RunRequest,
        thread: ThreadRecord | None = None,
        *,
        new_thread: bool = False,  # the records tell, under the thread's lock
    ) -> ActiveRun:
        kept = _request_json(request)
        record = new_run_record(thread_id, request, {"request": kept})
        here = self.work and self._locked and len(self._claimed) < self.concurrency
        started = await self.records.astart_run(
            record,
            json.dumps(kept),
            thread=thread,
            worker=self.worker_key if here else None,
        )
        if not started.started:
            raise thread_busy(thread_id, started.before[0])
        if started.claimed:
            return self._run_here(record, request, attempt=1)
        return self._handle(record)

    async def cancel(
        self, run: ActiveRun, *, wait: bool, action: CancelAction = "interrupt"
    ) -> None:
        self._cancel_here(run.record.run_id, action)
        await self.records.arequest_cancel(run.record.run_id, action)
        if wait or action == "rollback":
            await run.wait()

    # the worker's side
    async def _work(self) -> None:
        upkeep_due = beat_due = 0.0
        beat_every = self.records.worker_timeout / 3
        upkeep_every = min(POLL_SECONDS, beat_every)
        while True:
            self._queue_wake.clear()
            try:
                if time.monotonic() >= upkeep_due:
                    started, beat = time.monotonic(), time.monotonic() >= beat_due
                    await self._upkeep(beat)
                    upkeep_due = time.monotonic() + upkeep_every
                    if beat:
                        beat_due = started + beat_every
                while self._locked and len(self._claimed) < self.concurrency:
                    if self._claimed:  # the least busy worker claims first
                        await asyncio.sleep(CLAIM_DELAY_SECONDS * len(self._claimed))
                    claimed = await self.records.aclaim(self.worker_key)
                    if claimed is None:
                        break
                    record, request_text, attempt, cancel = claimed
                    if record.run_id in self._claimed:  # a claim of ours was taken for dead,
                        self._lose(record.run_id)  # and the run came back to us
                    request = _request_from_json(json.loads(request_text), record)
                    events = await self.records.aevents(record.run_id) if attempt > 1 else []
                    run = self._run_here(record, request, attempt, events)
                    if cancel:  # asked before it was claimed
                        self._cancel_here(record.run_id, cancel)
                        run.cancel.set()
            except Exception:  # the database went away a moment: try again at the next poll
                _log.exception("graph-agent serve: claiming runs failed")
            await wait_at_most(self._queue_wake, upkeep_every)

    async def _upkeep(self, beat: bool) -> None:
        """Renew this worker's claims (with ``beat``), stop the runs whose claims were taken
        over meanwhile, and put back in the queue the runs of dead or silent workers."""
        if beat:
            await self._keep_lock()
        sent = time.monotonic()
        held = [(run_id, c.claim.attempt) for run_id, c in self._claimed.items()]
        found = await self.records.aupkeep(self.worker_key, held, beat=beat)
        if not beat:
            return
        for run_id, attempt in held:
            claimed = self._claimed.get(run_id)
            if (
                run_id not in found.held
                and claimed is not None
                and claimed.claim.attempt == attempt
                and claimed.since < sent
                and not claimed.ending
            ):
                self._lose(run_id, claimed)

    async def _keep_lock(self) -> None:
        """Check that this worker's lock session lives; if it was lost (the server ended it,
        the network cut it), lock the same key on a new one. Until then the worker claims
        nothing: the other workers take its runs for a dead worker's at once."""
        import psycopg

        try:
            await self._lock_conn.execute("SELECT 1")
        except psycopg.Error:
            self._locked = False
            with contextlib.suppress(psycopg.Error):
                await self._lock_conn.close()
            _log.warning("graph-agent serve: this worker's lock session was lost; locking again")
            self._lock_conn = await psycopg.AsyncConnection.connect(
                self.records.dsn, autocommit=True
            )
        if not self._locked:  # the old session may hold it a while yet: tried at each beat
            cursor = await self._lock_conn.execute(
                "SELECT pg_try_advisory_lock(%s)", (self.worker_key,)
            )
            found = await cursor.fetchone()
            self._locked = bool(found and found[0])

    async def _holds(self, claimed: _Claimed) -> bool:
        """Whether the claim still holds (True when the records cannot tell now)."""
        try:
            return await self.records.aholds(claimed.run.record.run_id, claimed.claim)
        except Exception:
            return True

    def _lose(self, run_id: str, lost: _Claimed | None = None) -> None:
        """Another worker took this run over (this one was silent past its deadline): stop it
        (as a cancel does), writing nothing more. ``lost``: the claim that was lost
        (a newer claim of this worker on the same run stays)."""
        claimed = self._claimed.get(run_id)
        if claimed is None or (lost is not None and claimed is not lost) or claimed.run.lost:
            return
        del self._claimed[run_id]
        _log.warning(
            "graph-agent serve: run %s was taken over by another worker (this one was taken "
            "for dead, or silent past worker_timeout=%s s); stopping it here",
            run_id,
            self.records.worker_timeout,
        )
        claimed.run.lost = True
        claimed.writer.stop()
        claimed.run.cancel.set()
        # those waiting or following here turn to the other worker now, not when this
        # worker's copy has stopped (a sync node it cannot stop may run long yet)
        claimed.run.end()

    def _run_here(
        self,
        record: RunRecord,
        request: RunRequest,
        attempt: int,
        events: list[tuple[int, str, str]] | None = None,
    ) -> ActiveRun:
        """Run a run this process claimed, as a task; its clients here follow it in memory."""
        claim = Claim(worker=self.worker_key, attempt=attempt)
        writer = EventWriter(self.records, record.run_id, claim)
        writer.followed = self._follow_asks.pop(record.run_id, None) is not None
        run = _LocalRun(record=record, request=request, log=writer, runner=self)
        run.earlier = list(events or ())
        run.first_id = (
            first_event_id(attempt)
            if self.records.wide_event_ids
            else narrow_first_event_id(attempt, run.earlier)
        )
        claimed = _Claimed(run=run, claim=claim, writer=writer)
        self._claimed[record.run_id] = claimed
        run.task = asyncio.create_task(self._run_claimed(claimed))
        # kept till it ends, its claim taken over or not (a lost run stops at its next step
        # boundary, which may be a long node away): close cancels it
        self._running.add(run.task)
        run.task.add_done_callback(self._running.discard)
        return run

    async def _run_claimed(self, claimed: _Claimed) -> None:
        run = claimed.run
        try:
            await self._execute_claimed(claimed)
        finally:
            if len(self._claimed) >= self.concurrency:
                self._queue_wake.set()  # room for one more from the queue
            if self._claimed.get(run.record.run_id) is claimed:
                del self._claimed[run.record.run_id]
            run.end()

    async def _execute_claimed(self, claimed: _Claimed) -> None:
        run = claimed.run
        run.emit("metadata", {"run_id": run.record.run_id, "attempt": claimed.claim.attempt})
        runnable = self.assistants.get(run.request.graph)
        outcome: _Outcome | None
        try:
            if runnable is None:
                raise LookupError(f"this worker does not serve graph {run.request.graph}")
            outcome = await self._run_through(claimed, runnable)
        except (_Cancelled, GraphCancelledError):
            assert runnable is not None
            try:  # stopping reads and writes too; should that fail, the run ends all the same
                outcome = await self._stop(claimed, runnable)
            except Exception as exc:
                outcome = await self._failed(claimed, exc)
        except Exception as exc:
            outcome = await self._failed(claimed, exc)
        if outcome is not None and not claimed.run.lost:
            await self._end(claimed, outcome)

    async def _run_through(self, claimed: _Claimed, runnable: Runnable) -> _Outcome:
        """Run the claimed run (resumed from its thread's last checkpoint when taken over)
        until it ends, and read its result. Raises :class:`_Cancelled` (or the graph's
        :class:`GraphCancelledError`) when it was cancelled before its end."""
        run, attempt = claimed.run, claimed.claim.attempt
        thread_id = run.record.thread_id
        if attempt > 1:
            timeout = max(LEASE_WAIT_SECONDS, 2 * self.records.worker_timeout)
            await to_thread(_await_lease, runnable, thread_id, timeout)
            run.request = await to_thread(_resumed, runnable, run.record, run.request)
        if run.cancel.is_set():
            raise _Cancelled
        seen = None
        if run.request is not _NOTHING_LEFT:
            seen = await self._stream(run, runnable)
        if streamed_to_end(seen, runnable) and not run.cancel.is_set():
            assert seen is not None
            return _Outcome("success", "idle", seen.values_json())  # as get_state()
        values, snapshot = await to_thread(thread_values, runnable, thread_id)
        result = to_json(values)
        thread_status: ThreadStatus = "idle"
        if snapshot is not None and snapshot.interrupts:
            thread_status = "interrupted"
            result["__interrupt__"] = to_json(list(snapshot.interrupts))
        if run.cancel.is_set() and snapshot is not None and snapshot.next:
            raise _Cancelled
        return _Outcome("success", thread_status, result)

    async def _stop(self, claimed: _Claimed, runnable: Runnable) -> _Outcome | None:
        """End a cancelled run: ``interrupted``, or rolled back (deleted, its thread taken
        back) when asked so. None: nothing left to record (rolled back, or taken over)."""
        run = claimed.run
        thread_id, run_id = run.record.thread_id, run.record.run_id
        if run.lost:
            return None
        if "rollback" not in claimed.cancel_action:
            values = (await to_thread(thread_values, runnable, thread_id))[0]
            return _Outcome("interrupted", "idle", to_json(values))
        if not await self._holds(claimed):  # the thread is the new claimer's now
            self._lose(run_id, claimed)
            return None
        await to_thread(rollback_thread, runnable, thread_id, {run_id})
        await claimed.writer.drain()
        if not await self.records.arolled_back(run_id, thread_id, claimed.claim):
            # taken over meanwhile: the run is the new claimer's to roll back (its cancel is
            # on the row), and those waiting here get what it does
            self._lose(run_id, claimed)
            return None
        run.rolled_back = True
        return None

    async def _failed(self, claimed: _Claimed, exc: Exception) -> _Outcome | None:
        """End a run that raised ``exc`` as ``error`` (its clients get the error event).
        None when the run was taken over: e.g. the saver refused a checkpoint because the
        thread's lease was taken, and the error here is no error of the run's."""
        if claimed.run.lost or not await self._holds(claimed):
            self._lose(claimed.run.record.run_id, claimed)
            return None
        error = error_json(exc)
        claimed.run.emit("error", error)
        return _Outcome("error", "error", {"__error__": error})

    async def _end(self, claimed: _Claimed, outcome: _Outcome) -> None:
        """Record how the run ended, with its events not written yet."""
        run, run_id = claimed.run, claimed.run.record.run_id
        claimed.ending = True
        events = await claimed.writer.drain()
        try:
            ended = await self._write_end(claimed, outcome, events)
        except Exception:  # refused, not only away a moment: the run ends as an error
            _log.exception("graph-agent serve: could not record the end of run %s", run_id)
            outcome, ended = await self._end_as_error(claimed, events)
        if ended == "deleted":
            _log.info(
                "graph-agent serve: run %s was deleted (with its thread) while it ran here; its "
                "end is not recorded",
                run_id,
            )  # those waiting here get its result
        elif ended == "taken over":
            _log.warning(
                "graph-agent serve: run %s was taken over by another worker before it ended "
                "here; its end here is not recorded",
                run_id,
            )
            run.lost = True  # those waiting here get the other worker's result
            return
        run.result = outcome.result
        if run.request.webhook is not None and self.webhooks is not None:
            await self.webhooks.aended(run.record, run.request.webhook, outcome.status, run.result)

    async def _end_as_error(
        self, claimed: _Claimed, events: list[tuple[int, str, str]]
    ) -> tuple[_Outcome, Ending]:
        """Record a run whose end the records refused as ``error``: with its unwritten
        ``events`` and the error event after them, or, should that be refused too (an event
        the records cannot take), with the error event alone."""
        run = claimed.run
        failed = _Outcome("error", "error", {"__error__": end_not_recorded_error()})
        number = run.first_id + len(run.events)
        run.log = None  # its clients here get it now; the records with the end
        run.emit("error", failed.result["__error__"])
        last = [(number, "error", run.events[-1][1])]
        try:
            return failed, await self._write_end(claimed, failed, events + last)
        except Exception:
            if not events:
                raise
            _log.exception("graph-agent serve: run %s's last events refused too", run.record.run_id)
        return failed, await self._write_end(claimed, failed, last)

    async def _write_end(
        self, claimed: _Claimed, outcome: _Outcome, events: list[tuple[int, str, str]]
    ) -> Ending:
        """:meth:`PostgresRecords.afinish_run`, tried again while the database may be away a
        moment (a connection lost, a pool exhausted); its last failure is raised, and at once
        one that trying again cannot mend (the statement refused)."""
        import psycopg

        record, claim = claimed.run.record, claimed.claim
        status, result, thread_status = outcome.status, outcome.result, outcome.thread_status
        end = (record.run_id, record.thread_id, status, result, claim, thread_status)
        for delay in (0.1, 0.5, 2.0):
            try:
                return await self.records.afinish_run(*end, events)
            except psycopg.OperationalError as exc:
                _log.warning("graph-agent serve: could not record the end of a run (%s)", exc)
                await asyncio.sleep(delay)
        return await self.records.afinish_run(*end, events)


def _set(wake: asyncio.Event | None) -> None:
    if wake is not None:
        wake.set()


class _Cancelled(Exception):
    pass


@dataclass(frozen=True, slots=True)
class _Outcome:
    """How a claimed run ended, to be recorded: its status, its thread's, its result."""

    status: RunStatus
    thread_status: ThreadStatus
    result: Any


_NOTHING_LEFT = RunRequest(assistant_id="")
"""The request of a resumed run whose thread already holds its last checkpoint."""


def _await_lease(runnable: Runnable, thread_id: str, timeout: float = 30.0) -> None:
    """Wait until the thread's checkpoint lease is free: the dead worker's session that held
    it may end a moment after the one whose lock said it was dead, and a silent worker's
    lease lapses ``lease_ttl`` after its last heartbeat (its saver's heartbeat thread stops
    extending it while its event loop does not answer: ``QueueRunner._guard_leases``). Past
    ``timeout``, the previous worker still renews the lease (its loop answers, yet its claim
    heartbeats do not reach the database): the run fails with the saver's ThreadBusyError."""
    saver = saver_of(runnable)
    deadline = time.monotonic() + timeout
    while saver is not None:
        try:
            saver.release(saver.acquire(thread_id))
            return
        except ThreadBusyError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _resumed(runnable: Runnable, record: RunRecord, request: RunRequest) -> RunRequest:
    """What a run claimed again (its worker died) does: go on from the thread's newest
    checkpoint when the run wrote it, else start as it was asked."""
    snapshot = runnable.get_state(RunnableConfig(thread_id=record.thread_id))
    if snapshot.metadata.get("run_id") != record.run_id:
        return request
    if not snapshot.next and not snapshot.interrupts:
        return _NOTHING_LEFT
    return dataclasses.replace(request, input=None, command=None, checkpoint_id=None)


def _request_json(request: RunRequest) -> dict[str, Any]:
    data = dataclasses.asdict(request)
    data["stream_modes"] = list(request.stream_modes)
    return dict(to_json(data))


def _request_from_json(data: Mapping[str, Any], record: RunRecord) -> RunRequest:
    if not data:
        return RunRequest(assistant_id=record.assistant_id)
    return RunRequest(**{**data, "stream_modes": tuple(data.get("stream_modes", ("values",)))})


async def work_forever(
    assistants: Mapping[str, Runnable], records: PostgresRecords, *, store: Any = None
) -> None:
    """A worker process without HTTP: claim and run runs until cancelled (each run's
    ``config.store`` is ``store``, the server's)."""
    runner = QueueRunner(assistants, records)
    runner.store = store
    await runner.open()
    try:
        await asyncio.Event().wait()
    finally:
        await runner.close()
