"""Runs as durable jobs in PostgreSQL, claimed by any number of worker processes.

Why a queue table rather than procrastinate: a run is already a row the API reads (status,
result, events), so claiming that very row (``UPDATE ... WHERE run_id = (SELECT ... FOR UPDATE
SKIP LOCKED)``) keeps one source of truth and one round trip per claim, with no second schema
and no job/row mapping to keep in step; what procrastinate would add (retries, periodic tasks)
a run does not need.

- **Claiming.** A worker claims the oldest pending run whose thread has no earlier unfinished
  run, so runs on one thread go one at a time in order (``enqueue``), and runs on different
  threads in parallel, on any worker.
- **A worker that dies is noticed at once.** Each worker process holds a session advisory lock
  on a random key, on a connection of its own, and writes that key on the runs it claims. When
  the process dies (``kill -9`` included) PostgreSQL ends its session and drops the lock; every
  worker polls ``pg_try_advisory_xact_lock(key)`` over the running runs and puts back in the
  queue those whose lock is free. The next claim resumes such a run from the thread's last
  checkpoint (the checkpoint saver's own lease, also bound to the dead session, is free too):
  input ``None`` when the thread's newest checkpoint is the run's own, its input otherwise.
  Liveness is never judged from a PID or a clock.
- **Events reach every process.** Events are rows (``seq`` per run) and each insert is announced
  with ``NOTIFY graph_agent_serve``; one connection per process LISTENs and wakes the clients
  streaming or waiting there, who read the rows after the last they sent. A reconnecting client
  (``Last-Event-ID``) reads from the table: nothing is lost or sent twice, whichever process
  ran or runs the run.
- **Cancel** marks the row and notifies; the worker running it stops at its next step boundary
  (``rollback``: it also takes the thread back and deletes the run) before the next run on the
  thread may be claimed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import secrets
import threading
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from graph_agent.graph.errors import GraphCancelledError, ThreadBusyError
from graph_agent.graph.types import RunnableConfig
from graph_agent.serve.pg_records import CHANNEL, UNFINISHED, PostgresRecords
from graph_agent.serve.records import RunRecord, RunStatus, ThreadStatus
from graph_agent.serve.runs import (
    ActiveRun,
    CancelAction,
    Runnable,
    Runner,
    RunRequest,
    new_run_record,
    rollback_thread,
    thread_busy,
    thread_values,
)
from graph_agent.serve.wire import error_json, to_json

__all__ = ["QueueRunner", "RemoteRun", "work_forever"]

_log = logging.getLogger(__name__)

POLL_SECONDS = 0.5
"""How often a worker looks for runs without being told (and for the runs of dead workers)."""


@dataclass(kw_only=True)
class RemoteRun(ActiveRun):
    """A run as the API sees it in PostgreSQL mode: its rows, whichever process runs it."""

    runner: QueueRunner
    status: RunStatus = "pending"
    last_result: Any = None

    @property
    def finished(self) -> bool:
        return self.status not in UNFINISHED

    def _refresh(self) -> bool:
        """Read the run's row; False when it is gone (deleted, or rolled back)."""
        found = self.runner.records.run_by_id(self.record.run_id)
        if found is None:
            self.status = "interrupted"
            return False
        self.record, self.last_result, _ = found
        self.status = self.record.status
        return True

    async def wait(self) -> Any:
        while True:
            wake = self.runner.wake_for(self.record.run_id)
            if not self._refresh() or self.finished:
                return self.last_result
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), POLL_SECONDS * 4)

    async def follow(self, after: int = -1) -> AsyncIterator[tuple[int, str, str]]:
        while True:
            wake = self.runner.wake_for(self.record.run_id)
            ended = not self._refresh() or self.finished  # read before the events: none missed
            for item in self.runner.records.events(self.record.run_id, after):
                yield item
                after = item[0]
            if ended:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), POLL_SECONDS * 4)


@dataclass(kw_only=True)
class _Claimed:
    run: ActiveRun
    attempt: int
    cancel_action: list[str] = field(default_factory=list)


