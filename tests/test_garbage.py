"""What a call leaves for the garbage collector: no reference cycles, and in MemorySaver only
data it stops tracking, so a process holding many threads does not pay for them in every full
collection (and with the collector off, as in benchmarks, a call's state is still freed)."""

from __future__ import annotations

import asyncio
import gc
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    AssistantMessage,
    CompileConfig,
    MemorySaver,
    RunnableConfig,
    StateGraph,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from graph_agent.checkpoint.base import Checkpoint, new_checkpoint_id
from graph_agent.demo import build_agent
from graph_agent.graph.engine import Blob

_threads = itertools.count()


def thread() -> RunnableConfig:
    return RunnableConfig(thread_id=f"garbage-{next(_threads)}", max_steps=50)


def react(saver: MemorySaver | None) -> Any:
    """Two nodes taking turns three times, appending messages, as an agent does."""

    def model(state: Any) -> dict[str, Any]:
        done = sum(isinstance(m, ToolResponseMessage) for m in state["messages"])
        if done == 3:
            return {"messages": AssistantMessage("done", finish_reason="stop")}
        call = ToolCall(f"call_{done}", "add", {"a": done, "b": 1})
        return {"messages": AssistantMessage(tool_calls=[call], finish_reason="tool_calls")}

    def tools(state: Any) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]
        return {"messages": ToolResponseMessage(tool_call_id=call.id, name="add", content="1")}

    g = StateGraph("react", key_strategies={"messages": AppendStrategy()})
    g.add_node("model", model)
    g.add_node("tools", tools)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", lambda s: "tools" if s["messages"][-1].tool_calls else END)
    g.add_edge("tools", "model")
    return g.compile(CompileConfig(saver=saver))


def fan_out(saver: MemorySaver | None) -> Any:
    """Two branches and a barrier join: pending writes and barriers get stored."""
    g = StateGraph("fan", key_strategies={"log": AppendStrategy()})
    g.add_node("a", lambda s: {"log": "a"})
    g.add_node("b", lambda s: {"log": "b"})
    g.add_node("join", lambda s: {"log": "join"})
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge(["a", "b"], "join")
    g.add_edge("join", END)
    return g.compile(CompileConfig(saver=saver))


def _calls() -> dict[str, Callable[[], Any]]:
    question = {"messages": [UserMessage("count to three")]}
    with_saver, without = react(MemorySaver()), react(None)
    fan = fan_out(MemorySaver())
    agent = build_agent()

    async def streamed_async() -> list[Any]:
        return [chunk async for chunk in with_saver.astream(question, thread())]

    return {
        "invoke, in-memory saver": lambda: with_saver.invoke(question, thread()),
        "invoke, no saver": lambda: without.invoke(question),
        "stream, in-memory saver": lambda: list(with_saver.stream(question, thread())),
        "stream, no saver": lambda: list(without.stream(question)),
        "ainvoke, in-memory saver": lambda: asyncio.run(with_saver.ainvoke(question, thread())),
        "astream, in-memory saver": lambda: asyncio.run(streamed_async()),
        "parallel branches, in-memory saver": lambda: fan.invoke({"log": []}, thread()),
        "demo agent invoke": lambda: agent.invoke("What is 2 ** 16?", thread()),
        "demo agent stream": lambda: list(agent.stream("What is 2 ** 16?", thread())),
    }


CALLS = _calls()


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@pytest.mark.parametrize("name", list(CALLS))
def test_a_call_leaves_no_reference_cycle(name: str, collector_off: None) -> None:
    call = CALLS[name]
    call()  # first calls make what is made once (caches, parked greenlets, pools)
    call()
    gc.collect()
    result = call()
    assert result
    unreachable = gc.collect()  # objects found only in cycles, that refcounting never frees
    assert unreachable == 0, f"{name}: {unreachable} objects left in reference cycles"


def _tracked_in(saver: MemorySaver) -> list[str]:
    """What the garbage collector still tracks among the saver's stored checkpoints (a thread's
    dicts of blobs and of writes hold dicts, so they stay tracked: three objects per thread)."""
    found = []
    for thread_id, spaces in saver._threads.items():
        for space in spaces.values():
            containers: dict[str, Any] = {"headers": space.headers}
            for checkpoint_id, header in space.headers.items():
                containers[f"header {checkpoint_id}"] = header
                containers.update({f"header {checkpoint_id}[{i}]": f for i, f in enumerate(header)})
            for key, by_version in space.blobs.items():
                containers[f"blobs[{key!r}]"] = by_version
                containers.update({f"blob {key} {v}": b for v, b in by_version.items()})
            for checkpoint_id, writes in space.writes.items():
                containers[f"writes {checkpoint_id}"] = writes
                containers.update({f"write {checkpoint_id} {k}": k for k in writes})
            found += [f"{thread_id}: {name}" for name, o in containers.items() if gc.is_tracked(o)]
    return found


def test_memory_saver_stores_nothing_the_collector_keeps_tracking() -> None:
    saver = MemorySaver()
    app, fan = react(saver), fan_out(saver)
    for _ in range(3):
        app.invoke({"messages": [UserMessage("count to three")]}, thread())
        fan.invoke({"log": []}, thread())
    hand_made = Checkpoint(
        id=new_checkpoint_id(),
        thread_id="by hand",
        checkpoint_ns="",
        parent_id=None,
        step=0,
        next=("a",),
        versions={},
        barriers={"join": ("a", "b")},
        blobs={"log": Blob("full", ["x"])},
        metadata={"source": "input", "step": 0, "writers": []},
    )
    hand_made.versions["log"] = hand_made.id
    saver.put(hand_made)
    saver.put_writes("by hand", "", hand_made.id, "task", [("log", ["y"])])
    stored = saver._threads["by hand"][""]
    assert any(h[6] for h in stored.headers.values()), "no barriers stored: the test is moot"
    assert any(stored.writes.values()) and sum(len(s) for s in saver._threads.values()) == 7
    for _ in range(3):  # dicts are untracked only by full collections, the outer after the inner
        gc.collect()
    tracked = _tracked_in(saver)
    assert tracked == [], tracked
    # and what is stored still loads
    assert saver.get("by hand").barriers == {"join": ("a", "b")}
    assert saver.get("by hand").pending_writes[0].value == ["y"]
