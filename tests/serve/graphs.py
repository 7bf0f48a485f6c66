"""The graphs and the agent the serve tests run; also a target for ``graph-agent serve``."""

from __future__ import annotations

import time

from graph_agent import END, START, StateGraph, emit_chunk, interrupt
from graph_agent.agent.flows import SequentialAgent
from graph_agent.agent.react import ReactAgent
from graph_agent.messages import AssistantMessageChunk
from graph_agent.models.scripted import ScriptedChatModel


def chain() -> StateGraph:
    """``x`` goes up by one in ``first``, by ten in ``second``; ``first`` emits two chunks."""
    graph = StateGraph("chain")

    def first(state):
        emit_chunk("tick")
        emit_chunk({"progress": 1})
        emit_chunk(AssistantMessageChunk(id="m1", content="Hel"))
        emit_chunk(AssistantMessageChunk(id="m1", content="lo"))
        return {"x": state["x"] + 1}

    graph.add_node("first", first)
    graph.add_node("second", lambda state: {"x": state["x"] + 10})
    graph.add_edge(START, "first").add_edge("first", "second").add_edge("second", END)
    return graph


def approval() -> StateGraph:
    """Asks a human before writing ``answer``."""
    graph = StateGraph("approval")
    graph.add_node("draft", lambda state: {"draft": f"reply to {state['question']}"})
    graph.add_node("ask", lambda state: {"answer": interrupt({"approve": state["draft"]})})
    graph.add_edge(START, "draft").add_edge("draft", "ask").add_edge("ask", END)
    return graph


def slow() -> StateGraph:
    """Ten steps of 0.1 s each: long enough to be busy, cancelled between steps."""
    graph = StateGraph("slow")

    def step(state):
        time.sleep(0.1)
        return {"n": state.get("n", 0) + 1}

    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", lambda state: END if state["n"] >= 10 else "step")
    return graph


ANSWERS = ("Hello there.", "Second answer.", "Third.", *(f"Answer {n}." for n in range(4, 50)))
"""What the test agent answers, in order (a module's tests ask it many times)."""


def agent() -> ReactAgent:
    return ReactAgent("assistant", model=ScriptedChatModel(list(ANSWERS)))


def team() -> SequentialAgent:
    """A writer, then an editor: a team served like an agent."""
    writer = ReactAgent("writer", model=ScriptedChatModel([f"Draft {n}." for n in range(50)]))
    editor = ReactAgent("editor", model=ScriptedChatModel([f"Edited {n}." for n in range(50)]))
    return SequentialAgent("pipeline", [writer, editor])
