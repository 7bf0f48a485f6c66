"""What the Studio's browser tests serve: the offline demo agent (streaming its words), the demo
agent behind a human approval of its tools, a two-step graph to travel in time with, a graph
with a subgraph, a graph whose node raises, one that asks a human, a slow one, a graph that
chats (a ``messages`` key, and a private log), and slow nodes and a slow tool to watch running."""

from __future__ import annotations

import time

from graph_agent import END, START, AppendStrategy, ReplaceStrategy, StateGraph, interrupt
from graph_agent.agent.builtin_hooks import HumanInTheLoopHook
from graph_agent.agent.react import ReactAgent
from graph_agent.demo import INSTRUCTION, DemoChatModel
from graph_agent.demo_tools import calculator, clock, convert_units
from graph_agent.messages import AssistantMessage, ToolCall
from graph_agent.models.scripted import ScriptedChatModel
from graph_agent.tools import tool

CHUNK_DELAY = 0.02
"""Seconds between streamed words: long enough that a page sees tokens arrive."""

PACE = 1.5
"""Seconds a slow node or tool takes: long enough to see it lit while it runs."""


def demo() -> ReactAgent:
    """The demo agent, as ``graph-agent demo`` runs it."""
    return ReactAgent(
        "demo",
        DemoChatModel(chunk_delay=CHUNK_DELAY),
        tools=[calculator, clock, convert_units],
        instruction=INSTRUCTION,
    )


def gated() -> ReactAgent:
    """The demo agent asking before it calculates or converts."""
    return ReactAgent(
        "gated",
        DemoChatModel(),
        tools=[calculator, clock, convert_units],
        instruction=INSTRUCTION,
        hooks=[
            HumanInTheLoopHook(
                approve={
                    "calculator": "runs arithmetic on the server",
                    "convert_units": "converts units",
                }
            )
        ],
    )


def steps() -> StateGraph:
    """``x`` goes up by one in ``first``, then by ten in ``second``."""
    graph = StateGraph("steps")
    graph.add_node("first", lambda state: {"x": state["x"] + 1})
    graph.add_node("second", lambda state: {"x": state["x"] + 10})
    graph.add_edge(START, "first").add_edge("first", "second").add_edge("second", END)
    return graph


def nested() -> StateGraph:
    """A graph with a subgraph node (``research``), drawn as a cluster."""
    inner = StateGraph("research")
    inner.add_node("search", lambda state: {"notes": f"notes on {state['topic']}"})
    inner.add_node("summarise", lambda state: {"summary": state["notes"].upper()})
    inner.add_edge(START, "search").add_edge("search", "summarise").add_edge("summarise", END)
    outer = StateGraph("nested")
    outer.add_node("plan", lambda state: {"topic": state.value("topic", "graphs")})
    outer.add_node("research", inner.compile())
    outer.add_node("write", lambda state: {"report": f"report: {state['summary']}"})
    outer.add_edge(START, "plan").add_edge("plan", "research").add_edge("research", "write")
    outer.add_edge("write", END)
    return outer


def broken() -> StateGraph:
    """``check`` raises on its input: a run fails at step 1."""
    graph = StateGraph("broken")

    def check(state):
        raise ValueError(f"the amount {state['amount']} is over the limit")

    graph.add_node("load", lambda state: {"amount": state["amount"] * 2})
    graph.add_node("check", check)
    graph.add_edge(START, "load").add_edge("load", "check").add_edge("check", END)
    return graph


def asking() -> StateGraph:
    """``ask`` pauses with a question; the answer it is resumed with lands in ``answer``."""
    graph = StateGraph("asking")
    graph.add_node("draft", lambda state: {"draft": f"reply to {state['question']}"})
    graph.add_node("ask", lambda state: {"answer": interrupt({"send this?": state["draft"]})})
    graph.add_edge(START, "draft").add_edge("draft", "ask").add_edge("ask", END)
    return graph


def slow() -> StateGraph:
    """Fifty steps of 0.1 s: a run long enough to be cancelled from the page."""
    graph = StateGraph("slow")

    def tick(state):
        time.sleep(0.1)
        return {"n": state.value("n", 0) + 1}

    graph.add_node("tick", tick)
    graph.add_edge(START, "tick")
    graph.add_conditional_edges("tick", lambda state: END if state["n"] >= 50 else "tick")
    return graph


def chatty() -> StateGraph:
    """A graph (not an agent) that answers each message in ``messages`` in its ``tone``, and
    keeps a private ``log`` of its replies: bookkeeping, never an input."""
    graph = StateGraph(
        "chatty",
        key_strategies={
            "messages": AppendStrategy(),
            "log": AppendStrategy(),
            "tone": ReplaceStrategy(),
        },
        private_keys=["log"],
    )

    def reply(state):
        said = state["messages"][-1].content  # the server hands a graph message objects
        answer = f"{state.value('tone', 'echo')}: {said}"
        return {"messages": [{"type": "ai", "content": answer}], "log": f"replied to {said}"}

    graph.add_node("reply", reply)
    graph.add_edge(START, "reply").add_edge("reply", END)
    return graph


def paced() -> StateGraph:
    """``think`` takes :data:`PACE` seconds, then ``left`` and ``right`` take as long together
    (one step, two branches), then ``join``."""
    graph = StateGraph("paced")

    def slow_node(key: str):
        def node(state):
            time.sleep(PACE)
            return {key: True}

        return node

    for name in ("think", "left", "right"):
        graph.add_node(name, slow_node(name))
    graph.add_node("join", lambda state: {"joined": state["left"] and state["right"]})
    graph.add_edge(START, "think").add_edge("think", "left").add_edge("think", "right")
    graph.add_edge("left", "join").add_edge("right", "join").add_edge("join", END)
    return graph


@tool
def pause(seconds: float) -> str:
    """Wait ``seconds``, then say so."""
    time.sleep(seconds)
    return f"waited {seconds} s"


def pausing() -> ReactAgent:
    """An agent whose model calls :func:`pause` for :data:`PACE` seconds, then answers (as
    often as it is asked)."""
    call = AssistantMessage(tool_calls=[ToolCall("pause-1", "pause", {"seconds": PACE})])
    return ReactAgent("pausing", ScriptedChatModel([call, "Done waiting."] * 20), tools=[pause])


def targets() -> list[object]:
    served = [demo(), gated(), steps(), nested(), broken(), asking(), slow(), chatty()]
    return [*served, paced(), pausing()]
