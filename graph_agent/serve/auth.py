"""API keys: who may call the server, and which threads each caller sees.

A request carries its key as LangGraph's client sends it (header ``x-api-key``) or as
``Authorization: Bearer KEY``. With keys configured, a request without a valid one is a 401
(``/ok``, ``/docs`` and ``/openapi.json`` stay open), and each key is an *owner*: the threads
it creates are stamped with the key's fingerprint (``metadata["owner"]``, a hash, never the
key) and another key is told they do not exist (404, not 403: existence is not leaked).
Without keys, everyone sees everything: fine on loopback, refused elsewhere by the command.
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from graph_agent.serve.errors import error_bytes

__all__ = [
    "API_KEYS_ENV",
    "OWNER_KEY",
    "PUBLIC_PATHS",
    "ApiKeyMiddleware",
    "binding_problem",
    "current_owner",
    "keys_from_env",
    "owns",
    "stamp_owner",
]

API_KEYS_ENV = "GRAPH_AGENT_API_KEYS"
"""The environment variable ``graph-agent serve`` reads keys from (comma-separated)."""
OWNER_KEY = "owner"
"""The thread metadata key holding its creator's key fingerprint (LangGraph's convention)."""
PUBLIC_PATHS = frozenset({"/ok", "/docs", "/openapi.json"})

_owner: contextvars.ContextVar[str | None] = contextvars.ContextVar("owner", default=None)


def current_owner() -> str | None:
    """The fingerprint of the key of the request being served (``None`` without keys)."""
    return _owner.get()


def owns(metadata: Mapping[str, Any]) -> bool:
    """Whether the current request may see a thread with ``metadata``."""
    owner = _owner.get()
    return owner is None or metadata.get(OWNER_KEY) == owner


def stamp_owner(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` of a new thread, owned by the current request's key (whatever it said)."""
    owner = _owner.get()
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
        keys: The valid keys; none turns the check off.
    """

    def __init__(self, app: ASGIApp, keys: Iterable[str]) -> None:
        self.app = app
        self._keys = [(key.encode(), fingerprint(key)) for key in keys if key]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._keys:
            await self.app(scope, receive, send)
            return
        owner = self._owner_of(scope)
        if owner is None and scope["path"] not in PUBLIC_PATHS:
            await _refuse(send)
            return
        token = _owner.set(owner)
        try:
            await self.app(scope, receive, send)
        finally:
            _owner.reset(token)

    def _owner_of(self, scope: Scope) -> str | None:
        given = _presented_key(scope["headers"])
        if given is None:
            return None
        owner = None
        for key, name in self._keys:  # every key compared: the time says nothing about which
            if hmac.compare_digest(given, key):
                owner = name
        return owner


def _presented_key(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    for name, value in headers:
        if name == b"x-api-key" and value:
            return value
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            return value[7:].strip()
    return None


async def _refuse(send: Send) -> None:
    body = error_bytes(
        401,
        "missing or invalid API key: send it in the x-api-key header "
        "(langgraph-sdk: get_client(url, api_key=...)) or as Authorization: Bearer KEY",
    )
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer realm="graph-agent"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
