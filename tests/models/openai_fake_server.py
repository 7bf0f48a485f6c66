"""A real HTTP server on 127.0.0.1 that speaks (and bends) the OpenAI chat-completions API.

Each test scripts the replies in order with :meth:`FakeOpenAIServer.enqueue`; every request is
recorded (headers and JSON body). By default the server is as strict as a llama.cpp server:

- an assistant message with ``content: null`` gets HTTP 500;
- ``tool_choice: "required"`` gets HTTP 500 with an empty body (set
  ``accepts_tool_choice_required = True`` to behave like OpenAI, which honours it);
- ``tool_choice`` or ``parallel_tool_calls`` without tools, or ``tools: []``, get HTTP 400;
- a tool message without ``tool_call_id`` gets 400, and history tool-call arguments that are not
  a JSON string get 500;
- an assistant message with parts other than ``text`` and ``refusal`` (an image) gets 400, as
  OpenAI answers it.

Replies can be plain JSON, SSE (chunked, with or without ``[DONE]``), a connection dropped in
the middle of a stream or before any answer, a stall (for read timeouts), or a function of the
request.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

API_KEY = "sk-test-SECRET-4242-do-not-leak"


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    client_port: int


Behaviour = Callable[["_Handler", RecordedRequest], None]


def completion(
    content: str | None = "",
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = "stop",
    usage: dict[str, int] | None = None,
    reasoning: str | None = None,
    model: str = "fake-model",
) -> dict[str, Any]:
    """A non-streamed chat completion."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def tool_call(call_id: str, name: str, arguments: str | dict[str, Any]) -> dict[str, Any]:
    """One tool call of a non-streamed completion (arguments as a JSON string by default)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, int] | None = None,
    no_choices: bool = False,
) -> dict[str, Any]:
    """One streamed ``chat.completion.chunk``."""
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "fake-model",
        "choices": []
        if no_choices
        else [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def tool_delta(
    index: int | None,
    *,
    call_id: str | None = None,
    name: str | None = None,
    arguments: str | None = None,
) -> dict[str, Any]:
    """One streamed tool-call piece."""
    piece: dict[str, Any] = {}
    if index is not None:
        piece["index"] = index
    if call_id is not None:
        piece["id"] = call_id
        piece["type"] = "function"
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    piece["function"] = function
    return piece


def split(text: str, size: int) -> list[str]:
    """``text`` cut into pieces of ``size`` characters."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def reply_json(body: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> Behaviour:
    def behave(handler: _Handler, request: RecordedRequest) -> None:
        handler.send_body(status, json.dumps(body).encode(), "application/json", headers)

    return behave


def reply_raw(
    status: int,
    body: bytes = b"",
    *,
    content_type: str = "text/plain",
    headers: dict[str, str] | None = None,
) -> Behaviour:
    def behave(handler: _Handler, request: RecordedRequest) -> None:
        handler.send_body(status, body, content_type, headers)

    return behave


def reply_error(
    status: int, message: str, *, code: str | None = None, headers: dict[str, str] | None = None
) -> Behaviour:
    """An OpenAI-style error object."""
    error = {"message": message, "type": "invalid_request_error", "code": code}
    return reply_json({"error": error}, status=status, headers=headers)


def reply_sse(
    events: Iterable[dict[str, Any] | str],
    *,
    done: bool = True,
    drop_after: int | None = None,
    stall_after: int | None = None,
    content_type: str = "text/event-stream",
) -> Behaviour:
    """A chunked SSE stream of ``events`` (dicts are JSON-encoded).

    ``done=False`` ends the stream cleanly without ``[DONE]``; ``drop_after=n`` closes the
    connection after n events without finishing the chunked body; ``stall_after=n`` stops
    sending after n events until the test ends.
    """
    payloads = [e if isinstance(e, str) else json.dumps(e) for e in events]

    def behave(handler: _Handler, request: RecordedRequest) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.send_header("Cache-Control", "no-cache")
        handler.end_headers()
        for number, payload in enumerate(payloads):
            if number == drop_after:
                handler.drop()
                return
            if number == stall_after:
                handler.server_state.release.wait(30)
                handler.drop()
                return
            handler.write_chunk(f"data: {payload}\n\n".encode())
        if drop_after is not None and drop_after >= len(payloads):
            handler.drop()
            return
        if done:
            handler.write_chunk(b"data: [DONE]\n\n")
        handler.write_chunk(b"")

    return behave


def hang_up(handler: _Handler, request: RecordedRequest) -> None:
    """Close the connection without answering (a server that crashed or restarted)."""
    handler.drop()


def stall(seconds: float = 30.0) -> Behaviour:
    """Send nothing for ``seconds`` (or until the test ends), then close."""

    def behave(handler: _Handler, request: RecordedRequest) -> None:
        handler.server_state.release.wait(seconds)
        handler.drop()

    return behave


