"""Custom auth at work: the middleware that runs an :class:`~graph_agent.serve.auth_handlers.Auth`
object's handlers on each request, and the rules it leaves for the records to apply.

For every request but the open ones (``/ok``, ``/info``, ``/docs``, ``/openapi.json``, the
Studio's files), ``authenticate`` says who calls (its refusal is the answer: a 401 or what it
raised). Then the ``on`` handler of the request's resource and action
(:func:`~graph_agent.serve.auth_events.event_of`) gets the request's value: ``False`` is a
403; a filter narrows what :func:`graph_agent.serve.auth.owns` lets the request see (a thread
another user's filter excludes is a 404, as if missing); the metadata it sets on
``value["metadata"]`` is what :func:`graph_agent.serve.auth.stamp_owner` adds to the records
the request creates; a store namespace it rewrites is the one the store is asked about.
A request that reads a thread or an assistant besides its own resource (a cron on a thread, a
run of an assistant) has that record's ``read`` handler run too.

A handler that fails otherwise (raises something else, returns something else) is a 503 naming
what failed, logged with the handler's name; the server goes on serving.

The user is in ``request.user`` (``scope["user"]``) for custom routes (``--app``), with its
permissions in ``request.auth.scopes``, as Starlette's authentication middleware leaves them.
"""

from __future__ import annotations

import functools
import inspect
import logging
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.authentication import AuthCredentials
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from graph_agent.graph.concurrency import to_thread
from graph_agent.serve.auth import RECORD_RULES, _public, _route_path
from graph_agent.serve.auth_events import (
    Event,
    FilterError,
    check_filter,
    event_of,
    filter_matches,
    namespace_of,
    with_namespace,
)
from graph_agent.serve.auth_handlers import AuthContext, AuthUser, handler_name
from graph_agent.serve.bodies import BodyError, json_bytes, read_json
from graph_agent.serve.errors import send_error

__all__ = ["Access", "AuthRules", "CustomAuthMiddleware", "Refusal"]

log = logging.getLogger(__name__)

AUTHENTICATE_PARAMETERS = frozenset(
    {"request", "authorization", "headers", "path", "method", "query_params", "path_params"}
    | {"scope"}
)
"""What ``authenticate`` may take, by name (LangGraph's)."""
_STAMPING = ("create", "create_run", "update")
"""The actions whose handlers' metadata new records get."""


class Refusal(Exception):
    """The answer to a request auth refused: ``status`` with ``detail``."""

    def __init__(
        self,
        status: int,
        detail: str,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status, self.detail, self.code = status, detail, code
        self.headers = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]


class AuthRules:
    """The handlers of an ``Auth`` object (graph_agent's, or ``langgraph_sdk.Auth``: both keep
    them under the same names).

    Raises:
        ValueError: ``auth`` is no such object, has no ``authenticate`` handler, or it takes a
            parameter the server cannot give.
    """

    def __init__(self, auth: Any) -> None:
        handlers = getattr(auth, "_handlers", None)
        authenticate = getattr(auth, "_authenticate_handler", None)
        if not isinstance(handlers, dict) or not hasattr(auth, "_global_handlers"):
            raise ValueError(
                f"expected an Auth object (graph_agent.serve.Auth or langgraph_sdk.Auth), got "
                f"{type(auth).__name__}"
            )
        if authenticate is None:
            raise ValueError(
                "the Auth object has no authenticate handler: add one with @auth.authenticate "
                "(a function returning the caller's identity)"
            )
        self.authenticate: Callable[..., Any] = authenticate
        self.parameters = _parameters(authenticate)
        self._handlers: dict[tuple[str, str], list[Callable[..., Any]]] = handlers
        self._global: list[Callable[..., Any]] = list(auth._global_handlers)

    def handler_for(self, resource: str, action: str) -> Callable[..., Any] | None:
        """The most specific handler of ``resource.action`` (LangGraph's order), or None."""
        for key in ((resource, action), (resource, "*"), ("*", action), ("*", "*")):
            found = self._handlers.get(key)
            if found:
                return found[-1]
        return self._global[-1] if self._global else None


