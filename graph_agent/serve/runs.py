"""Runs inside the server process: each an asyncio task that streams its graph or agent, keeps
its events (in memory for the clients that listen, and in the records for those who come back
later) and records how it ended.

One run holds a thread at a time. A run asked for while another holds the thread follows the
request's ``multitask_strategy``, as LangGraph Server does:

- ``reject`` (default): refused with :class:`ThreadBusy`, a 409;
- ``enqueue``: it waits for the runs before it;
- ``interrupt``: the runs before it stop at once (status ``interrupted``; their finished steps
  stay in the thread, the writes of the node they were running never land), then it starts;
- ``rollback``: the runs before it stop, are deleted with their events, and the thread goes back
  to where it was before them (a checkpoint copying that state becomes the newest), then it
  starts.

A stateless run that deletes its thread when it ends (``on_completion="delete"``, the default)
runs on a *temporary* thread (:meth:`Runner.start_temporary`): its checkpoints in a
:class:`MemorySaver` of the runner's, its records in memory (see
:mod:`graph_agent.serve.records`), all gone when it ends. Nothing of it would outlive the run
anyway, and the file's commits and worker-thread round trips were most of what such a run cost
(LangGraph Server runs these without a checkpointer at all). While it runs, the API finds the
thread, its state and the run as for any other.

In PostgreSQL mode a process that runs runs does the same with its own runner (its records in
memory): its client is tied to this process by its connection anyway, and nothing of the run
is left once it ends. What that gives up: while it runs, only this process knows the thread
and the run (a client asking another process gets a 404), and if the process dies the run
dies with it instead of going on elsewhere from its last checkpoint (its client, whose
connection died too, would never have seen the end either; a tool it was about to call is not
called). A stateless run that keeps its thread (``on_completion="keep"``), and every run on a
thread, is a durable job in PostgreSQL as before.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.graph.concurrency import to_thread
from graph_agent.graph.errors import GraphCancelledError
from graph_agent.graph.types import RunnableConfig
from graph_agent.runnable import Runnable as Runnable  # the served assistants' type
from graph_agent.runnable_traits import local_graph, saver_of
from graph_agent.serve.bodies import json_text
from graph_agent.serve.records import (
    Records,
    RunRecord,
    RunStatus,
    ThreadRecord,
    ThreadStatus,
    now,
)
from graph_agent.serve.tasks import cancel_and_await
from graph_agent.serve.wire import (
    command_from_json,
    error_json,
    input_from_json,
    to_json,
)
from graph_agent.serve.wire_modes import RunEvents
from graph_agent.serve.wire_subgraphs import SubgraphEvents

if TYPE_CHECKING:
    from graph_agent.serve.webhooks import Webhooks

__all__ = [
    "MULTITASK_STRATEGIES",
    "STREAM_MODES",
    "ActiveRun",
    "CancelAction",
    "RunRequest",
    "Runner",
    "ThreadBusy",
    "end_not_recorded_error",
    "rollback_thread",
    "sse_text",
    "streamed_to_end",
    "thread_values",
]

_log = logging.getLogger(__name__)

StreamMode = Literal[
    "values",
    "updates",
    "custom",
    "messages",
    "messages-tuple",
    "tasks",
    "checkpoints",
    "debug",
]
STREAM_MODES: tuple[str, ...] = get_args(StreamMode)
MultitaskStrategy = Literal["reject", "enqueue", "interrupt", "rollback"]
MULTITASK_STRATEGIES: tuple[str, ...] = get_args(MultitaskStrategy)
CancelAction = Literal["interrupt", "rollback"]
END_NOT_RECORDED = (
    "the server could not record how this run ended, so it ended as an error; the server's "
    "log says why"
)
"""The message of :func:`end_not_recorded_error`."""
EventLog = Callable[[str, int, str, str], None]
"""Stores one event of a run: ``(run_id, seq, event, data as JSON text)``."""


def end_not_recorded_error() -> dict[str, Any]:
    """The error a run ends with when the records refused to write how it ended (its
    ``error`` event and ``__error__``). Fixed: what the database said may quote values the
    server holds (see :mod:`graph_agent.serve.errors`), so it goes to the server's log only."""
    return {"error": "RunEndNotRecorded", "message": END_NOT_RECORDED}


