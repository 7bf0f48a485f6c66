"""The LangGraph Server wire format: our values as the JSON its clients expect, and back.

Messages travel as LangChain-style dicts (``{"type": "human", "content": ...}``), the shape
LangGraph's clients and UIs read; requests may send either that shape or ours (``role``).
What a node writes to an append key travels as LangGraph sends its own: :class:`RemoveMessage`
as LangChain's ``{"type": "remove", "id": ...}``, and :class:`ReplaceAll` of messages as
``[{"type": "remove", "id": "__remove_all__"}, *messages]`` (what ``add_messages`` reads), of
other items as LangGraph's ``{"__overwrite__": [...]}``. Both are read back under ``messages``
only (:func:`input_from_json`): reading a request, the server does not know which other keys
append, and on a key that does not, a replace-all would be stored as the value itself. A failed
run's error names the exception a node raised, as LangGraph does, with our node and step beside
it.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from graph_agent.graph.errors import NodeError, exception_text
from graph_agent.graph.state import RemoveMessage, ReplaceAll
from graph_agent.graph.types import Command, Interrupt, RunnableConfig, Send, StateSnapshot
from graph_agent.messages import (
    AssistantMessage,
    AssistantMessageChunk,
    BaseMessage,
    MessageContent,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResponseMessage,
    Usage,
    UserMessage,
    content_text,
)
from graph_agent.serve.wire_parts import PartError, part_from_json, part_json
from graph_agent.serve.wire_usage import UsageError, usage_from_json, usage_json

__all__ = [
    "WireError",
    "checkpoint_json",
    "command_from_json",
    "error_json",
    "input_from_json",
    "interrupt_json",
    "messages_from_json",
    "snapshot_json",
    "to_json",
]

_TYPE_OF_ROLE = {"user": "human", "assistant": "ai", "system": "system", "tool": "tool"}
_ROLE_OF_TYPE = {
    "human": "user",
    "user": "user",
    "ai": "assistant",
    "assistant": "assistant",
    "AIMessageChunk": "assistant",
    "system": "system",
    "tool": "tool",
}


REMOVE_ALL_MESSAGES = "__remove_all__"
"""The id of LangGraph's remove-all message: the messages after it replace the whole list."""

_OVERWRITE = "__overwrite__"

_PLAIN = frozenset({str, int, float, bool, type(None)})
"""The types :func:`to_json` returns as they are (their subclasses too, found more slowly)."""


class WireError(ValueError):
    """A request body that cannot be turned into a graph's input: the client's mistake (422)."""


