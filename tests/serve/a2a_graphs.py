"""Graphs with a ``messages`` key, which A2A can talk to: the A2A tests' assistants."""

from __future__ import annotations

import time
from typing import Any

from graph_agent import END, START, AppendStrategy, StateGraph, interrupt
from graph_agent.messages import AssistantMessage


def chat() -> StateGraph:
    """A graph with a ``messages`` key: it echoes the last message."""
    graph = StateGraph("chat", key_strategies={"messages": AppendStrategy()})
    graph.add_node(
        "echo",
        lambda state: {"messages": [AssistantMessage(f"echo: {state['messages'][-1].text}")]},
    )
    graph.add_edge(START, "echo").add_edge("echo", END)
    return graph


def asking() -> StateGraph:
    """Asks a human before answering."""
    graph = StateGraph("asking", key_strategies={"messages": AppendStrategy()})
    graph.add_node(
        "ask", lambda state: {"messages": [AssistantMessage(f"you said {interrupt('May I?')}")]}
    )
    graph.add_edge(START, "ask").add_edge("ask", END)
    return graph


def slow_chat() -> StateGraph:
    """Thirty steps of 0.1 s before it answers: long enough to cancel."""
    graph = StateGraph("slow_chat", key_strategies={"messages": AppendStrategy()})

    def step(state: dict[str, Any]) -> dict[str, Any]:
        time.sleep(0.1)
        return {"n": state.get("n", 0) + 1}

    graph.add_node("step", step)
    graph.add_node("answer", lambda state: {"messages": [AssistantMessage("done")]})
    graph.add_edge(START, "step").add_edge("answer", END)
    graph.add_conditional_edges("step", lambda state: "answer" if state["n"] >= 30 else "step")
    return graph


def broken() -> StateGraph:
    """Fails on every message."""
    graph = StateGraph("broken", key_strategies={"messages": AppendStrategy()})

    def fail(state: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("the broken graph always fails")

    graph.add_node("fail", fail)
    graph.add_edge(START, "fail").add_edge("fail", END)
    return graph
