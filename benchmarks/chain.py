"""W1 chain: 100 nodes in a line, state ``{"x": int}`` replaced, node *i* returns ``x + 1``.

The metric is µs per node step: what the runtime costs around a node that does nothing.
"""

from __future__ import annotations

import itertools
from typing import Any, TypedDict

from benchmarks.harness import (
    GRAPH_AGENT,
    LANGGRAPH,
    PLAIN,
    Row,
    Settings,
    micros,
    timed_together,
)

LENGTH = 100


def increment(state: Any) -> dict[str, int]:
    return {"x": state["x"] + 1}


def _names() -> list[str]:
    return [f"n{i}" for i in range(LENGTH)]


def graph_agent_chain() -> Any:
    from graph_agent import END, START, StateGraph

    g = StateGraph("chain")
    names = _names()
    for name in names:
        g.add_node(name, increment)
    g.add_edge(START, names[0])
    for first, second in itertools.pairwise(names):
        g.add_edge(first, second)
    g.add_edge(names[-1], END)
    return g.compile()


class ChainState(TypedDict):
    x: int


def langgraph_chain() -> Any:
    from langgraph.graph import END, START, StateGraph

    g = StateGraph(ChainState)
    names = _names()
    for name in names:
        g.add_node(name, increment)
    g.add_edge(START, names[0])
    for first, second in itertools.pairwise(names):
        g.add_edge(first, second)
    g.add_edge(names[-1], END)
    return g.compile()


def plain_chain() -> int:
    """The floor: the same node functions called in a loop, merging each update."""
    state = {"x": 0}
    for _ in range(LENGTH):
        state = {**state, **increment(state)}
    return state["x"]


def run(settings: Settings) -> list[Row]:
    app = graph_agent_chain()
    runs = {GRAPH_AGENT: lambda: app.invoke({"x": 0})}
    if settings.with_langgraph:
        lg_app = langgraph_chain()
        runs[LANGGRAPH] = lambda: lg_app.invoke({"x": 0})
    runs[PLAIN] = plain_chain
    seconds = timed_together(runs, settings.repeat, batch_seconds=settings.batch_seconds)
    return [
        Row(
            key="W1 chain",
            unit="µs per node step",
            samples={name: micros(values, LENGTH) for name, values in seconds.items()},
            target="≤ 1/15 of LangGraph (≈10 µs)",
        )
    ]
