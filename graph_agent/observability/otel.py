"""OpenTelemetry traces and metrics of every run (needs ``pip install 'graph-agent[otel]'``,
which is ``opentelemetry-api``; an SDK or a distro exports them).

Spans, following the OpenTelemetry GenAI semantic conventions where they apply:

- ``invoke_agent {graph}`` per run (a call of a graph or agent; ``gen_ai.operation.name``
  ``invoke_agent``, ``gen_ai.agent.name``, ``gen_ai.conversation.id`` = the thread id). Its
  parent is the span current where the run was called: the node or tool call it runs inside
  (a subgraph, an agent node, an agent called as a tool), or the caller's own; else the
  ``traceparent`` of ``RunnableConfig.metadata`` (``graph-agent serve`` puts the request's
  there). A run resuming a paused thread links to the run that paused it (the paused run's
  span context is kept in its checkpoints' metadata).
- ``node {node}`` per node execution, child of its run (``graph_agent.step``,
  ``graph_agent.attempt``, ``graph_agent.status``: ``ok``, ``error`` with the exception
  recorded, or ``interrupted``). It is current while the node runs, in the node's thread.
- ``chat {model}`` per model request (kind CLIENT; ``gen_ai.request.model``,
  ``gen_ai.provider.name`` when the model names its ``provider`` (``"openai"`` for
  ``OpenAIChatModel``, ``"anthropic"`` for ``AnthropicChatModel``),
  ``gen_ai.usage.input_tokens``/``output_tokens``, ``gen_ai.response.finish_reasons``;
  ``gen_ai.input.messages``/``gen_ai.output.messages`` only with ``capture_content``).
- ``execute_tool {tool}`` per tool call (``gen_ai.tool.name``, ``gen_ai.tool.call.id``;
  ``gen_ai.tool.call.arguments``/``result`` only with ``capture_content``), current while the
  tool runs.

Metrics: ``graph_agent.run.duration`` and ``graph_agent.node.duration`` (histograms, s),
``graph_agent.model.tokens`` (a counter by ``gen_ai.request.model`` and
``gen_ai.token.type``), and the conventions' ``gen_ai.client.operation.duration`` and
``gen_ai.client.token.usage`` (with ``gen_ai.provider.name`` too).

With OpenTelemetry's no-op tracer (the API installed and no SDK set up, or a
``NoOpTracerProvider``) the listener makes no spans and builds no attributes: a run only
carries on a caller's trace context, if it has one. Likewise nothing is measured with the
no-op meter.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from graph_agent.graph.listeners import (
    NodeEvent,
    RunEvent,
    add_listener,
    remove_listener,
)
from graph_agent.models.events import ModelCallEvent, ToolCallEvent
from graph_agent.observability._spans import NodeStatus, SpanListener

try:
    from opentelemetry import context as otel_context
    from opentelemetry import metrics, trace
    from opentelemetry.trace import (
        Link,
        NoOpTracer,
        NoOpTracerProvider,
        ProxyTracer,
        ProxyTracerProvider,
        SpanKind,
        Status,
        StatusCode,
    )
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError as missing:  # pragma: no cover - the otel extra is in dev
    raise ImportError(
        "graph_agent.observability.instrument needs OpenTelemetry's API: "
        "pip install 'graph-agent[otel]' (and an SDK or distro to export the spans, e.g. "
        "opentelemetry-sdk)"
    ) from missing

try:  # the global meter provider while none is set up (not exported: if it moves, the
    # listener only records into the no-op meter, as it would anyway)
    from opentelemetry.metrics._internal import _ProxyMeterProvider as _UnsetMeterProvider
except ImportError:  # pragma: no cover
    _UnsetMeterProvider = metrics.NoOpMeterProvider  # type: ignore[misc,assignment]

SCOPE = "graph_agent"
_propagator = TraceContextTextMapPropagator()


class OpenTelemetryListener(SpanListener[Any]):
    """The listener :func:`instrument` adds: spans and metrics of every run (see the module
    docstring). ``capture_content`` also puts messages, tool arguments and results on the
    spans (they may hold personal data: off by default)."""

    def __init__(
        self,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        capture_content: bool = False,
    ) -> None:
        super().__init__()
        self.tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
        self._meter_provider = meter_provider
        meter = metrics.get_meter(SCOPE, meter_provider=meter_provider)
        self.capture_content = capture_content
        self.run_duration = meter.create_histogram(
            "graph_agent.run.duration", unit="s", description="Duration of graph and agent runs"
        )
        self.node_duration = meter.create_histogram(
            "graph_agent.node.duration", unit="s", description="Duration of node executions"
        )
        self.tokens = meter.create_counter(
            "graph_agent.model.tokens", unit="{token}", description="Tokens used, by model"
        )
        self.operation_duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="GenAI operation duration"
        )
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Tokens used per call"
        )
        self._tracing = self._makes_spans()
        self._measuring = self._records_metrics()

    def _makes_spans(self) -> bool:
        """Whether the tracer makes spans: not OpenTelemetry's no-op tracer (a
        ``NoOpTracerProvider``'s, or the global provider's while none is set up, as when the
        API is installed without an SDK). With it, every span would be the invalid one or the
        caller's: the listener skips building spans, attributes and contexts."""
        tracer = self.tracer
        if isinstance(tracer, ProxyTracer):  # the global provider's: it may be set later
            provider = trace.get_tracer_provider()
            return not isinstance(provider, ProxyTracerProvider | NoOpTracerProvider)
        return not isinstance(tracer, NoOpTracer)

    def _records_metrics(self) -> bool:
        """Whether the meter records: not OpenTelemetry's no-op one (a
        ``NoOpMeterProvider``'s, or the global provider's while none is set up)."""
        provider = self._meter_provider
        if provider is None:
            provider = metrics.get_meter_provider()
        return not isinstance(provider, metrics.NoOpMeterProvider | _UnsetMeterProvider)

    # runs
    def _start_run(self, event: RunEvent) -> Any:
        self._tracing = self._makes_spans()  # (an SDK may have been set up since)
        self._measuring = self._records_metrics()
        parent = otel_context.get_current()
        if not trace.get_current_span(parent).get_span_context().is_valid:
            given = _trace_headers(event.metadata)
            if given:
                parent = _propagator.extract(given)
        links = []
        if event.resumed_from:
            paused = trace.get_current_span(_propagator.extract(dict(event.resumed_from)))
            if paused.get_span_context().is_valid:
                links.append(Link(paused.get_span_context(), {"graph_agent.link": "resumes"}))
        span = self.tracer.start_span(
            f"invoke_agent {event.graph}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=_run_attributes(event) if self._tracing else None,
            links=links,
            start_time=event.started,
        )
        if not span.get_span_context().is_valid:  # a no-op tracer's, with no caller's trace
            return None
        _propagator.inject(event.carrier, context=trace.set_span_in_context(span))  # (a resume's)
        return span

    def _end_run(self, event: RunEvent, span: Any) -> None:
        status = event.status
        if span is not None:
            if span.is_recording():
                span.set_attribute("graph_agent.status", status)
                span.set_attribute("graph_agent.step", event.step)
                if event.interrupts:
                    span.set_attribute("graph_agent.interrupts", [i.id for i in event.interrupts])
                if status == "error" and event.error is not None:
                    _failed(span, event.error)
            span.end()
        if self._measuring:
            self.run_duration.record(
                event.duration or 0.0,
                {"graph_agent.graph": event.graph, "graph_agent.status": status},
            )

    # nodes
    def _start_node(self, event: NodeEvent, run_span: Any) -> Any:
        if not self._tracing:  # what the no-op tracer would give: the run's (caller's) span
            return run_span
        parent = trace.set_span_in_context(run_span) if run_span is not None else None
        span = self.tracer.start_span(
            f"node {event.node}", context=parent, start_time=event.started
        )
        if span.is_recording():  # (a no-op tracer's span is not: nothing to build for it)
            span.set_attributes(
                _drop_none(
                    {
                        "graph_agent.graph": event.graph,
                        "graph_agent.node": event.node,
                        "graph_agent.step": event.step,
                        "graph_agent.task_id": event.task_id,
                        "graph_agent.run_id": event.run_id,
                        "graph_agent.thread_id": event.thread_id,
                        "graph_agent.checkpoint_ns": event.ns,
                    }
                )
            )
        return span

    def _end_node(self, event: NodeEvent, span: Any, status: NodeStatus) -> None:
        if span is not None:
            if span.is_recording():
                span.set_attribute("graph_agent.attempt", event.attempt)
                span.set_attribute("graph_agent.status", status)
                if status == "interrupted":
                    span.set_attribute("graph_agent.interrupted", True)
                    span.set_attribute("graph_agent.interrupts", [i.id for i in event.interrupts])
                elif status == "error" and event.error is not None:
                    _failed(span, event.error)
            span.end()
        if self._measuring:
            self.node_duration.record(
                event.duration or 0.0,
                {
                    "graph_agent.graph": event.graph,
                    "graph_agent.node": event.node or "",
                    "graph_agent.status": status,
                },
            )

    # model calls
    def _start_model_call(self, event: ModelCallEvent) -> Any:
        if not self._tracing:  # (the no-op tracer's span would be the current one)
            return None
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": event.model,
            "gen_ai.provider.name": event.provider,
            "graph_agent.node": event.node,
            "graph_agent.step": event.step,
        }
        if self.capture_content and event.request is not None:
            attributes["gen_ai.input.messages"] = _messages_json(event.request.messages)
        return self.tracer.start_span(
            f"chat {event.model}",
            kind=SpanKind.CLIENT,
            attributes=_drop_none(attributes),
            start_time=event.started,
        )

    def _end_model_call(self, event: ModelCallEvent, span: Any) -> None:
        reply, usage = event.reply, event.usage
        if span is not None:
            if reply is not None:
                finish = getattr(reply, "finish_reason", None)
                if finish:
                    span.set_attribute("gen_ai.response.finish_reasons", [str(finish)])
                span.set_attribute("gen_ai.response.id", str(reply.id))
                if self.capture_content:
                    span.set_attribute("gen_ai.output.messages", _messages_json([reply]))
            if usage is not None:
                span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
            if event.error is not None:
                _failed(span, event.error)
            span.end()
        if not self._measuring:
            return
        common = {"gen_ai.operation.name": "chat", "gen_ai.request.model": event.model}
        if event.provider is not None:
            common["gen_ai.provider.name"] = event.provider
        self.operation_duration.record(
            event.duration or 0.0,
            {**common, **({"error.type": type(event.error).__name__} if event.error else {})},
        )
        if usage is not None:
            for kind, count in (
                ("input", usage.prompt_tokens),
                ("output", usage.completion_tokens),
            ):
                attributes = {**common, "gen_ai.token.type": kind}
                self.tokens.add(count, attributes)
                self.token_usage.record(count, attributes)

    # tool calls
    def _start_tool_call(self, event: ToolCallEvent) -> Any:
        if not self._tracing:
            return None
        call = event.call
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
            "graph_agent.node": event.node,
            "graph_agent.step": event.step,
        }
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = json.dumps(call.arguments, default=str)
        return self.tracer.start_span(
            f"execute_tool {call.name}", attributes=attributes, start_time=event.started
        )

    def _end_tool_call(self, event: ToolCallEvent, span: Any) -> None:
        if span is None:
            return
        result = event.result
        if result is not None:
            if self.capture_content:
                span.set_attribute("gen_ai.tool.call.result", result.content)
            if result.is_error:
                span.set_attribute("error.type", "tool_error")
                span.set_status(Status(StatusCode.ERROR, result.content[:200]))
        if event.error is not None:
            _failed(span, event.error)
        span.end()

    # the span current while a node or call runs (unless it is no span at all: a no-op
    # tracer's)
    def _make_current(self, span: Any) -> Any:
        if span.get_span_context().is_valid:
            return otel_context.attach(trace.set_span_in_context(span))
        return None

    def _restore(self, token: Any) -> None:
        otel_context.detach(token)


