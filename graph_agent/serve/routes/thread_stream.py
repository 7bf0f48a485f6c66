"""``GET /threads/{thread_id}/stream``: join a thread's live stream, as LangGraph Server's
``client.threads.join_stream`` does.

The stream follows the thread's runs one after another, until the client disconnects (or the
thread is deleted): the run
unfinished when it joins (from that run's first event), then each run started on the thread
later, live, or replayed from the records when it ended between two looks. After each run, a
``metadata`` event ``{"status": "run_done", "run_id": ...}`` (LangGraph's). Each event's id is
``<run_id>:<number>`` (``<run_id>:done`` for the run's end); a client that reconnects with it in
``Last-Event-ID`` (``join_stream(..., last_event_id=...)``) gets what came after it, on the same
run and the runs after it.

``stream_mode`` (repeatable): ``run_modes`` (the default: every event of the runs), ``lifecycle``
(only each run's start, its first ``metadata`` event, and its ``run_done``). LangGraph's
``state_update`` mode is not served (a 422 naming the others): this server tells no thread
state changes apart from the runs' own events.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from graph_agent.graph.concurrency import to_thread
from graph_agent.serve.api import Api, ApiError, Operation, Query
from graph_agent.serve.models import StreamEvent
from graph_agent.serve.records import RunRecord
from graph_agent.serve.runs import sse_text

__all__ = ["OPERATIONS", "THREAD_STREAM_MODES"]

THREAD_STREAM_MODES = ("run_modes", "lifecycle")
"""The ``stream_mode`` values of a thread's stream this server serves."""
LOOK_SECONDS = 0.25
"""How often a thread's stream looks for a new run on the thread while none runs."""
RUNS_LOOKED_AT = 100
"""How many of the thread's newest runs each look reads."""

Event = tuple[str, str, str]
"""One event of a thread's stream: ``(id, event, JSON text)``."""


def _modes(request: Request) -> set[str]:
    modes = set(request.query_params.getlist("stream_mode")) or {"run_modes"}
    unknown = sorted(modes - set(THREAD_STREAM_MODES))
    if unknown:
        raise ApiError(
            422,
            f"stream_mode {unknown[0]!r} is not supported on a thread's stream; use "
            + " or ".join(THREAD_STREAM_MODES),
        )
    return modes


def _resume_point(text: str) -> tuple[str, int | None] | None:
    """``Last-Event-ID`` of a thread's stream: the run and the last event number seen of it
    (None: all of it, its ``run_done`` included)."""
    text = text.strip()
    if not text or text == "-1":
        return None
    run_id, colon, number = text.rpartition(":")
    if colon and run_id and (number == "done" or number.isdigit()):
        return run_id, None if number == "done" else int(number)
    raise ApiError(
        400,
        f"Last-Event-ID {text!r:.60} is not an event id of a thread's stream: send the id of "
        "the last event received (<run_id>:<number>)",
    )


async def join_thread_stream(api: Api, request: Request) -> Response:
    thread_id = api.thread(request.path_params["thread_id"]).thread_id
    modes = _modes(request)
    resume = _resume_point(request.headers.get("last-event-id", ""))
    events = _ThreadStream(api, thread_id, modes).events(resume)

    async def lines() -> AsyncIterator[str]:
        async for number, event, text in events:
            yield f"event: {event}\ndata: {text}\nid: {number}\n\n"

    headers = {"Cache-Control": "no-store"}
    return StreamingResponse(lines(), media_type="text/event-stream", headers=headers)


class _ThreadStream:
    """The events of a thread's runs, one run after another, for one client."""

    def __init__(self, api: Api, thread_id: str, modes: set[str]) -> None:
        self.api = api
        self.thread_id = thread_id
        self.everything = "run_modes" in modes
        self.seen: set[str] = set()

    async def events(self, resume: tuple[str, int | None] | None) -> AsyncIterator[Event]:
        runs = await self._runs()  # oldest first
        pending: list[tuple[str, int]] = []
        if resume is None:  # the runs not finished yet, from their first event
            for record in runs:
                self.seen.add(record.run_id)
                if record.status in ("pending", "running"):
                    pending.append((record.run_id, -1))
        else:
            run_id, after = resume
            ids = [record.run_id for record in runs]
            before = ids.index(run_id) if run_id in ids else len(ids)
            self.seen.update(ids[: before + 1])
            if after is not None and run_id in ids:
                pending.append((run_id, after))
            pending += [(later, -1) for later in ids[before + 1 :]]
            self.seen.update(ids)
        while True:
            for run_id, after in pending:
                async for item in self._run_events(run_id, after):
                    yield item
            fresh = await self._new_runs()
            if fresh is None:
                return
            pending = [(record.run_id, -1) for record in fresh]

    async def _new_runs(self) -> list[RunRecord] | None:
        """The runs started on the thread since it was last looked at (waiting for one); None
        once the thread is deleted (its stream ends)."""
        records = self.api.records_of(self.thread_id)
        while True:
            fresh = [record for record in await self._runs() if record.run_id not in self.seen]
            if fresh:
                self.seen.update(record.run_id for record in fresh)
                return fresh
            if await to_thread(records.thread, self.thread_id) is None:
                return None
            await asyncio.sleep(LOOK_SECONDS)

    async def _runs(self) -> list[RunRecord]:
        records = self.api.records_of(self.thread_id)
        found = await to_thread(
            lambda: records.runs(self.thread_id, limit=RUNS_LOOKED_AT, offset=0)
        )
        return list(reversed(found))

    async def _run_events(self, run_id: str, after: int) -> AsyncIterator[Event]:
        """The run's events after number ``after``, live while it runs, then its end."""
        runner = self.api.runner_of(self.thread_id)
        run = await to_thread(runner.find, run_id)
        source: AsyncIterator[tuple[int, str, str]]
        if run is not None and not run.finished:
            source = run.follow(after)
        else:
            source = self._stored(run_id, after)
        async for number, event, text in source:
            if self.everything or event == "metadata":  # a run's start
                yield f"{run_id}:{number}", event, text
        done = sse_text({"status": "run_done", "run_id": run_id})
        yield f"{run_id}:done", "metadata", done

    async def _stored(self, run_id: str, after: int) -> AsyncIterator[tuple[int, str, str]]:
        records = self.api.records_of(self.thread_id)
        for item in await to_thread(records.events, run_id, after):
            yield item


_STREAM_MODE: dict[str, Any] = {
    "anyOf": [
        {"enum": list(THREAD_STREAM_MODES)},
        {"type": "array", "items": {"enum": list(THREAD_STREAM_MODES)}},
    ]
}
OPERATIONS = [
    Operation(
        "GET",
        "/threads/{thread_id}/stream",
        join_thread_stream,
        "Join the thread's live stream: its runs' events, one run after another",
        StreamEvent,
        media="text/event-stream",
        errors=(404, 422),
        query=(
            Query(
                "stream_mode",
                _STREAM_MODE,
                "run_modes (every event, the default) or lifecycle (runs' starts and ends)",
            ),
        ),
    ),
]
