"""The ReAct workload (W2) in three implementations; W4, W5 and storage reuse it.

Two nodes, ``model`` and ``tools``: START → model; model → tools when the last message has tool
calls, else END; tools → model; ``messages`` is appended to. The fake model is deterministic
and looks at the last message only (so its own cost does not grow with the history): it calls
``add(done, 1)`` until ``iterations`` tool calls are done, then answers.

graph_agent and the plain loop use ``graph_agent.messages``; LangGraph uses plain dict messages
under an ``operator.add`` reducer, its cheapest natural form (the issue's "(dict msgs)").
"""

from __future__ import annotations

import operator
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

from benchmarks.harness import fresh_thread
from graph_agent import (
    END,
    START,
    AppendStrategy,
    AssistantMessage,
    CompileConfig,
    MemorySaver,
    RunnableConfig,
    SqliteSaver,
    StateGraph,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)

ITERATIONS = 10
QUESTION = "Count to ten by adding one, with the add tool."
SaverKind = Literal["none", "memory", "sqlite", "sqlite-full"]


def add(a: int, b: int) -> int:
    """The one tool."""
    return a + b


def max_steps(iterations: int) -> int:
    """Supersteps a run takes (a model and a tools step per iteration, the final answer), with
    room to spare."""
    return 2 * iterations + 5


# graph_agent messages: the graph_agent nodes and the plain loop do exactly this work


def model_reply(last: Any, iterations: int) -> AssistantMessage:
    done = int(last.content) if isinstance(last, ToolResponseMessage) else 0
    if done >= iterations:
        return AssistantMessage(f"The answer is {done}.", finish_reason="stop")
    call = ToolCall(f"call_{done}", "add", {"a": done, "b": 1})
    return AssistantMessage(tool_calls=[call], finish_reason="tool_calls")


def tool_results(last: AssistantMessage) -> list[ToolResponseMessage]:
    return [
        ToolResponseMessage(
            tool_call_id=call.id, name=call.name, content=str(add(**call.arguments))
        )
        for call in last.tool_calls
    ]


def history(length: int) -> list[Any]:
    """An earlier conversation of ``length`` messages, then the question."""
    earlier: list[Any] = []
    for i in range(length // 2):
        earlier.append(UserMessage(f"Question {i}?", id=f"u{i}"))
        earlier.append(AssistantMessage(f"Answer {i}.", id=f"a{i}"))
    return [*earlier, UserMessage(QUESTION)]


def graph_agent_react(iterations: int, saver: Any = None, clock: list[float] | None = None) -> Any:
    """``clock``: the model node appends ``perf_counter()`` to it each time it starts (W4)."""

    def model(state: Any) -> dict[str, Any]:
        if clock is not None:
            clock.append(time.perf_counter())
        return {"messages": model_reply(state["messages"][-1], iterations)}

    def tools(state: Any) -> dict[str, Any]:
        return {"messages": tool_results(state["messages"][-1])}

    def route(state: Any) -> str:
        return "tools" if state["messages"][-1].tool_calls else END

    g = StateGraph("react", key_strategies={"messages": AppendStrategy()})
    g.add_node("model", model)
    g.add_node("tools", tools)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", route, {"tools": "tools", END: END})
    g.add_edge("tools", "model")
    return g.compile(CompileConfig(saver=saver))


def graph_agent_saver(kind: SaverKind, folder: Path) -> Any:
    if kind == "memory":
        return MemorySaver()
    if kind in ("sqlite", "sqlite-full"):
        durability = "full" if kind == "sqlite-full" else "normal"
        return SqliteSaver(folder / f"graph_agent-{kind}.db", durability=durability)
    return None


def graph_agent_invoke(
    app: Any, iterations: int, *, forget: bool = False
) -> Callable[[list[Any]], Any]:
    """One run per call on a fresh thread; returns the final state. ``forget``: delete the
    thread after the run (W4: thousands of 5,000-message threads would pile up in memory)."""
    steps = max_steps(iterations)

    def invoke(messages: list[Any]) -> Any:
        thread = fresh_thread() if app.saver is not None else None
        config = RunnableConfig(thread_id=thread, max_steps=steps)
        final = app.invoke({"messages": messages}, config)
        if forget and thread is not None:
            app.saver.delete_thread(thread)
        return final

    return invoke


def graph_agent_stream(app: Any, iterations: int) -> Callable[[list[Any]], int]:
    """One streamed run per call; returns how many events it yielded."""
    steps = max_steps(iterations)

    def stream(messages: list[Any]) -> int:
        thread = fresh_thread() if app.saver is not None else None
        config = RunnableConfig(thread_id=thread, max_steps=steps)
        return sum(1 for _ in app.stream({"messages": messages}, config))

    return stream


# the plain loop: the floor


def plain_react(
    messages: list[Any], iterations: int, clock: list[float] | None = None
) -> list[Any]:
    messages = list(messages)
    while True:
        if clock is not None:
            clock.append(time.perf_counter())
        reply = model_reply(messages[-1], iterations)
        messages.append(reply)
        if not reply.tool_calls:
            return messages
        messages.extend(tool_results(reply))


def plain_react_stream(messages: list[Any], iterations: int) -> Iterator[dict[str, Any]]:
    """The plain loop as a generator of per-step updates, like a stream."""
    messages = list(messages)
    while True:
        reply = model_reply(messages[-1], iterations)
        messages.append(reply)
        yield {"model": reply}
        if not reply.tool_calls:
            return
        results = tool_results(reply)
        messages.extend(results)
        yield {"tools": results}


# LangGraph, with dict messages


class DictReactState(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]


def dict_model_reply(last: dict[str, Any], iterations: int) -> dict[str, Any]:
    done = int(last["content"]) if last["role"] == "tool" else 0
    if done >= iterations:
        return {"role": "assistant", "id": uuid.uuid4().hex, "content": f"The answer is {done}."}
    call = {"id": f"call_{done}", "name": "add", "args": {"a": done, "b": 1}}
    return {"role": "assistant", "id": uuid.uuid4().hex, "content": "", "tool_calls": [call]}


def dict_tool_results(last: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "role": "tool",
            "id": uuid.uuid4().hex,
            "tool_call_id": call["id"],
            "name": call["name"],
            "content": str(add(**call["args"])),
        }
        for call in last["tool_calls"]
    ]


