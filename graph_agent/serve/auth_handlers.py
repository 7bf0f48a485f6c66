"""Custom auth as LangGraph writes it: an :class:`Auth` object whose ``authenticate`` handler
says who calls, and whose ``on`` handlers say what each caller may do with threads, runs,
assistants, crons and the store.

Used exactly like ``langgraph_sdk.Auth`` (a file written for LangGraph Server works with its
import changed, or unchanged: ``graph-agent serve --auth`` takes a ``langgraph_sdk.Auth`` too)::

    from graph_agent.serve import Auth

    auth = Auth()

    @auth.authenticate
    async def who(authorization: str | None) -> str:
        user = USERS.get((authorization or "").removeprefix("Bearer "))
        if user is None:
            raise Auth.exceptions.HTTPException(status_code=401, detail="unknown token")
        return user

    @auth.on
    async def owner_only(ctx: Auth.types.AuthContext, value: dict) -> dict:
        value.setdefault("metadata", {})["owner"] = ctx.user.identity  # stamped on creation
        return {"owner": ctx.user.identity}  # what the caller sees

``authenticate`` receives, by parameter name, any of ``request``, ``authorization``,
``headers``, ``path``, ``method``, ``query_params``, ``path_params``, ``scope``; it returns the
user: a string (the identity), a mapping with ``identity`` (and maybe ``permissions``,
``display_name``...), or an object with an ``identity``. An ``on`` handler gets ``ctx``
(:class:`AuthContext`) and ``value`` (what the request asks) and returns ``None``/``True``
(allowed), ``False`` (a 403) or a filter on the records' metadata (``{"owner": "ann"}``,
``{"k": {"$eq": v}}``, ``{"k": {"$contains": v}}``). The most specific handler of a request's
resource and action is the one called: ``on.threads.create``, else ``on.threads``, else
``on(actions="create")``, else ``on``; none: allowed. How the server applies them is in
:mod:`graph_agent.serve.auth_custom`.
"""

from __future__ import annotations

import http
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = [
    "RESOURCE_ACTIONS",
    "Auth",
    "AuthContext",
    "AuthUser",
    "HTTPException",
    "handler_name",
]

F = TypeVar("F", bound=Callable[..., Any])

RESOURCE_ACTIONS: dict[str, tuple[str, ...]] = {
    "threads": ("create", "read", "update", "delete", "search", "create_run"),
    "assistants": ("create", "read", "update", "delete", "search"),
    "crons": ("create", "read", "update", "delete", "search"),
    "store": ("put", "get", "search", "delete", "list_namespaces"),
}
"""The resources an ``on`` handler may guard, with their actions (LangGraph's)."""


