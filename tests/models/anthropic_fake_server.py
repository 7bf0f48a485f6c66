"""A real HTTP server on 127.0.0.1 that speaks Anthropic's Messages API (``POST /v1/messages``).

It is the fake OpenAI server's machinery (scripted replies in order, every request recorded)
with the Messages API's rules: by default a request breaking one of them gets the API's HTTP
400 ``invalid_request_error``, as the real API answers:

- ``model``, ``max_tokens`` and a non-empty ``messages`` list are required; no ``system`` role;
- turns alternate, starting with ``user``; text blocks are not empty;
- every ``tool_use`` block is answered by a ``tool_result`` block at the start of the next user
  turn (all of them in that one turn);
- with ``thinking`` enabled, an assistant turn holding ``tool_use`` starts with a thinking
  block, and a thinking block carries its signature;
- tools have a unique ``name`` (``^[a-zA-Z0-9_-]{1,64}$``) and an ``input_schema`` of type
  ``object``, and a request holding ``tool_use`` or ``tool_result`` blocks defines tools;
- ``tool_choice`` comes with tools only, names an offered tool, and, with ``thinking``
  enabled, does not force tool use (``any`` or ``tool``): only ``auto`` and ``none`` go with
  thinking;
- assistant turns hold text, ``tool_use`` and thinking blocks only (no ``image`` or
  ``document``);
- there is no ``response_format`` field.

Streams are real SSE (``event:`` and ``data:`` lines), built from a whole message by
:func:`message_events`, and can be cut anywhere.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .openai_fake_server import (
    API_KEY,
    Behaviour,
    FakeOpenAIServer,
    RecordedRequest,
    _Handler,
    reply_json,
    split,
)

__all__ = [
    "API_KEY",
    "FakeAnthropicServer",
    "anthropic_error",
    "message",
    "message_events",
    "reply_events",
    "text",
    "thinking",
    "tool_use",
]


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def thinking(value: str, signature: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": signature}


def message(
    *blocks: dict[str, Any],
    stop_reason: str = "end_turn",
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    """A whole Messages response."""
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": list(blocks),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage if usage is not None else {"input_tokens": 10, "output_tokens": 5},
    }


def anthropic_error(
    status: int, kind: str, text: str, *, headers: dict[str, str] | None = None
) -> Behaviour:
    """An error response in the API's shape."""
    body = {"type": "error", "error": {"type": kind, "message": text}, "request_id": "req_1"}
    return reply_json(body, status=status, headers=headers)


def message_events(whole: Mapping[str, Any], *, piece: int = 4) -> list[dict[str, Any]]:
    """The stream events the API sends for ``whole``: its text, tool input JSON and thinking
    cut in pieces of ``piece`` characters, each thinking block's signature as a
    ``signature_delta``, a ping, and the stop reason and usage at the end."""
    usage = dict(whole["usage"])
    start = {**whole, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}, {"type": "ping"}]
    for index, block in enumerate(whole["content"]):
        kind = block["type"]
        if kind == "text":
            opened, deltas = (
                {"type": "text", "text": ""},
                [{"type": "text_delta", "text": part} for part in split(block["text"], piece)],
            )
        elif kind == "tool_use":
            opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": part}
                for part in ["", *split(json.dumps(block["input"]), piece)]
            ]
        elif kind == "thinking":
            opened = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": part}
                for part in split(block["thinking"], piece)
            ] + [{"type": "signature_delta", "signature": block["signature"]}]
        else:
            opened, deltas = dict(block), []
        events.append({"type": "content_block_start", "index": index, "content_block": opened})
        events.extend(
            {"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas
        )
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        }
    )
    events.append({"type": "message_stop"})
    return events


def reply_events(
    events: Iterable[dict[str, Any] | str], *, drop_after: int | None = None
) -> Behaviour:
    """An SSE stream of ``events`` (``event:`` named by each one's type; a str is sent as the
    data of an event named ``raw``). ``drop_after=n`` closes the connection after n events,
    without ending the chunked body."""
    items = list(events)

    def behave(handler: _Handler, request: RecordedRequest) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for number, event in enumerate(items):
            if number == drop_after:
                handler.drop()
                return
            name, data = ("raw", event) if isinstance(event, str) else (event["type"], event)
            payload = data if isinstance(data, str) else json.dumps(data)
            handler.write_chunk(f"event: {name}\ndata: {payload}\n\n".encode())
        handler.write_chunk(b"")

    return behave


def _invalid(text: str) -> Behaviour:
    return anthropic_error(400, "invalid_request_error", text)


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_ASSISTANT_BLOCKS = ("text", "tool_use", "thinking", "redacted_thinking")