def dynamic(make: Callable[[RecordedRequest], Behaviour]) -> Behaviour:
    """Choose the reply by looking at the request."""

    def behave(handler: _Handler, request: RecordedRequest) -> None:
        make(request)(handler, request)

    return behave


def strict_rejection(body: Any, *, accepts_tool_choice_required: bool = False) -> Behaviour | None:
    """How a strict (llama.cpp-like) server refuses ``body``, or ``None`` when it accepts it.

    ``accepts_tool_choice_required``: answer ``tool_choice: "required"`` as OpenAI does (like
    any other request) instead of with llama.cpp's empty HTTP 500.
    """
    if not isinstance(body, dict):
        return reply_error(400, "body must be a JSON object")
    tools = body.get("tools")
    if body.get("tool_choice") == "required" and not accepts_tool_choice_required:
        return reply_raw(500, b"")
    if tools == []:
        return reply_error(400, "[] is too short - 'tools'")
    if not tools and ("tool_choice" in body or "parallel_tool_calls" in body):
        return reply_error(400, "tool_choice is only allowed when tools are specified")
    for number, message in enumerate(body.get("messages", [])):
        if message.get("role") == "assistant":
            if (refused := _assistant_part_rejection(number, message.get("content"))) is not None:
                return refused
            if message.get("content", "") is None:
                return reply_json(
                    {"error": {"code": 500, "message": "content null", "type": "server_error"}},
                    status=500,
                )
            for call in message.get("tool_calls") or []:
                arguments = call.get("function", {}).get("arguments")
                try:
                    json.loads(arguments)
                except (TypeError, ValueError):
                    return reply_json({"error": {"message": "bad arguments"}}, status=500)
        if message.get("role") == "tool" and not message.get("tool_call_id"):
            return reply_error(400, "tool message needs tool_call_id")
    return None


def _assistant_part_rejection(number: int, content: Any) -> Behaviour | None:
    """OpenAI's answer to an assistant message holding parts other than text and refusal."""
    for index, part in enumerate(content if isinstance(content, list) else []):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "image_url":
            return reply_error(
                400,
                f"Invalid 'messages[{number}]'. Image URLs are only allowed for messages with "
                "role 'user', but this message with role 'assistant' contains an image URL.",
            )
        if kind not in ("text", "refusal"):
            return reply_error(
                400,
                f"Invalid value: '{kind}'. Supported values are: 'text' and 'refusal'. "
                f"(param: messages[{number}].content[{index}].type)",
            )
    return None


class _State:
    def __init__(self) -> None:
        self.queue: deque[Behaviour] = deque()
        self.requests: list[RecordedRequest] = []
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.strict = True
        self.accepts_tool_choice_required = False
        # Another API's rules (the Anthropic fake server's), used instead of strict_rejection.
        self.check: Callable[[Any], Behaviour | None] | None = None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_state: _State

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode(errors="replace")
        request = RecordedRequest(
            "POST", self.path, dict(self.headers.items()), body, self.client_address[1]
        )
        state = self.server_state
        if state.check is not None:
            rejection = state.check(body) if state.strict else None
        else:
            rejection = (
                strict_rejection(
                    body, accepts_tool_choice_required=state.accepts_tool_choice_required
                )
                if state.strict
                else None
            )
        with state.lock:
            state.requests.append(request)
            behaviour = state.queue.popleft() if state.queue and rejection is None else None
        if rejection is not None:
            rejection(self, request)
        elif behaviour is None:
            reply_error(599, "the fake server has no scripted reply left")(self, request)
        else:
            behaviour(self, request)

    def send_body(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def drop(self) -> None:
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that hang up on purpose are part of the tests


class FakeOpenAIServer:
    """The server, started on a free port of 127.0.0.1; use as a context manager."""

    def __init__(self) -> None:
        self._state = _State()
        handler = type("Handler", (_Handler,), {"server_state": self._state})
        self._server = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        host, port = self._server.server_address[:2]
        self.base_url = f"http://{host!s}:{port}/v1"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._state.release.set()
        self._server.shutdown()
        self._server.server_close()

    @property
    def strict(self) -> bool:
        return self._state.strict

    @strict.setter
    def strict(self, value: bool) -> None:
        self._state.strict = value

    @property
    def accepts_tool_choice_required(self) -> bool:
        """``False`` (the default): ``tool_choice: "required"`` gets llama.cpp's empty HTTP 500;
        ``True``: it is accepted, as by OpenAI."""
        return self._state.accepts_tool_choice_required

    @accepts_tool_choice_required.setter
    def accepts_tool_choice_required(self, value: bool) -> None:
        self._state.accepts_tool_choice_required = value

    def enqueue(self, *behaviours: Behaviour) -> None:
        """Add replies, used one per request in order."""
        with self._state.lock:
            self._state.queue.extend(behaviours)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far."""
        with self._state.lock:
            return list(self._state.requests)

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies of every request received so far."""
        return [request.body for request in self.requests]
