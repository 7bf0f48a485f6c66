"""The ``tasks``, ``checkpoints`` and ``debug`` stream modes on LangGraph Server's wire: the
engine's :class:`~graph_agent.graph.stream_modes.TaskEvent` items as the events LangGraph
Server sends for them.

- ``tasks``: a task's start ``{"id", "name", "input", "triggers"}`` and its result ``{"id",
  "name", "error", "result", "interrupts"}`` (``error`` as LangGraph serializes an exception:
  ``{"error": <type>, "message"}``, else ``null``).
- ``checkpoints``: ``{"config", "parent_config", "values", "metadata", "next", "tasks"}``, a
  config as ``{"configurable": {"thread_id", "checkpoint_ns", "checkpoint_id"}}``.
- ``debug``: ``{"type": "task" | "task_result" | "checkpoint", "timestamp", "step",
  "payload"}``; a checkpoint's payload also carries ``checkpoint`` and ``parent_checkpoint``
  as the state API's ``Checkpoint`` objects, as LangGraph Server adds them.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from graph_agent.graph.stream_modes import TaskEvent
from graph_agent.graph.types import RunnableConfig
from graph_agent.serve.wire import checkpoint_json, error_json, interrupt_json, to_json

TASK_MODES = frozenset({"tasks", "checkpoints", "debug"})
"""The stream modes made of task events: a run asking for one streams its TaskEvents."""


def task_event_parts(event: TaskEvent, modes: Collection[str]) -> list[tuple[str, Any]]:
    """The ``(event, data)`` pairs ``event`` is sent as, for a run streaming ``modes``."""
    parts: list[tuple[str, Any]] = []
    if event.mode not in modes and "debug" not in modes:
        return parts
    payload = _payload_json(event)
    if event.mode in modes:
        parts.append((event.mode, payload))
    if "debug" in modes:
        if event.type == "checkpoint":
            given = event.payload
            payload = {
                **payload,
                "checkpoint": checkpoint_json(given["config"]),
                "parent_checkpoint": checkpoint_json(given["parent_config"]),
            }
        wrapped = {"type": event.type, "timestamp": event.timestamp, "step": event.step}
        parts.append(("debug", {**wrapped, "payload": payload}))
    return parts


def _payload_json(event: TaskEvent) -> dict[str, Any]:
    payload = event.payload
    if event.type == "task":
        return {
            "id": payload["id"],
            "name": payload["name"],
            "input": to_json(payload["input"]),
            "triggers": list(payload["triggers"]),
        }
    if event.type == "task_result":
        error = payload["error"]
        return {
            "id": payload["id"],
            "name": payload["name"],
            "error": error_json(error) if error is not None else None,
            "result": to_json(payload["result"]),
            "interrupts": [interrupt_json(item) for item in payload["interrupts"]],
        }
    return {
        "config": config_json(payload["config"]),
        "parent_config": config_json(payload["parent_config"]),
        "values": to_json(payload["values"]),
        "metadata": to_json(payload["metadata"]),
        "next": list(payload["next"]),
        "tasks": [
            {
                "id": task["id"],
                "name": task["name"],
                "interrupts": [interrupt_json(item) for item in task["interrupts"]],
                "state": None,
            }
            for task in payload["tasks"]
        ],
    }


def config_json(config: RunnableConfig | None) -> dict[str, Any] | None:
    """A checkpoint's config as LangGraph's ``RunnableConfig``."""
    if config is None:
        return None
    return {
        "configurable": {
            "thread_id": config.thread_id,
            "checkpoint_ns": config.checkpoint_ns,
            "checkpoint_id": config.checkpoint_id,
        }
    }
