"""Observability: lifecycle listeners, OpenTelemetry traces and metrics, run ids on logs.

- :class:`Listener` (``CompileConfig(listeners=...)``, ``ReactAgent(listeners=...)``,
  :func:`add_listener` for every graph): told of each run, node, model call and tool call.
- :func:`instrument` (``pip install 'graph-agent[otel]'``): OpenTelemetry spans and metrics
  of every run, after the GenAI semantic conventions (``otel.py``).
- :class:`RunContextFilter`: the run's ids on log records (on the library's loggers already).
- :class:`TraceRecorder`: a listener that keeps a run's tree of spans in memory, for
  ``graph-agent run|demo --trace`` (no OpenTelemetry needed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graph_agent.graph.listeners import (
    Listener,
    ListenerEvent,
    NodeEvent,
    RunEvent,
    add_listener,
    remove_listener,
)
from graph_agent.graph.log_context import RunContextFilter
from graph_agent.models.events import ModelCallEvent, ToolCallEvent
from graph_agent.observability.tree import TraceRecorder

if TYPE_CHECKING:
    from graph_agent.observability.otel import OpenTelemetryListener, instrument, uninstrument

__all__ = [
    "Listener",
    "ListenerEvent",
    "ModelCallEvent",
    "NodeEvent",
    "OpenTelemetryListener",
    "RunContextFilter",
    "RunEvent",
    "ToolCallEvent",
    "TraceRecorder",
    "add_listener",
    "instrument",
    "remove_listener",
    "uninstrument",
]

_NEEDS_OTEL = ("OpenTelemetryListener", "instrument", "uninstrument")


def __getattr__(name: str) -> Any:
    """The OpenTelemetry parts, imported when first used (the ``otel`` extra)."""
    if name in _NEEDS_OTEL:
        from graph_agent.observability import otel

        return getattr(otel, name)
    raise AttributeError(f"module 'graph_agent.observability' has no attribute {name!r}")
