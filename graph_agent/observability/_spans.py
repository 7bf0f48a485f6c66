"""What the listeners drawing runs as spans share (``otel.py``'s OpenTelemetry spans,
``tree.py``'s in-memory tree): pairing each start with its end, a node's run span, and the
span current while a node or call runs.

:class:`SpanListener` turns the ten listener hooks into four pairs (a run, a node, a model
call, a tool call) of ``_start_*``/``_end_*`` methods a subclass writes, each start returning
its span (or ``None``: nothing to keep, as with OpenTelemetry's no-op tracer) and the end
getting it back (or ``None``). The object a start hook gets is the one its end hook gets
(``listeners.py``), so a node's or call's span is kept by the event's identity; a run's is
kept by its run id, namespace and graph, which its nodes' events carry too, so that a node
finds the span of its run.
"""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from graph_agent.graph.listeners import (
    Listener,
    ListenerEvent,
    NodeEvent,
    RunEvent,
)
from graph_agent.models.events import ModelCallEvent, ToolCallEvent

SpanT = TypeVar("SpanT")
NodeStatus = Literal["ok", "error", "interrupted"]
RunKey = tuple[str, str, str]


def run_key(event: ListenerEvent) -> RunKey:
    """Which run an event belongs to: its run id, namespace and graph (a subgraph's run
    shares its caller's run id)."""
    return event.run_id, event.ns, event.graph


class SpanListener(Listener, Generic[SpanT]):
    """A listener keeping a span of each run, node execution, model call and tool call.

    A subclass writes how a span starts and ends (``_start_run``/``_end_run`` and the node's,
    model call's and tool call's pairs) and how a span is made current
    (``_make_current``/``_restore``): a node's or call's span is current between its start
    and end, in the thread running it, so that what runs inside finds its parent there.
    """

    def __init__(self) -> None:
        # (each is read and written in single dict operations: thread-safe without a lock)
        self._runs: dict[RunKey, SpanT] = {}
        self._open: dict[int, tuple[SpanT, Any]] = {}  # by id(event): its span, its token

    # the hooks: final, a subclass writes the methods they call
    def on_run_start(self, event: RunEvent) -> None:
        span = self._start_run(event)
        if span is not None:
            self._runs[run_key(event)] = span

    def on_run_end(self, event: RunEvent) -> None:
        self._end_run(event, self._runs.pop(run_key(event), None))

    def before_node(self, event: NodeEvent) -> None:
        runs = self._runs  # (none: no key to make, as with a no-op tracer)
        span = self._start_node(event, runs.get(run_key(event)) if runs else None)
        if span is not None:
            self._enter(event, span)

    def after_node(self, event: NodeEvent) -> None:
        self._end_node(event, self._leave(event), "ok")

    def on_node_error(self, event: NodeEvent) -> None:
        self._end_node(event, self._leave(event), "error")

    def on_interrupt(self, event: NodeEvent) -> None:
        self._end_node(event, self._leave(event), "interrupted")

    def before_model_call(self, event: ModelCallEvent) -> None:
        span = self._start_model_call(event)
        if span is not None:
            self._enter(event, span)

    def on_model_call(self, event: ModelCallEvent) -> None:
        self._end_model_call(event, self._leave(event))

    def before_tool_call(self, event: ToolCallEvent) -> None:
        span = self._start_tool_call(event)
        if span is not None:
            self._enter(event, span)

    def on_tool_call(self, event: ToolCallEvent) -> None:
        self._end_tool_call(event, self._leave(event))

    # what a subclass writes
    def _start_run(self, event: RunEvent) -> SpanT | None:
        raise NotImplementedError

    def _end_run(self, event: RunEvent, span: SpanT | None) -> None:
        raise NotImplementedError

    def _start_node(self, event: NodeEvent, run: SpanT | None) -> SpanT | None:
        """The node's span, a child of ``run`` (its run's span, if known)."""
        raise NotImplementedError

    def _end_node(self, event: NodeEvent, span: SpanT | None, status: NodeStatus) -> None:
        raise NotImplementedError

    def _start_model_call(self, event: ModelCallEvent) -> SpanT | None:
        raise NotImplementedError

    def _end_model_call(self, event: ModelCallEvent, span: SpanT | None) -> None:
        raise NotImplementedError

    def _start_tool_call(self, event: ToolCallEvent) -> SpanT | None:
        raise NotImplementedError

    def _end_tool_call(self, event: ToolCallEvent, span: SpanT | None) -> None:
        raise NotImplementedError

    def _make_current(self, span: SpanT) -> Any:
        """Make ``span`` current; what :meth:`_restore` takes to undo it (``None``: nothing
        was done)."""
        raise NotImplementedError

    def _restore(self, token: Any) -> None:
        raise NotImplementedError

    # the span current while a node or call runs
    def _enter(self, event: ListenerEvent, span: SpanT) -> None:
        self._open[id(event)] = (span, self._make_current(span))

    def _leave(self, event: ListenerEvent) -> SpanT | None:
        opened = self._open.pop(id(event), None)
        if opened is None:
            return None
        span, token = opened
        if token is not None:
            self._restore(token)
        return span