def _parameters(fn: Callable[..., Any]) -> frozenset[str]:
    parameters = inspect.signature(fn).parameters
    unknown = [
        name
        for name, parameter in parameters.items()
        if name not in AUTHENTICATE_PARAMETERS
        and parameter.default is parameter.empty
        and parameter.kind not in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL)
    ]
    if unknown:
        raise ValueError(
            f"the authenticate handler {handler_name(fn)} takes {', '.join(unknown)}, which the "
            f"server does not give; it may take: {', '.join(sorted(AUTHENTICATE_PARAMETERS))}"
        )
    return frozenset(name for name in parameters if name in AUTHENTICATE_PARAMETERS)


_DENIED: list[dict[str, Any]] | None = None


@dataclass(kw_only=True)
class Access:
    """What the handlers decided for one request (the :class:`~graph_agent.serve.auth.RecordRules`
    :func:`~graph_agent.serve.auth.owns` and :func:`~graph_agent.serve.auth.stamp_owner`
    follow).

    ``filters`` by ``(resource, action)``: a record must meet every filter listed; ``None``:
    the handler refused (nothing of it is seen); a key not there had no handler run.
    """

    user: AuthUser
    event: Event | None
    rules: AuthRules
    filters: dict[tuple[str, str], list[dict[str, Any]] | None] = field(default_factory=dict)
    added: dict[str, Any] = field(default_factory=dict)
    removed: frozenset[str] = frozenset()
    _warned: set[tuple[str, str]] = field(default_factory=set)

    def _key(self, resource: str | None) -> tuple[str, str]:
        event = self.event
        if event is not None and resource in (None, event.resource):
            return event.resource, event.action
        return resource or "threads", "read"

    def allows(self, metadata: Mapping[str, Any], resource: str | None) -> bool:
        key = self._key(resource)
        if key not in self.filters:
            if self.rules.handler_for(*key) is None:
                return True
            if key not in self._warned:
                self._warned.add(key)
                log.warning(
                    "custom auth: no %s.%s handler ran for this request (%s): its records "
                    "are treated as not found",
                    *key,
                    self.event,
                )
            return False
        filters = self.filters[key]
        return filters is not None and all(filter_matches(metadata, f) for f in filters)

    def stamp(self, metadata: Mapping[str, Any], resource: str | None) -> dict[str, Any]:
        event = self.event
        if event is None or resource not in (None, event.resource):
            return dict(metadata)
        kept = {key: value for key, value in metadata.items() if key not in self.removed}
        return {**kept, **self.added}