def to_json(value: Any) -> Any:
    """``value`` as plain JSON data: messages LangChain-style, models and dataclasses as
    dicts, datetimes as ISO text, anything else unknown as its ``repr``."""
    kind = type(value)  # the usual types first, by type: every streamed value comes here
    if kind in _PLAIN:
        return value
    if kind is dict:
        return {key if type(key) is str else str(key): to_json(item) for key, item in value.items()}
    if kind is list:
        return [to_json(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Mapping):
        return {str(key): to_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset | Sequence) and not isinstance(
        value, bytes | bytearray
    ):  # a Sequence: an append key's read-only view (SeqView) too
        return [to_json(item) for item in value]
    if isinstance(value, BaseMessage):
        return message_json(value)
    if isinstance(value, AssistantMessageChunk):
        return chunk_json(value)
    if isinstance(value, Interrupt):
        return interrupt_json(value)
    if isinstance(value, ReplaceAll | RemoveMessage | Send | Usage):
        return _own_json(value)
    if isinstance(value, BaseModel):
        return to_json(value.model_dump(mode="json"))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_json({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    return repr(value)


def _own_json(value: ReplaceAll | RemoveMessage | Send | Usage) -> Any:
    """Our values that LangGraph and LangChain have shapes of their own for, in those shapes
    (never as their fields: ``{"items": [...]}`` means nothing to a LangGraph client)."""
    if isinstance(value, RemoveMessage):
        return _remove_json(value.id)
    if isinstance(value, ReplaceAll):
        items = [to_json(item) for item in value.items]
        if all(isinstance(item, BaseMessage) for item in value.items):
            return [_remove_json(REMOVE_ALL_MESSAGES), *items]
        return {_OVERWRITE: items}
    if isinstance(value, Send):
        return {"node": value.node, "arg": to_json(value.input)}
    return usage_json(value)


def _remove_json(message_id: Any) -> dict[str, Any]:
    """LangChain's ``RemoveMessage`` as it serialises."""
    return {
        "type": "remove",
        "content": "",
        "id": to_json(message_id),
        "name": None,
        "additional_kwargs": {},
        "response_metadata": {},
    }


def message_json(message: BaseMessage) -> dict[str, Any]:
    """A message as LangChain serialises it (``type``, ``content``, ``id``, ...)."""
    body: dict[str, Any] = {
        "type": _TYPE_OF_ROLE.get(getattr(message, "role", "user"), "human"),
        "content": _content_json(message.content),
        "id": message.id,
        "name": getattr(message, "name", None) or None,
        "additional_kwargs": {},
        "response_metadata": {},
    }
    if isinstance(message, AssistantMessage):
        body["tool_calls"] = [_tool_call_json(call) for call in message.tool_calls]
        body["invalid_tool_calls"] = []
        body["usage_metadata"] = usage_json(message.usage) if message.usage is not None else None
        if message.finish_reason is not None:
            body["response_metadata"] = {"finish_reason": message.finish_reason}
    if isinstance(message, ToolResponseMessage):
        body["tool_call_id"] = message.tool_call_id
        body["status"] = "error" if message.is_error else "success"
    return body


def _content_json(content: MessageContent) -> Any:
    return content if isinstance(content, str) else [part_json(part) for part in content]


def chunk_json(chunk: AssistantMessageChunk) -> dict[str, Any]:
    """A streamed token chunk as LangChain's ``AIMessageChunk``."""
    return {
        "type": "AIMessageChunk",
        "content": chunk.content,
        "id": chunk.id,
        "name": None,
        "additional_kwargs": {},
        "response_metadata": (
            {"finish_reason": chunk.finish_reason} if chunk.finish_reason is not None else {}
        ),
        "tool_call_chunks": [
            {"index": d.index, "id": d.id, "name": d.name, "args": d.arguments}
            for d in chunk.tool_call_deltas
        ],
        "usage_metadata": usage_json(chunk.usage) if chunk.usage is not None else None,
    }


def _tool_call_json(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "args": to_json(call.arguments), "type": "tool_call"}


def error_json(exc: BaseException) -> dict[str, Any]:
    """A failed run's ``error`` event and ``__error__``, as LangGraph sends them: the class
    (``error``) and ``message`` of the exception that failed the run, for a node or router
    the one it raised (not the :class:`NodeError` wrapping it, also through subgraphs); and
    beside them the ``node`` and ``step`` it raised in, when a node did.

    Example:
        >>> failure = NodeError("node 'check' raised ValueError: boom", node="check", step=0)
        >>> failure.__cause__ = ValueError("boom")
        >>> error_json(failure)
        {'error': 'ValueError', 'message': 'boom', 'node': 'check', 'step': 0}
    """
    raised = exc
    while isinstance(raised, NodeError) and raised.__cause__ is not None:
        raised = raised.__cause__
    body: dict[str, Any] = {"error": type(raised).__name__, "message": exception_text(raised)}
    node, step = getattr(exc, "node", None), getattr(exc, "step", None)
    if isinstance(node, str):
        body["node"] = node
    if isinstance(step, int) and not isinstance(step, bool):
        body["step"] = step
    return body


def interrupt_json(item: Interrupt) -> dict[str, Any]:
    """An interrupt as LangGraph sends it (``value``, ``id``), with the node that paused."""
    return {"value": to_json(item.value), "id": item.id, "node": item.node}


def checkpoint_json(config: RunnableConfig | None) -> dict[str, Any] | None:
    """Where a snapshot stands, as LangGraph's ``Checkpoint`` object."""
    if config is None:
        return None
    return {
        "thread_id": config.thread_id,
        "checkpoint_ns": config.checkpoint_ns,
        "checkpoint_id": config.checkpoint_id,
        "checkpoint_map": None,
    }


def snapshot_json(snapshot: StateSnapshot) -> dict[str, Any]:
    """A thread's state as LangGraph's ``ThreadState``."""
    return {
        "values": to_json(snapshot.values),
        "next": list(snapshot.next),
        "checkpoint": checkpoint_json(snapshot.config),
        "metadata": to_json(snapshot.metadata),
        "created_at": snapshot.created_at.isoformat() if snapshot.created_at else None,
        "parent_checkpoint": checkpoint_json(snapshot.parent_config),
        "tasks": [
            {
                "id": task.id,
                "name": task.name,
                "error": task.error,
                "interrupts": [interrupt_json(item) for item in task.interrupts],
                "checkpoint": None,
                "state": snapshot_json(task.state) if task.state is not None else None,
                "result": None,
            }
            for task in snapshot.tasks
        ],
        "interrupts": [interrupt_json(item) for item in snapshot.interrupts],
    }


def input_from_json(value: Any) -> Any:
    """A run's ``input`` from JSON: message dicts under ``messages`` become our messages."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise WireError(f"input must be a JSON object of state keys, got {type(value).__name__}")
    state = dict(value)
    if "messages" in state:
        state["messages"] = messages_from_json(state["messages"])
    return state


def messages_from_json(value: Any) -> Any:
    """A ``messages`` value from JSON: a list of messages, one message, or a string (a human
    message). LangChain's ``remove`` messages become :class:`RemoveMessage`; after LangGraph's
    remove-all message, the messages that follow are a :class:`ReplaceAll`, and so is
    ``{"__overwrite__": [...]}``. Anything else is left as it is."""
    if isinstance(value, str):
        return [UserMessage(value)]
    if isinstance(value, Mapping):
        if value.keys() == {_OVERWRITE} and isinstance(value[_OVERWRITE], list):
            return ReplaceAll(_item_from_json(item) for item in value[_OVERWRITE])
        return [_item_from_json(value)]
    if not isinstance(value, list):
        return value
    items = [_item_from_json(item) for item in value]
    cut = [i for i, item in enumerate(items) if _removes_all(item)]
    return ReplaceAll(items[cut[-1] + 1 :]) if cut else items


def _removes_all(item: Any) -> bool:
    return isinstance(item, RemoveMessage) and item.id == REMOVE_ALL_MESSAGES


def _item_from_json(item: Any) -> BaseMessage | RemoveMessage:
    if isinstance(item, Mapping) and (item.get("role") or item.get("type")) == "remove":
        message_id = item.get("id")
        if not isinstance(message_id, str) or not message_id:
            raise WireError(
                f"a remove message needs the id of the message to remove, e.g. "
                f'{{"type": "remove", "id": "<message id>"}}; got {item!r:.60}'
            )
        return RemoveMessage(message_id)
    return message_from_json(item)


def message_from_json(item: Any) -> BaseMessage:
    """One message from a LangChain-style or graph_agent-style dict (or a bare string)."""
    if isinstance(item, str):
        return UserMessage(item)
    if not isinstance(item, Mapping):
        raise WireError(f"a message is an object with a type and content, got {item!r:.60}")
    kind = item.get("role") or item.get("type") or "human"
    role = _ROLE_OF_TYPE.get(str(kind))
    content = _content_from_json(item.get("content", ""), role)
    extra: dict[str, Any] = {"id": str(item["id"])} if item.get("id") else {}
    try:
        if role == "user":
            return UserMessage(content, **extra)
        if role == "system":
            return SystemMessage(content_text(content), **extra)
        if role == "tool":
            return ToolResponseMessage(
                content=content,
                tool_call_id=str(item.get("tool_call_id", "")),
                name=str(item.get("name") or ""),
                **extra,
            )
        if role == "assistant":
            calls = [
                ToolCall(
                    str(call.get("id", "")),
                    str(call.get("name", "")),
                    dict(call.get("args", call.get("arguments", {})) or {}),
                )
                for call in item.get("tool_calls") or ()
            ]
            usage = usage_from_json(item.get("usage_metadata"))
            return AssistantMessage(content=content, tool_calls=calls, usage=usage, **extra)
    except UsageError as exc:
        raise WireError(str(exc)) from exc
    except (TypeError, ValueError) as exc:
        raise WireError(f"message {item!r:.60} is malformed: {exc}") from exc
    raise WireError(f"unknown message type {kind!r}: use human, ai, system or tool")


def _content_from_json(content: Any, role: str | None) -> MessageContent:
    """A message's content: text, or its content blocks as parts (text only: joined)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise WireError(f"message content is a string or a list of blocks, got {content!r:.60}")
    try:
        parts = [part_from_json(block) for block in content]
    except PartError as exc:
        raise WireError(str(exc)) from exc
    if all(isinstance(part, TextPart) for part in parts):
        return content_text(parts)
    if role == "system":
        raise WireError("a system message holds text only, not images, audio or files")
    return parts


def command_from_json(value: Any) -> Command:
    """A run's ``command`` (``resume``, ``update``, ``goto``) as our :class:`Command`."""
    if not isinstance(value, Mapping):
        raise WireError("command must be an object with resume, update or goto")
    goto = value.get("goto")
    if isinstance(goto, Mapping):
        goto = goto.get("node")
    update = value.get("update")
    if update is not None:
        if isinstance(update, list):  # LangGraph also sends [[key, value], ...]
            if not all(isinstance(pair, list | tuple) and len(pair) == 2 for pair in update):
                raise WireError("command.update must be an object or a list of [key, value]")
            update = dict(update)
        update = input_from_json(update)
    return Command(resume=value.get("resume"), update=update, goto=goto)
