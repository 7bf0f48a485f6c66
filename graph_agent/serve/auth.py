"""API keys: who may call the server, and which threads each caller sees.

A request carries its key as LangGraph's client sends it (header ``x-api-key``) or as
``Authorization: Bearer KEY``. With keys configured, a request without a valid one is a 401
(``/ok``, ``/docs``, ``/openapi.json`` and the Studio's files under ``/studio`` stay open: the
page asks for the key and sends it with its API calls), and each key is an *owner*: the threads
it creates are stamped with the key's fingerprint (``metadata["owner"]``, a hash, never the
key) and another key is told they do not exist (404, not 403: existence is not leaked).
Without keys, everyone sees everything: fine on loopback, refused elsewhere by the command.

Two settings widen what a key sees, in the way LangGraph's custom auth is mostly used (an
identity per caller, a metadata filter per resource):

- *key groups* (``--key-group TEAM=KEY,KEY``): the keys of a group own its threads together
  (``metadata["owner"]`` is ``group:TEAM``); each also still sees the threads it created alone;
- *shared threads* (``--shared-threads``): every valid key sees every thread. Threads are
  still stamped with their creator, so turning sharing off again gives each its own back.

With custom auth (``--auth module:auth``, :mod:`graph_agent.serve.auth_custom`) the keys are
off and the request's :class:`RecordRules` decide instead: :func:`owns` applies the filters its
handlers returned, :func:`stamp_owner` adds the metadata they set.
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.types import ASGIApp, Receive, Scope, Send

from graph_agent.serve.errors import send_error

__all__ = [
    "API_KEYS_ENV",
    "KEY_GROUPS_ENV",
    "OWNER_KEY",
    "PUBLIC_PATHS",
    "RECORD_RULES",
    "STUDIO_PREFIX",
    "ApiKeyMiddleware",
    "Caller",
    "RecordRules",
    "binding_problem",
    "callers",
    "current_owner",
    "key_group",
    "key_groups_from_env",
    "keys_from_env",
    "owns",
    "stamp_owner",
]

API_KEYS_ENV = "GRAPH_AGENT_API_KEYS"
"""The environment variable ``graph-agent serve`` reads keys from (comma-separated)."""
KEY_GROUPS_ENV = "GRAPH_AGENT_KEY_GROUPS"
"""The environment variable ``graph-agent serve`` reads key groups from:
``TEAM=KEY,KEY;OTHER=KEY`` (groups separated by ``;``)."""
OWNER_KEY = "owner"
"""The thread metadata key holding its creator's key fingerprint (LangGraph's convention)."""
PUBLIC_PATHS = frozenset({"/ok", "/info", "/docs", "/openapi.json"})
STUDIO_PREFIX = "/studio"
"""The Studio page's files (``graph_agent.serve.studio``): open, as the page holds no data."""


@dataclass(frozen=True, slots=True)
class Caller:
    """What one key may do with threads.

    Args:
        owner: What the threads it creates are stamped with (``metadata["owner"]``).
        sees: The owners whose threads it sees, or ``None`` for every thread.
    """

    owner: str
    sees: frozenset[str] | None


class RecordRules(Protocol):
    """Who may see which records in the request being served, when custom auth decides
    (:class:`graph_agent.serve.auth_custom.Access`)."""

    def allows(self, metadata: Mapping[str, Any], resource: str | None) -> bool:
        """Whether the request may see a record (of ``resource``) with ``metadata``."""

    def stamp(self, metadata: Mapping[str, Any], resource: str | None) -> dict[str, Any]:
        """``metadata`` of a new record (of ``resource``) with what the handlers added."""


_caller: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("caller", default=None)
RECORD_RULES: contextvars.ContextVar[RecordRules | None] = contextvars.ContextVar(
    "record_rules", default=None
)
"""The custom auth rules of the request being served (unset with API keys or no auth)."""


def current_owner() -> str | None:
    """The owner the request being served stamps on new threads (``None`` without keys)."""
    caller = _caller.get()
    return None if caller is None else caller.owner


def owns(metadata: Mapping[str, Any], resource: str | None = None) -> bool:
    """Whether the current request may see a record with ``metadata``: a thread (its runs
    with it), or, named by ``resource``, an assistant, a cron... (default: the resource the
    request's path is about)."""
    rules = RECORD_RULES.get()
    if rules is not None:
        return rules.allows(metadata, resource)
    caller = _caller.get()
    return caller is None or caller.sees is None or metadata.get(OWNER_KEY) in caller.sees


def stamp_owner(metadata: Mapping[str, Any], resource: str | None = None) -> dict[str, Any]:
    """``metadata`` of a new record (a thread; or ``resource``'s), owned by the current
    request's key (whatever it said), or with what custom auth handlers added."""
    rules = RECORD_RULES.get()
    if rules is not None:
        return rules.stamp(metadata, resource)
    owner = current_owner()
    stamped = {key: value for key, value in metadata.items() if key != OWNER_KEY}
    if owner is not None:
        stamped[OWNER_KEY] = owner
    return stamped


