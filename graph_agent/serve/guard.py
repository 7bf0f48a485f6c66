"""Keeping web pages off the server: the ``Host`` and ``Origin`` checks, and CORS for listed
origins.

A browser lets any page send a "simple" cross-site request (a ``POST`` with a ``text/plain``
body, no preflight), and a page whose domain is re-pointed at 127.0.0.1 (DNS rebinding) may
even read the answers. A server without API keys would run both. So, as Jupyter and LangGraph's
dev server do:

- without keys, a request must name this server in its ``Host`` header: its bound address,
  ``localhost``, ``127.0.0.1`` or ``[::1]`` (any port), or a host allowed with ``--allow-host``
  (``*``: any). Else 403. With keys the check is off: a page cannot present a key it does not
  have, and a server behind a proxy is reached under names of the proxy's;
- with or without keys, a request with an ``Origin`` (sent by browsers) must come from the
  server's own origin (the ``Origin``'s host and port are the ``Host``'s) or one listed with
  ``--cors-origin``. Else 403. The listed ones also get their preflight (``OPTIONS``) answered
  and the CORS headers (Starlette's :class:`CORSMiddleware`). Requests without ``Origin``
  (curl, SDKs, servers) are not affected;
- a JSON body must say so: ``Content-Type: application/json`` (or a ``+json`` type), else
  415 (:func:`is_json_type`, checked where the app parses a body). A cross-site form or
  ``text/plain`` body therefore never reaches a handler.

:class:`GuardMiddleware` answers before anything else runs; it costs a few header lookups.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable

from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from graph_agent.serve.errors import send_error

__all__ = [
    "ANY",
    "LOCAL_HOSTS",
    "GuardMiddleware",
    "cors_origin",
    "guard_middleware",
    "host_name",
    "is_json_type",
    "json_type_problem",
]

ANY = "*"
"""As an allowed host or CORS origin: every one."""
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
"""The names a keyless server always answers to (with any port)."""
_KNOWN = 64
"""How many allowed ``Host`` values the guard remembers, not to parse them again."""
_EXPOSED = ("Content-Location", "Location")
"""Response headers a listed origin's page may read: where a run's stream is (SDKs rejoin it)."""


def host_name(value: str) -> str:
    """The host of a ``Host`` header or ``--allow-host`` value, without its port: lower case,
    an IPv6 address without brackets, no trailing dot (``[::1]:8123`` → ``::1``)."""
    value = value.strip().lower()
    if value.startswith("["):
        name = value[1:].partition("]")[0]
    elif value.count(":") == 1:
        name = value.partition(":")[0]
    else:  # a bare name, or an IPv6 address as --host takes it (no brackets, no port)
        name = value
    return name.rstrip(".")


def cors_origin(value: str) -> str:
    """``value`` as the ``Origin`` a browser sends for it (``https://app.example.com``: lower
    case, no trailing slash), or ``*``.

    Raises:
        ValueError: not ``SCHEME://HOST[:PORT]`` (a path, a query, no host).
    """
    text = value.strip().lower().removesuffix("/")
    if text == ANY:
        return ANY
    parts = urllib.parse.urlsplit(text)
    if not parts.scheme or not parts.netloc or parts.path or parts.query or parts.fragment:
        raise ValueError(
            f"--cors-origin {value!r} is not an origin: give SCHEME://HOST[:PORT] as the page's "
            "address bar shows it, without a path (e.g. https://app.example.com or "
            "http://localhost:3000), or * for every origin"
        )
    return text


def _allowed_host(value: str) -> str:
    if value.strip() == ANY:
        return ANY
    name = host_name(value)
    if not name or "/" in value or any(c.isspace() for c in name):
        raise ValueError(
            f"--allow-host {value!r} is not a host name: give the name clients use in the "
            "address (e.g. agents.example.com, 192.168.1.20), or * for any"
        )
    return name


def is_json_type(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` declares JSON: ``application/json`` or ``application/*+json``,
    with any parameters (``; charset=utf-8``)."""
    if content_type is None:
        return False
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def json_type_problem(content_type: str | None) -> str:
    """What a 415 says: the body was not declared as JSON, and how to send it."""
    got = f"Content-Type {content_type!r}" if content_type else "no Content-Type"
    return (
        f"the request body must be JSON sent with Content-Type: application/json (got {got}); "
        "set that header (curl: -H 'content-type: application/json')"
    )


