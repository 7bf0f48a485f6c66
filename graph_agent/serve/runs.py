"""Runs inside the server process: each an asyncio task that streams its graph or agent, keeps
its events for the clients that listen, and records how it ended.

One run holds a thread at a time. A run asked for while another holds the thread is rejected
(:class:`ThreadBusy`, a 409) or, with ``multitask_strategy="enqueue"``, waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from graph_agent.agent.react import ReactAgent
from graph_agent.graph.compiled import CompiledGraph
from graph_agent.graph.errors import GraphCancelledError
from graph_agent.graph.types import NodeOutput, RunnableConfig, StreamingOutput
from graph_agent.messages import AssistantMessageChunk
from graph_agent.serve.records import Records, RunRecord, RunStatus, ThreadStatus, now
from graph_agent.serve.wire import chunk_json, command_from_json, input_from_json, to_json

__all__ = ["STREAM_MODES", "ActiveRun", "RunRequest", "Runner", "ThreadBusy", "thread_values"]

Runnable = ReactAgent | CompiledGraph
StreamMode = Literal["values", "updates", "custom", "messages", "messages-tuple"]
STREAM_MODES: tuple[str, ...] = ("values", "updates", "custom", "messages", "messages-tuple")
MultitaskStrategy = Literal["reject", "enqueue"]


class ThreadBusy(Exception):
    """A run asked for a thread another run holds, with ``multitask_strategy="reject"``."""


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    """What a client asked a run to do, checked (see ``graph_agent.serve.app``)."""

    assistant_id: str
    input: Any = None
    command: Mapping[str, Any] | None = None
    stream_modes: tuple[StreamMode, ...] = ("values",)
    checkpoint_id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
    max_steps: int | None = None
    multitask_strategy: MultitaskStrategy = "reject"

    def graph_input(self) -> Any:
        """The input the graph is called with: a Command to resume, or the state update."""
        if self.command is not None:
            return command_from_json(self.command)
        return input_from_json(self.input)


@dataclass(kw_only=True)
class ActiveRun:
    """A run the server started: its record, its events so far, and how to stop it."""

    record: RunRecord
    request: RunRequest
    cancel: threading.Event = field(default_factory=threading.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    events: list[tuple[str, Any]] = field(default_factory=list)
    listeners: list[asyncio.Queue[tuple[str, Any] | None]] = field(default_factory=list)
    result: Any = None
    task: asyncio.Task[None] | None = None

    def emit(self, event: str, data: Any) -> None:
        self.events.append((event, data))
        for queue in self.listeners:
            queue.put_nowait((event, data))

    async def follow(self) -> AsyncIterator[tuple[int, str, Any]]:
        """Every event of the run, numbered, from the first, until it ends."""
        queue: asyncio.Queue[tuple[str, Any] | None] = asyncio.Queue()
        seen = list(self.events)
        if not self.done.is_set():
            self.listeners.append(queue)
        try:
            for number, (event, data) in enumerate(seen):
                yield number, event, data
            number = len(seen)
            while not self.done.is_set() or not queue.empty():
                item = await queue.get()
                if item is None:
                    break
                yield number, item[0], item[1]
                number += 1
        finally:
            with contextlib.suppress(ValueError):
                self.listeners.remove(queue)


def thread_values(runnable: Runnable | None, thread_id: str) -> tuple[dict[str, Any], Any]:
    """A thread's newest values and its state snapshot (``None`` when nothing ran on it)."""
    if runnable is None:
        return {}, None
    snapshot = runnable.get_state(RunnableConfig(thread_id=thread_id))
    return dict(snapshot.values), snapshot


