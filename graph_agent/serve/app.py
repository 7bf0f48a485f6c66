"""The HTTP API: LangGraph Server's paths and bodies over graph_agent graphs and agents.

:func:`create_app` returns a Starlette app; ``graph-agent serve`` runs it under uvicorn. Every
error is a JSON body ``{"detail": ..., "code": ...}`` with a 4xx status saying what to fix
(:mod:`graph_agent.serve.errors`); API keys and thread ownership are in
:mod:`graph_agent.serve.auth`, the body size limit in :mod:`graph_agent.serve.limits`, the
``Host``/``Origin``/``Content-Type`` checks that keep web pages off it in
:mod:`graph_agent.serve.guard`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.graph.concurrency import to_thread
from graph_agent.graph.errors import GraphAgentError
from graph_agent.graph.types import RunnableConfig
from graph_agent.observability.propagation import with_trace_context
from graph_agent.serve.auth import ApiKeyMiddleware, callers, owns, stamp_owner
from graph_agent.serve.bodies import BodyError, JSONResponse, read_json
from graph_agent.serve.errors import error_response
from graph_agent.serve.guard import guard_middleware, is_json_type, json_type_problem
from graph_agent.serve.ids import (
    MAX_COUNT,
    count_param,
    history_before,
    last_event_id,
    thread_id_problem,
)
from graph_agent.serve.inputs import InputKeys
from graph_agent.serve.limits import DEFAULT_MAX_BODY_BYTES, BodyLimitMiddleware
from graph_agent.serve.openapi import docs_html, openapi_document
from graph_agent.serve.pg_records import PostgresRecords
from graph_agent.serve.queue import QueueRunner
from graph_agent.serve.records import Records, RunRecord, ThreadRecord, matches, now
from graph_agent.serve.runs import (
    MULTITASK_STRATEGIES,
    STREAM_MODES,
    ActiveRun,
    Runnable,
    Runner,
    RunRequest,
    ThreadBusy,
    thread_values,
)
from graph_agent.serve.schemas import (
    DIAGRAM_FORMATS,
    graph_json,
    graph_text,
    subgraph_schemas,
    xray_depth,
)
from graph_agent.serve.studio import studio_routes
from graph_agent.serve.targets import (
    Servable,
    assistant_kind,
    assistants_on,
    graph_of,
    served_targets,
)
from graph_agent.serve.tasks import cancel_and_await
from graph_agent.serve.wire import WireError, checkpoint_json, input_from_json, snapshot_json
from graph_agent.serve.wire import to_json as wire_json

__all__ = ["ApiError", "assistants_on", "create_app"]

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Response]]


class ApiError(Exception):
    """A request the API refuses: answered with ``status`` and ``{"detail": detail, "code":
    code}`` (``code`` defaults to the status's word, see :data:`errors.CODES`)."""

    def __init__(self, status: int, detail: str, code: str | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.code = code


def create_app(
    targets: Mapping[str, Servable] | Sequence[Servable],
    *,
    saver: CheckpointSaver | None = None,
    records: Records | PostgresRecords | None = None,
    work: bool = True,
    api_keys: Iterable[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    input_keys: Mapping[str, Iterable[str]] | None = None,
    key_groups: Mapping[str, Iterable[str]] | None = None,
    shared_threads: bool = False,
    studio: bool = True,
    bound_host: str | None = None,
    allow_hosts: Iterable[str] = (),
    cors_origins: Iterable[str] = (),
    insecure_no_auth: bool = False,
) -> Starlette:
    """A LangGraph-Server-compatible app serving ``targets``.

    Args:
        targets: What to serve, by assistant id (a sequence: by their names): anything
            runnable (a compiled graph, an agent, a team of agents) runs as a copy on
            ``saver`` (``with_saver``: the object given keeps its own); a StateGraph is
            compiled on it.
        saver: Where threads' checkpoints live (default: a MemorySaver).
        records: Where thread and run records live (default: in memory). With
            :class:`PostgresRecords` runs are durable jobs in PostgreSQL that every process on
            the database may claim (see :mod:`graph_agent.serve.queue`).
        work: In PostgreSQL mode, whether this process also runs runs (not only serves).
        api_keys: The keys a request must carry (``x-api-key`` or ``Authorization: Bearer``);
            each sees only the threads it created. None: no check (for loopback only).
        max_body_bytes: A larger request body is refused with a 413.
        input_keys: Per assistant id, the only state keys a client may send (default: any
            key but the graph's private ones).
        key_groups: More valid keys, by group name: the keys of a group see each other's
            threads (see :mod:`graph_agent.serve.auth`).
        shared_threads: Every valid key sees every thread.
        studio: Also serve the Studio page at ``/studio`` (:mod:`graph_agent.serve.studio`).
        bound_host: The address the server listens on. Without keys a request's ``Host`` must
            name it, ``localhost``, ``127.0.0.1``, ``[::1]`` or one of ``allow_hosts``
            (:mod:`graph_agent.serve.guard`); None: not it.
        allow_hosts: More host names a keyless server answers to (``*``: any, only with
            ``insecure_no_auth``).
        cors_origins: The origins, besides its own, whose web pages may call the server (they
            get CORS answers; ``*``: any, without keys only with ``insecure_no_auth``). Other
            pages' requests are a 403.
        insecure_no_auth: Without keys, take ``*`` in ``allow_hosts`` and ``cors_origins``
            all the same (``--insecure-no-auth``: a proxy in front checks who calls).

    Raises:
        ValueError: ``input_keys`` names an assistant not served or a private key, a key is
            in two groups, an allowed host or CORS origin is not one, or is ``*`` without
            keys nor ``insecure_no_auth``.

    Example:
        >>> from graph_agent import StateGraph, START, END
        >>> graph = StateGraph("inc")
        >>> _ = graph.add_node("inc", lambda state: {"x": state["x"] + 1})
        >>> _ = graph.add_edge(START, "inc").add_edge("inc", END)
        >>> app = create_app([graph])
        >>> sorted(route.path for route in app.routes)[:2]
        ['/assistants/search', '/assistants/{assistant_id}']
    """
    store = saver if saver is not None else MemorySaver()
    served = served_targets(targets, store, input_keys)
    api = _Api(served.runnables, store, records if records is not None else Records())
    if isinstance(records, PostgresRecords):
        api.runner = QueueRunner(api.assistants, records, work=work)
        # a working process runs stateless runs here, in memory (see Runner.start_temporary)
        api.local = Runner(api.assistants, Records()) if work else api.runner
    api.input_keys = served.input_keys
    api.schemas = served.schemas
    access = callers(api_keys, key_groups, shared=shared_threads)
    guards = guard_middleware(
        keyed=bool(access),
        bound_host=bound_host,
        allow_hosts=allow_hosts,
        cors_origins=cors_origins,
        insecure_no_auth=insecure_no_auth,
    )
    return Starlette(
        routes=api.routes() + (studio_routes(keys_required=bool(access)) if studio else []),
        exception_handlers={ApiError: _api_error, HTTPException: _http_error, 500: _crash},
        lifespan=api.lifespan,
        middleware=[
            *guards,
            Middleware(ApiKeyMiddleware, keys=access),
            Middleware(BodyLimitMiddleware, max_body_bytes=max_body_bytes),
        ],
    )


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.detail, exc.code)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(exc.status_code, exc.detail, headers=exc.headers)


async def _crash(request: Request, exc: Exception) -> Response:
    return error_response(500, "internal server error: the server's log says more")


class _Api:
    def __init__(
        self,
        assistants: dict[str, Runnable],
        saver: CheckpointSaver,
        records: Records | PostgresRecords,
    ) -> None:
        self.assistants = assistants
        self.saver = saver
        self.records = records
        self.runner: Runner = Runner(assistants, records)  # type: ignore[arg-type]
        self.local: Runner = self.runner
        """The runner of temporary threads (stateless runs that delete their thread): the
        same one on SQLite; in PostgreSQL mode, one of this process's, in memory."""
        self.created_at = now()
        self.input_keys: dict[str, InputKeys] = {}
        self.schemas: dict[str, dict[str, Any]] = {}
        self._forgetting: set[asyncio.Task[None]] = set()
        """The stateless runs' threads to delete once their runs end (:meth:`_forget`)."""

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        if isinstance(self.runner, QueueRunner):
            await self.runner.open()
        try:
            yield
        finally:
            # the runs still running stop now, while the records and savers they write to
            # are open (the caller closes those once the server returned); so does the wait
            # to delete a stateless run's thread, which reads the records
            await cancel_and_await(list(self._forgetting))
            if self.local is not self.runner:  # PostgreSQL mode's in-memory one
                await self.local.close()
                self.local.records.close()
            await self.runner.close()

    def routes(self) -> list[Route]:
        t, r = "/threads/{thread_id}", "/threads/{thread_id}/runs/{run_id}"
        table: list[tuple[str, str, Handler]] = [
            ("GET", "/ok", self.ok),
            ("GET", "/openapi.json", self.openapi),
            ("GET", "/docs", self.docs),
            ("POST", "/assistants/search", self.search_assistants),
            ("GET", "/assistants/{assistant_id}", self.get_assistant),
            ("GET", "/assistants/{assistant_id}/graph", self.get_graph),
            ("GET", "/assistants/{assistant_id}/schemas", self.get_schemas),
            ("GET", "/assistants/{assistant_id}/subgraphs", self.get_subgraphs),
            ("GET", "/assistants/{assistant_id}/subgraphs/{namespace}", self.get_subgraphs),
            ("POST", "/threads", self.create_thread),
            ("POST", "/threads/search", self.search_threads),
            ("GET", t, self.get_thread),
            ("DELETE", t, self.delete_thread),
            ("POST", f"{t}/copy", self.copy_thread),
            ("GET", f"{t}/state", self.get_state),
            ("POST", f"{t}/state", self.update_state),
            ("POST", f"{t}/state/checkpoint", self.get_state_at_body),
            ("GET", f"{t}/state/{{checkpoint_id}}", self.get_state_at),
            ("POST", f"{t}/history", self.history),
            ("POST", f"{t}/runs", self.create_run),
            ("GET", f"{t}/runs", self.list_runs),
            ("POST", f"{t}/runs/wait", self.wait_run),
            ("POST", f"{t}/runs/stream", self.stream_run),
            ("GET", r, self.get_run),
            ("DELETE", r, self.delete_run),
            ("GET", f"{r}/join", self.join_run),
            ("GET", f"{r}/stream", self.join_stream),
            ("POST", f"{r}/cancel", self.cancel_run),
            ("POST", "/runs/wait", self.wait_stateless),
            ("POST", "/runs/stream", self.stream_stateless),
        ]
        # Starlette tries routes in order, a regular expression each (the 26 before it were 8%
        # of what a stateless runs/wait cost): runs first, those without a thread before all.
        # No two routes take the same method and path, so the order changes nothing else.
        table.sort(key=lambda row: (not row[1].startswith("/runs"), "/runs" not in row[1]))
        return [Route(path, handler, methods=[method]) for method, path, handler in table]

    async def ok(self, request: Request) -> Response:
        if isinstance(self.runner, QueueRunner) and self.runner.work:
            return JSONResponse({"ok": True, "worker": self.runner.worker_key})
        return JSONResponse({"ok": True})

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(openapi_document(sorted(self.assistants)))

    async def docs(self, request: Request) -> Response:
        return HTMLResponse(docs_html(openapi_document(sorted(self.assistants))))

    # assistants
    def _assistant_json(self, assistant_id: str) -> dict[str, Any]:
        return {
            "assistant_id": assistant_id,
            "graph_id": assistant_id,
            "name": assistant_id,
            "description": None,
            "config": {},
            "context": {},
            "metadata": {"created_by": "system", "kind": self._kind(assistant_id)},
            "version": 1,
            "created_at": self.created_at,
            "updated_at": self.created_at,
        }

    def _kind(self, assistant_id: str) -> str:
        """``agent`` (an agent or a team: takes a question) or ``graph``, for clients like
        ``graph-agent run --url``."""
        return assistant_kind(self.assistants[assistant_id])

    def _runnable(self, assistant_id: Any) -> Runnable:
        if not isinstance(assistant_id, str):
            raise ApiError(422, "assistant_id must be a string naming a served graph or agent")
        runnable = self.assistants.get(assistant_id)
        if runnable is None:
            known = ", ".join(sorted(self.assistants))
            raise ApiError(404, f"assistant {assistant_id!r} not found; this server has: {known}")
        return runnable

    async def search_assistants(self, request: Request) -> Response:
        body = await _body(request)
        limit, offset = _page(body)
        wanted = _field(body, "metadata", dict, {})
        graph_id = _field(body, "graph_id", str, None)
        name = _field(body, "name", str, None)
        found = [
            self._assistant_json(assistant_id)
            for assistant_id in self.assistants
            if graph_id in (None, assistant_id)
            and (name is None or name in assistant_id)
            and matches({"created_by": "system"}, wanted)
        ]
        return JSONResponse(found[offset : offset + limit])

    async def get_assistant(self, request: Request) -> Response:
        assistant_id = request.path_params["assistant_id"]
        self._runnable(assistant_id)
        return JSONResponse(self._assistant_json(assistant_id))

    async def get_graph(self, request: Request) -> Response:
        """The graph as LangGraph's JSON, or as ``?format=mermaid|dot|plantuml|ascii`` text;
        ``?xray=`` opens subgraph nodes (``true``, or how many levels)."""
        runnable = self._runnable(request.path_params["assistant_id"])
        view = graph_of(runnable).view
        fmt = request.query_params.get("format", "json")
        if fmt not in DIAGRAM_FORMATS:
            formats = ", ".join(DIAGRAM_FORMATS)
            raise ApiError(422, f"format {fmt!r} is not supported; use {formats}")
        try:
            depth = xray_depth(request.query_params.get("xray"))
        except ValueError as exc:
            raise ApiError(422, str(exc)) from exc
        if fmt == "json":
            return JSONResponse(graph_json(view, depth))
        if fmt == "svg":  # Graphviz runs as a subprocess: not on the event loop
            svg = await to_thread(graph_text, view, fmt, depth)
            return Response(svg, media_type="image/svg+xml")
        return PlainTextResponse(graph_text(view, fmt, depth))

    async def get_schemas(self, request: Request) -> Response:
        assistant_id = request.path_params["assistant_id"]
        self._runnable(assistant_id)
        return JSONResponse(self.schemas[assistant_id])

    async def get_subgraphs(self, request: Request) -> Response:
        """The schemas of the graphs an assistant's nodes run, by namespace (``node``,
        ``node|child``); ``?recurse=true`` goes all the way down."""
        assistant_id = request.path_params["assistant_id"]
        runnable = self._runnable(assistant_id)
        graph = graph_of(runnable)
        recurse = request.query_params.get("recurse", "false").lower()
        if recurse not in ("true", "false", "1", "0"):
            raise ApiError(422, f"recurse must be true or false, got {recurse!r}")
        namespace = request.path_params.get("namespace")
        try:
            found = subgraph_schemas(graph, namespace, recurse in ("true", "1"))
        except KeyError as exc:
            raise ApiError(404, f"assistant {assistant_id}: {exc.args[0]}") from exc
        return JSONResponse(found)

    # threads
    def _records_of(self, thread_id: str) -> Records | PostgresRecords:
        """The records holding the thread's: the local runner's for its temporary threads."""
        return self.local.records if self.local.holds(thread_id) else self.records

    def _runner_of(self, thread_id: str) -> Runner:
        return self.local if self.local.holds(thread_id) else self.runner

    def _thread(self, thread_id: str) -> ThreadRecord:
        return _owned(self._records_of(thread_id).thread(thread_id), thread_id)

    def _thread_runnable(self, record: ThreadRecord) -> Runnable | None:
        if record.assistant_id in self.assistants:
            return self._runner_of(record.thread_id).runnable_of(
                record.thread_id, record.assistant_id
            )
        if len(self.assistants) == 1:
            return next(iter(self.assistants.values()))
        return None

    def _thread_json(self, record: ThreadRecord) -> dict[str, Any]:
        values, snapshot = thread_values(self._thread_runnable(record), record.thread_id)
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

    def _new_thread(self, thread_id: str, metadata: dict[str, Any]) -> ThreadRecord:
        record = _thread_record(thread_id, metadata)
        self.records.put_thread(record)
        return record

    async def create_thread(self, request: Request) -> Response:
        body = await _body(request)
        thread_id = _creatable(_field(body, "thread_id", str, None) or str(uuid.uuid4()))
        metadata = _field(body, "metadata", dict, {})
        if_exists = _field(body, "if_exists", str, "raise")
        if if_exists not in ("raise", "do_nothing"):
            raise ApiError(422, f"if_exists must be raise or do_nothing, not {if_exists!r:.40}")
        existing = self._records_of(thread_id).thread(thread_id)
        if existing is not None:
            if if_exists == "do_nothing" and owns(existing.metadata):
                return JSONResponse(self._thread_json(existing))
            raise ApiError(409, f"thread {thread_id} already exists; send if_exists='do_nothing'")
        return JSONResponse(self._thread_json(self._new_thread(thread_id, metadata)))

    async def get_thread(self, request: Request) -> Response:
        return JSONResponse(self._thread_json(self._thread(request.path_params["thread_id"])))

    async def search_threads(self, request: Request) -> Response:
        body = await _body(request)
        limit, offset = _page(body)
        wanted = _field(body, "metadata", dict, {})
        status = _field(body, "status", str, None)
        ids = _field(body, "ids", list, None)
        found = [
            record
            for record in self.records.threads()
            if owns(record.metadata)
            and matches(record.metadata, wanted)
            and status in (None, record.status)
            and (ids is None or record.thread_id in ids)
        ]
        return JSONResponse([self._thread_json(r) for r in found[offset : offset + limit]])

    async def delete_thread(self, request: Request) -> Response:
        record = self._thread(request.path_params["thread_id"])
        runner = self._runner_of(record.thread_id)
        active = runner.active(record.thread_id)
        if active is not None:
            await runner.cancel(active, wait=True)
        await to_thread(self.saver.delete_thread, record.thread_id)
        self._records_of(record.thread_id).delete_thread(record.thread_id)
        return Response(status_code=204)

    async def copy_thread(self, request: Request) -> Response:
        source = self._thread(request.path_params["thread_id"])
        copy = self._new_thread(str(uuid.uuid4()), dict(source.metadata))

        def copy_checkpoints() -> None:
            if self.saver.get(source.thread_id) is not None:  # one that never ran has none
                self.saver.copy_thread(source.thread_id, copy.thread_id)

        await to_thread(copy_checkpoints)
        copy.assistant_id = source.assistant_id
        copy.status = "interrupted" if source.status == "interrupted" else "idle"
        self.records.put_thread(copy)
        return JSONResponse(self._thread_json(copy))

    # thread state
    def _state_runnable(self, record: ThreadRecord) -> Runnable:
        runnable = self._thread_runnable(record)
        if runnable is None:
            raise ApiError(
                409, f"thread {record.thread_id} has not run yet: it has no graph, hence no state"
            )
        return runnable

    async def _off_loop(self, thread_id: str, read: Callable[[], Any]) -> Any:
        """``read()`` (a thread's state or history read from its saver, as the response's JSON
        text) in a worker thread, as every saver call: a long history read on the event loop
        would stall every other request and run meanwhile. A temporary thread's, in memory, at
        once."""
        if self.local.holds(thread_id):
            return read()
        return await to_thread(read)

    async def _state(self, thread_id: str, checkpoint_id: str | None, subgraphs: bool) -> Response:
        record = self._thread(thread_id)
        runnable = self._thread_runnable(record)
        config = RunnableConfig(thread_id=thread_id, checkpoint_id=checkpoint_id)
        if runnable is None and checkpoint_id is not None:  # nothing ran: no checkpoint at all
            raise ApiError(404, f"thread {thread_id} has no checkpoint {checkpoint_id}")
        if runnable is None:
            return JSONResponse(
                {
                    "values": {},
                    "next": [],
                    "checkpoint": checkpoint_json(config),
                    "metadata": {},
                    "created_at": None,
                    "parent_checkpoint": None,
                    "tasks": [],
                    "interrupts": [],
                }
            )

        def read() -> Response | None:
            snapshot = runnable.get_state(config, subgraphs=subgraphs)
            if checkpoint_id is not None and snapshot.created_at is None:
                return None  # no such checkpoint
            return JSONResponse(snapshot_json(snapshot))

        response: Response | None = await self._off_loop(thread_id, read)
        if response is None:
            raise ApiError(404, f"thread {thread_id} has no checkpoint {checkpoint_id}")
        return response

    async def get_state(self, request: Request) -> Response:
        subgraphs = request.query_params.get("subgraphs", "false").lower() in ("true", "1")
        return await self._state(request.path_params["thread_id"], None, subgraphs)

    async def get_state_at(self, request: Request) -> Response:
        subgraphs = request.query_params.get("subgraphs", "false").lower() in ("true", "1")
        params = request.path_params
        return await self._state(params["thread_id"], params["checkpoint_id"], subgraphs)

    async def get_state_at_body(self, request: Request) -> Response:
        body = await _body(request)
        checkpoint_id = _checkpoint_id(body)
        return await self._state(request.path_params["thread_id"], checkpoint_id, False)

    async def update_state(self, request: Request) -> Response:
        record = self._thread(request.path_params["thread_id"])
        body = await _body(request)
        runnable = self._state_runnable(record)
        if self._runner_of(record.thread_id).active(record.thread_id) is not None:
            raise ApiError(409, f"thread {record.thread_id} is busy: wait for its run to finish")
        self._check_keys(str(record.assistant_id), body.get("values"), "values")
        values = _wire(input_from_json, body.get("values"))
        as_node = _field(body, "as_node", str, None)
        config = RunnableConfig(thread_id=record.thread_id, checkpoint_id=_checkpoint_id(body))
        try:
            new_config = runnable.update_state(config, values or {}, as_node)
        except (GraphAgentError, ValueError, TypeError, KeyError) as exc:
            raise ApiError(422, f"cannot update thread {record.thread_id}: {exc}") from exc
        return JSONResponse({"checkpoint": checkpoint_json(new_config)})

    async def history(self, request: Request) -> Response:
        record = self._thread(request.path_params["thread_id"])
        body = await _body(request)
        limit = _field(body, "limit", int, 10)
        if not 0 <= limit <= MAX_COUNT:
            raise ApiError(422, f"limit must be an integer from 0 to {MAX_COUNT}")
        try:
            before = history_before(body.get("before"))
        except ValueError as exc:
            raise ApiError(422, str(exc)) from exc
        runnable = self._thread_runnable(record)
        if runnable is None:
            return JSONResponse([])
        config = RunnableConfig(thread_id=record.thread_id)

        def read() -> Response:
            snapshots = runnable.get_state_history(config, limit=limit, before=before)
            return JSONResponse([snapshot_json(snapshot) for snapshot in snapshots])

        response: Response = await self._off_loop(record.thread_id, read)
        return response

    # runs
    def _run_request(self, body: dict[str, Any]) -> RunRequest:
        runnable_id = body.get("assistant_id")
        self._runnable(runnable_id)
        modes = body.get("stream_mode", "values")
        modes = [modes] if isinstance(modes, str) else modes
        if not isinstance(modes, list) or not modes:
            raise ApiError(422, "stream_mode must be a mode or a list of modes")
        for mode in modes:
            if mode not in STREAM_MODES:
                raise ApiError(
                    422, f"stream_mode {mode!r} is not supported; use {', '.join(STREAM_MODES)}"
                )
        for unsupported in ("interrupt_before", "interrupt_after"):
            if body.get(unsupported):
                raise ApiError(422, f"{unsupported} per run is not supported: compile it in")
        strategy = _field(body, "multitask_strategy", str, "reject")
        if strategy not in MULTITASK_STRATEGIES:
            raise ApiError(
                422,
                f"multitask_strategy {strategy!r} is not supported; use "
                + ", ".join(MULTITASK_STRATEGIES),
            )
        config = _field(body, "config", dict, {})
        max_steps = config.get("recursion_limit")  # true is an int to isinstance(), not here
        if max_steps is not None and (type(max_steps) is not int or max_steps < 1):
            raise ApiError(422, "config.recursion_limit must be a positive integer")
        command = _field(body, "command", dict, None)
        request = RunRequest(
            assistant_id=str(runnable_id),
            input=body.get("input"),
            command=command,
            stream_modes=tuple(modes),
            checkpoint_id=_checkpoint_id(body),
            metadata=_field(body, "metadata", dict, {}),
            context=_field(body, "context", dict, {}),
            max_steps=max_steps,
            multitask_strategy=strategy,
            stream_resumable=_field(body, "stream_resumable", bool, False),
        )
        _wire(lambda r: r.graph_input(), request)  # a malformed input fails here, as a 422
        self._check_keys(request.assistant_id, request.input, "input")
        self._check_keys(request.assistant_id, (command or {}).get("update"), "command.update")
        return request

    def _check_keys(self, assistant_id: str, values: Any, where: str) -> None:
        keys = self.input_keys.get(assistant_id)
        problem = keys.problem(assistant_id, values, where) if keys is not None else None
        if problem is not None:
            raise ApiError(422, problem, "unknown_input_key")

    async def _start(
        self, request: Request, thread_id: str | None, modes: tuple[str, ...] | None = None
    ) -> ActiveRun:
        body = with_trace_context(await _body(request), request.headers)
        if modes is not None:
            body = {**body, "stream_mode": list(modes)}
        run_request = self._run_request(body)
        delete = body.get("on_completion", "delete") == "delete"
        here = isinstance(self.records, Records) or self.local is not self.runner
        if thread_id is None and delete and here:
            return self.local.start_temporary(self._temporary_thread(run_request), run_request)
        if thread_id is None:  # stateless: a thread of its own, gone when the run ends
            record = _thread_record(str(uuid.uuid4()), {})
            run = await self._start_on(record.thread_id, run_request, record)
            if delete:
                task = asyncio.get_running_loop().create_task(self._forget(run))
                self._forgetting.add(task)
                task.add_done_callback(self._forgetting.discard)
            return run
        found = self._records_of(thread_id).thread(thread_id)
        if found is None:
            if body.get("if_not_exists") != "create":
                raise ApiError(
                    404, f"thread {thread_id} not found; create it, or send if_not_exists='create'"
                )
            record = _thread_record(_creatable(thread_id), {})
            return await self._start_on(thread_id, run_request, record)
        return await self._start_on(thread_id, run_request, existing=_owned(found, thread_id))

    def _temporary_thread(self, run_request: RunRequest) -> ThreadRecord:
        """The record of a stateless run's thread, as :meth:`_start_on` would leave it."""
        assistant_id = run_request.assistant_id
        metadata = {"graph_id": assistant_id, "assistant_id": assistant_id}
        record = _thread_record(str(uuid.uuid4()), metadata)
        record.assistant_id = assistant_id
        return record

    async def _start_on(
        self,
        thread_id: str,
        run_request: RunRequest,
        new: ThreadRecord | None = None,
        *,
        existing: ThreadRecord | None = None,
    ) -> ActiveRun:
        """Start the run on the thread: an existing one (its record, if read already), or
        ``new`` (not written yet: the runner writes it with the run)."""
        record = new or existing or self._thread(thread_id)
        runner = self._runner_of(thread_id)
        changed = None
        # the thread's record takes the run's assistant unless another run holds it; the queue
        # sees that as it starts the run, under the thread's lock (it is not asked twice)
        if new is not None or isinstance(runner, QueueRunner) or runner.active(thread_id) is None:
            # written before the run may end elsewhere
            record.metadata = {
                **record.metadata,
                "graph_id": run_request.assistant_id,
                "assistant_id": run_request.assistant_id,
            }
            record.assistant_id = run_request.assistant_id
            changed = record
        try:
            return await runner.astart(thread_id, run_request, changed, new_thread=new is not None)
        except ThreadBusy as exc:
            raise ApiError(409, str(exc)) from exc

    async def _forget(self, run: ActiveRun) -> None:
        await run.wait()
        thread_id = run.record.thread_id

        def forget() -> None:
            self.saver.delete_thread(thread_id)
            self.records.delete_thread(thread_id)

        await to_thread(forget)

    async def create_run(self, request: Request) -> Response:
        run = await self._start(request, request.path_params["thread_id"])
        return JSONResponse(run.record.json(), headers=_run_location(run))

    async def wait_run(self, request: Request) -> Response:
        run = await self._start(request, request.path_params["thread_id"])
        return JSONResponse(await run.wait(), headers=_run_location(run))

    async def wait_stateless(self, request: Request) -> Response:
        run = await self._start(request, None)
        return JSONResponse(await run.wait(), headers=_run_location(run))

    async def stream_run(self, request: Request) -> Response:
        run = await self._start(request, request.path_params["thread_id"])
        return _sse(run.follow(), run, resumable=run.request.stream_resumable)

    async def stream_stateless(self, request: Request) -> Response:
        run = await self._start(request, None)
        return _sse(run.follow(), run, resumable=False)

    def _active_run(self, request: Request) -> ActiveRun | None:
        thread_id, run_id = request.path_params["thread_id"], request.path_params["run_id"]
        if self._records_of(thread_id).run(self._thread(thread_id).thread_id, run_id) is None:
            raise ApiError(404, f"run {run_id} not found on thread {thread_id}")
        return self._runner_of(thread_id).find(run_id)

    async def get_run(self, request: Request) -> Response:
        params = request.path_params
        thread_id = self._thread(params["thread_id"]).thread_id
        record = self._records_of(thread_id).run(thread_id, params["run_id"])
        if record is None:
            raise ApiError(404, f"run {params['run_id']} not found on thread {params['thread_id']}")
        return JSONResponse(record.json())

    async def list_runs(self, request: Request) -> Response:
        thread_id = self._thread(request.path_params["thread_id"]).thread_id
        limit = _int_param(request, "limit", 10)
        offset = _int_param(request, "offset", 0)
        status = request.query_params.get("status")
        runs = self._records_of(thread_id).runs(thread_id, limit=limit, offset=offset)
        return JSONResponse([r.json() for r in runs if status in (None, r.status)])

    async def delete_run(self, request: Request) -> Response:
        run = self._active_run(request)
        if run is not None and not run.finished:
            raise ApiError(409, f"run {run.record.run_id} is still running: cancel it first")
        self._records_of(request.path_params["thread_id"]).delete_run(request.path_params["run_id"])
        return Response(status_code=204)

    async def join_run(self, request: Request) -> Response:
        run = self._active_run(request)
        if run is None:  # finished before this server started: the thread holds its result
            record = self._thread(request.path_params["thread_id"])
            values, _ = thread_values(self._thread_runnable(record), record.thread_id)
            return JSONResponse(wire_json(values))
        return JSONResponse(await run.wait())

    async def join_stream(self, request: Request) -> Response:
        """A run's events, from the one after ``Last-Event-ID`` (from the first without it),
        live while it runs; replayed from the records once it ended."""
        after = _last_event_id(request)
        run = self._active_run(request)
        if run is not None:
            return _sse(run.follow(after), run, resumable=True)
        params = request.path_params
        records = self._records_of(params["thread_id"])
        record = records.run(params["thread_id"], params["run_id"])
        assert record is not None  # _active_run checked it

        async def stored() -> AsyncIterator[tuple[int, str, str]]:
            for item in records.events(record.run_id, after):
                yield item

        return _sse(stored(), record, resumable=True)

    async def cancel_run(self, request: Request) -> Response:
        run = self._active_run(request)
        action = request.query_params.get("action", "interrupt")
        if action not in ("interrupt", "rollback"):
            raise ApiError(
                422, f"cancel action {action!r} is not supported; use interrupt or rollback"
            )
        if run is not None and not run.finished:
            wait = request.query_params.get("wait", "0").lower() in ("1", "true")
            await self._runner_of(run.record.thread_id).cancel(
                run, wait=wait, action="rollback" if action == "rollback" else "interrupt"
            )
        return Response(status_code=204)


def _owned(record: ThreadRecord | None, thread_id: str) -> ThreadRecord:
    """``record``, if the request's key may see it (another key's thread is as if missing)."""
    if record is None or not owns(record.metadata):
        raise ApiError(404, f"thread {thread_id} not found")
    return record


def _creatable(thread_id: str) -> str:
    """``thread_id``, if a client may create a thread so named (:mod:`graph_agent.serve.ids`)."""
    problem = thread_id_problem(thread_id)
    if problem is not None:
        raise ApiError(422, problem, "invalid_thread_id")
    return thread_id


def _thread_record(thread_id: str, metadata: dict[str, Any]) -> ThreadRecord:
    """A new thread's record, owned by the request's key (not written yet)."""
    stamp = now()
    return ThreadRecord(
        thread_id=thread_id, created_at=stamp, updated_at=stamp, metadata=stamp_owner(metadata)
    )


def _run_location(run: ActiveRun | RunRecord) -> dict[str, str]:
    record = run.record if isinstance(run, ActiveRun) else run
    location = f"/threads/{record.thread_id}/runs/{record.run_id}"
    return {
        "Content-Location": urllib.parse.quote(location)
    }  # headers are latin-1: ids need not be


def _last_event_id(request: Request) -> int:
    try:
        return last_event_id(request.headers.get("last-event-id", ""))
    except ValueError as exc:
        raise ApiError(400, str(exc)) from exc


def _sse(
    events: AsyncIterator[tuple[int, str, str]], run: ActiveRun | RunRecord, *, resumable: bool
) -> Response:
    """The events as an SSE response. A resumable one names, in ``Location``, where a client
    that lost it reconnects (with ``Last-Event-ID``); the SDK does so by itself."""

    async def lines() -> AsyncIterator[str]:
        async for number, event, text in events:
            yield f"event: {event}\ndata: {text}\nid: {number}\n\n"

    headers = {"Cache-Control": "no-store", **_run_location(run)}
    if resumable:
        headers["Location"] = headers["Content-Location"] + "/stream"
    return StreamingResponse(lines(), media_type="text/event-stream", headers=headers)


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    content_type = request.headers.get("content-type")
    if not is_json_type(content_type):  # a cross-site page can send text/plain, not JSON
        raise ApiError(415, json_type_problem(content_type))
    try:
        body = read_json(raw)
    except BodyError as exc:
        raise ApiError(exc.status, str(exc)) from exc
    if not isinstance(body, dict):
        raise ApiError(422, f"the request body must be a JSON object, got {type(body).__name__}")
    return body


def _field(body: Mapping[str, Any], key: str, kind: type, default: Any) -> Any:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ApiError(422, f"{key} must be a {_KIND_NAMES.get(kind, kind.__name__)}")
    return value


_KIND_NAMES = {
    dict: "JSON object",
    list: "JSON array",
    str: "string",
    int: "integer",
    bool: "boolean",
}


def _page(body: Mapping[str, Any]) -> tuple[int, int]:
    limit, offset = _field(body, "limit", int, 10), _field(body, "offset", int, 0)
    if limit < 0 or offset < 0:
        raise ApiError(422, "limit and offset must not be negative")
    return limit, offset


def _int_param(request: Request, name: str, default: int) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        return count_param(name, text)
    except ValueError as exc:
        raise ApiError(422, str(exc)) from exc


def _checkpoint_id(body: Mapping[str, Any]) -> str | None:
    checkpoint = _field(body, "checkpoint", dict, {})
    checkpoint_id = _field(body, "checkpoint_id", str, None) or checkpoint.get("checkpoint_id")
    if checkpoint_id is not None and not isinstance(checkpoint_id, str):
        raise ApiError(422, "checkpoint_id must be a string")
    return checkpoint_id


def _wire(convert: Callable[[Any], Any], value: Any) -> Any:
    try:
        return convert(value)
    except WireError as exc:
        raise ApiError(422, str(exc)) from exc
    except (TypeError, ValueError, KeyError) as exc:  # a shape no check above foresaw
        raise ApiError(422, f"the request has a malformed value: {exc}") from exc