class CustomAuthMiddleware:
    """Authenticates each request with ``rules`` and runs its handlers (see the module).

    Args:
        app: The app behind it.
        rules: The ``Auth`` object's handlers.
    """

    def __init__(self, app: ASGIApp, rules: AuthRules) -> None:
        self.app = app
        self.rules = rules

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or _public(_route_path(scope)):
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        try:
            user = await self._authenticate(scope)
            event = event_of(scope.get("method", "GET"), _route_path(scope))
            if event is not None and scope["type"] == "http" and event.reads_body:
                messages = await _read_all(receive)
            access, scope = await self._decide(scope, user, event, messages)
        except Refusal as refusal:
            await _refuse(scope, send, refusal)
            return
        scope["user"] = user
        scope["auth"] = AuthCredentials(list(user.permissions))

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        token = RECORD_RULES.set(access)
        try:
            await self.app(scope, replay, send)
        finally:
            RECORD_RULES.reset(token)

    async def _authenticate(self, scope: Scope) -> AuthUser:
        fn = self.rules.authenticate
        arguments = _arguments(scope, self.rules.parameters)
        try:
            found = await _call(fn, arguments)
        except Exception as exc:
            raise _refusal_of(exc, fn, 401) from None
        try:
            return _user(found)
        except ValueError as exc:
            log.error("custom auth: authenticate handler %s %s", handler_name(fn), exc)
            raise _failed(fn) from None

    async def _decide(
        self, scope: Scope, user: AuthUser, event: Event | None, messages: list[Message]
    ) -> tuple[Access, Scope]:
        """The request's :class:`Access` (its handlers run), and its scope, whose query or
        body (``messages``, rewritten in place) name the namespace a store handler set."""
        access = Access(user=user, event=event, rules=self.rules)
        if event is None:
            return access, scope
        body = _json_of(messages)
        if event.resource == "store":
            return access, await self._store(scope, access, event, body, messages)
        items = body if isinstance(body, list) else [body]  # a batch: each of its runs
        values = [_value(event, item if isinstance(item, dict) else {}) for item in items]
        found = [await self._run(access, event.resource, event.action, v) for v in values]
        if any(f is _DENIED for f in found):
            raise Refusal(403, f"forbidden: this user may not {event.action} {event.resource}")
        access.filters[(event.resource, event.action)] = [f for fs in found for f in fs or ()]
        if event.action in _STAMPING:
            _keep_metadata(access, items, values)
        for resource, value in _also_read(event, items):
            access.filters[(resource, "read")] = await self._run(access, resource, "read", value)
        return access, scope

    async def _store(
        self,
        scope: Scope,
        access: Access,
        event: Event,
        body: Any,
        messages: list[Message],
    ) -> Scope:
        request = _query(scope) if event.action == "get" else body
        namespace = namespace_of(event.action, request) if isinstance(request, dict) else None
        if namespace is None:  # not one: the store route refuses the request with a 422
            return scope
        value = {**_value(event, request), "namespace": namespace}
        if await self._run(access, "store", event.action, value) is _DENIED:
            raise Refusal(403, f"forbidden: this user may not {event.action} in the store")
        try:
            rewritten = with_namespace(event.action, request, value.get("namespace"))
        except FilterError as exc:
            handler = self.rules.handler_for("store", event.action)
            log.error("custom auth: store handler %s %s", handler_name(handler), exc)
            raise _failed(handler) from None
        if event.action == "get":
            query = urllib.parse.urlencode(rewritten).encode()
            return {**scope, "query_string": query}
        raw = json_bytes(rewritten)
        messages[:] = [{"type": "http.request", "body": raw, "more_body": False}]
        headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
        return {**scope, "headers": [*headers, (b"content-length", str(len(raw)).encode())]}

    async def _run(
        self, access: Access, resource: str, action: str, value: dict[str, Any]
    ) -> list[dict[str, Any]] | None:
        """The filters of ``resource.action``'s handler on ``value`` (``[]``: all allowed;
        ``None``: refused); ``value`` as the handler left it."""
        handler = self.rules.handler_for(resource, action)
        if handler is None:
            return []
        user = access.user
        ctx = AuthContext(user=user, permissions=user.permissions, resource=resource, action=action)
        try:
            found = await _call(handler, {"ctx": ctx, "value": value})
        except Exception as exc:
            raise _refusal_of(exc, handler, 403) from None
        if found is None or found is True:
            return []
        if found is False:
            return _DENIED
        try:
            return [check_filter(found)]
        except FilterError as exc:
            name = handler_name(handler)
            log.error("custom auth: handler %s of %s.%s %s", name, resource, action, exc)
            raise _failed(handler) from None


def _value(event: Event, body: Mapping[str, Any]) -> dict[str, Any]:
    """What a handler of ``event`` gets: the body's fields (a create's ``metadata`` always
    there, a dict the handler may add to) and the ids the path names."""
    value: dict[str, Any] = {**body, **event.ids} if event.reads_body else dict(event.ids)
    if event.action in _STAMPING and not isinstance(value.get("metadata"), dict):
        value["metadata"] = {}
    elif isinstance(value.get("metadata"), dict):
        value["metadata"] = dict(value["metadata"])
    return value


def _keep_metadata(access: Access, items: list[Any], values: list[dict[str, Any]]) -> None:
    """What the handlers added to (and removed from) the value's metadata: new records get it
    (in a batch: what they did alike to every run)."""
    added: dict[str, Any] | None = None
    removed: set[str] = set()
    for item, value in zip(items, values, strict=True):
        given = item.get("metadata") if isinstance(item, dict) else None
        given = given if isinstance(given, dict) else {}
        final = value.get("metadata")
        final = final if isinstance(final, dict) else {}
        removed |= {key for key in given if key not in final}
        changed = {k: v for k, v in final.items() if k not in given or given[k] != v}
        if added is not None:
            changed = {k: v for k, v in added.items() if k in changed and changed[k] == v}
        added = changed
    access.added = added or {}
    access.removed = frozenset(removed)


def _also_read(event: Event, items: list[Any]) -> Iterable[tuple[str, dict[str, Any]]]:
    """The other records the request reads: the thread its path names (a cron's), the
    assistant its body names (a run's, a cron's)."""
    if event.resource != "threads" and "thread_id" in event.ids:
        yield "threads", {"thread_id": event.ids["thread_id"]}
    if event.resource != "assistants":
        for item in items[:1]:
            assistant = item.get("assistant_id") if isinstance(item, dict) else None
            if isinstance(assistant, str):
                yield "assistants", {"assistant_id": assistant}


