"""``/threads/{thread_id}/runs`` and ``/runs``: runs on a thread, and stateless ones (on a
thread of their own)."""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any, get_args

from starlette.requests import Request
from starlette.responses import Response

from graph_agent.observability.propagation import with_trace_context
from graph_agent.serve.api import (
    Api,
    ApiError,
    Operation,
    Query,
    creatable,
    flag,
    int_param,
    json_body,
    json_objects,
    last_event,
    owned,
    parse,
    run_location,
    sse,
    thread_record,
    wire,
)
from graph_agent.serve.assistant_config import ConfigProblem
from graph_agent.serve.bodies import JSONResponse
from graph_agent.serve.models import Run, RunCreate, RunResult, StreamEvent
from graph_agent.serve.queue import QueueRunner
from graph_agent.serve.records import Records, RunRecord, RunStatus, ThreadRecord
from graph_agent.serve.runs import (
    ActiveRun,
    CancelAction,
    Runnable,
    RunRequest,
    ThreadBusy,
    thread_values,
    with_breakpoints,
)
from graph_agent.serve.webhooks import Webhooks
from graph_agent.serve.webhooks_policy import WebhookPolicy
from graph_agent.serve.wire import to_json as wire_json

__all__ = ["OPERATIONS", "checked_run", "start_from_body"]

_log = logging.getLogger(__name__)


def _run_request(api: Api, body: RunCreate) -> RunRequest:
    """The run ``body`` asks, checked: its assistant's graph, with the assistant's config and
    context merged under the run's."""
    assistant = api.assistant(body.assistant_id)
    runnable = api.graph_runnable(assistant)
    try:
        config = body.config.model_dump(exclude_none=True)
        context, max_steps = assistant.run_settings(config, body.context)
    except ConfigProblem as exc:
        raise ApiError(422, str(exc)) from exc
    command = body.command.model_dump(exclude_unset=True) if body.command else None
    before, after = body.breakpoints()
    request = RunRequest(
        assistant_id=body.assistant_id,
        graph_id=assistant.graph_id,
        input=body.input,
        command=command,
        stream_modes=body.modes(),
        checkpoint_id=body.target(),
        metadata=body.metadata,
        context=context,
        max_steps=max_steps,
        multitask_strategy=body.multitask_strategy,
        stream_resumable=body.stream_resumable,
        interrupt_before=before,
        interrupt_after=after,
        stream_subgraphs=body.stream_subgraphs,
        webhook=_webhook(api, body.webhook),
    )
    _check_breakpoints(runnable, request)
    wire(lambda r: r.graph_input(), request)  # a malformed input fails here, as a 422
    api.check_keys(request.graph, request.input, "input")
    api.check_keys(request.graph, (command or {}).get("update"), "command.update")
    return request


def _webhook(api: Api, url: str | None) -> str | None:
    """``url``, if the server may call it as a run's webhook (a 422 naming the host and
    ``--webhook-allow`` otherwise)."""
    if url is None:
        return None
    policy = api.webhooks.policy if api.webhooks is not None else WebhookPolicy(())
    problem = policy.problem(url)
    if problem is not None:
        raise ApiError(422, problem, "webhook_not_allowed")
    return url


def _check_breakpoints(runnable: Runnable, request: RunRequest) -> None:
    """A 422 naming the nodes the run's breakpoints name that its graph has not."""
    try:
        with_breakpoints(runnable, request)
    except ValueError as exc:  # GraphSetupError is one
        raise ApiError(422, f"{exc}") from exc


async def _start(api: Api, request: Request, thread_id: str | None) -> ActiveRun:
    body = parse(RunCreate, with_trace_context(await json_body(request), request.headers))
    return await _start_body(api, body, _run_request(api, body), thread_id)