def dict_history(length: int) -> list[dict[str, Any]]:
    earlier: list[dict[str, Any]] = []
    for i in range(length // 2):
        earlier.append({"role": "user", "id": f"u{i}", "content": f"Question {i}?"})
        earlier.append({"role": "assistant", "id": f"a{i}", "content": f"Answer {i}."})
    return [*earlier, {"role": "user", "id": uuid.uuid4().hex, "content": QUESTION}]


def langgraph_react(
    iterations: int, checkpointer: Any = None, clock: list[float] | None = None
) -> Any:
    from langgraph.graph import END as LG_END
    from langgraph.graph import START as LG_START
    from langgraph.graph import StateGraph as LGStateGraph

    def model(state: DictReactState) -> dict[str, Any]:
        if clock is not None:
            clock.append(time.perf_counter())
        return {"messages": [dict_model_reply(state["messages"][-1], iterations)]}

    def tools(state: DictReactState) -> dict[str, Any]:
        return {"messages": dict_tool_results(state["messages"][-1])}

    def route(state: DictReactState) -> str:
        return "tools" if state["messages"][-1].get("tool_calls") else LG_END

    g = LGStateGraph(DictReactState)
    g.add_node("model", model)
    g.add_node("tools", tools)
    g.add_edge(LG_START, "model")
    g.add_conditional_edges("model", route, {"tools": "tools", LG_END: LG_END})
    g.add_edge("tools", "model")
    return g.compile(checkpointer=checkpointer)


def langgraph_saver(kind: SaverKind, folder: Path) -> Any:
    if kind == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        return InMemorySaver()
    if kind in ("sqlite", "sqlite-full"):
        from langgraph.checkpoint.sqlite import SqliteSaver as LGSqliteSaver

        conn = sqlite3.connect(folder / "langgraph.db", check_same_thread=False)
        return LGSqliteSaver(conn)
    return None


def langgraph_config(app: Any, iterations: int) -> dict[str, Any]:
    config: dict[str, Any] = {"recursion_limit": max_steps(iterations)}
    if app.checkpointer is not None:
        config["configurable"] = {"thread_id": fresh_thread()}
    return config


def langgraph_invoke(
    app: Any, iterations: int, durability: str | None = None, *, forget: bool = False
) -> Callable[[list[dict[str, Any]]], Any]:
    """``durability``: LangGraph's own setting (``"sync"`` writes each checkpoint before the
    next step starts; its default writes them in the background); ``forget``: as for
    :func:`graph_agent_invoke`."""
    extra = {} if durability is None else {"durability": durability}

    def invoke(messages: list[dict[str, Any]]) -> Any:
        config = langgraph_config(app, iterations)
        final = app.invoke({"messages": messages}, config, **extra)
        if forget and app.checkpointer is not None:
            app.checkpointer.delete_thread(config["configurable"]["thread_id"])
        return final

    return invoke


def langgraph_stream(app: Any, iterations: int) -> Callable[[list[dict[str, Any]]], int]:
    def stream(messages: list[dict[str, Any]]) -> int:
        config = langgraph_config(app, iterations)
        return sum(1 for _ in app.stream({"messages": messages}, config, stream_mode="updates"))

    return stream