def guard_middleware(
    *,
    keyed: bool,
    bound_host: str | None = None,
    allow_hosts: Iterable[str] = (),
    cors_origins: Iterable[str] = (),
) -> list[Middleware]:
    """The middleware that checks ``Host`` and ``Origin``, then (with listed origins) CORS.

    Args:
        keyed: The server checks API keys (then ``Host`` is not checked).
        bound_host: The address the server listens on: a ``Host`` may name it. None: only the
            names of :data:`LOCAL_HOSTS`.
        allow_hosts: More names a ``Host`` may carry (``*``: any).
        cors_origins: The origins, besides the server's own, whose pages may call it (``*``:
            any).

    Raises:
        ValueError: a host or an origin that is not one, saying what to give.
    """
    origins = sorted({cors_origin(origin) for origin in cors_origins})
    hosts: frozenset[str] | None = None
    if not keyed:
        named = {_allowed_host(host) for host in allow_hosts}
        if bound_host is not None:
            named.add(host_name(bound_host))
        hosts = None if ANY in named else LOCAL_HOSTS | named
    found = [Middleware(GuardMiddleware, hosts=hosts, origins=frozenset(origins))]
    if origins:
        found.append(
            Middleware(
                CORSMiddleware,
                allow_origins=origins,
                allow_methods=["*"],
                allow_headers=["*"],
                allow_private_network=True,  # a listed page on the internet may call this one
                expose_headers=_EXPOSED,
            )
        )
    return found


class GuardMiddleware:
    """Refuses (403) a request whose ``Host`` is not this server's, when ``hosts`` is set, or
    whose ``Origin`` is neither the server's own nor in ``origins``.

    Args:
        app: The app behind it.
        hosts: The host names a ``Host`` header may carry (any port); None: any.
        origins: The other origins whose pages may call the server (``*``: any).
    """

    def __init__(self, app: ASGIApp, *, hosts: frozenset[str] | None, origins: frozenset[str]):
        self.app = app
        self.hosts = hosts
        self.origins = origins
        self.any_origin = ANY in origins
        # Host headers already found allowed, as sent: most requests are a set lookup. Only
        # allowed ones are kept (a few names, by port), and at most _KNOWN of them.
        self._known: set[bytes] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = origin = None
        for name, value in scope["headers"]:
            if name == b"host":
                host = value
            elif name == b"origin":
                origin = value
        # no Host at all is no browser's (HTTP/1.0 from a script): nothing to rebind
        if host is not None and host not in self._known and not self._answers(host):
            await self._refuse_host(send, _text(host))
            return
        if origin is not None and not self._from_allowed_origin(_text(origin), host):
            await self._refuse_origin(send, _text(origin), host)
            return
        await self.app(scope, receive, send)

    def _answers(self, host: bytes) -> bool:
        """Whether ``host`` names this server (remembered when it does)."""
        if self.hosts is not None and host_name(_text(host)) not in self.hosts:
            return False
        if len(self._known) < _KNOWN:
            self._known.add(host)
        return True

    def _from_allowed_origin(self, origin: str, host: bytes | None) -> bool:
        if self.any_origin or origin in self.origins:
            return True
        return host is not None and origin.partition("://")[2] == _text(host)

    async def _refuse_host(self, send: Send, host: str) -> None:
        name = host_name(host)[:200]
        await send_error(
            send,
            403,
            f"this server does not answer to the host {name!r} (the Host header): without API "
            "keys it answers only to its own address, localhost, 127.0.0.1 and [::1], so that "
            "no web page reaches it by DNS rebinding; to serve it under that name, start it "
            f"with --allow-host {name} (create_app(allow_hosts=[...])), or give it API keys",
            code="host_not_allowed",
        )

    async def _refuse_origin(self, send: Send, origin: str, host: bytes | None) -> None:
        origin = origin[:200]
        own = f" (at {_text(host)[:200]!r})" if host else ""
        await send_error(
            send,
            403,
            f"requests from pages at {origin!r} are refused: this server answers browsers only "
            f"from its own origin{own} and the origins it lists; to let that page call it, "
            f"start it with --cors-origin {origin} (create_app(cors_origins=[...]))",
            code="origin_not_allowed",
        )


def _text(header: bytes) -> str:
    """A header's value as lower-case text (ASGI gives bytes; host names and origins are
    ASCII, and compared without case)."""
    return header.decode("latin-1").lower()
