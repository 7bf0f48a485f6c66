"""The HTTP API: LangGraph Server's paths and bodies over graph_agent graphs and agents.

:func:`create_app` returns a Starlette app; ``graph-agent serve`` runs it under uvicorn. Every
error is a JSON body ``{"detail": ..., "code": ...}`` with a 4xx status saying what to fix
(:mod:`graph_agent.serve.errors`); API keys and thread ownership are in
:mod:`graph_agent.serve.auth`, the body size limit in :mod:`graph_agent.serve.limits`, the
``Host``/``Origin``/``Content-Type`` checks that keep web pages off it in
:mod:`graph_agent.serve.guard`. The routes are in :mod:`graph_agent.serve.routes` (one module
per resource), their bodies in :mod:`graph_agent.serve.models`, which also write the OpenAPI
document (:mod:`graph_agent.serve.openapi`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp

from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.graph.concurrency import to_thread
from graph_agent.serve.api import Api, ApiError
from graph_agent.serve.auth import ApiKeyMiddleware, Caller, callers
from graph_agent.serve.auth_custom import AuthRules, CustomAuthMiddleware
from graph_agent.serve.crons import install_crons
from graph_agent.serve.custom_routes import (
    CustomRoutesMiddleware,
    custom_routes_of,
    with_custom_lifespan,
)
from graph_agent.serve.errors import error_response
from graph_agent.serve.guard import guard_middleware
from graph_agent.serve.limits import DEFAULT_MAX_BODY_BYTES, BodyLimitMiddleware
from graph_agent.serve.openapi import openapi_document
from graph_agent.serve.pg_records import PostgresRecords
from graph_agent.serve.protocols import Protocols
from graph_agent.serve.records import Records
from graph_agent.serve.retention import ServerRetention
from graph_agent.serve.retention import install as install_retention
from graph_agent.serve.routes import RouteTable, starlette_routes
from graph_agent.serve.routes.runs import start_from_body
from graph_agent.serve.runs import ActiveRun
from graph_agent.serve.studio import studio_routes
from graph_agent.serve.targets import Servable, ServedTargets, assistants_on, served_targets
from graph_agent.store import BaseStore

__all__ = ["ApiError", "assistants_on", "create_app"]

log = logging.getLogger(__name__)


def create_app(
    targets: Mapping[str, Servable] | Sequence[Servable],
    *,
    saver: CheckpointSaver | None = None,
    records: Records | PostgresRecords | None = None,
    store: BaseStore | None = None,
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
    retention: ServerRetention | None = None,
    auth: Any = None,
    custom_app: Any = None,
    custom_app_auth: bool = False,
    webhook_allow: Iterable[str] = (),
) -> Starlette:
    """A LangGraph-Server-compatible app serving ``targets`` (also over /mcp and A2A).

    Args:
        targets: The graphs and agents to serve, by assistant id (a sequence: by their names).
            A StateGraph is compiled on ``saver``; a compiled graph and an agent run on it.
        saver: Where threads' checkpoints live (default: a MemorySaver).
        records: Where thread and run records live (default: in memory); with
            :class:`PostgresRecords` runs are durable jobs (:mod:`graph_agent.serve.queue`).
        store: The long-term memory served at ``/store`` (default: an InMemoryStore).
        work: In PostgreSQL mode, whether this process also runs runs (not only serves).
        api_keys: The keys a request must carry (``x-api-key`` or ``Authorization: Bearer``);
            each sees only the threads it created. None: no check (for loopback only).
        max_body_bytes: A larger request body is refused with a 413.
        input_keys: Per assistant id, the only state keys a client may send (default: any
            key but the graph's private ones).
        key_groups: More valid keys, by group name (:mod:`graph_agent.serve.auth`);
            ``shared_threads``: every valid key sees every thread.
        studio: Also serve the Studio page at ``/studio`` (:mod:`graph_agent.serve.studio`).
        bound_host: The address the server listens on; ``allow_hosts``: more host names a
            keyless server answers to; ``cors_origins``: the origins whose pages may call it;
            ``insecure_no_auth``: take ``*`` in those without keys (see
            :mod:`graph_agent.serve.guard`: a keyless server answers only its own hosts).
        retention: TTL defaults and the sweeper's pace (:mod:`graph_agent.serve.retention`).
        auth: Custom auth instead of keys: a :class:`~graph_agent.serve.Auth` or
            ``langgraph_sdk.Auth`` (:mod:`graph_agent.serve.auth_custom`); not with keys.
        custom_app: A Starlette app whose routes come first (:mod:`~.serve.custom_routes`),
            behind the API's auth if ``custom_app_auth``.
        webhook_allow: The hosts runs' webhooks may call (``--webhook-allow``; none by
            default: a run with a webhook is refused). See :mod:`graph_agent.serve.webhooks`.

    Raises:
        ValueError: an option is malformed or clashes with another (``input_keys`` naming an
            unserved assistant, ``*`` without keys, auth with keys, a webhook host...).

    Example:
        >>> from graph_agent import StateGraph, START, END
        >>> graph = StateGraph("inc")
        >>> _ = graph.add_node("inc", lambda state: {"x": state["x"] + 1})
        >>> _ = graph.add_edge(START, "inc").add_edge("inc", END)
        >>> app = create_app([graph])
        >>> sorted(r.path for r in app.routes if r.path.startswith("/assistants"))[:2]
        ['/assistants', '/assistants/count']
    """
    checkpoints = saver if saver is not None else MemorySaver()
    served = served_targets(targets, checkpoints, input_keys)
    return _starlette(
        _api(served, checkpoints, records, store, work=work, webhook_allow=webhook_allow),
        *_who_calls(callers(api_keys, key_groups, shared=shared_threads), auth),
        custom=_custom(custom_app, custom_app_auth),
        studio=studio,
        max_body_bytes=max_body_bytes,
        bound_host=bound_host,
        allow_hosts=allow_hosts,
        cors_origins=cors_origins,
        insecure_no_auth=insecure_no_auth,
        retention=retention,
    )


def _who_calls(access: dict[str, Caller], auth: Any) -> tuple[dict[str, Caller], AuthRules | None]:
    """The API keys, or the custom ``auth``'s rules (a ValueError when both are given)."""
    if auth is None:
        return access, None
    if access:
        raise ValueError(
            "custom auth and API keys were both given: the Auth object's authenticate decides "
            "who calls, so drop the keys (or check them in authenticate)"
        )
    return access, AuthRules(auth)