def _run_attributes(event: RunEvent) -> dict[str, Any]:
    return _drop_none(
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": event.graph,
            "gen_ai.conversation.id": event.thread_id,
            "graph_agent.run_id": event.run_id,
            "graph_agent.thread_id": event.thread_id,
            "graph_agent.checkpoint_ns": event.ns,
            "graph_agent.resumed": event.resumed,
            "graph_agent.parent_run_id": event.parent_run_id,
        }
    )


def _failed(span: Any, error: BaseException) -> None:
    span.record_exception(error)
    span.set_attribute("error.type", type(error).__qualname__)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"[:500]))


def _drop_none(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in attributes.items() if value is not None}


def _trace_headers(metadata: Mapping[str, Any]) -> dict[str, str]:
    """The W3C trace context a run's metadata carries (``traceparent``, ``tracestate``)."""
    return {
        key: value
        for key in ("traceparent", "tracestate")
        if isinstance(value := metadata.get(key), str)
    }


def _messages_json(messages: Sequence[Any]) -> str:
    """Messages as the GenAI conventions' ``gen_ai.*.messages`` JSON: role and parts."""
    shown = []
    for message in messages:
        parts: list[dict[str, Any]] = []
        text = getattr(message, "text", "")
        if message.role == "tool":
            parts.append(
                {"type": "tool_call_response", "id": message.tool_call_id, "response": text}
            )
        elif text:
            parts.append({"type": "text", "content": text})
        for call in getattr(message, "tool_calls", None) or ():
            parts.append(
                {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
            )
        shown.append({"role": message.role, "parts": parts})
    return json.dumps(shown, default=str)


_installed: OpenTelemetryListener | None = None
_install_lock = threading.Lock()


def instrument(
    tracer_provider: Any = None, meter_provider: Any = None, capture_content: bool = False
) -> OpenTelemetryListener:
    """Trace and measure every graph and agent run in this process with OpenTelemetry.

    Args:
        tracer_provider: Where spans go (default: the global one,
            ``opentelemetry.trace.set_tracer_provider``).
        meter_provider: Where metrics go (default: the global one).
        capture_content: Also record messages, tool arguments and tool results on spans.

    Returns:
        The listener added (calling again replaces it; :func:`uninstrument` removes it).

    Example:
        >>> from opentelemetry.sdk.trace import TracerProvider
        >>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        >>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        ...     InMemorySpanExporter)
        >>> from graph_agent import StateGraph, START, END
        >>> exporter = InMemorySpanExporter()
        >>> provider = TracerProvider()
        >>> provider.add_span_processor(SimpleSpanProcessor(exporter))
        >>> _ = instrument(tracer_provider=provider)
        >>> g = StateGraph("inc")
        >>> _ = g.add_node("inc", lambda state: {"x": state["x"] + 1})
        >>> _ = g.add_edge(START, "inc").add_edge("inc", END)
        >>> _ = g.compile().invoke({"x": 1})
        >>> uninstrument()
        >>> [span.name for span in exporter.get_finished_spans()]
        ['node inc', 'invoke_agent inc']
    """
    global _installed
    listener = OpenTelemetryListener(tracer_provider, meter_provider, capture_content)
    with _install_lock:
        if _installed is not None:
            remove_listener(_installed)
        _installed = listener
        add_listener(listener)
    return listener


def uninstrument() -> None:
    """Stop what :func:`instrument` started."""
    global _installed
    with _install_lock:
        if _installed is not None:
            remove_listener(_installed)
            _installed = None
