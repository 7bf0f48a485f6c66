"""The request size limit: a body over ``max_body_bytes`` is a 413 before any handler reads it.

A declared ``Content-Length`` over the limit is refused at once; a chunked body is read up to
the limit and refused at the first byte past it. Bodies under the limit are handed on as read.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from graph_agent.serve.errors import send_error

BODY = "graph_agent.body"
"""The scope key of the request's whole body once read here, ``(receive, body)``: a route
handed that ``receive`` (no layer between rewrote the body, as custom auth may) takes the
body from there instead of reading it through ``receive`` again
(``graph_agent.serve.routes``)."""

__all__ = ["BODY", "DEFAULT_MAX_BODY_BYTES", "BodyLimitMiddleware"]

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
"""4 MiB: a long conversation fits; a runaway upload does not."""


class BodyLimitMiddleware:
    """Answers 413 to a request whose body exceeds ``max_body_bytes``."""

    def __init__(self, app: ASGIApp, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._refuse(send)
            return
        messages: list[Message] = []

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_body_bytes:
                await self._refuse(send)
                return
            if not message.get("more_body", False):
                # read whole: the route takes it from here if it is handed this replay
                scope[BODY] = replay, b"".join(part.get("body", b"") for part in messages)
                break
        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        await send_error(
            send,
            413,
            f"the request body is over {self.max_body_bytes} bytes: send less "
            "(the server's limit is set with --max-body-bytes)",
            [(b"connection", b"close")],
        )