async def _start_body(
    api: Api, body: RunCreate, run_request: RunRequest, thread_id: str | None
) -> ActiveRun:
    """Start the run ``body`` asks (``run_request``, checked) on the thread, or stateless."""
    delete = body.on_completion == "delete"
    here = isinstance(api.records, Records) or api.local is not api.runner
    if thread_id is None and delete and here and run_request.webhook is None:
        return api.local.start_temporary(_temporary_thread(run_request), run_request)
    if thread_id is None:  # stateless: a thread of its own, gone when the run ends
        record = thread_record(str(uuid.uuid4()), {})
        run = await _start_on(api, record.thread_id, run_request, record)
        if delete:
            api.forget_later(run)
        return run
    found = api.records_of(thread_id).thread(thread_id)
    if found is None:
        if body.if_not_exists != "create":
            raise ApiError(
                404, f"thread {thread_id} not found; create it, or send if_not_exists='create'"
            )
        record = thread_record(creatable(thread_id), {})
        return await _start_on(api, thread_id, run_request, record)
    return await _start_on(api, thread_id, run_request, existing=owned(found, thread_id))


def checked_run(api: Api, body: Mapping[str, Any]) -> tuple[RunCreate, RunRequest]:
    """``body`` (a run's, as ``POST /threads/{thread_id}/runs`` takes it), checked as the runs
    routes check it: an :class:`ApiError` naming what is wrong."""
    parsed = parse(RunCreate, body)
    return parsed, _run_request(api, parsed)


async def start_from_body(
    api: Api, body: Mapping[str, Any], thread_id: str | None, *, run_id: str | None = None
) -> ActiveRun:
    """Start the run ``body`` asks for on the thread (``None``: stateless) as the runs routes
    do: the server's own runs (a cron's) come through here, to run as a client's would.
    ``run_id``: the id the server chose for the run (a new one when None)."""
    parsed, run_request = checked_run(api, body)
    if run_id is not None:
        run_request = dataclasses.replace(run_request, run_id=run_id)
    return await _start_body(api, parsed, run_request, thread_id)


def _temporary_thread(run_request: RunRequest) -> ThreadRecord:
    """The record of a stateless run's thread, as :func:`_start_on` would leave it."""
    metadata = {"graph_id": run_request.graph, "assistant_id": run_request.assistant_id}
    record = thread_record(str(uuid.uuid4()), metadata)
    record.assistant_id = run_request.graph
    return record


async def _start_on(
    api: Api,
    thread_id: str,
    run_request: RunRequest,
    new: ThreadRecord | None = None,
    *,
    existing: ThreadRecord | None = None,
) -> ActiveRun:
    """Start the run on the thread: an existing one (its record, if read already), or
    ``new`` (not written yet: the runner writes it with the run)."""
    record = new or existing or api.thread(thread_id)
    runner = api.runner_of(thread_id)
    changed = None
    # the thread's record takes the run's assistant unless another run holds it; the queue
    # sees that as it starts the run, under the thread's lock (it is not asked twice)
    if new is not None or isinstance(runner, QueueRunner) or runner.active(thread_id) is None:
        # written before the run may end elsewhere
        metadata = {
            **record.metadata,
            "graph_id": run_request.graph,
            "assistant_id": run_request.assistant_id,
        }
        # a local run on a thread that names it already: the run's start sets the rest
        same = new is None and metadata == record.metadata and not isinstance(runner, QueueRunner)
        record.metadata = metadata
        record.assistant_id = run_request.graph
        changed = None if same else record
    try:
        run = await runner.astart(thread_id, run_request, changed, new_thread=new is not None)
    except ThreadBusy as exc:
        raise ApiError(409, str(exc)) from exc
    if run_request.webhook is not None and api.webhooks is not None:
        await _webhook_waits(api.webhooks, run, run_request.webhook)
    return run


async def _webhook_waits(webhooks: Webhooks, run: ActiveRun, url: str) -> None:
    """Write the row of the run's webhook, waiting for its end (should that fail, the end
    writes it all the same)."""
    try:
        await webhooks.created(run.record, url)
    except Exception:
        _log.exception("graph-agent serve: could not write run %s's webhook", run.record.run_id)


async def create_run(api: Api, request: Request) -> Response:
    run = await _start(api, request, request.path_params["thread_id"])
    return JSONResponse(run.record.json(), headers=run_location(run))


