"""The server's error bodies: ``{"detail": message, "code": code}`` for every refusal.

``detail`` is what LangGraph Server sends (its client shows it); ``code`` is a stable word a
program can branch on. Messages say what to fix and never carry a stack trace, a key or a
value the server holds secret.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from starlette.types import Send

from graph_agent.serve.bodies import JSONResponse, json_bytes

__all__ = ["CODES", "error_body", "error_bytes", "error_response", "send_error"]

CODES: dict[int, str] = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_input",
    500: "internal_error",
}
"""The ``code`` each status carries unless the refusal names a more precise one."""


def error_body(status: int, detail: str, code: str | None = None) -> dict[str, Any]:
    """The JSON body of an error with ``status``."""
    return {"detail": detail, "code": code or CODES.get(status, "error")}


def error_response(
    status: int, detail: str, code: str | None = None, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """An error as a Starlette response."""
    return JSONResponse(error_body(status, detail, code), status_code=status, headers=headers)


def error_bytes(status: int, detail: str, code: str | None = None) -> bytes:
    """An error body as bytes, for middleware that answers before the app runs."""
    return json_bytes(error_body(status, detail, code))


async def send_error(
    send: Send,
    status: int,
    detail: str,
    headers: Sequence[tuple[bytes, bytes]] = (),
    *,
    code: str | None = None,
) -> None:
    """Answer with an error body straight from ASGI middleware, before the app runs."""
    body = error_bytes(status, detail, code)
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": [*start, *headers]})
    await send({"type": "http.response.body", "body": body})