def sse_text(data: Any) -> str:
    """An event's data as the compact JSON an SSE ``data:`` line carries (a lone surrogate
    escaped: see :func:`graph_agent.serve.bodies.json_text`)."""
    return json_text(data)


class ThreadBusy(Exception):
    """A run asked for a thread another run holds, with ``multitask_strategy="reject"``."""


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    """What a client asked a run to do, checked (see ``graph_agent.serve.app``)."""

    assistant_id: str
    graph_id: str | None = None
    """The served graph or agent it runs (None: ``assistant_id``, a served one itself)."""
    input: Any = None
    command: Mapping[str, Any] | None = None
    stream_modes: tuple[StreamMode, ...] = ("values",)
    checkpoint_id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
    max_steps: int | None = None
    multitask_strategy: MultitaskStrategy = "reject"
    stream_resumable: bool = False
    interrupt_before: tuple[str, ...] | None = None
    interrupt_after: tuple[str, ...] | None = None
    run_id: str | None = None
    """The run's id, when the server chose it beforehand (a cron's run: see
    :mod:`graph_agent.serve.crons`); a new one otherwise."""

    @property
    def graph(self) -> str:
        """The served graph or agent the run runs."""
        return self.graph_id or self.assistant_id

    stream_subgraphs: bool = False
    """Also stream the graphs its nodes run (:mod:`graph_agent.serve.wire_subgraphs`)."""
    webhook: str | None = None
    """Where to POST the run's final record when it ends (:mod:`graph_agent.serve.webhooks`)."""

    def graph_input(self) -> Any:
        """The input the graph is called with: a Command to resume, or the state update."""
        if self.command is not None:
            return command_from_json(self.command)
        return input_from_json(self.input)