class HTTPException(Exception):
    """Raised by a handler to answer with ``status_code`` and ``detail`` (default: 401).

    Args:
        status_code: The answer's status.
        detail: What the client is told (default: the status's phrase).
        headers: More headers of the answer (e.g. ``WWW-Authenticate``).
    """

    def __init__(
        self,
        status_code: int = 401,
        detail: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.status_code = status_code
        self.detail = detail if detail is not None else http.HTTPStatus(status_code).phrase
        self.headers = headers
        super().__init__(f"{status_code}: {self.detail}")


@dataclass(frozen=True, kw_only=True)
class AuthUser:
    """The user ``authenticate`` returned, as handlers and custom routes see it
    (``ctx.user``, ``request.user``): its ``identity``, ``permissions`` and whatever else it
    said (``user["org"]`` or ``user.org``)."""

    identity: str
    permissions: tuple[str, ...] = ()
    display_name: str = ""
    is_authenticated: bool = True
    fields: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.fields[key] if key in self.fields else getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return key in self.fields

    def __getattr__(self, name: str) -> Any:  # only for names the dataclass has not
        fields = object.__getattribute__(self, "fields")
        if name in fields:
            return fields[name]
        raise AttributeError(name)

    def get(self, key: str, default: Any = None) -> Any:
        """A field the user was returned with (``default`` when it has none)."""
        return self.fields.get(key, default)


@dataclass(frozen=True, kw_only=True)
class AuthContext:
    """What an ``on`` handler is told besides the value: who calls and what they do."""

    user: AuthUser
    permissions: tuple[str, ...]
    resource: str
    action: str


class _Types:
    """``Auth.types``: the names LangGraph's handlers annotate with."""

    AuthContext = AuthContext
    BaseUser = AuthUser
    MinimalUser = AuthUser
    MinimalUserDict = dict
    FilterType = dict
    HandlerResult = object


class _Exceptions:
    """``Auth.exceptions``."""

    HTTPException = HTTPException


class Auth:
    """Who may call the server and what each caller may do (see the module's docstring).

    Example:
        >>> auth = Auth()
        >>> @auth.authenticate
        ... def who(authorization: str | None) -> str:
        ...     return "ann"
        >>> @auth.on.threads.read
        ... async def mine(ctx: AuthContext, value: dict) -> dict:
        ...     return {"owner": ctx.user.identity}
        >>> sorted(auth._handlers)
        [('threads', 'read')]
    """

    types = _Types
    exceptions = _Exceptions

    def __init__(self) -> None:
        # the names langgraph_sdk.Auth keeps them under: the server reads either object
        self._authenticate_handler: Callable[..., Any] | None = None
        self._handlers: dict[tuple[str, str], list[Callable[..., Any]]] = {}
        self._global_handlers: list[Callable[..., Any]] = []
        self.on = _On(self)

    def authenticate(self, fn: F) -> F:
        """Register the function that says who calls (once per ``Auth``).

        Raises:
            ValueError: one is registered already.
        """
        if self._authenticate_handler is not None:
            raise ValueError(f"an authenticate handler is set already: {handler_name(fn)}")
        self._authenticate_handler = fn
        return fn

    def _register(self, resource: str, action: str, fn: F) -> F:
        _check_handler(fn)
        if resource == "*" and action == "*":
            if self._global_handlers:
                raise ValueError("a global @auth.on handler is set already")
            self._global_handlers.append(fn)
            return fn
        if (resource, action) in self._handlers:
            raise ValueError(f"a handler for {resource}.{action} is set already")
        self._handlers[(resource, action)] = [fn]
        return fn


class _Action:
    """``auth.on.RESOURCE.ACTION``: a decorator."""

    def __init__(self, auth: Auth, resource: str, action: str) -> None:
        self._auth, self._resource, self._action = auth, resource, action

    def __call__(self, fn: F) -> F:
        return self._auth._register(self._resource, self._action, fn)


class _Resource:
    """``auth.on.RESOURCE``: a decorator for every action of it, with one per action."""

    def __init__(self, auth: Auth, resource: str) -> None:
        self._auth, self._resource = auth, resource
        for action in RESOURCE_ACTIONS[resource]:
            setattr(self, action, _Action(auth, resource, action))

    def __call__(self, fn: F | None = None, *, actions: str | Sequence[str] | None = None) -> Any:
        if fn is not None:
            return self._auth._register(self._resource, "*", fn)

        def register(handler: F) -> F:
            for action in _listed(actions):
                self._auth._register(self._resource, action, handler)
            return handler

        return register


class _On:
    """``auth.on``: the handler of everything, or (``resources=``, ``actions=``) of some."""

    def __init__(self, auth: Auth) -> None:
        self._auth = auth
        self.threads = _Resource(auth, "threads")
        self.assistants = _Resource(auth, "assistants")
        self.crons = _Resource(auth, "crons")
        self.store = _Resource(auth, "store")

    def __call__(
        self,
        fn: F | None = None,
        *,
        resources: str | Sequence[str] | None = None,
        actions: str | Sequence[str] | None = None,
    ) -> Any:
        if fn is not None:
            return self._auth._register("*", "*", fn)

        def register(handler: F) -> F:
            for resource in _listed(resources):
                for action in _listed(actions):
                    self._auth._register(resource, action, handler)
            return handler

        return register


def _listed(names: str | Iterable[str] | None) -> list[str]:
    if names is None:
        return ["*"]
    return [names] if isinstance(names, str) else list(names)


def _check_handler(fn: Callable[..., Any]) -> None:
    """An ``on`` handler takes ``ctx`` and ``value`` (sync or async)."""
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError) as exc:
        raise ValueError(f"auth handler {handler_name(fn)} is not a function") from exc
    missing = [name for name in ("ctx", "value") if name not in parameters]
    if missing:
        raise ValueError(
            f"auth handler {handler_name(fn)} must take the parameters ctx and value "
            f"(missing: {', '.join(missing)})"
        )


def handler_name(fn: Any) -> str:
    """How logs and answers name a handler (its qualified name)."""
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or fn)