async def _result(run: ActiveRun, headers: Mapping[str, str] | None = None) -> Response:
    """The run's result, once it ended, as a JSON response."""
    body = await run.result_body()
    return Response(body, headers=headers, media_type=JSONResponse.media_type)


async def wait_run(api: Api, request: Request) -> Response:
    run = await _start(api, request, request.path_params["thread_id"])
    return await _result(run, run_location(run))


async def create_stateless(api: Api, request: Request) -> Response:
    run = await _start(api, request, None)
    return JSONResponse(run.record.json(), headers=run_location(run))


async def wait_stateless(api: Api, request: Request) -> Response:
    run = await _start(api, request, None)
    return await _result(run, run_location(run))


async def stream_run(api: Api, request: Request) -> Response:
    run = await _start(api, request, request.path_params["thread_id"])
    return sse(run.follow(), run, resumable=run.request.stream_resumable)


async def stream_stateless(api: Api, request: Request) -> Response:
    run = await _start(api, request, None)
    return sse(run.follow(), run, resumable=False)


MAX_BATCH = 100
"""The most runs one ``POST /runs/batch`` starts."""


async def create_batch(api: Api, request: Request) -> Response:
    """Start stateless background runs; every body is checked before any run starts."""
    items = await json_objects(request)
    if len(items) > MAX_BATCH:
        raise ApiError(422, f"a batch holds at most {MAX_BATCH} runs, got {len(items)}")
    checked = []
    for index, item in enumerate(items):
        try:
            body = parse(RunCreate, with_trace_context(item, request.headers))
            checked.append((body, _run_request(api, body)))
        except ApiError as exc:
            raise ApiError(exc.status, f"run {index} of the batch: {exc.detail}", exc.code) from exc
    runs = [await _start_body(api, body, run_request, None) for body, run_request in checked]
    return JSONResponse([run.record.json() for run in runs])


def _active_run(api: Api, request: Request) -> ActiveRun | None:
    thread_id, run_id = request.path_params["thread_id"], request.path_params["run_id"]
    if api.records_of(thread_id).run(api.thread(thread_id).thread_id, run_id) is None:
        raise ApiError(404, f"run {run_id} not found on thread {thread_id}")
    return api.runner_of(thread_id).find(run_id)


async def get_run(api: Api, request: Request) -> Response:
    params = request.path_params
    thread_id = api.thread(params["thread_id"]).thread_id
    record = api.records_of(thread_id).run(thread_id, params["run_id"])
    if record is None:
        raise ApiError(404, f"run {params['run_id']} not found on thread {params['thread_id']}")
    return JSONResponse(record.json())


async def list_runs(api: Api, request: Request) -> Response:
    thread_id = api.thread(request.path_params["thread_id"]).thread_id
    limit = int_param(request, "limit", 10)
    offset = int_param(request, "offset", 0)
    status = request.query_params.get("status")
    runs = api.records_of(thread_id).runs(thread_id, limit=limit, offset=offset)
    return JSONResponse([r.json() for r in runs if status in (None, r.status)])


async def delete_run(api: Api, request: Request) -> Response:
    run = _active_run(api, request)
    if run is not None and not run.finished:
        raise ApiError(409, f"run {run.record.run_id} is still running: cancel it first")
    api.records_of(request.path_params["thread_id"]).delete_run(request.path_params["run_id"])
    return Response(status_code=204)


async def join_run(api: Api, request: Request) -> Response:
    run = _active_run(api, request)
    if run is None:  # finished before this server started: the thread holds its result
        record = api.thread(request.path_params["thread_id"])
        values, _ = thread_values(api.thread_runnable(record), record.thread_id)
        return JSONResponse(wire_json(values))
    return await _result(run)


