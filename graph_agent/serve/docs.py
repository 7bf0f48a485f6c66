"""``/docs``: the OpenAPI document as a page.

The page is plain HTML made from the document: every operation (method, path, summary, body,
answers) and every schema, readable with scripts off and with nothing fetched from elsewhere.
"""

from __future__ import annotations

import html
import json
from typing import Any

__all__ = ["docs_html"]


def _rows(document: dict[str, Any]) -> str:
    rows = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            body_name = body["schema"]["$ref"].rsplit("/", 1)[-1] if body else ""
            answers = ", ".join(operation["responses"])
            rows.append(
                f"<tr><td><code>{method.upper()}</code></td><td><code>{html.escape(path)}</code>"
                f"</td><td>{html.escape(operation['summary'])}</td><td>{body_name}</td>"
                f"<td>{answers}</td></tr>"
            )
    return "".join(rows)


def docs_html(document: dict[str, Any]) -> str:
    """A page listing every operation of ``document``: method, path, summary, body, answers."""
    schemas = "".join(
        f"<h3 id='{name}'>{name}</h3><pre>{html.escape(json.dumps(schema, indent=2))}</pre>"
        for name, schema in document["components"]["schemas"].items()
    )
    title = html.escape(document["info"]["title"])
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:.2em .8em;"
        "text-align:left;vertical-align:top}pre{background:#f4f4f4;padding:.5em}</style>"
        f"</head><body><h1>{title}</h1><p>{html.escape(document['info']['description'])} "
        "The machine-readable document: <a href='/openapi.json'>/openapi.json</a>. "
        "Send the API key as the <code>x-api-key</code> header.</p>"
        "<table><tr><th>Method</th><th>Path</th><th>What</th><th>Body</th><th>Answers</th></tr>"
        f"{_rows(document)}</table><h2>Schemas</h2>{schemas}</body></html>"
    )
