"""``/docs``: the OpenAPI document as a page, with a console to try a request.

The page is plain HTML made from the document: every operation (method, path, summary, body,
answers) and every schema, readable with scripts off. At its top it embeds the console
(``/docs/try.html``, files shipped in ``graph_agent/serve/docs_web/``): it lists the operations
of ``/openapi.json`` and sends the one a user picks, with the path and query parameters and
JSON body filled in, and the API key (``x-api-key``) when the server has keys. Nothing is
fetched from any host but this server: the Content-Security-Policy says so to the browser too.
"""

from __future__ import annotations

import functools
import html
import json
from pathlib import Path
from typing import Any

__all__ = ["CONSOLE_HEADERS", "DOCS_FILES", "PAGE_HEADERS", "console_file", "docs_html"]

DOCS_FILES = Path(__file__).with_name("docs_web")
"""Where the console's files live (shipped in the wheel with the package)."""

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
CONSOLE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
"""The console may load and connect to nothing but this server, and only /docs frames it."""
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "frame-src 'self'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
}
"""The page runs no script and shows nothing from elsewhere; it frames only the console."""


def console_file(name: str, *, keys_required: bool) -> tuple[bytes, str] | None:
    """The console's file ``name`` and its content type (None: no such file). The page learns
    from ``try.html`` whether to ask for the API key."""
    found = _shipped().get(name)  # only the shipped files: no path ever reaches the disk
    if found is None:
        return None
    body, media_type = found
    if name == "try.html":
        body = body.replace(b"{{keys}}", b"yes" if keys_required else b"no")
    return body, media_type


@functools.cache
def _shipped() -> dict[str, tuple[bytes, str]]:
    return {
        path.name: (path.read_bytes(), _TYPES[path.suffix])
        for path in sorted(DOCS_FILES.iterdir())
        if path.suffix in _TYPES
    }


def _body_name(schema: dict[str, Any]) -> str:
    """The body's model, ``[Model]`` for an array of them."""
    if schema.get("type") == "array":
        return f"[{_body_name(schema['items'])}]"
    return str(schema["$ref"]).rsplit("/", 1)[-1]


def _rows(document: dict[str, Any]) -> str:
    rows = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            body_name = _body_name(body["schema"]) if body else ""
            answers = ", ".join(operation["responses"])
            rows.append(
                f"<tr><td><code>{method.upper()}</code></td><td><code>{html.escape(path)}</code>"
                f"</td><td>{html.escape(operation['summary'])}</td><td>{body_name}</td>"
                f"<td>{answers}</td></tr>"
            )
    return "".join(rows)


def docs_html(document: dict[str, Any]) -> str:
    """A page listing every operation of ``document`` (method, path, summary, body, answers)
    and every schema, under the console that sends them."""
    schemas = "".join(
        f"<h3 id='{name}'>{name}</h3><pre>{html.escape(json.dumps(schema, indent=2))}</pre>"
        for name, schema in document["components"]["schemas"].items()
    )
    title = html.escape(document["info"]["title"])
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:.2em .8em;"
        "text-align:left;vertical-align:top}pre{background:#f4f4f4;padding:.5em}"
        "iframe{width:100%;height:42em;border:1px solid #ccc}</style>"
        f"</head><body><h1>{title}</h1><p>{html.escape(document['info']['description'])} "
        "The machine-readable document: <a href='/openapi.json'>/openapi.json</a>. "
        "Send the API key as the <code>x-api-key</code> header.</p>"
        "<iframe id='console' src='/docs/try.html' title='Try a request'></iframe>"
        "<h2>Operations</h2>"
        "<table><tr><th>Method</th><th>Path</th><th>What</th><th>Body</th><th>Answers</th></tr>"
        f"{_rows(document)}</table><h2>Schemas</h2>{schemas}</body></html>"
    )