@dataclass(kw_only=True)
class ActiveRun:
    """A run the server started: its record, its events so far, and how to stop it.

    Events are numbered in the order emitted, from ``first_id`` (0 but for a run taken over
    from another worker: see :func:`graph_agent.serve.queue_events.first_event_id`), after the
    ``earlier`` ones; the number is the SSE event id a client sends back as ``Last-Event-ID``
    to get what it missed.
    """

    record: RunRecord
    request: RunRequest
    cancel: threading.Event = field(default_factory=threading.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    events: list[tuple[str, str]] = field(default_factory=list)
    result: Any = None
    task: asyncio.Task[None] | None = None
    previous: ActiveRun | None = None
    """The run it waits for (with ``enqueue``, ``interrupt`` or ``rollback``)."""
    log: EventLog | None = None
    rolled_back: bool = False
    earlier: list[tuple[int, str, str]] = field(default_factory=list)
    """The events an earlier attempt of the run stored, ``(id, event, JSON text)``."""
    first_id: int = 0
    """The id of ``events[0]``, above every id of ``earlier``."""
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _last: tuple[Any, str] | None = None
    """The data of the last event emitted, and its JSON text."""

    @property
    def finished(self) -> bool:
        return self.done.is_set()

    async def wait(self) -> Any:
        """The run's result, once it ended."""
        await self.done.wait()
        return self.result

    async def result_body(self) -> bytes:
        """The run's result as a JSON response body, once it ended: the text of its last
        event when that carried the result itself (a run that streamed to its end: its
        final ``values``), not encoded again; else :func:`sse_text` of it, as any response's
        JSON is written (see ``graph_agent.serve.bodies``)."""
        result = await self.wait()
        last = self._last
        text = last[1] if last is not None and last[0] is result else sse_text(result)
        return text.encode("utf-8")

    def emit(self, event: str, data: Any) -> None:
        text = sse_text(data)
        self._last = data, text
        if self.log is not None:
            self.log(self.record.run_id, self.first_id + len(self.events), event, text)
        self.events.append((event, text))
        self._wake_followers()

    def end(self) -> None:
        self.done.set()
        self._wake_followers()

    def _wake_followers(self) -> None:
        # the waiters' futures are settled by set(): cleared at once, it wakes each one once
        self._wake.set()
        self._wake.clear()

    async def follow(self, after: int = -1) -> AsyncIterator[tuple[int, str, str]]:
        """The run's events numbered above ``after``, as ``(id, event, JSON text)``, until it
        ends."""
        for item in self.earlier:
            if item[0] > after:
                yield item
        number = max(after + 1 - self.first_id, 0)
        while True:
            if number < len(self.events):
                event, text = self.events[number]
                yield self.first_id + number, event, text
                number += 1
            elif self.done.is_set():
                return
            else:
                await self._wake.wait()

    def chain(self) -> list[ActiveRun]:
        """This run and the unfinished runs it waits for, newest first."""
        runs: list[ActiveRun] = []
        run: ActiveRun | None = self
        while run is not None and not run.done.is_set():
            runs.append(run)
            run = run.previous
        return runs


class PendingEvents:
    """A run's events on their way to the records (an :data:`EventLog`): stored with the run's
    next status change, in its transaction (for most runs, their start and their end), or
    once :attr:`most` wait or the oldest waited :attr:`seconds`. The run's clients follow it
    from memory meanwhile; the records serve those who come after it ended (or after a
    restart, when a crash lost at most the last few events of the run it stopped)."""

    most = 100
    seconds = 1.0

    def __init__(self, records: Records) -> None:
        self.records = records
        self.pending: list[tuple[int, str, str]] = []
        self._since = 0.0

    def __call__(self, run_id: str, seq: int, event: str, data: str) -> None:
        pending = self.pending
        if not pending:
            self._since = time.monotonic()
        pending.append((seq, event, data))
        if len(pending) >= self.most or time.monotonic() - self._since >= self.seconds:
            self.records.add_events(run_id, self.take())

    def take(self) -> list[tuple[int, str, str]]:
        """The events not stored yet (now the caller's to store)."""
        pending, self.pending = self.pending, []
        return pending


def thread_busy(thread_id: str, run_id: str) -> ThreadBusy:
    """The refusal of a run on a thread another run holds (``multitask_strategy='reject'``)."""
    return ThreadBusy(
        f"thread {thread_id} is busy with run {run_id}: wait for it (runs.join), cancel it, or "
        "send multitask_strategy='enqueue', 'interrupt' or 'rollback'"
    )


def new_run_record(
    thread_id: str, request: RunRequest, kept: Mapping[str, Any] | None = None
) -> RunRecord:
    """The record of a new run of ``request`` on the thread (``kept``: more to keep with what
    it was asked)."""
    stamp = now()
    return RunRecord(
        run_id=request.run_id or str(uuid.uuid4()),
        thread_id=thread_id,
        assistant_id=request.assistant_id,
        created_at=stamp,
        updated_at=stamp,
        metadata=dict(request.metadata),
        multitask_strategy=request.multitask_strategy,
        kwargs={
            "input": to_json(request.input),
            "command": to_json(request.command),
            "stream_mode": list(request.stream_modes),
            "checkpoint_id": request.checkpoint_id,
            **_breakpoints_json(request),
            **(kept or {}),
        },
    )


def thread_values(runnable: Runnable | None, thread_id: str) -> tuple[dict[str, Any], Any]:
    """A thread's newest values and its state snapshot (``None`` when nothing ran on it)."""
    if runnable is None:
        return {}, None
    snapshot = runnable.get_state(RunnableConfig(thread_id=thread_id))
    return dict(snapshot.values), snapshot


def rollback_thread(runnable: Runnable, thread_id: str, run_ids: set[str]) -> None:
    """Take the thread back to its newest checkpoint that none of ``run_ids`` wrote.

    That checkpoint's state is copied into a new newest checkpoint (what ``get_state`` shows
    and the next run continues from); the abandoned checkpoints stay as a side branch of the
    history. A thread none of whose checkpoints predate those runs is emptied.
    """
    config = RunnableConfig(thread_id=thread_id)
    for snapshot in runnable.get_state_history(config):
        if snapshot.metadata.get("run_id") not in run_ids:
            if snapshot.config is not None and snapshot.config.checkpoint_id is not None:
                target = dataclasses.replace(config, checkpoint_id=snapshot.config.checkpoint_id)
                runnable.update_state(target, {})
            return
    saver = saver_of(runnable)
    if saver is not None:
        saver.delete_thread(thread_id)


def _breakpoints_json(request: RunRequest) -> dict[str, Any]:
    """The breakpoints a run asked for, as its record's kwargs show them (none: nothing)."""
    asked = {
        "interrupt_before": request.interrupt_before,
        "interrupt_after": request.interrupt_after,
    }
    return {key: list(names) for key, names in asked.items() if names is not None}


def with_breakpoints(runnable: Runnable, request: RunRequest) -> Runnable:
    """``runnable`` pausing where the run asks (``interrupt_before`` / ``interrupt_after``);
    itself when the run asks nothing.

    Raises:
        GraphSetupError: a name is no node of the graph.
        ValueError: the assistant is no graph (an agent takes no breakpoints per run).
    """
    before, after = request.interrupt_before, request.interrupt_after
    if before is None and after is None:
        return runnable
    paused = getattr(runnable, "with_breakpoints", None)
    if paused is None:
        raise ValueError(
            f"assistant {request.assistant_id!r} takes no interrupt_before/interrupt_after per "
            "run: only a graph does"
        )
    return cast("Runnable", paused(before, after))


def streamed_to_end(seen: RunEvents | None, runnable: Runnable) -> bool:
    """Whether a graph's run streamed through to its end with nothing interrupting it: its
    last streamed state is then the thread's values, and reading them back is not needed (a
    compiled graph's own: an agent or a team runs a graph of its own, whose state it shows
    its own way)."""
    own: object = local_graph(runnable)
    return own is runnable and seen is not None and seen.state is not None and not seen.interrupted


def on_saver(runnable: Runnable, saver: CheckpointSaver) -> Runnable:
    """The same graph or agent keeping its threads in ``saver`` (``runnable`` is unchanged)."""
    return runnable.with_saver(saver)


class Runner:
    """Starts, follows and cancels the runs of one server process.

    Args:
        assistants: Each runnable by its assistant id.
        records: Where threads, runs and their events are recorded.
    """

    sync_in_thread = True
    """Whether a graph whose nodes are all plain functions runs with its sync ``stream`` in
    one worker thread (see :func:`_stream_in_thread`); a runner whose saver is natively async
    (PostgreSQL's) runs every graph with ``astream``."""

    finished_kept = 1000
    """How many finished runs stay in memory, with their results, for clients that join them;
    an older one is joined from the records and its thread, as after a restart (kept all, a
    server held every run it ever ran: some kilobytes each, and longer garbage collections)."""

    def __init__(self, assistants: Mapping[str, Runnable], records: Records) -> None:
        self.assistants = assistants
        self.records = records
        self.store: Any = None
        """The server's store (``Api.store``): every run's ``config.store``, so its nodes,
        hooks and tools use what ``/store`` serves (None: each graph's own)."""
        self._latest: dict[str, ActiveRun] = {}
        self._by_id: dict[str, ActiveRun] = {}
        self._finished: collections.deque[ActiveRun] = collections.deque()
        self._temporary: dict[str, list[str]] = {}
        """The temporary threads running, with their runs' ids (see the module docstring)."""
        self._scratch = MemorySaver()
        self._on_scratch: dict[str, Runnable] = {}
        self._running: set[asyncio.Task[None]] = set()
        """The tasks of the runs not finished yet (:meth:`close` cancels them)."""
        self.webhooks: Webhooks | None = None
        """Told of the end of each run that has a webhook (None: webhooks are off)."""

    async def close(self) -> None:
        """Cancel the runs still running and wait until they stopped (at the server's
        shutdown): each ends ``interrupted``, its saver's lease released and its thread
        resumable from its last checkpoint (a temporary thread is deleted with its runs), while
        the records and savers are still open, not later when the event loop closes."""
        await cancel_and_await(list(self._running))
        self._on_scratch.clear()
        self._scratch = MemorySaver()

    def active(self, thread_id: str) -> ActiveRun | None:
        """The thread's newest run while it (or one queued before it) has not finished."""
        run = self._latest.get(thread_id)
        return run if run is not None and not run.done.is_set() else None

    def find(self, run_id: str) -> ActiveRun | None:
        return self._by_id.get(run_id)

    def holds(self, thread_id: str) -> bool:
        """Whether the thread is one of this runner's temporary threads, running."""
        return thread_id in self._temporary

    def runnable_of(self, thread_id: str, assistant_id: str) -> Runnable:
        """The assistant's runnable on the saver holding the thread's checkpoints."""
        runnable = self.assistants[assistant_id]
        if thread_id not in self._temporary:
            return runnable
        scratch = self._on_scratch.get(assistant_id)
        if scratch is None:
            scratch = self._on_scratch[assistant_id] = on_saver(runnable, self._scratch)
        return scratch

    def start_temporary(self, thread: ThreadRecord, request: RunRequest) -> ActiveRun:
        """Start a stateless run on ``thread``, a new thread kept in memory and deleted, with
        the run, when the run ends (see the module docstring)."""
        self._temporary[thread.thread_id] = []
        self.records.put_thread(thread, temporary=True)
        return self.start(thread.thread_id, request)

    def start(self, thread_id: str, request: RunRequest) -> ActiveRun:
        """Record a run and start it as a task.

        Raises:
            ThreadBusy: another run holds the thread and the request rejects waiting.
        """
        return self._start(thread_id, request)

    def _start(
        self, thread_id: str, request: RunRequest, thread: ThreadRecord | None = None
    ) -> ActiveRun:
        """:meth:`start`, with ``thread`` (the thread's record, when given) written in the
        same transaction as the run's."""
        previous = self.active(thread_id)
        if previous is not None and request.multitask_strategy == "reject":
            raise thread_busy(thread_id, previous.record.run_id)
        record = new_run_record(thread_id, request)
        # a run with none before it starts at once: recorded running from the start
        self.records.start_run(record, thread, running=previous is None)
        temporary = self._temporary.get(thread_id)
        if temporary is not None:
            temporary.append(record.run_id)
        # a temporary run's events are read from the run itself: it and its records go together
        log = PendingEvents(self.records) if temporary is None else None
        run = ActiveRun(record=record, request=request, previous=previous, log=log)
        self._latest[thread_id] = run
        self._by_id[record.run_id] = run
        if previous is not None and request.multitask_strategy in ("interrupt", "rollback"):
            for earlier in previous.chain():
                earlier.cancel.set()
        run.task = asyncio.create_task(self._execute(run))
        self._running.add(run.task)
        run.task.add_done_callback(self._running.discard)
        return run

    async def astart(
        self,
        thread_id: str,
        request: RunRequest,
        thread: ThreadRecord | None = None,
        *,
        new_thread: bool = False,
    ) -> ActiveRun:
        """:meth:`start`, with ``thread`` (the thread's record, set for this run; not written
        yet when ``new_thread``) written first; awaited, so that a runner whose records are a
        network away (PostgreSQL) writes both without blocking the event loop."""
        return self._start(thread_id, request, thread)

    async def cancel(
        self, run: ActiveRun, *, wait: bool, action: CancelAction = "interrupt"
    ) -> None:
        """Stop ``run`` at once (the node it is running is stopped and its writes dropped:
        see ``RunnableConfig.cancel``); with ``action="rollback"`` also delete it and take its
        thread back to before it."""
        run.cancel.set()
        if action == "rollback":
            await run.done.wait()
            await self._roll_back([run])
        elif wait:
            await run.done.wait()

    async def _roll_back(self, runs: Sequence[ActiveRun]) -> None:
        """Delete ``runs`` (finished) and take their thread back to before them."""
        if not runs:
            return
        thread_id = runs[0].record.thread_id
        runnable = self.runnable_of(thread_id, runs[0].request.graph)
        run_ids = {run.record.run_id for run in runs}
        await to_thread(rollback_thread, runnable, thread_id, run_ids)
        for run in runs:
            run.rolled_back = True
            self.records.delete_run(run.record.run_id)
            self._by_id.pop(run.record.run_id, None)
        if self.active(thread_id) is None:
            self.records.set_thread_status(thread_id, "idle")

    async def _execute(self, run: ActiveRun) -> None:
        thread_id, run_id = run.record.thread_id, run.record.run_id
        earlier = run.previous.chain() if run.previous is not None else []
        runnable = self.runnable_of(thread_id, run.request.graph)
        run_status: RunStatus = "success"
        thread_status: ThreadStatus = "idle"
        try:  # waiting in the queue too: a shutdown meanwhile ends it interrupted, not pending
            for before in earlier:
                await before.done.wait()
            if run.request.multitask_strategy == "rollback":
                await self._roll_back([before for before in earlier if not before.rolled_back])
            run.emit("metadata", {"run_id": run_id, "attempt": 1})
            if run.cancel.is_set():  # cancelled while it waited in the queue
                run_status = "interrupted"
                run.result = to_json(thread_values(runnable, thread_id)[0])
                return
            if run.previous is None:  # recorded running as it started (see _start)
                run.record.status, run.record.updated_at = "running", now()
            else:
                self._set_status(run, "running")
            seen = await self._stream(run, runnable)
            if streamed_to_end(seen, runnable) and not run.cancel.is_set():
                run.result = seen.values_json()  # what get_state() would read back
                return
            values, snapshot = thread_values(runnable, thread_id)
            result: dict[str, Any] = to_json(values)
            if snapshot is not None and snapshot.interrupts:
                thread_status = "interrupted"
                result["__interrupt__"] = to_json(list(snapshot.interrupts))
            run.result = result
        except GraphCancelledError:
            run_status = "interrupted"
            run.result = to_json(thread_values(runnable, thread_id)[0])
        except asyncio.CancelledError:  # the server shuts down (see close)
            run_status = "interrupted"
            raise
        except Exception as exc:
            run_status, thread_status = "error", "error"
            error = error_json(exc)
            run.result = {"__error__": error}
            run.emit("error", error)
        finally:
            self._record_end(run, run_status, thread_status)
            if run.request.webhook is not None and self.webhooks is not None:
                self.webhooks.ended(run.record, run.request.webhook, run.result)
            temporary = thread_id in self._temporary  # its runs are forgotten with it
            if temporary and self._latest.get(thread_id) is run:
                self._forget_temporary(thread_id)
            run.previous = None  # waited for: the runs before it need not stay in memory
            run.end()
            if not temporary:
                self._keep_finished(run)

    def _record_end(
        self, run: ActiveRun, run_status: RunStatus, thread_status: ThreadStatus
    ) -> None:
        """Record how the run ended, and its thread's status. Should the records refuse that,
        the run ends as ``error`` all the same, never left running: its clients get the error
        (from memory), and the records are told ``error`` if they take that at least."""
        thread_id = run.record.thread_id
        latest = self._latest.get(thread_id) is run
        try:
            self._set_status(run, run_status, (thread_id, thread_status) if latest else None)
        except Exception:
            _log.exception(
                "graph-agent serve: could not record the end of run %s", run.record.run_id
            )
            error = end_not_recorded_error()
            run.result = {"__error__": error}
            run.record.status = "error"
            run.log = None  # the records refused the end: this event is told from memory only
            run.emit("error", error)
            try:
                self.records.set_run_status(run.record.run_id, "error")
                if latest:
                    self.records.set_thread_status(thread_id, "error")
            except Exception:
                _log.exception(
                    "graph-agent serve: could not record run %s as failed either", run.record.run_id
                )

    def _keep_finished(self, run: ActiveRun) -> None:
        """Keep ``run`` among the :attr:`finished_kept` newest finished runs; forget the oldest."""
        self._finished.append(run)
        while len(self._finished) > self.finished_kept:
            old = self._finished.popleft()
            if self._by_id.get(old.record.run_id) is old:
                del self._by_id[old.record.run_id]
            if self._latest.get(old.record.thread_id) is old:
                del self._latest[old.record.thread_id]

    def _forget_temporary(self, thread_id: str) -> None:
        """Delete a temporary thread whose last run ended: its checkpoints, records and runs."""
        for run_id in self._temporary.pop(thread_id):
            self._by_id.pop(run_id, None)
        del self._latest[thread_id]
        self._scratch.delete_thread(thread_id)
        self.records.delete_thread(thread_id)

    def _set_status(
        self, run: ActiveRun, status: RunStatus, thread: tuple[str, ThreadStatus] | None = None
    ) -> None:
        """Record the run's new status, with its events not stored yet (and its ``thread``'s
        new status), in one transaction."""
        run.record.status = status
        run.record.updated_at = now()
        log = run.log
        events = log.take() if isinstance(log, PendingEvents) else ()
        self.records.set_run_status(run.record.run_id, status, events=events, thread=thread)

    async def _stream(self, run: ActiveRun, runnable: Runnable) -> RunEvents:
        """Stream the run, emitting its events; what it saw (its last state) is returned."""
        request = run.request
        config = RunnableConfig(
            thread_id=run.record.thread_id,
            checkpoint_id=request.checkpoint_id,
            metadata={**request.metadata, "run_id": run.record.run_id},
            context=request.context,
            cancel=run.cancel,
            store=self.store,
        )
        if request.max_steps is not None:
            config = dataclasses.replace(config, max_steps=request.max_steps)
        nested = {"subgraphs": True} if request.stream_subgraphs else {}
        kind = SubgraphEvents if request.stream_subgraphs else RunEvents
        events = kind(request.stream_modes, run.emit)
        runnable = with_breakpoints(runnable, request)
        if self.sync_in_thread and getattr(runnable, "runs_sync", False):
            await _stream_in_thread(run, runnable, config, events, nested)
            return events
        async for output in runnable.astream(
            request.graph_input(), config, task_events=events.task_events, **nested
        ):
            events(output)
        return events


async def _stream_in_thread(
    run: ActiveRun, graph: Any, config: RunnableConfig, events: RunEvents, nested: dict[str, Any]
) -> None:
    """Run a graph whose nodes are all plain functions (``CompiledGraph.runs_sync``) with its
    sync ``stream``, made and read in one worker thread: its saver calls are made there, and so
    are its lone nodes (parallel ones on the pool), and each output is handed to ``events`` on
    the loop as it comes (those that come while the loop is busy elsewhere, in one wake-up of
    it). A cancel stops the run at once even while a node runs in that thread: the run lets go
    of its thread's lease and tells ``on_stop``, and this raises its ``GraphCancelledError``
    without waiting for the node (what it returns later is dropped). What ``events`` raises
    stops the run, as under ``astream``. Cancelled (the server shuts down), the run is stopped
    through its cancel signal and waited for, so that it lets go of its thread's lease before
    this returns."""
    loop = asyncio.get_running_loop()
    # what ended the wait: the thread's end (None), or a cancel that stopped the run while a
    # node ran in the thread (its error)
    ended: asyncio.Future[GraphCancelledError | None] = loop.create_future()
    refused: list[BaseException] = []
    # the outputs the loop has not taken yet; a delivery is scheduled while any wait, and takes
    # all there are then: outputs that come faster than the loop takes them cost one wake-up
    waiting: list[Any] = []
    lock = threading.Lock()

    def deliver() -> None:
        nonlocal waiting
        with lock:
            taken, waiting = waiting, []
        for output in taken:
            if refused:
                return
            try:
                events(output)
            except BaseException as exc:  # the records refused an event, say: the run stops
                refused.append(exc)

    def stop(error: GraphCancelledError) -> None:
        loop.call_soon_threadsafe(_settle_once, ended, error)

    def read() -> None:
        outputs = graph.stream(
            run.request.graph_input(),
            config,
            task_events=events.task_events,
            on_stop=stop,
            **nested,
        )
        try:
            for output in outputs:
                with lock:
                    waiting.append(output)
                    wake = len(waiting) == 1
                if wake:
                    loop.call_soon_threadsafe(deliver)
                if refused:
                    return
        finally:
            outputs.close()

    reading = asyncio.ensure_future(to_thread(read))
    reading.add_done_callback(lambda _: _settle_once(ended, None))
    try:
        stopped = await asyncio.shield(ended)
    except asyncio.CancelledError:
        run.cancel.set()
        with contextlib.suppress(Exception):
            await asyncio.shield(ended)
        raise
    if stopped is not None and not reading.done():  # the node is left to end in its thread
        reading.add_done_callback(_dropped)
        refused.append(stopped)  # (an output still on its way is not delivered)
        raise stopped
    reading.result()
    # every output was handed over before the thread's end was: all are delivered by now
    if refused:
        raise refused[0]


def _settle_once(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():
        future.set_result(result)


def _dropped(reading: asyncio.Future[Any]) -> None:
    """What a run stopped while its node ran raised once the node returned (its
    ``GraphCancelledError``): taken, unread."""
    if not reading.cancelled():
        reading.exception()
