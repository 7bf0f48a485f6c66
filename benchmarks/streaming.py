"""W5 stream: the ReAct workload (W2, no saver) through ``stream()``; µs per streamed event.

Each implementation's events are what its stream yields for the run: graph_agent a
``NodeOutput`` per node plus one for the input, LangGraph one ``updates`` item per node, the
plain loop one dict per step.
"""

from __future__ import annotations

from collections.abc import Callable

from benchmarks import react
from benchmarks.harness import GRAPH_AGENT, LANGGRAPH, PLAIN, Row, Settings, micros, timed_together


def run(settings: Settings) -> list[Row]:
    iterations = react.ITERATIONS
    messages = react.history(0)
    streams: dict[str, Callable[[], int]] = {}

    stream = react.graph_agent_stream(react.graph_agent_react(iterations), iterations)
    streams[GRAPH_AGENT] = lambda: stream(messages)
    if settings.with_langgraph:
        lg_stream = react.langgraph_stream(react.langgraph_react(iterations), iterations)
        dict_messages = react.dict_history(0)
        streams[LANGGRAPH] = lambda: lg_stream(dict_messages)
    streams[PLAIN] = lambda: sum(1 for _ in react.plain_react_stream(messages, iterations))

    events = {name: count() for name, count in streams.items()}
    seconds = timed_together(streams, settings.repeat, batch_seconds=settings.batch_seconds)
    return [
        Row(
            key="W5 stream",
            unit="µs per streamed event",
            samples={name: micros(values, events[name]) for name, values in seconds.items()},
            target="≤ 1/15 of LangGraph",
            extra={"events per run": events},
        )
    ]
