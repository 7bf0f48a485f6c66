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
    Listener,
    ListenerEvent,
    ModelCallEvent,
    NodeEvent,
    RunEvent,
    ToolCallEvent,
)


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


class TraceRecorder(Listener):
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
        self.roots: list[RecordedSpan] = []
        self._current: ContextVar[RecordedSpan | None] = ContextVar(
            "graph_agent_recorded_span", default=None
        )
        self._runs: dict[tuple[str, str, str], RecordedSpan] = {}
        self._open: dict[int, tuple[RecordedSpan, Token[RecordedSpan | None]]] = {}
        self._lock = threading.Lock()

    def on_run_start(self, event: RunEvent) -> None:
        span = self._add(
            self._current.get(),
            f"invoke_agent {event.graph}",
            "run",
            event,
            "resumed" if event.resumed else "",
        )
        with self._lock:
            self._runs[(event.run_id, event.ns, event.graph)] = span

    def on_run_end(self, event: RunEvent) -> None:
        with self._lock:
            span = self._runs.pop((event.run_id, event.ns, event.graph), None)
        if span is not None:
            self._end(span, event, event.status)

    def before_node(self, event: NodeEvent) -> None:
        with self._lock:
            run = self._runs.get((event.run_id, event.ns, event.graph))
        self._enter(
            event, self._add(run, f"node {event.node}", "node", event, f"step {event.step}")
        )

    def after_node(self, event: NodeEvent) -> None:
        self._leave(event, "ok")

    def on_node_error(self, event: NodeEvent) -> None:
        self._leave(event, "error", f"{type(event.error).__name__}: {event.error}")

    def on_interrupt(self, event: NodeEvent) -> None:
        self._leave(event, "interrupted")

    def before_model_call(self, event: ModelCallEvent) -> None:
        self._enter(event, self._add(self._current.get(), f"chat {event.model}", "model", event))

    def on_model_call(self, event: ModelCallEvent) -> None:
        usage = event.usage
        tokens = f"{usage.prompt_tokens} in / {usage.completion_tokens} out tokens" if usage else ""
        if event.error is not None:
            self._leave(event, "error", f"{type(event.error).__name__}: {event.error}")
        else:
            self._leave(event, "ok", tokens)

    def before_tool_call(self, event: ToolCallEvent) -> None:
        name = f"execute_tool {event.call.name}"
        self._enter(event, self._add(self._current.get(), name, "tool", event, event.call.id))

    def on_tool_call(self, event: ToolCallEvent) -> None:
        failed = event.error is not None or (event.result is not None and event.result.is_error)
        self._leave(event, "error" if failed else "ok")

    def tree(self) -> Tree:
        """The recorded runs, drawn as a rich tree (durations in ms)."""
        top = Tree(Text("trace", style="bold"))
        for root in self.roots:
            _draw(top, root)
        return top

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

    def _enter(self, event: ListenerEvent, span: RecordedSpan) -> None:
        self._open[id(event)] = (span, self._current.set(span))

    def _leave(self, event: ListenerEvent, status: str, detail: str = "") -> None:
        opened = self._open.pop(id(event), None)
        if opened is None:
            return
        span, token = opened
        self._current.reset(token)
        if detail:
            span.detail = f"{span.detail}, {detail}" if span.detail else detail
        self._end(span, event, status)

    @staticmethod
    def _end(span: RecordedSpan, event: ListenerEvent, status: str) -> None:
        span.duration = event.duration
        span.status = status


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
