"""A run's stream on LangGraph Server's wire: the library's stream-mode items, as JSON.

The modes are made once, by :class:`~graph_agent.graph.stream_modes.ModeItems` (what
``stream(..., stream_mode=...)`` yields); :class:`RunEvents` turns each item into the event
LangGraph Server sends for it, and adds what only the server sends:

- ``values``, ``updates``, ``custom``: the payloads as JSON (at a pause, ``values`` is the
  state with the pending interrupts under ``"__interrupt__"``, as LangGraph sends it);
- ``messages``: LangGraph Server's ``messages/metadata`` (once per message) and
  ``messages/partial`` (the message so far) events; ``messages-tuple``: a ``messages`` event
  ``[chunk, metadata]`` per token (both made of the library's ``messages`` items);
- ``usage`` (with ``updates``): a node's token usage, when it called a model;
- ``tasks``: a task's start ``{"id", "name", "input", "triggers"}`` and its result ``{"id",
  "name", "error", "result", "interrupts"}`` (``error`` as LangGraph serializes an exception:
  ``{"error": <type>, "message"}``, else ``null``);
- ``checkpoints``: ``{"config", "parent_config", "values", "metadata", "next", "tasks"}``, a
  config as ``{"configurable": {"thread_id", "checkpoint_ns", "checkpoint_id"}}``, each task
  in the shape LangGraph gives it (see :class:`~graph_agent.graph.stream_modes.CheckpointTask`);
- ``debug``: ``{"type": "task" | "task_result" | "checkpoint", "timestamp", "step",
  "payload"}``; a checkpoint's payload also carries ``checkpoint`` and ``parent_checkpoint``
  as the state API's ``Checkpoint`` objects, as LangGraph Server adds them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, cast

from graph_agent.graph.state import OverAllState
from graph_agent.graph.stream_modes import (
    ModeItems,
    StreamMode,
    TaskEvent,
    TaskEventTypes,
    task_events_for,
)
from graph_agent.graph.types import NodeOutput, RunnableConfig, StreamingOutput
from graph_agent.messages import AssistantMessageChunk
from graph_agent.serve.wire import checkpoint_json, chunk_json, error_json, to_json

__all__ = ["RunEvents", "config_json", "library_modes", "task_payload_json"]

Emit = Callable[[str, Any], None]
"""Sends one event of a run: ``(event, data)``."""


_LIBRARY_MODE: dict[str, StreamMode] = {
    "values": "values",
    "updates": "updates",
    "custom": "custom",
    "messages": "messages",
    "messages-tuple": "messages",
    "tasks": "tasks",
    "checkpoints": "checkpoints",
    "debug": "debug",
}


def library_modes(modes: Sequence[str]) -> tuple[StreamMode, ...]:
    """The library's modes whose items make the server's ``modes`` (its ``messages`` and
    ``messages-tuple`` are both made of the library's ``messages``).

    Example:
        >>> library_modes(["messages-tuple", "values", "messages"])
        ('messages', 'values')
    """
    return tuple(dict.fromkeys(_LIBRARY_MODE[mode] for mode in modes))


@functools.lru_cache(maxsize=64)
def _planned(modes: tuple[str, ...]) -> tuple[tuple[StreamMode, ...], TaskEventTypes]:
    """The library's modes for the server's ``modes``, and the task events they need (worked
    out once per combination of modes, not per run)."""
    asked = library_modes(modes)
    return asked, task_events_for(asked)


class RunEvents:
    """Turns a run's outputs into LangGraph Server's events for ``modes``, sent with ``emit``.

    Feed it every output of the run's stream, asked with ``task_events=events.task_events``.
    What it saw is kept: :attr:`state`, the state after the last step, and
    :attr:`interrupted`.
    """

    def __init__(self, modes: Sequence[str], emit: Emit) -> None:
        asked, self.task_events = _planned(tuple(modes))
        self.items = ModeItems(asked, tuples=True)
        self.emit = emit
        self.usage = "updates" in modes
        self.tuples = "messages-tuple" in modes
        self.partials: dict[str, str] | None = {} if "messages" in modes else None
        """The text so far of each message streaming (LangGraph Server's ``messages`` mode)."""
        self.state: OverAllState | None = None
        """The state after the last step streamed (a graph's values, once it ended)."""
        self.interrupted = False
        """Whether an output (a nested graph's included) carried interrupts."""
        self._values: tuple[OverAllState, Any] | None = None
        """The last state a ``values`` event carried, with that event's data."""
        self._payload: Any = None  # the last task event's payload, and its JSON
        self._payload_json: Any = None

    def __call__(self, output: NodeOutput) -> None:
        kind = type(output)
        top = kind is NodeOutput and not output.path
        finished = top and not output.interrupts
        if top:  # a node finished, or a pause
            if output.interrupts:
                self.interrupted = True
            elif self.partials:  # its messages are whole now
                self.partials.clear()
            if output.state is not None:
                self.state = output.state
        elif kind is not StreamingOutput and kind is not TaskEvent and output.interrupts:
            self.interrupted = True  # a nested graph's pause
        for mode, payload in self.items(output):
            if mode == "messages":  # the most frequent: one per token
                chunk, metadata = payload
                self._message(chunk, metadata)
            elif mode == "values" or mode == "custom":
                data = to_json(payload)
                if finished and mode == "values" and self.state is not None:
                    self._values = self.state, data  # a finished node's: its state's values
                self.emit(mode, data)
            elif mode == "updates":
                self._updates(output, payload)
            elif mode == "debug":
                self.emit(mode, self._debug(payload))
            else:  # tasks, checkpoints
                self.emit(mode, self._task_json(payload))

    def values_json(self) -> dict[str, Any]:
        """:attr:`state`'s values as JSON: the very data its ``values`` event carried, when
        one did (a run's result then shares that event's JSON text: see
        ``ActiveRun.result_body``), else made now."""
        assert self.state is not None
        if self._values is not None and self._values[0] is self.state:
            return cast("dict[str, Any]", self._values[1])
        return cast("dict[str, Any]", to_json(self.state.data()))

    def _updates(self, output: NodeOutput, payload: dict[str, Any]) -> None:
        self.emit("updates", {node: to_json(update) for node, update in payload.items()})
        if self.usage and output.usage is not None and not output.interrupts:
            usage = {"node": output.node, "step": output.step, "usage": to_json(output.usage)}
            self.emit("usage", usage)

    def _message(self, chunk: Any, metadata: dict[str, Any]) -> None:
        if not isinstance(chunk, AssistantMessageChunk):  # another MessageChunk: as it is
            if self.tuples:
                self.emit("messages", to_json([chunk, metadata]))
            return
        if self.tuples:
            self.emit("messages", [chunk_json(chunk), metadata])
        partials = self.partials
        if partials is None:
            return
        if chunk.id not in partials:
            partials[chunk.id] = ""
            self.emit("messages/metadata", {chunk.id: {"metadata": metadata}})
        partials[chunk.id] += chunk.content
        whole = chunk_json(chunk)  # a dict of its own: the message so far
        whole["type"], whole["content"] = "ai", partials[chunk.id]
        self.emit("messages/partial", [whole])

    def _debug(self, item: Any) -> dict[str, Any]:
        given = item["payload"]
        payload = self._task_json(given)
        if item["type"] == "checkpoint":
            payload = {
                **payload,
                "checkpoint": checkpoint_json(given["config"]),
                "parent_checkpoint": checkpoint_json(given["parent_config"]),
            }
        return {**item, "payload": payload}  # the library's wrapping, its payload as JSON

    def _task_json(self, payload: Any) -> Any:
        """A ``tasks`` or ``checkpoints`` payload as JSON (made once: ``debug`` wraps the same
        payload again)."""
        if payload is not self._payload:
            self._payload, self._payload_json = payload, task_payload_json(payload)
        return self._payload_json


def task_payload_json(payload: Any) -> dict[str, Any]:
    """A ``tasks`` or ``checkpoints`` payload of the library as LangGraph Server sends it."""
    if "config" in payload:  # a checkpoint
        return {
            "config": config_json(payload["config"]),
            "parent_config": config_json(payload["parent_config"]),
            "values": to_json(payload["values"]),
            "metadata": to_json(payload["metadata"]),
            "next": list(payload["next"]),
            "tasks": to_json(payload["tasks"]),  # each in its shape: see CheckpointTask
        }
    if "result" in payload:  # a task's result
        error = payload["error"]
        return {
            "id": payload["id"],
            "name": payload["name"],
            "error": error_json(error) if error is not None else None,
            "result": to_json(payload["result"]),
            "interrupts": to_json(payload["interrupts"]),
        }
    return {  # a task's start
        "id": payload["id"],
        "name": payload["name"],
        "input": to_json(payload["input"]),
        "triggers": list(payload["triggers"]),
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
