"""``/threads``: threads, their state and its history."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from graph_agent.graph.concurrency import to_thread
from graph_agent.graph.errors import GraphAgentError
from graph_agent.graph.types import RunnableConfig
from graph_agent.serve.api import (
    Api,
    ApiError,
    Operation,
    Query,
    creatable,
    flag,
    read,
    thread_record,
    wire,
)
from graph_agent.serve.auth import owns
from graph_agent.serve.bodies import JSONResponse
from graph_agent.serve.models import (
    CheckpointRequest,
    HistoryRequest,
    Thread,
    ThreadCreate,
    ThreadSearch,
    ThreadState,
    ThreadStateUpdate,
    ThreadStateUpdated,
)
from graph_agent.serve.records import ThreadRecord, matches
from graph_agent.serve.retention import set_ttl
from graph_agent.serve.runs import Runnable, thread_values
from graph_agent.serve.wire import checkpoint_json, input_from_json, snapshot_json
from graph_agent.serve.wire import to_json as wire_json

__all__ = ["OPERATIONS", "drop_thread"]


def thread_json(api: Api, record: ThreadRecord) -> dict[str, Any]:
    values, snapshot = thread_values(api.thread_runnable(record), record.thread_id)
    interrupts: dict[str, list[Any]] = {}
    if snapshot is not None:
        for task in snapshot.tasks:
            if task.interrupts:
                interrupts[task.id] = wire_json(list(task.interrupts))
    return {
        "thread_id": record.thread_id,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "metadata": record.metadata,
        "status": record.status,
        "values": wire_json(values),
        "interrupts": interrupts,
    }


def _new_thread(api: Api, thread_id: str, metadata: dict[str, Any]) -> ThreadRecord:
    record = thread_record(thread_id, metadata)
    api.records.put_thread(record)
    return record


async def create_thread(api: Api, request: Request) -> Response:
    body = await read(request, ThreadCreate)
    thread_id = creatable(body.thread_id or str(uuid.uuid4()))
    existing = api.records_of(thread_id).thread(thread_id)
    if existing is not None:
        if body.if_exists == "do_nothing" and owns(existing.metadata):
            return JSONResponse(thread_json(api, existing))
        raise ApiError(409, f"thread {thread_id} already exists; send if_exists='do_nothing'")
    record = _new_thread(api, thread_id, body.metadata)
    set_ttl(api, record, body.ttl)
    return JSONResponse(thread_json(api, record))


async def get_thread(api: Api, request: Request) -> Response:
    return JSONResponse(thread_json(api, api.thread(request.path_params["thread_id"])))


async def search_threads(api: Api, request: Request) -> Response:
    body = await read(request, ThreadSearch)
    found = [
        record
        for record in api.records.threads()
        if owns(record.metadata)
        and matches(record.metadata, body.metadata)
        and body.status in (None, record.status)
        and (body.ids is None or record.thread_id in body.ids)
    ]
    page = found[body.offset : body.offset + body.limit]
    return JSONResponse([thread_json(api, r) for r in page])


async def delete_thread(api: Api, request: Request) -> Response:
    await drop_thread(api, api.thread(request.path_params["thread_id"]))
    return Response(status_code=204)


async def drop_thread(api: Api, record: ThreadRecord) -> None:
    """Delete the thread: its run stopped first, then its checkpoints and records."""
    runner = api.runner_of(record.thread_id)
    active = runner.active(record.thread_id)
    if active is not None:
        await runner.cancel(active, wait=True)
    await to_thread(api.saver.delete_thread, record.thread_id)
    api.records_of(record.thread_id).delete_thread(record.thread_id)


async def copy_thread(api: Api, request: Request) -> Response:
    source = api.thread(request.path_params["thread_id"])
    copy = _new_thread(api, str(uuid.uuid4()), dict(source.metadata))

    def copy_checkpoints() -> None:
        if api.saver.get(source.thread_id) is not None:  # one that never ran has none
            api.saver.copy_thread(source.thread_id, copy.thread_id)

    await to_thread(copy_checkpoints)
    copy.assistant_id = source.assistant_id
    copy.status = "interrupted" if source.status == "interrupted" else "idle"
    api.records.put_thread(copy)
    return JSONResponse(thread_json(api, copy))


# thread state


async def _off_loop(api: Api, thread_id: str, read_it: Callable[[], Any]) -> Any:
    """``read_it()`` (a thread's state or history read from its saver, as the response) in a
    worker thread, as every saver call: a long history read on the event loop would stall
    every other request and run meanwhile. A temporary thread's, in memory, at once."""
    if api.local.holds(thread_id):
        return read_it()
    return await to_thread(read_it)


def _no_state(config: RunnableConfig) -> dict[str, Any]:
    """The state of a thread nothing ran on."""
    return {
        "values": {},
        "next": [],
        "checkpoint": checkpoint_json(config),
        "metadata": {},
        "created_at": None,
        "parent_checkpoint": None,
        "tasks": [],
        "interrupts": [],
    }


async def _state(api: Api, thread_id: str, checkpoint_id: str | None, subgraphs: bool) -> Response:
    record = api.thread(thread_id)
    runnable = api.thread_runnable(record)
    config = RunnableConfig(thread_id=thread_id, checkpoint_id=checkpoint_id)
    if runnable is None and checkpoint_id is not None:  # nothing ran: no checkpoint at all
        raise ApiError(404, f"thread {thread_id} has no checkpoint {checkpoint_id}")
    if runnable is None:
        return JSONResponse(_no_state(config))

    def read_state() -> Response | None:
        snapshot = runnable.get_state(config, subgraphs=subgraphs)
        if checkpoint_id is not None and snapshot.created_at is None:
            return None  # no such checkpoint
        return JSONResponse(snapshot_json(snapshot))

    response: Response | None = await _off_loop(api, thread_id, read_state)
    if response is None:
        raise ApiError(404, f"thread {thread_id} has no checkpoint {checkpoint_id}")
    return response


async def get_state(api: Api, request: Request) -> Response:
    return await _state(api, request.path_params["thread_id"], None, flag(request, "subgraphs"))


async def get_state_at(api: Api, request: Request) -> Response:
    params = request.path_params
    return await _state(
        api, params["thread_id"], params["checkpoint_id"], flag(request, "subgraphs")
    )


async def get_state_at_body(api: Api, request: Request) -> Response:
    body = await read(request, CheckpointRequest)
    return await _state(api, request.path_params["thread_id"], body.target(), False)


def _state_runnable(api: Api, record: ThreadRecord) -> Runnable:
    runnable = api.thread_runnable(record)
    if runnable is None:
        raise ApiError(
            409, f"thread {record.thread_id} has not run yet: it has no graph, hence no state"
        )
    return runnable


async def update_state(api: Api, request: Request) -> Response:
    record = api.thread(request.path_params["thread_id"])
    body = await read(request, ThreadStateUpdate)
    runnable = _state_runnable(api, record)
    if api.runner_of(record.thread_id).active(record.thread_id) is not None:
        raise ApiError(409, f"thread {record.thread_id} is busy: wait for its run to finish")
    api.check_keys(api.thread_graph(record) or "", body.values, "values")
    values = wire(input_from_json, body.values)
    config = RunnableConfig(thread_id=record.thread_id, checkpoint_id=body.target())
    try:
        new_config = runnable.update_state(config, values or {}, body.as_node)
    except (GraphAgentError, ValueError, TypeError, KeyError) as exc:
        raise ApiError(422, f"cannot update thread {record.thread_id}: {exc}") from exc
    return JSONResponse({"checkpoint": checkpoint_json(new_config)})


async def history(api: Api, request: Request) -> Response:
    record = api.thread(request.path_params["thread_id"])
    body = await read(request, HistoryRequest)
    runnable = api.thread_runnable(record)
    if runnable is None:
        return JSONResponse([])
    config = RunnableConfig(thread_id=record.thread_id)

    def read_history() -> Response:
        snapshots = runnable.get_state_history(config, limit=body.limit, before=body.before)
        return JSONResponse([snapshot_json(snapshot) for snapshot in snapshots])

    response: Response = await _off_loop(api, record.thread_id, read_history)
    return response


_T = "/threads/{thread_id}"
_SUBGRAPHS = Query("subgraphs", {"type": "boolean"}, "include subgraphs' states")
OPERATIONS = [
    Operation(
        "POST",
        "/threads",
        create_thread,
        "Create a thread",
        Thread,
        body=ThreadCreate,
        errors=(409, 422),
    ),
    Operation(
        "POST",
        "/threads/search",
        search_threads,
        "Search threads by metadata",
        list[Thread],
        body=ThreadSearch,
        errors=(422,),
    ),
    Operation("GET", _T, get_thread, "A thread", Thread, errors=(404,)),
    Operation(
        "DELETE", _T, delete_thread, "Delete a thread (its run is cancelled)", None, errors=(404,)
    ),
    Operation(
        "POST",
        f"{_T}/copy",
        copy_thread,
        "Copy a thread with its checkpoints",
        Thread,
        errors=(404,),
    ),
    Operation(
        "GET",
        f"{_T}/state",
        get_state,
        "The thread's newest state",
        ThreadState,
        errors=(404,),
        query=(_SUBGRAPHS,),
    ),
    Operation(
        "POST",
        f"{_T}/state",
        update_state,
        "Write values into the thread's state",
        ThreadStateUpdated,
        body=ThreadStateUpdate,
        errors=(404, 409, 422),
    ),
    Operation(
        "POST",
        f"{_T}/state/checkpoint",
        get_state_at_body,
        "The thread's state at a checkpoint",
        ThreadState,
        body=CheckpointRequest,
        errors=(404, 422),
    ),
    Operation(
        "GET",
        f"{_T}/state/{{checkpoint_id}}",
        get_state_at,
        "The thread's state at a checkpoint",
        ThreadState,
        errors=(404,),
        query=(_SUBGRAPHS,),
    ),
    Operation(
        "POST",
        f"{_T}/history",
        history,
        "The thread's states, newest first",
        list[ThreadState],
        body=HistoryRequest,
        errors=(404, 422),
    ),
]