class Runner:
    """Starts, follows and cancels the runs of one server process.

    Args:
        assistants: Each runnable by its assistant id.
        records: Where threads and runs are recorded.
    """

    def __init__(self, assistants: Mapping[str, Runnable], records: Records) -> None:
        self.assistants = assistants
        self.records = records
        self._latest: dict[str, ActiveRun] = {}
        self._by_id: dict[str, ActiveRun] = {}

    def active(self, thread_id: str) -> ActiveRun | None:
        """The thread's newest run while it (or one queued before it) has not finished."""
        run = self._latest.get(thread_id)
        return run if run is not None and not run.done.is_set() else None

    def find(self, run_id: str) -> ActiveRun | None:
        return self._by_id.get(run_id)

    def start(self, thread_id: str, request: RunRequest) -> ActiveRun:
        """Record a run and start it as a task.

        Raises:
            ThreadBusy: another run holds the thread and the request rejects waiting.
        """
        previous = self.active(thread_id)
        if previous is not None and request.multitask_strategy == "reject":
            raise ThreadBusy(
                f"thread {thread_id} is busy with run {previous.record.run_id}: wait for it "
                "(runs.join), cancel it, or send multitask_strategy='enqueue'"
            )
        stamp = now()
        record = RunRecord(
            run_id=str(uuid.uuid4()),
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
            },
        )
        self.records.put_run(record)
        self.records.set_thread_status(thread_id, "busy", request.assistant_id)
        run = ActiveRun(record=record, request=request)
        self._latest[thread_id] = run
        self._by_id[record.run_id] = run
        run.task = asyncio.create_task(self._execute(run, previous))
        return run

    async def cancel(self, run: ActiveRun, *, wait: bool) -> None:
        """Stop ``run`` before its next step (a running node finishes first)."""
        run.cancel.set()
        if wait:
            await run.done.wait()

    async def _execute(self, run: ActiveRun, previous: ActiveRun | None) -> None:
        thread_id, run_id = run.record.thread_id, run.record.run_id
        if previous is not None:
            await previous.done.wait()
        runnable = self.assistants[run.request.assistant_id]
        run.emit("metadata", {"run_id": run_id, "attempt": 1})
        run_status: RunStatus = "success"
        thread_status: ThreadStatus = "idle"
        try:
            if run.cancel.is_set():  # cancelled while it waited in the queue
                run_status = "interrupted"
                run.result = to_json(thread_values(runnable, thread_id)[0])
                return
            self._set_status(run, "running")
            await self._stream(run, runnable)
            values, snapshot = thread_values(runnable, thread_id)
            result: dict[str, Any] = to_json(values)
            if snapshot is not None and snapshot.interrupts:
                thread_status = "interrupted"
                result["__interrupt__"] = to_json(list(snapshot.interrupts))
            run.result = result
        except GraphCancelledError:
            run_status = "interrupted"
            run.result = to_json(thread_values(runnable, thread_id)[0])
        except Exception as exc:
            run_status, thread_status = "error", "error"
            error = {"error": type(exc).__name__, "message": str(exc)}
            run.result = {"__error__": error}
            run.emit("error", error)
        finally:
            self._set_status(run, run_status)
            if self._latest.get(thread_id) is run:
                self.records.set_thread_status(thread_id, thread_status)
            run.done.set()
            for queue in run.listeners:
                queue.put_nowait(None)

    def _set_status(self, run: ActiveRun, status: RunStatus) -> None:
        run.record.status = status
        run.record.updated_at = now()
        self.records.set_run_status(run.record.run_id, status)

    async def _stream(self, run: ActiveRun, runnable: Runnable) -> None:
        request = run.request
        config = RunnableConfig(
            thread_id=run.record.thread_id,
            checkpoint_id=request.checkpoint_id,
            metadata={**request.metadata, "run_id": run.record.run_id},
            context=request.context,
            cancel=run.cancel,
        )
        if request.max_steps is not None:
            config = dataclasses.replace(config, max_steps=request.max_steps)
        translate = _Translator(request.stream_modes, run.emit)
        async for output in runnable.astream(request.graph_input(), config):
            translate(output)


class _Translator:
    """Turns a run's outputs into LangGraph's stream events for the modes asked."""

    def __init__(self, modes: Sequence[str], emit: Any) -> None:
        self.modes = set(modes)
        self.emit = emit
        self.values_at: str | None = None
        self.partial: dict[str, str] = {}

    def __call__(self, output: NodeOutput) -> None:
        if output.path:
            return
        if isinstance(output, StreamingOutput):
            self._chunk(output)
            return
        interrupts = [to_json(item) for item in output.interrupts]
        if interrupts:
            for mode in ("values", "updates"):
                if mode in self.modes:
                    self.emit(mode, {"__interrupt__": interrupts})
            return
        if "updates" in self.modes and output.node != "__start__":
            self.emit("updates", {output.node: to_json(output.update)})
        if (
            "values" in self.modes
            and output.state is not None
            and output.checkpoint_id != self.values_at
        ):
            self.values_at = output.checkpoint_id
            self.emit("values", to_json(output.state.data()))
        if "messages" in self.modes:
            for message_id in list(self.partial):
                del self.partial[message_id]

    def _chunk(self, output: StreamingOutput) -> None:
        message = output.message
        if not isinstance(message, AssistantMessageChunk):
            if "custom" in self.modes:
                self.emit("custom", to_json(message if message is not None else output.chunk))
            return
        metadata = {"langgraph_node": output.node, "langgraph_step": output.step}
        if "messages-tuple" in self.modes:
            self.emit("messages", [chunk_json(message), metadata])
        if "messages" in self.modes:
            if message.id not in self.partial:
                self.partial[message.id] = ""
                self.emit("messages/metadata", {message.id: {"metadata": metadata}})
            self.partial[message.id] += message.content
            whole = {**chunk_json(message), "type": "ai", "content": self.partial[message.id]}
            self.emit("messages/partial", [whole])