async def _call(fn: Callable[..., Any], arguments: dict[str, Any]) -> Any:
    if inspect.iscoroutinefunction(fn):
        return await fn(**arguments)
    found = await to_thread(functools.partial(fn, **arguments))
    return await found if inspect.isawaitable(found) else found


def _arguments(scope: Scope, names: frozenset[str]) -> dict[str, Any]:
    headers = dict(scope.get("headers", []))
    given: dict[str, Callable[[], Any]] = {
        "request": lambda: Request(scope) if scope["type"] == "http" else None,
        "authorization": lambda: _text(headers.get(b"authorization")),
        "headers": lambda: headers,
        "path": lambda: scope["path"],
        "method": lambda: scope.get("method", "GET"),
        "query_params": lambda: dict(_query(scope)),
        "path_params": lambda: dict(scope.get("path_params", {})),
        "scope": lambda: scope,
    }
    return {name: given[name]() for name in names}


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")


def _query(scope: Scope) -> dict[str, str]:
    text = scope.get("query_string", b"").decode("latin-1")
    return dict(urllib.parse.parse_qsl(text, keep_blank_values=True))


def _user(found: Any) -> AuthUser:
    """What ``authenticate`` returned, as an :class:`AuthUser`.

    Raises:
        ValueError: it is no user (the message says what it was).
    """
    if isinstance(found, AuthUser):
        return found
    if isinstance(found, str) and found:
        return AuthUser(identity=found, display_name=found)
    if isinstance(found, Mapping):
        fields = dict(found)
    elif hasattr(found, "identity"):
        names = ("permissions", "display_name", "is_authenticated")
        fields = {"identity": found.identity}
        fields |= {name: getattr(found, name) for name in names if hasattr(found, name)}
    else:
        fields = {}
    identity = fields.get("identity")
    if not isinstance(identity, str) or not identity:
        raise ValueError(
            f"returned {type(found).__name__}, not a user: return a non-empty string, a dict "
            "with an 'identity' string, or an object with an identity"
        )
    permissions = fields.get("permissions") or ()
    return AuthUser(
        identity=identity,
        permissions=tuple(str(p) for p in permissions),
        display_name=str(fields.get("display_name") or identity),
        is_authenticated=bool(fields.get("is_authenticated", True)),
        fields=fields,
    )


def _refusal_of(exc: Exception, fn: Any, assertion_status: int) -> Refusal:
    """What a handler's exception answers: the status it carries (an ``HTTPException`` of
    graph_agent, langgraph_sdk or Starlette), ``assertion_status`` for a failed assert, a 503
    (logged with the handler's name) for anything else."""
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and 400 <= status < 600:
        detail = getattr(exc, "detail", None) or str(exc)
        headers = getattr(exc, "headers", None)
        headers = headers if isinstance(headers, Mapping) else None
        return Refusal(status, str(detail), headers=headers)
    if isinstance(exc, AssertionError):
        return Refusal(assertion_status, str(exc) or "refused by the server's auth rules")
    log.exception("custom auth: handler %s raised %s", handler_name(fn), type(exc).__name__)
    return _failed(fn)


def _failed(fn: Any) -> Refusal:
    return Refusal(
        503,
        f"the server's auth handler {handler_name(fn)} failed; its log says why",
        "auth_handler_failed",
    )


async def _read_all(receive: Receive) -> list[Message]:
    """The request's body messages, read (the body limit before this bounds them)."""
    messages: list[Message] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request" or not message.get("more_body", False):
            return messages


def _json_of(messages: list[Message]) -> Any:
    raw = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")
    if not raw.strip():
        return {}
    try:
        return read_json(raw)
    except BodyError:  # the route refuses it, with the reason
        return {}


async def _refuse(scope: Scope, send: Send, refusal: Refusal) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    if refusal.status == 401 and not any(k == b"www-authenticate" for k, _ in refusal.headers):
        refusal.headers.append((b"www-authenticate", b'Bearer realm="graph-agent"'))
    await send_error(send, refusal.status, refusal.detail, refusal.headers, code=refusal.code)
