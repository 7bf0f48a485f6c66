"""A listener that keeps the tree of a run's spans in memory and draws it with rich: what
``graph-agent run|demo --trace`` prints. It needs no OpenTelemetry: the same parents as
``otel.py`` (a run under the node or tool call it runs in, a node under its run, a model or
tool call under its node), kept with a context variable of its own.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar, Token
from dataclasses import dataclass, field

from rich.text import Text
from rich.tree import Tree

from graph_agent.graph.listeners import (
    ListenerEvent,
    NodeEvent,
    RunEvent,
)
from graph_agent.models.events import ModelCallEvent, ToolCallEvent
from graph_agent.observability._spans import NodeStatus, SpanListener


@dataclass(kw_only=True, eq=False)
class RecordedSpan:
    """One span of the tree: a run, a node execution, a model call or a tool call."""

    name: str
    kind: str  # "run" | "node" | "model" | "tool"
    started: int
    duration: float | None = None
    status: str = "running"
    detail: str = ""
    children: list[RecordedSpan] = field(default_factory=list)


class TraceRecorder(SpanListener[RecordedSpan]):
    """Records every run it is told of as a tree (:attr:`roots`); :meth:`tree` draws it.

    Example:
        >>> from graph_agent import StateGraph, START, END, CompileConfig
        >>> recorder = TraceRecorder()
        >>> g = StateGraph("inc")
        >>> _ = g.add_node("inc", lambda state: {"x": state["x"] + 1})
        >>> _ = g.add_edge(START, "inc").add_edge("inc", END)
        >>> _ = g.compile(CompileConfig(listeners=[recorder])).invoke({"x": 1})
        >>> [(span.name, [child.name for child in span.children]) for span in recorder.roots]
        [('invoke_agent inc', ['node inc'])]
    """

    def __init__(self) -> None:
        super().__init__()
        self.roots: list[RecordedSpan] = []
        self._lock = threading.Lock()  # (appending to a span's children)
        self._current: ContextVar[RecordedSpan | None] = ContextVar(
            "graph_agent_recorded_span", default=None
        )

    def tree(self) -> Tree:
        """The recorded runs, drawn as a rich tree (durations in ms)."""
        top = Tree(Text("trace", style="bold"))
        for root in self.roots:
            _draw(top, root)
        return top

    def _start_run(self, event: RunEvent) -> RecordedSpan:
        detail = "resumed" if event.resumed else ""
        return self._add(self._current.get(), f"invoke_agent {event.graph}", "run", event, detail)

    def _end_run(self, event: RunEvent, span: RecordedSpan | None) -> None:
        if span is not None:
            _end(span, event, event.status)

    def _start_node(self, event: NodeEvent, run: RecordedSpan | None) -> RecordedSpan:
        return self._add(run, f"node {event.node}", "node", event, f"step {event.step}")

    def _end_node(self, event: NodeEvent, span: RecordedSpan | None, status: NodeStatus) -> None:
        detail = _error(event.error) if status == "error" else ""
        _end(span, event, status, detail)

    def _start_model_call(self, event: ModelCallEvent) -> RecordedSpan:
        return self._add(self._current.get(), f"chat {event.model}", "model", event)

    def _end_model_call(self, event: ModelCallEvent, span: RecordedSpan | None) -> None:
        usage = event.usage
        if event.error is not None:
            _end(span, event, "error", _error(event.error))
        elif usage:
            tokens = f"{usage.prompt_tokens} in / {usage.completion_tokens} out tokens"
            _end(span, event, "ok", tokens)
        else:
            _end(span, event, "ok")

    def _start_tool_call(self, event: ToolCallEvent) -> RecordedSpan:
        name = f"execute_tool {event.call.name}"
        return self._add(self._current.get(), name, "tool", event, event.call.id)

    def _end_tool_call(self, event: ToolCallEvent, span: RecordedSpan | None) -> None:
        failed = event.error is not None or (event.result is not None and event.result.is_error)
        _end(span, event, "error" if failed else "ok")

    def _make_current(self, span: RecordedSpan) -> Token[RecordedSpan | None]:
        return self._current.set(span)

    def _restore(self, token: Token[RecordedSpan | None]) -> None:
        self._current.reset(token)

    def _add(
        self,
        parent: RecordedSpan | None,
        name: str,
        kind: str,
        event: ListenerEvent,
        detail: str = "",
    ) -> RecordedSpan:
        span = RecordedSpan(name=name, kind=kind, started=event.started, detail=detail)
        with self._lock:
            (parent.children if parent is not None else self.roots).append(span)
        return span


def _end(span: RecordedSpan | None, event: ListenerEvent, status: str, detail: str = "") -> None:
    if span is None:
        return
    if detail:
        span.detail = f"{span.detail}, {detail}" if span.detail else detail
    span.duration = event.duration
    span.status = status


def _error(error: BaseException | None) -> str:
    return f"{type(error).__name__}: {error}"


_STYLES = {"ok": "green", "finished": "green", "error": "red", "interrupted": "yellow"}


def _draw(parent: Tree, span: RecordedSpan) -> None:
    label = Text(span.name, style="bold" if span.kind == "run" else "")
    if span.duration is not None:
        label.append(f"  {span.duration * 1000:.1f} ms", style="dim")
    label.append(f"  {span.status}", style=_STYLES.get(span.status, "dim"))
    if span.detail:
        label.append(f"  ({span.detail})", style="dim")
    branch = parent.add(label)
    for child in sorted(span.children, key=lambda child: child.started):
        _draw(branch, child)
