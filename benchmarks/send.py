"""W3 with Send: START → fan → one ``Send("work", {"item": i})`` per item (50) → join → END.

W3 (``fanout.py``) with its 50 static branches replaced by map-reduce: the router of ``fan``
returns 50 Sends to one ``work`` node, whose tasks run in one superstep, each with its item as
its whole state and appending one result; ``join`` runs once after them. graph_agent and
LangGraph run the same functions; the metric is µs per run.
"""

from __future__ import annotations

import operator
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

ITEMS = list(range(50))


def fan(state: Any) -> dict[str, Any]:
    return {"started": True}


def work(state: Any) -> dict[str, Any]:
    return {"results": [state["item"] * 2]}


def join(state: Any) -> dict[str, Any]:
    return {"total": sum(state["results"])}


def _wired(g: Any, send: Any, start: str, end: str) -> Any:
    """The map-reduce on a builder with LangGraph's API (graph_agent's StateGraph shares it:
    the router's path_map list declares where its Sends go)."""

    def fan_out(state: Any) -> list[Any]:
        return [send("work", {"item": item}) for item in state["items"]]

    g.add_node("fan", fan)
    g.add_node("work", work)
    g.add_node("join", join)
    g.add_edge(start, "fan")
    g.add_conditional_edges("fan", fan_out, ["work"])
    g.add_edge("work", "join")
    g.add_edge("join", end)
    return g.compile()


def graph_agent_send() -> Any:
    from graph_agent import END, START, AppendStrategy, Send, StateGraph

    g = StateGraph("send", key_strategies={"results": AppendStrategy()})
    return _wired(g, Send, START, END)


class SendState(TypedDict, total=False):
    items: list[int]
    started: bool
    results: Annotated[list[int], operator.add]
    total: int


def langgraph_send() -> Any:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    return _wired(StateGraph(SendState), Send, START, END)


def plain_send() -> dict[str, Any]:
    """The floor: the same functions, each item's work called one after another."""
    state: dict[str, Any] = {"items": ITEMS, "results": []}
    state.update(fan(state))
    updates = [work({"item": item}) for item in state["items"]]
    state["results"] = [*state["results"], *(r for u in updates for r in u["results"])]
    state.update(join(state))
    return state


def run(settings: Settings) -> list[Row]:
    app = graph_agent_send()
    runs = {GRAPH_AGENT: lambda: app.invoke({"items": ITEMS})}
    if settings.with_langgraph:
        lg_app = langgraph_send()
        runs[LANGGRAPH] = lambda: lg_app.invoke({"items": ITEMS})
    runs[PLAIN] = plain_send
    seconds = timed_together(runs, settings.repeat, batch_seconds=settings.batch_seconds)
    return [
        Row(
            key="W3 send",
            unit=f"µs per run ({len(ITEMS)} items through Send)",
            samples={name: micros(values) for name, values in seconds.items()},
            target="≤ 1/10 of LangGraph",
        )
    ]
