"""W3 fanout: START → fan → 50 parallel branches, each appending one item → join → END.

The branches run in one superstep (graph_agent and LangGraph run them on worker threads); the
join is a barrier edge waiting for all 50. The metric is µs per run.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from benchmarks.harness import (
    GRAPH_AGENT,
    LANGGRAPH,
    PLAIN,
    Row,
    Settings,
    micros,
    timed_together,
)

BRANCHES = 50


def fan(state: Any) -> dict[str, Any]:
    return {"started": True}


def branch(index: int) -> Callable[[Any], dict[str, Any]]:
    def append_one(state: Any) -> dict[str, Any]:
        return {"items": [index]}

    return append_one


def join(state: Any) -> dict[str, Any]:
    return {"total": sum(state["items"])}


BRANCH_NODES = [branch(i) for i in range(BRANCHES)]


def _branch_names() -> list[str]:
    return [f"branch{i}" for i in range(BRANCHES)]


def _wired(g: Any, start: str, end: str) -> Any:
    """The fan-out on a builder with LangGraph's API (graph_agent's StateGraph shares it)."""
    g.add_node("fan", fan)
    names = _branch_names()
    for name, node in zip(names, BRANCH_NODES, strict=True):
        g.add_node(name, node)
        g.add_edge("fan", name)
    g.add_node("join", join)
    g.add_edge(start, "fan")
    g.add_edge(names, "join")
    g.add_edge("join", end)
    return g.compile()


def graph_agent_fanout() -> Any:
    from graph_agent import END, START, AppendStrategy, StateGraph

    return _wired(StateGraph("fanout", key_strategies={"items": AppendStrategy()}), START, END)


class FanoutState(TypedDict, total=False):
    started: bool
    items: Annotated[list[int], operator.add]
    total: int


def langgraph_fanout() -> Any:
    from langgraph.graph import END, START, StateGraph

    return _wired(StateGraph(FanoutState), START, END)


def plain_fanout() -> dict[str, Any]:
    """The floor: the same functions, branches called one after another."""
    state: dict[str, Any] = {"items": []}
    state.update(fan(state))
    updates = [run_branch(state) for run_branch in BRANCH_NODES]
    state["items"] = [*state["items"], *(item for u in updates for item in u["items"])]
    state.update(join(state))
    return state


def run(settings: Settings) -> list[Row]:
    app = graph_agent_fanout()
    runs = {GRAPH_AGENT: lambda: app.invoke({"items": []})}
    if settings.with_langgraph:
        lg_app = langgraph_fanout()
        runs[LANGGRAPH] = lambda: lg_app.invoke({"items": []})
    runs[PLAIN] = plain_fanout
    seconds = timed_together(runs, settings.repeat, batch_seconds=settings.batch_seconds)
    return [
        Row(
            key="W3 fanout",
            unit=f"µs per run ({BRANCHES} branches)",
            samples={name: micros(values) for name, values in seconds.items()},
            target="≤ 1/10 of LangGraph",
        )
    ]
