"""What a call leaves for the garbage collector: no reference cycles when it finishes or pauses
(so its state is freed when it ends, even with the collector off, as in benchmarks), and in
MemorySaver only data the collector stops tracking, so that a process holding many threads
does not pay for their checkpoints in every full collection."""

from __future__ import annotations

import asyncio
import gc
import itertools
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from benchmarks.harness import no_collection
from graph_agent import (
    END,
    START,
    AppendStrategy,
    AssistantMessage,
    Command,
    CompileConfig,
    MemorySaver,
    RunnableConfig,
    Send,
    StateGraph,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
    interrupt,
    tool,
)
from graph_agent.agent import HumanInTheLoopHook, ReactAgent
from graph_agent.checkpoint.base import Checkpoint, new_checkpoint_id
from graph_agent.checkpoint.memory import _Header
from graph_agent.demo import build_agent
from graph_agent.graph.saver import Blob
from graph_agent.models import ScriptedChatModel

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


def map_reduce(saver: MemorySaver | None) -> Any:
    """Sends to one node and a deferred join: Sends and a waiting node get stored."""
    g = StateGraph("map_reduce", key_strategies={"log": AppendStrategy()})
    g.add_node("plan", lambda s: None)
    g.add_node("work", lambda item: {"log": item["n"]})
    g.add_node("join", lambda s: {"log": "join"}, defer=True)
    g.add_edge(START, "plan").add_edge("plan", "join").add_edge("work", "join")
    g.add_conditional_edges("plan", lambda s: [Send("work", {"n": n}) for n in range(3)])
    g.add_edge("join", END)
    return g.compile(CompileConfig(saver=saver))


def ask(state: Any) -> dict[str, Any]:
    return {"answer": interrupt("ok?")}


def paused_then_answered(app: Any) -> Callable[[], Any]:
    """A call that pauses on ``interrupt()``, then the call that answers it."""

    def call() -> Any:
        config = thread()
        assert app.invoke({"answer": None}, config).interrupts
        return app.invoke(Command(resume="yes"), config)

    return call


def asking(saver: MemorySaver | None, *, nested: bool = False) -> Any:
    """START → ask → END; ``nested``: the asking graph is a node of an outer graph."""
    g = StateGraph("ask")
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    if not nested:
        return g.compile(CompileConfig(saver=saver))
    outer = StateGraph("outer")
    outer.add_node("inner", g.compile())
    outer.add_edge(START, "inner")
    outer.add_edge("inner", END)
    return outer.compile(CompileConfig(saver=saver))


@tool
def send(to: str) -> str:
    """Send a message."""
    return f"sent to {to}"


def agent_asking_a_human() -> Callable[[], Any]:
    """A ReactAgent whose tool call waits for a human's approval, then runs."""
    call = AssistantMessage(tool_calls=[ToolCall("m1", "send", {"to": "bob"})])
    model = ScriptedChatModel([call, "sent"] * 10)
    gate = HumanInTheLoopHook(approve={"send": "sends a message"})
    agent = ReactAgent("mail", model, tools=[send], hooks=[gate])

    def run() -> Any:
        config = thread()
        assert agent.invoke("message bob", config).interrupts
        return agent.invoke(Command(resume={"m1": {"decision": "approve"}}), config)

    return run


def _calls() -> dict[str, Callable[[], Any]]:
    question = {"messages": [UserMessage("count to three")]}
    with_saver, without = react(MemorySaver()), react(None)
    fan = fan_out(MemorySaver())
    sends = map_reduce(MemorySaver())
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
        "sends and a deferred join, in-memory saver": lambda: sends.invoke({}, thread()),
        "a pause, then its answer": paused_then_answered(asking(MemorySaver())),
        "a subgraph's pause, then its answer": paused_then_answered(
            asking(MemorySaver(), nested=True)
        ),
        "demo agent invoke": lambda: agent.invoke("What is 2 ** 16?", thread()),
        "demo agent stream": lambda: list(agent.stream("What is 2 ** 16?", thread())),
        "agent pausing for a human's approval": agent_asking_a_human(),
    }


CALL_NAMES = [
    "invoke, in-memory saver",
    "invoke, no saver",
    "stream, in-memory saver",
    "stream, no saver",
    "ainvoke, in-memory saver",
    "astream, in-memory saver",
    "parallel branches, in-memory saver",
    "sends and a deferred join, in-memory saver",
    "a pause, then its answer",
    "a subgraph's pause, then its answer",
    "demo agent invoke",
    "demo agent stream",
    "agent pausing for a human's approval",
]


@pytest.fixture(scope="module")
def calls() -> dict[str, Callable[[], Any]]:
    made = _calls()
    assert list(made) == CALL_NAMES
    return made


@pytest.fixture
def collector_off() -> Iterator[None]:
    with no_collection():
        try:
            yield
        finally:
            gc.set_debug(0)
            gc.garbage.clear()


@pytest.mark.parametrize("name", CALL_NAMES)
def test_a_call_leaves_no_reference_cycle(
    name: str, calls: dict[str, Callable[[], Any]], collector_off: None
) -> None:
    call = calls[name]
    call()  # first calls make what is made once (caches, parked greenlets, pools)
    call()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds only in cycles stays in gc.garbage
    assert call()
    gc.collect()
    # (another thread's garbage may be there too: only graph_agent's objects count)
    ours = sorted({type(o).__qualname__ for o in gc.garbage if _ours(o)})
    assert ours == [], f"{name}: left in reference cycles: {ours}"


def _ours(value: object) -> bool:
    return type(value).__module__.startswith("graph_agent")


# Before 3.14, CPython also stops tracking dicts that hold only untracked values; 3.14 tracks
# every dict (python/cpython#127010). Tuples of strings, bytes and numbers are untracked by both.
DICTS_UNTRACKED = sys.version_info < (3, 14)


def _tracked_in(saver: MemorySaver) -> list[str]:
    """What the garbage collector still tracks among the saver's stored checkpoints (a thread's
    namespace dict, its ``_Space`` and its dicts of blobs and of writes, which hold dicts, stay
    tracked: up to four objects per thread)."""
    found = []
    for thread_id, spaces in saver._threads.items():
        for space in spaces.values():
            stored: dict[str, Any] = {}
            for checkpoint_id, header in space.headers.items():
                stored[f"header {checkpoint_id}"] = header
                fields = _Header._make(header)._asdict()
                stored.update({f"header {checkpoint_id}.{f}": v for f, v in fields.items()})
            for key, by_version in space.blobs.items():
                stored.update({f"blob {key} {v}": b for v, b in by_version.items()})
            for checkpoint_id, writes in space.writes.items():
                stored.update({f"write {checkpoint_id} {k}": k for k in writes})
            if DICTS_UNTRACKED:
                stored["headers"] = space.headers
                stored.update({f"blobs[{k!r}]": d for k, d in space.blobs.items()})
                stored.update({f"writes {c}": d for c, d in space.writes.items()})
            found += [f"{thread_id}: {name}" for name, o in stored.items() if gc.is_tracked(o)]
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
    headers = [_Header._make(h) for h in stored.headers.values()]
    assert any(h.barriers for h in headers), "no barriers stored: the test is moot"
    assert any(stored.writes.values()) and sum(len(s) for s in saver._threads.values()) == 7
    for _ in range(3):  # dicts are untracked only by full collections, the outer after the inner
        gc.collect()
    tracked = _tracked_in(saver)
    assert tracked == [], tracked
    # and what is stored still loads
    assert saver.get("by hand").barriers == {"join": ("a", "b")}
    assert saver.get("by hand").pending_writes[0].value == ["y"]