async def join_stream(api: Api, request: Request) -> Response:
    """A run's events, from the one after ``Last-Event-ID`` (from the first without it),
    live while it runs; replayed from the records once it ended."""
    after = last_event(request)
    run = _active_run(api, request)
    if run is not None:
        return sse(run.follow(after), run, resumable=True)
    params = request.path_params
    records = api.records_of(params["thread_id"])
    record: RunRecord | None = records.run(params["thread_id"], params["run_id"])
    assert record is not None  # _active_run checked it

    async def stored() -> AsyncIterator[tuple[int, str, str]]:
        for item in records.events(record.run_id, after):
            yield item

    return sse(stored(), record, resumable=True)


async def cancel_run(api: Api, request: Request) -> Response:
    run = _active_run(api, request)
    action = request.query_params.get("action", "interrupt")
    if action not in ("interrupt", "rollback"):
        raise ApiError(422, f"cancel action {action!r} is not supported; use interrupt or rollback")
    if run is not None and not run.finished:
        how: CancelAction = "rollback" if action == "rollback" else "interrupt"
        runner = api.runner_of(run.record.thread_id)
        await runner.cancel(run, wait=flag(request, "wait"), action=how)
    return Response(status_code=204)


_T, _R = "/threads/{thread_id}", "/threads/{thread_id}/runs/{run_id}"
_SSE = "text/event-stream"
OPERATIONS = [
    Operation(
        "POST",
        f"{_T}/runs",
        create_run,
        "Start a background run",
        Run,
        body=RunCreate,
        errors=(404, 409, 422),
    ),
    Operation(
        "GET",
        f"{_T}/runs",
        list_runs,
        "The thread's runs, newest first",
        list[Run],
        errors=(404, 422),
        query=(
            Query("limit", {"type": "integer", "minimum": 0}, "at most this many (default 10)"),
            Query("offset", {"type": "integer", "minimum": 0}, "skip this many (default 0)"),
            Query("status", {"enum": list(get_args(RunStatus))}, "only runs in this status"),
        ),
    ),
    Operation(
        "POST",
        f"{_T}/runs/wait",
        wait_run,
        "Run and answer the final values",
        RunResult,
        body=RunCreate,
        errors=(404, 409, 422),
    ),
    Operation(
        "POST",
        f"{_T}/runs/stream",
        stream_run,
        "Run and stream its events",
        StreamEvent,
        media=_SSE,
        body=RunCreate,
        errors=(404, 409, 422),
    ),
    Operation("GET", _R, get_run, "A run", Run, errors=(404,)),
    Operation("DELETE", _R, delete_run, "Forget a finished run", None, errors=(404, 409)),
    Operation(
        "GET", f"{_R}/join", join_run, "Wait for a run; its final values", RunResult, errors=(404,)
    ),
    Operation(
        "GET",
        f"{_R}/stream",
        join_stream,
        "A run's events, from the first",
        StreamEvent,
        media=_SSE,
        errors=(404,),
    ),
    Operation(
        "POST",
        f"{_R}/cancel",
        cancel_run,
        "Cancel a run (the node it is running is stopped)",
        None,
        errors=(404, 422),
        query=(
            Query("wait", {"type": "boolean"}, "answer once the run has stopped"),
            Query("action", {"enum": ["interrupt", "rollback"]}, "how to cancel"),
        ),
    ),
    Operation(
        "POST",
        "/runs/wait",
        wait_stateless,
        "Run on a thread of its own and answer the final values",
        RunResult,
        body=RunCreate,
        errors=(404, 422),
    ),
    Operation(
        "POST",
        "/runs/stream",
        stream_stateless,
        "Run on a thread of its own and stream its events",
        StreamEvent,
        media=_SSE,
        body=RunCreate,
        errors=(404, 422),
    ),
    Operation(
        "POST",
        "/runs/batch",
        create_batch,
        f"Start background runs, each on a thread of its own (at most {MAX_BATCH})",
        list[Run],
        body=RunCreate,
        many=True,
        errors=(404, 422),
    ),
    Operation(
        "POST",
        "/runs",
        create_stateless,
        "Start a background run on a thread of its own",
        Run,
        body=RunCreate,
        errors=(404, 422),
    ),
]
