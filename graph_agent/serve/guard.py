"""Keeping web pages off the server: the ``Host`` and ``Origin`` checks, and CORS for listed
origins.

A browser lets any page send a "simple" cross-site request (a ``POST`` with a ``text/plain``
body, no preflight), and a page whose domain is re-pointed at 127.0.0.1 (DNS rebinding) may
even read the answers. A server without API keys would run both. So, as Jupyter and LangGraph's
dev server do:

- without keys, a request must name this server in its one ``Host`` header: its bound address,
  ``localhost``, ``127.0.0.1`` or ``[::1]`` (any port), or a host allowed with ``--allow-host``.
  Else 403 (two ``Host`` headers: 400). With keys the check is off: a page cannot present a key
  it does not have, and a server behind a proxy is reached under names of the proxy's;
- with or without keys, a request with an ``Origin`` (sent by browsers) must come from the
  server's own origin or one listed with ``--cors-origin``. Else 403. Its own origin: the
  browser says ``Sec-Fetch-Site: same-origin`` (a header no page can set), or the ``Origin``'s
  host and port are the ``Host``'s (a browser without ``Sec-Fetch-*``; behind a proxy that
  rewrites ``Host``, as nginx's default ``proxy_set_header Host $proxy_host`` does, only the
  first holds). The listed ones also get their preflight (``OPTIONS``) answered and the CORS
  headers (Starlette's :class:`CORSMiddleware`). Requests without ``Origin`` (curl, SDKs,
  servers) are not affected;
- ``*`` (any host, any origin) is refused without keys unless the server is told it is
  insecure (``--insecure-no-auth``): with ``--cors-origin *`` every page on the internet could
  run the agents and read the answers, with ``--allow-host *`` any page could by DNS
  rebinding (its ``Origin`` is its own ``Host``);
- a JSON body must say so: ``Content-Type: application/json`` (or a ``+json`` type), else
  415 (:func:`is_json_type`, checked where the app parses a body). A cross-site form or
  ``text/plain`` body therefore never reaches a handler.

:class:`GuardMiddleware` answers before anything else runs, for HTTP requests and websocket
handshakes alike (a websocket refused is closed before it is accepted: a 403); it costs a few
header lookups.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable
from typing import NamedTuple

from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from graph_agent.serve.errors import send_error

_REFUSED_WEBSOCKET = 1008
"""The close code of a websocket refused by the guard (policy violation): the server answers
its handshake with a 403."""

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
_PORT = re.compile(r"(?::[0-9]*)?")
"""What may follow a host name in a ``Host`` header: a port (RFC 3986 lets it be empty)."""


class _Refusal(NamedTuple):
    """How the guard answers a request it refuses."""

    status: int
    code: str
    detail: str


def host_name(value: str) -> str:
    """The host of a ``Host`` header or ``--allow-host`` value, without its port: lower case,
    an IPv6 address without brackets, no trailing dot (``[::1]:8123`` → ``::1``). A value that
    is not ``HOST[:PORT]`` (``[::1]evil``) is returned whole, lower case: it names no host."""
    value = value.strip().lower()
    name = _split_host(value)
    return value if name is None else name.rstrip(".")


def _split_host(value: str) -> str | None:
    """The host part of ``value`` (lower case, stripped), or None when what follows it is no
    port."""
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
    elif value.count(":") == 1:
        name, colon, port = value.partition(":")
        rest = colon + port
    else:  # a bare name, or an IPv6 address as --host takes it (no brackets, no port)
        name, rest = value, ""
    return name if _PORT.fullmatch(rest) else None


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
    malformed = _split_host(value.strip().lower()) is None
    if not name or malformed or "/" in value or any(c.isspace() for c in name):
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
    insecure_no_auth: bool = False,
) -> list[Middleware]:
    """The middleware that checks ``Host`` and ``Origin``, then (with listed origins) CORS.

    Args:
        keyed: The server checks API keys (then ``Host`` is not checked).
        bound_host: The address the server listens on: a ``Host`` may name it. None: only the
            names of :data:`LOCAL_HOSTS`.
        allow_hosts: More names a ``Host`` may carry (``*``: any; without keys, only with
            ``insecure_no_auth``).
        cors_origins: The origins, besides the server's own, whose pages may call it (``*``:
            any; without keys, only with ``insecure_no_auth``).
        insecure_no_auth: Take ``*`` without keys (``--insecure-no-auth``: something in
            front, a proxy, checks who calls).

    Raises:
        ValueError: a host or an origin that is not one, or ``*`` without keys nor
            ``insecure_no_auth``, saying what to give.
    """
    origins = sorted({cors_origin(origin) for origin in cors_origins})
    hosts: frozenset[str] | None = None
    if not keyed:
        named = {_allowed_host(host) for host in allow_hosts}
        if not insecure_no_auth:
            _refuse_any_without_keys(named, origins)
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


def _refuse_any_without_keys(hosts: Iterable[str], origins: Iterable[str]) -> None:
    """Refuse ``*`` as a CORS origin or an allowed host on a server without keys: it would
    open it to every web page again (see the module docstring)."""
    if ANY in origins:
        option, setting = (
            "--cors-origin",
            "cors_origins, or langgraph.json's http.cors.allow_origins",
        )
        why = (
            "any web page on the internet could run its agents and read the answers (the "
            "visitor's browser reaches this server, on their machine or network, for it)"
        )
        narrow = "list the pages' origins (--cors-origin https://app.example.com)"
    elif ANY in hosts:
        option, setting = "--allow-host", "allow_hosts"
        why = (
            "any web page could reach it by DNS rebinding (its own name re-pointed at this "
            "server: its Origin then matches its Host, and both checks pass)"
        )
        narrow = "name the hosts clients use (--allow-host agents.example.com)"
    else:
        return
    raise ValueError(
        f'{option} * (or "*" in {setting}) on a server without API keys: {why}; {narrow}, '
        "give the server API keys (--api-key), or, behind a proxy that checks who calls, pass "
        "--insecure-no-auth (create_app(insecure_no_auth=True))"
    )


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
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = origin = fetch_site = None
        hosts = 0
        for name, value in scope["headers"]:
            if name == b"host":
                host, hosts = value, hosts + 1
            elif name == b"origin":
                origin = value
            elif name == b"sec-fetch-site":
                fetch_site = value
        refusal = None
        if hosts > 1:  # which one would the checks and the app read?
            refusal = self._two_hosts()
        # no Host at all is no browser's (HTTP/1.0 from a script): nothing to rebind
        elif host is not None and host not in self._known and not self._answers(host):
            refusal = self._refuse_host(_text(host))
        elif origin is not None and not self._from_allowed_origin(_text(origin), host, fetch_site):
            refusal = self._refuse_origin(_text(origin), host)
        if refusal is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":  # closed before accepted: the server answers 403
            close = {"type": "websocket.close", "code": _REFUSED_WEBSOCKET}
            await send({**close, "reason": refusal.code})
        else:
            await send_error(send, refusal.status, refusal.detail, code=refusal.code)

    def _answers(self, host: bytes) -> bool:
        """Whether ``host`` names this server (remembered when it does)."""
        if self.hosts is not None and host_name(_text(host)) not in self.hosts:
            return False
        if len(self._known) < _KNOWN:
            self._known.add(host)
        return True

    def _from_allowed_origin(
        self, origin: str, host: bytes | None, fetch_site: bytes | None
    ) -> bool:
        if self.any_origin or origin in self.origins or fetch_site == b"same-origin":
            return True
        return host is not None and origin.partition("://")[2] == _text(host)

    @staticmethod
    def _two_hosts() -> _Refusal:
        return _Refusal(
            400,
            "bad_request",
            "the request has more than one Host header: send one, naming the server",
        )

    @staticmethod
    def _refuse_host(host: str) -> _Refusal:
        name = host_name(host)[:200]
        return _Refusal(
            403,
            "host_not_allowed",
            f"this server does not answer to the host {name!r} (the Host header): without API "
            "keys it answers only to its own address, localhost, 127.0.0.1 and [::1], so that "
            "no web page reaches it by DNS rebinding; to serve it under that name, start it "
            f"with --allow-host {name} (create_app(allow_hosts=[...])), or give it API keys",
        )

    @staticmethod
    def _refuse_origin(origin: str, host: bytes | None) -> _Refusal:
        origin = origin[:200]
        own = f" (at {_text(host)[:200]!r})" if host else ""
        return _Refusal(
            403,
            "origin_not_allowed",
            f"requests from pages at {origin!r} are refused: this server answers browsers only "
            f"from its own origin{own} and the origins it lists; to let that page call it, "
            f"start it with --cors-origin {origin} (create_app(cors_origins=[...]))",
        )


def _text(header: bytes) -> str:
    """A header's value as lower-case text (ASGI gives bytes; host names and origins are
    ASCII, and compared without case)."""
    return header.decode("latin-1").lower()