def fingerprint(key: str) -> str:
    """A key's stable, non-reversible name: what thread records store instead of the key."""
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:24]


def keys_from_env(text: str | None) -> list[str]:
    """The keys of a comma-separated list (blanks dropped)."""
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def key_group(text: str) -> tuple[str, list[str]]:
    """``TEAM=KEY,KEY`` as ``("TEAM", [KEY, KEY])``.

    Raises:
        ValueError: no group name, or no key; the message never repeats a key.
    """
    name, equals, keys = text.partition("=")
    name = name.strip()
    if not equals or not name or any(c in name for c in ",; "):
        raise ValueError(
            "a key group must be NAME=KEY[,KEY...] with a name of its own before the '=' "
            "(e.g. support=KEY1,KEY2)"
        )
    found = keys_from_env(keys)
    if not found:
        raise ValueError(f"key group {name!r} lists no key: give NAME=KEY[,KEY...]")
    return name, found


def key_groups_from_env(text: str | None) -> dict[str, list[str]]:
    """The groups of ``TEAM=KEY,KEY;OTHER=KEY`` (see :data:`KEY_GROUPS_ENV`)."""
    groups: dict[str, list[str]] = {}
    for part in (text or "").split(";"):
        if part.strip():
            name, keys = key_group(part)
            groups.setdefault(name, []).extend(keys)
    return groups


def callers(
    keys: Iterable[str],
    groups: Mapping[str, Iterable[str]] | None = None,
    *,
    shared: bool = False,
) -> dict[str, Caller]:
    """Each valid key with what it may see: alone, in a group, or everything when ``shared``.

    Raises:
        ValueError: a key is in two groups (which group would own its threads?).
    """
    group_of: dict[str, str] = {}
    for name, members in (groups or {}).items():
        for key in members:
            if group_of.get(key, name) != name:
                raise ValueError(
                    f"a key is in both key groups {group_of[key]!r} and {name!r}: "
                    "give each key one group"
                )
            group_of[key] = name
    table: dict[str, Caller] = {}
    for key in [*keys, *group_of]:
        if not key or key in table:
            continue
        own = fingerprint(key)
        group = group_of.get(key)
        owner = own if group is None else f"group:{group}"
        table[key] = Caller(owner=owner, sees=None if shared else frozenset({own, owner}))
    return table


def binding_problem(host: str, has_keys: bool) -> str | None:
    """Why serving on ``host`` without keys is unsafe, or ``None`` when it is fine."""
    if has_keys or _is_loopback(host):
        return None
    return (
        f"refusing to listen on {host} without an API key: anyone who can reach it could run "
        "the served agents and read every thread"
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class ApiKeyMiddleware:
    """Refuses requests without a valid key (401) and names the caller for :func:`owns`.

    Args:
        app: The app behind it.
        keys: The valid keys and what each sees (see :func:`callers`); none turns the check
            off.
    """

    def __init__(self, app: ASGIApp, keys: Mapping[str, Caller]) -> None:
        self.app = app
        self._keys = [(key.encode(), caller) for key, caller in keys.items() if key]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._keys:
            await self.app(scope, receive, send)
            return
        caller = self._caller_of(scope)
        if caller is None and not _public(_route_path(scope)):
            await _refuse(send)
            return
        token = _caller.set(caller)
        try:
            await self.app(scope, receive, send)
        finally:
            _caller.reset(token)

    def _caller_of(self, scope: Scope) -> Caller | None:
        given = _presented_key(scope["headers"])
        if given is None:
            return None
        found = None
        for key, caller in self._keys:  # every key compared: the time says nothing about which
            if hmac.compare_digest(given, key):
                found = caller
        return found


def _presented_key(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    for name, value in headers:
        if name == b"x-api-key" and value:
            return value
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            return value[7:].strip()
    return None


async def _refuse(send: Send) -> None:
    await send_error(
        send,
        401,
        "missing or invalid API key: send it in the x-api-key header "
        "(langgraph-sdk: get_client(url, api_key=...)) or as Authorization: Bearer KEY",
        [(b"www-authenticate", b'Bearer realm="graph-agent"')],
    )


def _route_path(scope: Scope) -> str:
    """The path the app routes: the request's, less the ``root_path`` it is mounted at (under
    ``Mount("/docs", app)`` the full path of its ``/threads`` begins with ``/docs/`` too)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        return path[len(root) :] or "/"
    return path


def _public(path: str) -> bool:
    return (
        path in PUBLIC_PATHS
        or path.startswith("/docs/")  # the /docs page's console files (serve/docs.py)
        or path == STUDIO_PREFIX
        or path.startswith(STUDIO_PREFIX + "/")
    )
