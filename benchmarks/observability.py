"""W2 under observation: what listeners and OpenTelemetry add per ReAct iteration.

The W2 workload (``react.py``, no saver) in one timed run, taking turns: graph_agent with no
listener (the row's sample, beside LangGraph and the plain loop: its ratio must stay W2's),
and in ``extra`` the same graph compiled with a listener that overrides nothing, with the
OpenTelemetry listener on OpenTelemetry's no-op tracer and meter (the API installed, no SDK
configured: what a library user who never set up tracing pays), and, when the SDK is
installed, on an SDK tracer provider that records spans and exports them nowhere.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable
from typing import Any

from benchmarks import react
from benchmarks.harness import GRAPH_AGENT, LANGGRAPH, PLAIN, Row, Settings, micros, timed_together
from graph_agent import CompiledGraph
from graph_agent.graph.listeners import Listener

NO_LISTENER = GRAPH_AGENT
IDLE_LISTENER = "a listener that overrides nothing"
OTEL_NOOP = "OpenTelemetry, no-op tracer"
OTEL_SDK = "OpenTelemetry SDK, spans recorded, no exporter"


def run(settings: Settings) -> list[Row]:
    iterations = react.ITERATIONS
    messages = react.history(0)

    def graph_agent(listeners: list[Any]) -> Callable[[], Any]:
        app = react.graph_agent_react(iterations)
        if listeners:
            app = with_listeners(app, listeners)
        invoke = react.graph_agent_invoke(app, iterations)
        return lambda: invoke(messages)

    runs: dict[str, Callable[[], Any]] = {NO_LISTENER: graph_agent([])}
    observers = {IDLE_LISTENER: "idle"}
    if _otel_installed():
        observers |= {OTEL_NOOP: "otel-noop", OTEL_SDK: "otel-sdk"}
    for name, kind in observers.items():
        runs[name] = graph_agent([listener(kind)])
    if settings.with_langgraph:
        lg_invoke = react.langgraph_invoke(react.langgraph_react(iterations), iterations)
        dict_messages = react.dict_history(0)
        runs[LANGGRAPH] = lambda: lg_invoke(dict_messages)
    runs[PLAIN] = lambda: react.plain_react(messages, iterations)
    seconds = timed_together(runs, settings.repeat, batch_seconds=settings.batch_seconds)
    samples = {name: micros(values, iterations) for name, values in seconds.items()}
    base = statistics.median(samples[NO_LISTENER])
    observed: dict[str, dict[str, float]] = {}
    for name in observers:
        median = statistics.median(samples.pop(name))
        observed[name] = {"µs per iteration": median, "added µs per iteration": median - base}
    note = (
        ""
        if _otel_installed()
        else "OpenTelemetry is not installed (pip install -e '.[otel]'): not timed"
    )
    return [
        Row(
            key="W2 react, no saver, observed",
            unit="µs per iteration",
            samples=samples,
            target="no listener: W2's ratio to LangGraph; with one, a few µs per iteration",
            note=note,
            extra={"with listeners (medians, taking turns with the row)": observed},
        )
    ]


def with_listeners(app: CompiledGraph, listeners: list[Any]) -> CompiledGraph:
    """``app`` with ``listeners``, as ``CompileConfig(listeners=...)`` gives them (the same
    compiled nodes and edges)."""
    return CompiledGraph(dataclasses.replace(app._run, listeners=tuple(listeners)), app.view)


def listener(kind: str) -> Any:
    """``"idle"``: a Listener overriding nothing; ``"otel-noop"``: OpenTelemetry's on its
    no-op tracer and meter; ``"otel-sdk"``: on an SDK tracer provider with no exporter."""
    if kind == "idle":
        return Listener()
    from opentelemetry import metrics, trace

    from graph_agent.observability.otel import OpenTelemetryListener

    if kind == "otel-noop":
        return OpenTelemetryListener(trace.NoOpTracerProvider(), metrics.NoOpMeterProvider())
    from opentelemetry.sdk.trace import TracerProvider

    return OpenTelemetryListener(TracerProvider(), metrics.NoOpMeterProvider())


def _otel_installed() -> bool:
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        return False
    return True
