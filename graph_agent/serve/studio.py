"""The Studio: a page that ``graph-agent serve`` serves at ``/studio`` to watch, debug and steer
runs in a browser.

The page is plain HTML, CSS and JavaScript modules shipped inside the package
(``graph_agent/serve/studio_web/``): no build step, no CDN, nothing fetched from any host but
this server (its Content-Security-Policy says so to the browser too). It talks to the server
only through the public HTTP API (``/assistants``, ``/threads``, ``/runs/stream``, and
``/store`` for its memory browser, ``memory.js``), with the API key a user types into it
once. The files are public (``auth.STUDIO_PREFIX``); the data is
not.
"""

from __future__ import annotations

import json
from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

__all__ = ["STUDIO_FILES", "studio_routes"]

STUDIO_FILES = Path(__file__).with_name("studio_web")
"""Where the page's files live (shipped in the wheel with the package)."""

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
"""The browser may load and connect to nothing but this server."""


def studio_routes(*, keys_required: bool) -> list[Route]:
    """``GET /studio`` (to ``/studio/``), the page's files, and ``/studio/config.json`` (what
    the page must know before its first API call: whether to ask for a key)."""
    files = {
        path.name: (path.read_bytes(), _TYPES[path.suffix])
        for path in sorted(STUDIO_FILES.iterdir())
        if path.suffix in _TYPES
    }
    files["config.json"] = (
        json.dumps({"keys_required": keys_required}).encode(),
        "application/json",
    )
    headers = {
        "Cache-Control": "no-cache",
        "Content-Security-Policy": _POLICY,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }

    async def home(request: Request) -> Response:
        return RedirectResponse(request.url.path + "/", status_code=308)

    async def file(request: Request) -> Response:
        name = request.path_params["name"] or "index.html"
        found = files.get(name)  # only the shipped files: no path ever reaches the disk
        if found is None:
            return Response(
                json.dumps({"detail": f"no Studio file {name!r}", "code": "not_found"}),
                status_code=404,
                media_type="application/json",
            )
        body, media_type = found
        return Response(body, media_type=media_type, headers=headers)

    return [
        Route("/studio", home, methods=["GET"]),
        Route("/studio/{name:path}", file, methods=["GET"]),
    ]
