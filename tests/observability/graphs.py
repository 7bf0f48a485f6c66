"""Small graphs the observability tests watch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graph_agent import END, START, CompileConfig, CompiledGraph, StateGraph


def failing(name: str, message: str, listeners: Sequence[Any] = ()) -> CompiledGraph:
    """One node, ``broken``, raising ``ValueError(message)``."""
    g = StateGraph(name)

    def broken(state: Any) -> dict[str, Any]:
        raise ValueError(message)

    g.add_node("broken", broken)
    g.add_edge(START, "broken").add_edge("broken", END)
    return g.compile(CompileConfig(listeners=listeners))