class QueueRunner(Runner):
    """Queues runs in PostgreSQL and, when ``work`` is set, works on them in this process.

    Args:
        assistants: Each runnable by its assistant id.
        records: The PostgreSQL records shared by every process.
        work: Whether this process claims runs (an API-only process does not).
        concurrency: Most runs this process runs at once.
    """

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
        self._wakes: dict[str, asyncio.Event] = {}
        self._queue_wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stop = threading.Event()
        self._lock_conn: Any = None
        self._listener: threading.Thread | None = None

    # lifecycle
    async def open(self) -> None:
        """Listen for notifications and, as a worker, start claiming runs."""
        import psycopg

        self._loop = asyncio.get_running_loop()
        self._queue_wake = asyncio.Event()
        if self.work:
            self._lock_conn = psycopg.connect(self.records.dsn, autocommit=True)
            self._lock_conn.execute("SELECT pg_advisory_lock(%s)", (self.worker_key,))
        ready = threading.Event()
        self._listener = threading.Thread(
            target=self._listen, args=(ready,), name="graph-agent-serve-listen", daemon=True
        )
        self._listener.start()
        await asyncio.to_thread(ready.wait, 10)
        if self.work:
            self._tasks.append(asyncio.create_task(self._work()))

    async def close(self) -> None:
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        running = [c.run.task for c in self._claimed.values() if c.run.task is not None]
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        if self._listener is not None:
            await asyncio.to_thread(self._listener.join, 5)
        if self._lock_conn is not None:
            self._lock_conn.close()

    def _listen(self, ready: threading.Event) -> None:
        import psycopg

        while not self._stop.is_set():
            try:
                with psycopg.connect(self.records.dsn, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    ready.set()
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            self._notified(note.payload)
            except psycopg.Error as exc:
                _log.warning("graph-agent serve: LISTEN connection lost (%s); reconnecting", exc)
                self._stop.wait(0.5)

    def _notified(self, payload: str) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(self._dispatch, payload)

    def _dispatch(self, payload: str) -> None:
        kind, _, run_id = payload.partition(":")
        if kind == "q":
            self._queue_wake.set()
        elif kind == "e":
            wake = self._wakes.pop(run_id, None)
            if wake is not None:
                wake.set()
        elif kind == "c":
            claimed = self._claimed.get(run_id)
            if claimed is not None:
                found = self.records.run_by_id(run_id)
                if found is not None and found[2]:
                    claimed.cancel_action.append(found[2])
                claimed.run.cancel.set()

    def wake_for(self, run_id: str) -> asyncio.Event:
        """An event set at the next announcement about ``run_id``."""
        wake = self._wakes.get(run_id)
        if wake is None:
            wake = self._wakes[run_id] = asyncio.Event()
        return wake

    # the API's side
    def active(self, thread_id: str) -> ActiveRun | None:
        unfinished = self.records.unfinished_runs(thread_id)
        return self.find(unfinished[0]) if unfinished else None

    def find(self, run_id: str) -> ActiveRun | None:
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
        unfinished = self.records.unfinished_runs(thread_id)
        if unfinished and request.multitask_strategy == "reject":
            raise thread_busy(thread_id, unfinished[0])
        record = new_run_record(thread_id, request, {"request": _request_json(request)})
        self.records.set_thread_status(thread_id, "busy", request.assistant_id)
        if unfinished and request.multitask_strategy in ("interrupt", "rollback"):
            for run_id in unfinished:
                self.records.request_cancel(run_id, request.multitask_strategy)
        self.records.put_run(record, json.dumps(_request_json(request)))
        return self._handle(record)

    async def cancel(
        self, run: ActiveRun, *, wait: bool, action: CancelAction = "interrupt"
    ) -> None:
        self.records.request_cancel(run.record.run_id, action)
        if wait or action == "rollback":
            await run.wait()

    # the worker's side
    async def _work(self) -> None:
        slots = asyncio.Semaphore(self.concurrency)
        while True:
            try:
                await asyncio.to_thread(self.records.requeue_orphans)
                while True:
                    await slots.acquire()
                    claimed = self.records.claim(self.worker_key)
                    if claimed is None:
                        slots.release()
                        break
                    record, request_text, attempt = claimed
                    task = asyncio.create_task(self._run_claimed(record, request_text, attempt))
                    task.add_done_callback(lambda _: slots.release())
            except Exception:  # the database went away a moment: try again at the next poll
                _log.exception("graph-agent serve: claiming runs failed")
            self._queue_wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._queue_wake.wait(), POLL_SECONDS)

    async def _run_claimed(self, record: RunRecord, request_text: str, attempt: int) -> None:
        request = _request_from_json(json.loads(request_text), record)
        runnable = self.assistants.get(request.assistant_id)
        run = ActiveRun(record=record, request=request, log=self.records.add_event)
        run.events = [(event, data) for _, event, data in self.records.events(record.run_id)]
        claimed = _Claimed(run=run, attempt=attempt)
        self._claimed[record.run_id] = claimed
        run.task = asyncio.current_task()
        found = self.records.run_by_id(record.run_id)
        if found is not None and found[2]:  # cancelled before it was claimed
            claimed.cancel_action.append(found[2])
            run.cancel.set()
        try:
            if runnable is None:
                raise LookupError(f"this worker does not serve assistant {request.assistant_id}")
            if attempt > 1:
                await asyncio.to_thread(_await_lease, runnable, record.thread_id)
                request = await asyncio.to_thread(_resumed, runnable, record, request)
                run.request = request
            await self._execute_claimed(run, runnable, attempt)
        finally:
            self._claimed.pop(record.run_id, None)

    async def _execute_claimed(self, run: ActiveRun, runnable: Runnable, attempt: int) -> None:
        thread_id, run_id = run.record.thread_id, run.record.run_id
        run.emit("metadata", {"run_id": run_id, "attempt": attempt})
        run_status: RunStatus = "success"
        thread_status: ThreadStatus = "idle"
        result: Any
        try:
            if run.cancel.is_set():
                raise _Cancelled
            if run.request is not _NOTHING_LEFT:
                await self._stream(run, runnable)
            values, snapshot = await asyncio.to_thread(thread_values, runnable, thread_id)
            result = to_json(values)
            if snapshot is not None and snapshot.interrupts:
                thread_status = "interrupted"
                result["__interrupt__"] = to_json(list(snapshot.interrupts))
            if run.cancel.is_set() and snapshot is not None and snapshot.next:
                raise _Cancelled
        except (_Cancelled, GraphCancelledError):
            claimed = self._claimed.get(run_id)
            if claimed is not None and "rollback" in claimed.cancel_action:
                await asyncio.to_thread(rollback_thread, runnable, thread_id, {run_id})
                self.records.delete_run(run_id)
                self.records.finish_thread(thread_id, "idle")
                return
            run_status = "interrupted"
            result = to_json((await asyncio.to_thread(thread_values, runnable, thread_id))[0])
        except Exception as exc:
            run_status, thread_status = "error", "error"
            error = error_json(exc)
            result = {"__error__": error}
            run.emit("error", error)
        if self.records.finish_run(run_id, run_status, result, self.worker_key):
            self.records.finish_thread(thread_id, thread_status)
        self.records.announce_queue()  # the next run on the thread may be claimed now


class _Cancelled(Exception):
    pass


_NOTHING_LEFT = RunRequest(assistant_id="")
"""The request of a resumed run whose thread already holds its last checkpoint."""


def _await_lease(runnable: Runnable, thread_id: str, timeout: float = 30.0) -> None:
    """Wait until the thread's checkpoint lease is free: the dead worker's session that held
    it may end a moment after the one whose lock said it was dead."""
    saver = runnable.saver
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


async def work_forever(assistants: Mapping[str, Runnable], records: PostgresRecords) -> None:
    """A worker process without HTTP: claim and run runs until cancelled."""
    runner = QueueRunner(assistants, records)
    await runner.open()
    try:
        await asyncio.Event().wait()
    finally:
        await runner.close()