def messages_rejection(body: Any) -> Behaviour | None:
    """How the Messages API refuses ``body``, or ``None`` when it accepts it."""
    if not isinstance(body, dict):
        return _invalid("body must be a JSON object")
    if not isinstance(body.get("model"), str) or not isinstance(body.get("max_tokens"), int):
        return _invalid("model: Field required; max_tokens: Field required")
    if "response_format" in body:
        return _invalid("response_format: Extra inputs are not permitted")
    turns = body.get("messages")
    if not isinstance(turns, list) or not turns:
        return _invalid("messages: at least one message is required")
    thinking_on = (body.get("thinking") or {}).get("type") in ("enabled", "adaptive")
    if (refused := _tools_rejection(body, thinking_on)) is not None:
        return refused
    pending: set[str] = set()
    for number, turn in enumerate(turns):
        role = turn.get("role")
        if role not in ("user", "assistant"):
            return _invalid(f"messages.{number}.role: Input should be 'user' or 'assistant'")
        if role != ("user" if number % 2 == 0 else "assistant"):
            return _invalid("messages: roles must alternate between 'user' and 'assistant'")
        blocks = _blocks(turn.get("content"))
        if any(block.get("type") == "text" and not block.get("text") for block in blocks):
            return _invalid(f"messages.{number}: text content blocks must be non-empty")
        if role == "user":
            results = []
            for block in blocks:
                if block.get("type") != "tool_result":
                    break
                results.append(block.get("tool_use_id"))
            if pending and set(results) != pending:
                return _invalid(
                    f"messages.{number}: tool_use ids were found without tool_result blocks "
                    f"immediately after: {sorted(pending - set(results))}"
                )
            pending = set()
            continue
        for block in blocks:
            if block.get("type") not in _ASSISTANT_BLOCKS:
                return _invalid(
                    f"messages.{number}: '{block.get('type')}' blocks are not permitted within "
                    "assistant turns"
                )
        calls = [block for block in blocks if block.get("type") == "tool_use"]
        pending = {call.get("id") for call in calls}
        if thinking_on and calls and blocks[0].get("type") not in ("thinking", "redacted_thinking"):
            return _invalid(
                f"messages.{number}.content.0.type: Expected `thinking` or `redacted_thinking`, "
                f"but found `{blocks[0].get('type')}`. When `thinking` is enabled, a final "
                "`assistant` message must start with a thinking block"
            )
        for block in blocks:
            if block.get("type") == "thinking" and not block.get("signature"):
                return _invalid(f"messages.{number}: thinking.signature: Field required")
    if not body.get("tools") and any(
        block.get("type") in ("tool_use", "tool_result")
        for turn in turns
        for block in _blocks(turn.get("content"))
    ):
        return _invalid("Requests which include tool_use or tool_result blocks must define tools.")
    return None


def _tools_rejection(body: dict[str, Any], thinking_on: bool) -> Behaviour | None:
    tools = body.get("tools") or []
    names = [tool.get("name") for tool in tools]
    for number, tool in enumerate(tools):
        if not isinstance(tool.get("input_schema"), dict):
            return _invalid("tools: each tool needs a name and an input_schema")
        if not _TOOL_NAME.match(str(tool.get("name") or "")):
            return _invalid(
                f"tools.{number}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
            )
        if tool["input_schema"].get("type") != "object":
            return _invalid(f"tools.{number}.custom.input_schema.type: Input should be 'object'")
    if len(set(names)) != len(names):
        return _invalid("tools: Tool names must be unique.")
    choice = body.get("tool_choice")
    if choice is None:
        return None
    if not tools:
        return _invalid("tool_choice may only be specified while providing tools.")
    kind = choice.get("type")
    if kind == "tool" and choice.get("name") not in names:
        return _invalid(f"Tool '{choice.get('name')}' not found in provided tools")
    if thinking_on and kind in ("any", "tool"):
        return _invalid("Thinking may not be enabled when tool_choice forces tool use.")
    if kind == "none" and "disable_parallel_tool_use" in choice:
        return _invalid(
            "tool_choice.none.disable_parallel_tool_use: Extra inputs are not permitted"
        )
    return None


class FakeAnthropicServer(FakeOpenAIServer):
    """The server, started on a free port of 127.0.0.1; ``base_url`` is its root (no /v1)."""

    def __init__(self) -> None:
        super().__init__()
        self._state.check = messages_rejection
        self.base_url = self.base_url.removesuffix("/v1")