def _custom(custom_app: Any, custom_app_auth: bool) -> tuple[Any, bool] | None:
    if custom_app is None:
        return None
    custom_routes_of(custom_app)  # a ValueError now, when it is not one
    return custom_app, custom_app_auth


def _api(
    served: ServedTargets,
    saver: CheckpointSaver,
    records: Records | PostgresRecords | None,
    store: BaseStore | None,
    *,
    work: bool,
    webhook_allow: Iterable[str],
) -> _Api:
    """The API's state: the served assistants on ``saver`` and ``records`` (runs queued in
    PostgreSQL on :class:`PostgresRecords`), and the webhooks ``webhook_allow`` allows."""
    api = _Api(served.runnables, saver, records if records is not None else Records(), store)
    if isinstance(records, PostgresRecords):
        api.use_queue(records, work=work)
    api.use_webhooks(webhook_allow)
    api.input_keys = served.input_keys
    api.schemas = served.schemas
    return api


def _starlette(
    api: _Api,
    access: dict[str, Caller],
    rules: AuthRules | None,
    *,
    custom: tuple[Any, bool] | None,
    studio: bool,
    max_body_bytes: int,
    retention: ServerRetention | None = None,
    **guard: Any,
) -> Starlette:
    """The app: ``api``'s routes (and the Studio's), behind the guards, the key check (or the
    custom ``rules``) and the body limit, the ``custom`` app's routes first (see
    :func:`create_app` for ``guard``'s options), and the crons' scheduler."""
    install_crons(api, start_from_body)
    keyed = bool(access) or rules is not None
    api.keys_required = keyed

    def checked(app: ASGIApp) -> ASGIApp:
        if rules is not None:
            return CustomAuthMiddleware(app, rules)
        return ApiKeyMiddleware(app, access)

    limit = Middleware(BodyLimitMiddleware, max_body_bytes=max_body_bytes)
    # custom auth reads a body the limit has bounded; a key is checked before a body is read;
    # without keys the key check passes every request on: it is left out, not a layer more
    if not keyed:
        stack = [limit]
    elif rules is not None:
        stack = [limit, Middleware(checked)]
    else:
        stack = [Middleware(checked), limit]
    lifespan: Callable[[Any], AbstractAsyncContextManager[None]] = api.lifespan
    if custom is not None:
        custom_app, covered = custom
        routes = Middleware(CustomRoutesMiddleware, custom_app, checked if covered else None)
        stack.insert(0, routes)
        lifespan = with_custom_lifespan(lifespan, custom_app)
    protocols = Protocols(api)  # /mcp and A2A: beside the API's operations, not among them
    app = Starlette(
        routes=api.routes()
        + (studio_routes(keys_required=keyed) if studio else [])
        + protocols.routes(),
        exception_handlers={ApiError: _api_error, HTTPException: _http_error, 500: _crash},
        lifespan=protocols.lifespan(lifespan),
        middleware=[*guard_middleware(keyed=keyed, **guard), *stack],
    )
    RouteTable.install(app.router)  # the API's routes looked up, not tried in turn
    app.state.api = api  # the API's state, for the command and tests (``app.state.api``)
    # threads' TTLs and the sweeper; its sweep(at=...) runs one round now (tests)
    app.state.retention = install_retention(api, retention)
    return app


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.detail, exc.code)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(exc.status_code, exc.detail, headers=exc.headers)


async def _crash(request: Request, exc: Exception) -> Response:
    return error_response(500, "internal server error: the server's log says more")


class _Api(Api):
    """The API's state, its routes (:mod:`graph_agent.serve.routes`), and the deletion of
    stateless runs' threads."""

    def routes(self) -> list[Route]:
        return starlette_routes(self)

    def describe(self) -> dict[str, Any]:
        return openapi_document(sorted(self.assistants))

    def forget_later(self, run: ActiveRun) -> None:
        # in a task the shutdown cancels and awaits (see Api.lifespan)
        task = asyncio.get_running_loop().create_task(self._forget(run))
        self.forgetting.add(task)
        task.add_done_callback(self.forgetting.discard)

    async def _forget(self, run: ActiveRun) -> None:
        await run.wait()
        thread_id = run.record.thread_id

        def forget() -> None:
            self.saver.delete_thread(thread_id)
            self.records.delete_thread(thread_id)

        await to_thread(forget)
