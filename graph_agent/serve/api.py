"""What every route of the HTTP API shares: the served assistants, where threads and runs live,
and the checks each handler makes (the thread is the caller's, the body fits its model).

The routes themselves are in :mod:`graph_agent.serve.routes`, one module per resource, each a
list of :class:`Operation`: a method, a path, its handler and what the OpenAPI document says
about it (:mod:`graph_agent.serve.openapi` writes the document from those lists, so a route
and its description are one entry).
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.serve.assistant_records import AssistantRecord, AssistantRecords
from graph_agent.serve.auth import owns, stamp_owner
from graph_agent.serve.bodies import BodyError, read_json
from graph_agent.serve.guard import is_json_type, json_type_problem
from graph_agent.serve.ids import count_param, last_event_id, thread_id_problem
from graph_agent.serve.inputs import InputKeys
from graph_agent.serve.models import Body, BodyProblem, read_body
from graph_agent.serve.pg_records import PostgresRecords
from graph_agent.serve.queue import QueueRunner
from graph_agent.serve.records import Records, RunRecord, ThreadRecord, now
from graph_agent.serve.runs import ActiveRun, Runnable, Runner
from graph_agent.serve.targets import assistant_kind
from graph_agent.serve.tasks import Periodic, cancel_and_await, run_periodically
from graph_agent.serve.webhooks import Webhooks
from graph_agent.serve.wire import WireError
from graph_agent.store import BaseStore, InMemoryStore

__all__ = ["Api", "ApiError", "Operation", "Query"]

M = TypeVar("M", bound=Body)
Handler = Callable[["Api", Request], Awaitable[Response]]


class ApiError(Exception):
    """A request the API refuses: answered with ``status`` and ``{"detail": detail, "code":
    code}`` (``code`` defaults to the status's word, see :data:`errors.CODES`)."""

    def __init__(self, status: int, detail: str, code: str | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.code = code


@dataclass(frozen=True)
class Query:
    """A query parameter an operation reads (always optional)."""

    name: str
    schema: Mapping[str, Any]
    description: str


@dataclass(frozen=True)
class Operation:
    """One route: ``method path`` answered by ``handler``, and its description.

    ``answer`` is the 200 body's model (``list[Model]`` for an array of them, or a JSON Schema
    for a body that is no JSON object of ours), ``media`` its content type and ``also`` more
    types it may come as (as text); ``answer=None`` means a 204. ``errors`` are the 4xx it may
    give besides those every route may (403; 401 unless ``public``; 400, 413 and 415 with a
    ``body``)."""

    method: str
    path: str
    handler: Handler
    summary: str
    answer: object
    body: type[Body] | None = None
    errors: tuple[int, ...] = ()
    query: tuple[Query, ...] = ()
    media: str = "application/json"
    also: tuple[str, ...] = ()
    public: bool = False
    many: bool = False
    """The body is a JSON array of ``body`` objects (``POST /runs/batch``)."""


class Api:
    """The state the handlers share: assistants, saver, records, runners and store."""

    def __init__(
        self,
        assistants: dict[str, Runnable],
        saver: CheckpointSaver,
        records: Records | PostgresRecords,
        store: BaseStore | None = None,
    ) -> None:
        self.assistants = assistants
        self.store: BaseStore = store if store is not None else InMemoryStore()
        """The long-term memory ``/store`` serves (:mod:`graph_agent.serve.routes.store`)."""
        self.saver = saver
        self.records = records
        self.created_assistants = AssistantRecords(records)
        """The assistants clients created (``POST /assistants``), beside the records."""
        self._system: dict[str, AssistantRecord] = {}
        self.runner: Runner = Runner(assistants, records)  # type: ignore[arg-type]
        self.runner.store = self.store  # every run's config.store: what /store serves
        self.local: Runner = self.runner
        """The runner of temporary threads (stateless runs that delete their thread): the
        same one on SQLite; in PostgreSQL mode, one of this process's, in memory."""
        self.created_at = now()
        self.input_keys: dict[str, InputKeys] = {}
        self.schemas: dict[str, dict[str, Any]] = {}
        self.forgetting: set[asyncio.Task[None]] = set()
        """The stateless runs' threads to delete once their runs end."""
        self.keys_required = False
        """Whether requests must carry an API key (the /docs console asks for one)."""
        self.document: bytes | None = None
        """The OpenAPI document as sent, once made (see ``routes.system``)."""
        self.periodic: list[Periodic] = []
        """The background jobs the server runs while it serves (:meth:`add_periodic`)."""
        self._periodic_tasks: list[asyncio.Task[None]] = []
        self.crons: Any = None
        """The crons and their scheduler, a :class:`graph_agent.serve.crons.Crons` (see
        :func:`~graph_agent.serve.crons.install_crons`)."""
        self.webhooks: Webhooks | None = None
        """Runs' webhooks (:mod:`graph_agent.serve.webhooks`; None: no host is allowed)."""

    def use_queue(self, records: PostgresRecords, *, work: bool) -> None:
        """Run runs as durable jobs in PostgreSQL (:mod:`graph_agent.serve.queue`)."""
        self.runner = QueueRunner(self.assistants, records, work=work)
        # a working process runs stateless runs here, in memory (see Runner.start_temporary)
        self.local = Runner(self.assistants, Records()) if work else self.runner
        self.runner.store = self.local.store = self.store

    def use_webhooks(self, allow: Iterable[str]) -> None:
        """Call the webhooks of runs on the hosts ``allow`` lists (``--webhook-allow``; none:
        a run with a webhook is refused)."""
        self.webhooks = Webhooks.on(self.records, allow)
        if self.webhooks is not None:
            self.runner.webhooks = self.webhooks  # stateless runs with one never run locally
            self.add_periodic(self.webhooks.periodic())

    def add_periodic(self, periodic: Periodic) -> None:
        """Run ``periodic`` in the background while the server serves (from its start; add it
        before the app starts)."""
        self.periodic.append(periodic)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        if isinstance(self.runner, QueueRunner):
            await self.runner.open()
        loop = asyncio.get_running_loop()
        self._periodic_tasks = [
            loop.create_task(run_periodically(periodic), name=f"periodic:{periodic.name}")
            for periodic in self.periodic
        ]
        try:
            yield
        finally:
            await cancel_and_await(self._periodic_tasks)
            # the runs still running stop now, while the records and savers they write to
            # are open (the caller closes those once the server returned); so does the wait
            # to delete a stateless run's thread, which reads the records
            await cancel_and_await(list(self.forgetting))
            if self.local is not self.runner:  # PostgreSQL mode's in-memory one
                await self.local.close()
                self.local.records.close()
            await self.runner.close()

    def describe(self) -> dict[str, Any]:
        """The server's OpenAPI document (``app._Api`` writes it: the routes serve it, and
        :mod:`graph_agent.serve.openapi` reads the routes)."""
        raise NotImplementedError

    def forget_later(self, run: ActiveRun) -> None:
        """Delete the thread of the stateless ``run`` once it ended (``app._Api`` does)."""
        raise NotImplementedError

    def runnable(self, assistant_id: Any) -> Runnable:
        """The served graph or agent the assistant ``assistant_id`` runs (a served one, or one
        created over it: see :meth:`assistant`); a 404 naming those there are."""
        return self.graph_runnable(self.assistant(assistant_id))

    def assistant(self, assistant_id: Any) -> AssistantRecord:
        """The assistant ``assistant_id``: a served graph or agent (a system assistant), or one
        created with ``POST /assistants`` that the caller may see, as its current version has
        it (a 404 naming the served ones otherwise). Every run resolves its assistant here:
        its graph, and the config and context merged under the run's
        (:meth:`AssistantRecord.run_settings`)."""
        if not isinstance(assistant_id, str):
            raise ApiError(422, "assistant_id must be a string naming a served graph or agent")
        if assistant_id in self.assistants:
            return self.system_assistant(assistant_id)
        found = None
        if not thread_id_problem(assistant_id):  # no assistant has another id
            found = self.created_assistants.get(assistant_id)
        if found is None or not owns(found.metadata, "assistants"):
            known = ", ".join(sorted(self.assistants))
            raise ApiError(
                404,
                f"assistant {assistant_id!r} not found; this server has: {known} (and the "
                "assistants created with POST /assistants)",
            )
        return found

    def system_assistant(self, assistant_id: str) -> AssistantRecord:
        """The served target ``assistant_id`` as an assistant (``metadata.created_by =
        "system"``)."""
        found = self._system.get(assistant_id)
        if found is None:
            # kind: agent (takes a question) or graph, for clients like graph-agent run --url
            kind = assistant_kind(self.assistants[assistant_id])
            found = self._system[assistant_id] = AssistantRecord(
                assistant_id=assistant_id,
                graph_id=assistant_id,
                name=assistant_id,
                metadata={"created_by": "system", "kind": kind},
                created_at=self.created_at,
                updated_at=self.created_at,
                system=True,
            )
        return found

    def graph_runnable(self, assistant: AssistantRecord) -> Runnable:
        """The served graph or agent ``assistant`` runs (a 404 when it is no longer served)."""
        runnable = self.assistants.get(assistant.graph_id)
        if runnable is None:
            known = ", ".join(sorted(self.assistants))
            raise ApiError(
                404,
                f"assistant {assistant.assistant_id!r} runs graph {assistant.graph_id!r}, which "
                f"this server does not serve; it serves: {known}",
            )
        return runnable

    def thread_graph(self, record: ThreadRecord) -> str | None:
        """The served graph the thread ran on: its assistant's (a created one's graph), else
        the one its metadata names; None when none is served."""
        for name in (record.assistant_id, record.metadata.get("graph_id")):
            if isinstance(name, str) and name in self.assistants:
                return name
        if isinstance(record.assistant_id, str) and not thread_id_problem(record.assistant_id):
            created = self.created_assistants.get(record.assistant_id)
            if created is not None and created.graph_id in self.assistants:
                return created.graph_id
        return None

    def records_of(self, thread_id: str) -> Records | PostgresRecords:
        """The records holding the thread's: the local runner's for its temporary threads."""
        return self.local.records if self.local.holds(thread_id) else self.records

    def runner_of(self, thread_id: str) -> Runner:
        return self.local if self.local.holds(thread_id) else self.runner

    def thread(self, thread_id: str) -> ThreadRecord:
        """The thread's record, if the caller may see it (a 404 otherwise)."""
        return owned(self.records_of(thread_id).thread(thread_id), thread_id)

    def thread_runnable(self, record: ThreadRecord) -> Runnable | None:
        """The assistant the thread ran on (the only one, if it never ran)."""
        graph = self.thread_graph(record)
        if graph is not None:
            return self.runner_of(record.thread_id).runnable_of(record.thread_id, graph)
        if len(self.assistants) == 1:
            return next(iter(self.assistants.values()))
        return None

    def check_keys(self, assistant_id: str, values: Any, where: str) -> None:
        """A 422 if ``values`` holds a key the assistant does not take as input."""
        keys = self.input_keys.get(assistant_id)
        problem = keys.problem(assistant_id, values, where) if keys is not None else None
        if problem is not None:
            raise ApiError(422, problem, "unknown_input_key")


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object (``{}`` for no body)."""
    body = await _json_value(request, {})
    if not isinstance(body, dict):
        raise ApiError(422, f"the request body must be a JSON object, got {type(body).__name__}")
    return body


async def json_objects(request: Request) -> list[dict[str, Any]]:
    """The request's JSON array of objects (``[]`` for no body)."""
    body = await _json_value(request, [])
    if not isinstance(body, list):
        raise ApiError(422, f"the request body must be a JSON array, got {type(body).__name__}")
    for index, item in enumerate(body):
        if not isinstance(item, dict):
            kind = type(item).__name__
            raise ApiError(
                422, f"item {index} of the request body must be a JSON object, not {kind}"
            )
    return body


async def _json_value(request: Request, empty: Any) -> Any:
    """The request's JSON value (``empty`` for no body)."""
    raw = await request.body()
    if not raw.strip():
        return empty
    content_type = request.headers.get("content-type")
    if not is_json_type(content_type):  # a cross-site page can send text/plain, not JSON
        raise ApiError(415, json_type_problem(content_type))
    try:
        body = read_json(raw)
    except BodyError as exc:
        raise ApiError(exc.status, str(exc)) from exc
    return body


def parse(model: type[M], body: Mapping[str, Any]) -> M:
    """``body`` as ``model``; a 422 naming the field that does not fit."""
    try:
        parsed: M = read_body(model, body)
    except BodyProblem as exc:
        raise ApiError(422, str(exc)) from None
    return parsed


async def read(request: Request, model: type[M]) -> M:
    """The request's body as ``model``."""
    return parse(model, await json_body(request))


def owned(record: ThreadRecord | None, thread_id: str) -> ThreadRecord:
    """``record``, if the request's key may see it (another key's thread is as if missing)."""
    if record is None or not owns(record.metadata, "threads"):
        raise ApiError(404, f"thread {thread_id} not found")
    return record


def creatable(thread_id: str) -> str:
    """``thread_id``, if a client may create a thread so named (:mod:`graph_agent.serve.ids`)."""
    problem = thread_id_problem(thread_id)
    if problem is not None:
        raise ApiError(422, problem, "invalid_thread_id")
    return thread_id


def thread_record(thread_id: str, metadata: dict[str, Any]) -> ThreadRecord:
    """A new thread's record, owned by the request's key (not written yet)."""
    stamp = now()
    return ThreadRecord(
        thread_id=thread_id,
        created_at=stamp,
        updated_at=stamp,
        metadata=stamp_owner(metadata, "threads"),
    )


def run_location(run: ActiveRun | RunRecord) -> dict[str, str]:
    record = run.record if isinstance(run, ActiveRun) else run
    location = f"/threads/{record.thread_id}/runs/{record.run_id}"
    # headers are latin-1: ids need not be
    return {"Content-Location": urllib.parse.quote(location)}


def last_event(request: Request) -> int:
    try:
        return last_event_id(request.headers.get("last-event-id", ""))
    except ValueError as exc:
        raise ApiError(400, str(exc)) from exc


def sse(
    events: AsyncIterator[tuple[int, str, str]], run: ActiveRun | RunRecord, *, resumable: bool
) -> Response:
    """The events as an SSE response. A resumable one names, in ``Location``, where a client
    that lost it reconnects (with ``Last-Event-ID``); the SDK does so by itself."""

    async def lines() -> AsyncIterator[str]:
        async for number, event, text in events:
            yield f"event: {event}\ndata: {text}\nid: {number}\n\n"

    headers = {"Cache-Control": "no-store", **run_location(run)}
    if resumable:
        headers["Location"] = headers["Content-Location"] + "/stream"
    return StreamingResponse(lines(), media_type="text/event-stream", headers=headers)


def int_param(request: Request, name: str, default: int) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        return count_param(name, text)
    except ValueError as exc:
        raise ApiError(422, str(exc)) from exc


def flag(request: Request, name: str) -> bool:
    """A ``true``/``1`` query flag (anything else: false)."""
    return request.query_params.get(name, "false").lower() in ("true", "1")


def wire(convert: Callable[[Any], Any], value: Any) -> Any:
    try:
        return convert(value)
    except WireError as exc:
        raise ApiError(422, str(exc)) from exc
    except (TypeError, ValueError, KeyError) as exc:  # a shape no check above foresaw
        raise ApiError(422, f"the request has a malformed value: {exc}") from exc
