"""``/runs/crons`` and ``/threads/{thread_id}/runs/crons``: runs started on a schedule
(:mod:`graph_agent.serve.crons`), in LangGraph Server's shapes, so ``client.crons`` works.

A cron's body is checked as a run's is (the assistant is served, the input's keys are its,
the breakpoints name its nodes) and so are its schedule, time zone and ``end_time``: a 422
names what is wrong. A cron belongs to the key that made it (``metadata["owner"]``, as a
thread does): another key is told it does not exist.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from graph_agent.serve import crons_schedule
from graph_agent.serve.api import Api, ApiError, Operation, json_body, parse
from graph_agent.serve.auth import owns, stamp_owner
from graph_agent.serve.bodies import JSONResponse
from graph_agent.serve.crons import Crons, install_crons
from graph_agent.serve.crons_schedule import CronRecord, owned_metadata, stamp
from graph_agent.serve.models_crons import (
    RUN_FIELDS,
    Cron,
    CronCount,
    CronCreate,
    CronSearch,
    CronUpdate,
)
from graph_agent.serve.records import matches
from graph_agent.serve.routes.runs import checked_run, start_from_body

__all__ = ["OPERATIONS"]


def _crons(api: Api) -> Crons:
    if api.crons is None:  # an Api made without create_app
        install_crons(api, start_from_body)
    assert isinstance(api.crons, Crons)
    return api.crons


def _payload(raw: dict[str, Any]) -> dict[str, Any]:
    """What of a cron's body its runs are started with."""
    return {key: value for key, value in raw.items() if key in RUN_FIELDS and value is not None}


def _check_schedule(schedule: str, timezone: str | None) -> None:
    problem = crons_schedule.schedule_problem(schedule, timezone)
    if problem is not None:
        raise ApiError(422, problem, "invalid_schedule")


def _end_time(text: str, moment: datetime) -> str:
    try:
        end = crons_schedule.end_time_of(text)
    except ValueError as exc:
        raise ApiError(422, str(exc), "invalid_end_time") from None
    if end <= moment:
        problem = f"end_time {text!r:.60} is not in the future: no run would start"
        raise ApiError(422, problem, "invalid_end_time")
    return stamp(end)


async def _create(api: Api, request: Request, thread_id: str | None) -> Response:
    raw = await json_body(request)
    body = parse(CronCreate, raw)
    payload = _payload(raw)
    checked_run(api, payload)
    _check_schedule(body.schedule, body.timezone)
    moment = crons_schedule.now()
    record = CronRecord(
        cron_id=str(uuid.uuid4()),
        assistant_id=body.assistant_id,
        thread_id=thread_id,
        schedule=body.schedule,
        timezone=body.timezone,
        payload=payload,
        metadata=stamp_owner(body.metadata or {}, "crons"),
        on_run_completed=(body.on_run_completed or "delete") if thread_id is None else None,
        end_time=None if body.end_time is None else _end_time(body.end_time, moment),
        enabled=body.enabled is not False,
        created_at=stamp(moment),
        updated_at=stamp(moment),
    )
    record.next_run_date = record.plan(moment)
    await _crons(api).store.put(record)
    return JSONResponse(record.json())


async def create_cron(api: Api, request: Request) -> Response:
    return await _create(api, request, None)


async def create_thread_cron(api: Api, request: Request) -> Response:
    return await _create(api, request, api.thread(request.path_params["thread_id"]).thread_id)


async def _owned(api: Api, cron_id: str) -> CronRecord:
    found = await _crons(api).store.get(cron_id)
    if found is None or not owns(found.metadata, "crons"):
        raise ApiError(404, f"cron {cron_id} not found")
    return found


async def update_cron(api: Api, request: Request) -> Response:
    raw = await json_body(request)
    body = parse(CronUpdate, raw)
    cron = await _owned(api, request.path_params["cron_id"])
    changes = {key: value for key, value in _payload(raw).items() if key != "assistant_id"}
    payload = {**cron.payload, **changes}
    checked_run(api, payload)
    moment = crons_schedule.now()
    timing = (cron.schedule, cron.timezone, cron.end_time, cron.enabled)
    cron.schedule = body.schedule if body.schedule is not None else cron.schedule
    cron.timezone = body.timezone if "timezone" in body.model_fields_set else cron.timezone
    _check_schedule(cron.schedule, cron.timezone)
    if "end_time" in raw:  # sent as null: no end any more
        end_time = raw["end_time"]
        cron.end_time = None if end_time is None else _end_time(str(body.end_time), moment)
    if body.enabled is not None:
        cron.enabled = body.enabled
    if body.on_run_completed is not None and cron.thread_id is None:
        cron.on_run_completed = body.on_run_completed
    if body.metadata is not None:
        cron.metadata = owned_metadata(cron.metadata, body.metadata)
    cron.payload = payload
    cron.updated_at = stamp(moment)
    retimed = timing != (cron.schedule, cron.timezone, cron.end_time, cron.enabled)
    if retimed:
        cron.next_run_date = cron.plan(moment)
    await _crons(api).store.put(cron, next_too=retimed)
    return JSONResponse(cron.json())


async def delete_cron(api: Api, request: Request) -> Response:
    cron = await _owned(api, request.path_params["cron_id"])
    await _crons(api).store.delete(cron.cron_id)
    return Response(status_code=204)


async def _found(api: Api, body: CronCount, enabled: bool | None = None) -> list[CronRecord]:
    found = await _crons(api).store.search(body.assistant_id, body.thread_id)
    return [
        cron
        for cron in found
        if owns(cron.metadata, "crons")
        and matches(cron.metadata, body.metadata)
        and enabled in (None, cron.enabled)
    ]


async def search_crons(api: Api, request: Request) -> Response:
    body = parse(CronSearch, await json_body(request))
    found = [cron.json() for cron in await _found(api, body, body.enabled)]
    found.sort(
        key=lambda cron: (cron[body.sort_by] is None, str(cron[body.sort_by] or "")),
        reverse=body.sort_order == "desc",
    )
    page = found[body.offset : body.offset + body.limit]
    if body.select is not None:
        fields = {"cron_id", *body.select}
        page = [{key: value for key, value in cron.items() if key in fields} for cron in page]
    return JSONResponse(page)


async def count_crons(api: Api, request: Request) -> Response:
    body = parse(CronCount, await json_body(request))
    return JSONResponse(len(await _found(api, body)))


_C = "/runs/crons/{cron_id}"
OPERATIONS = [
    Operation(
        "POST",
        "/runs/crons",
        create_cron,
        "Schedule runs, each on a new thread",
        Cron,
        body=CronCreate,
        errors=(404, 422),
    ),
    Operation(
        "POST",
        "/threads/{thread_id}/runs/crons",
        create_thread_cron,
        "Schedule runs on a thread",
        Cron,
        body=CronCreate,
        errors=(404, 422),
    ),
    Operation(
        "POST",
        "/runs/crons/search",
        search_crons,
        "Search crons",
        list[Cron],
        body=CronSearch,
        errors=(422,),
    ),
    Operation(
        "POST",
        "/runs/crons/count",
        count_crons,
        "Count crons",
        {"type": "integer", "minimum": 0},
        body=CronCount,
        errors=(422,),
    ),
    Operation("PATCH", _C, update_cron, "Change a cron", Cron, body=CronUpdate, errors=(404, 422)),
    Operation("DELETE", _C, delete_cron, "Delete a cron", None, errors=(404,)),
]
