"""Engine edge cases found in review: resuming after update_state, nested graphs and event
loops, streams read from other threads, context variables, error attribution, ids."""

from __future__ import annotations

import asyncio
import contextvars
import enum
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    Command,
    CompileConfig,
    GraphRecursionError,
    InvalidResumeError,
    MemorySaver,
    NodeError,
    RunnableConfig,
    StateGraph,
    StreamingOutput,
    ThreadBusyError,
    emit_chunk,
    interrupt,
)

CFG = RunnableConfig(thread_id="t1")
REPO = Path(__file__).resolve().parents[2]


def asking_graph(runs=None, *, sibling=False):
    """START -> ask (calls interrupt()) -> END; optionally a sibling 'calm' in the same step."""

    def ask(state):
        if runs is not None:
            runs.append("ask")
        return {"answer": interrupt("publish?")}

    g = StateGraph("ask")
    g.add_node("ask", ask)
    g.add_edge(START, "ask").add_edge("ask", END)
    if sibling:
        g.add_node(
            "calm", lambda s: (runs.append("calm") if runs is not None else None) or {"calm": 1}
        )
        g.add_edge(START, "calm").add_edge("calm", END)
    return g.compile(CompileConfig(saver=MemorySaver()))


def test_streaming_none_on_a_thread_paused_at_an_interrupt_ends_with_the_interrupts(driver):
    app = asking_graph()
    pending = driver.invoke(app, {}, CFG).interrupts
    outputs = driver.stream(app, None, CFG)
    assert outputs, "stream(None) on a paused thread yielded nothing"
    assert outputs[-1].interrupts == pending


def test_update_state_while_paused_at_an_interrupt_keeps_the_interrupt_answerable(driver):
    runs: list[str] = []
    app = asking_graph(runs, sibling=True)
    assert driver.invoke(app, {}, CFG).interrupts
    app.update_state(CFG, {"note": "edited"})
    assert [i.node for i in app.get_state(CFG).interrupts] == ["ask"]
    done = driver.invoke(app, Command(resume="yes"), CFG)
    assert done["answer"] == "yes" and done["note"] == "edited"
    assert runs.count("calm") == 1, "a sibling that finished before the pause ran again"


def test_none_on_a_thread_finished_after_an_interrupt_after_pause_raises(driver):
    g = StateGraph("last", key_strategies={"log": AppendStrategy()})
    g.add_node("only", lambda s: {"log": "only"}).add_edge(START, "only").add_edge("only", END)
    app = g.compile(CompileConfig(saver=MemorySaver(), interrupt_after=["only"]))
    assert driver.invoke(app, {}, CFG).interrupts
    assert driver.invoke(app, None, CFG).interrupts == ()
    assert app.get_state(CFG).next == () and app.get_state(CFG).interrupts == ()
    with pytest.raises(InvalidResumeError, match="finished"):
        driver.invoke(app, None, CFG)


request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)


def context_reader_graph(names):
    def reader(name):
        def node(state):
            return {name: request_id.get()}

        return node

    g = StateGraph("ctx")
    for name in names:
        g.add_node(name, reader(name))
        g.add_edge(START, name).add_edge(name, END)
    return g.compile()


def test_parallel_sync_nodes_see_the_callers_context_variables_under_invoke_as_under_ainvoke():
    app = context_reader_graph(["b", "c"])
    token = request_id.set("req-42")
    try:
        via_ainvoke = asyncio.run(app.ainvoke({})).data()
        via_invoke = app.invoke({}).data()
    finally:
        request_id.reset(token)
    assert via_ainvoke == {"b": "req-42", "c": "req-42"}
    assert via_invoke == via_ainvoke


def test_a_lone_sync_node_sees_the_same_context_variables_under_stream_as_under_invoke():
    app = context_reader_graph(["only"])
    token = request_id.set("req-42")
    try:
        invoked = app.invoke({})["only"]
        streamed = next(o.update for o in app.stream({}) if o.node == "only")["only"]
    finally:
        request_id.reset(token)
    assert invoked == "req-42"
    assert streamed == "req-42"


async def test_ainvoke_runs_parallel_sync_branches_beyond_the_cpu_sized_default_executor(
    monkeypatch,
):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    branches = 7
    barrier = threading.Barrier(branches, timeout=3)

    def branch(name):
        def node(state):
            barrier.wait()
            return {"log": name}

        return node

    g = StateGraph("wide", key_strategies={"log": AppendStrategy()})
    for i in range(branches):
        g.add_node(f"b{i}", branch(f"b{i}"))
        g.add_edge(START, f"b{i}").add_edge(f"b{i}", END)
    app = g.compile()

    def in_fresh_loop():
        return asyncio.run(app.ainvoke({}))

    result = await asyncio.to_thread(in_fresh_loop)
    assert len(result["log"]) == branches


def test_a_stream_can_be_consumed_from_different_threads():
    def talk(state):
        emit_chunk("one")
        emit_chunk("two")
        return {"done": True}

    g = StateGraph("live")
    g.add_node("talk", talk).add_edge(START, "talk").add_edge("talk", END)
    stream = g.compile().stream({})
    items: list = []
    errors: list = []

    def pull_one():
        try:
            items.append(next(stream))
        except StopIteration:
            pass
        except BaseException as exc:
            errors.append(exc)

    for _ in range(6):
        worker = threading.Thread(target=pull_one)
        worker.start()
        worker.join(timeout=10)
    assert errors == []
    assert [o.chunk for o in items if isinstance(o, StreamingOutput)] == ["one", "two"]
    assert items[-1].node == "talk" and items[-1].update == {"done": True}


def test_a_subgraph_in_a_parallel_branch_under_an_async_node_does_not_deadlock():
    script = textwrap.dedent(
        """
        from graph_agent import StateGraph, START, END

        async def leaf(state):
            return {"y": 1}

        innermost = StateGraph("innermost")
        innermost.add_node("leaf", leaf).add_edge(START, "leaf").add_edge("leaf", END)
        innermost_app = innermost.compile()

        mid = StateGraph("mid")
        mid.add_node("a", lambda s: {"a": innermost_app.invoke({})["y"]})
        mid.add_node("b", lambda s: {"b": 1})
        mid.add_edge(START, "a").add_edge(START, "b").add_edge("a", END).add_edge("b", END)
        mid_app = mid.compile()

        async def outer_node(state):
            return {"r": mid_app.invoke({})["a"]}

        outer = StateGraph("outer")
        outer.add_node("o", outer_node).add_edge(START, "o").add_edge("o", END)
        print(outer.compile().invoke({})["r"])
        """
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=10
        )
    except subprocess.TimeoutExpired:
        pytest.fail("nested invoke deadlocked on the private event-loop thread")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"


async def test_breaking_out_of_astream_frees_the_thread_for_the_next_call():
    g = StateGraph("two", key_strategies={"log": AppendStrategy()})
    g.add_node("a", lambda s: {"log": "a"}).add_node("b", lambda s: {"log": "b"})
    g.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    app = g.compile(CompileConfig(saver=MemorySaver()))
    async for _output in app.astream({}, CFG):
        break
    result = await app.ainvoke(None, CFG)
    assert result["log"] == ["a", "b"]


class Verdict(enum.Enum):
    ACCEPT = 1
    REJECT = 2


@pytest.mark.parametrize("key", [Verdict.ACCEPT, None], ids=["enum", "none"])
def test_a_router_may_answer_any_hashable_path_map_key(driver, key):
    g = StateGraph("hashable", key_strategies={"log": AppendStrategy()})
    g.add_node("judge", lambda s: {"log": "judge"}).add_node("yes", lambda s: {"log": "yes"})
    g.add_edge(START, "judge").add_edge("yes", END)
    g.add_conditional_edges("judge", lambda s: key, {key: "yes", "other": END})
    assert driver.invoke(g.compile(), {})["log"] == ["judge", "yes"]


def test_without_a_saver_a_task_id_is_not_the_node_name_alone(driver):
    seen: list[str] = []

    def count(state, config):
        seen.append(config.task.id)
        return {"i": state["i"] + 1}

    g = StateGraph("loop")
    g.add_node("count", count).add_edge(START, "count")
    g.add_conditional_edges("count", lambda s: "count" if s["i"] < 3 else END)
    driver.invoke(g.compile(), {"i": 0})
    assert len(set(seen)) == len(seen) == 3


def test_graph_recursion_error_names_the_last_nodes_run(driver):
    g = StateGraph("pingpong")
    g.add_node("ping", lambda s: {}).add_node("pong", lambda s: {})
    g.add_edge(START, "ping").add_edge("ping", "pong")
    g.add_conditional_edges("pong", lambda s: "ping", {"ping": "ping", "stop": END})
    with pytest.raises(GraphRecursionError) as info:
        driver.invoke(g.compile(), {}, RunnableConfig(max_steps=3))
    assert "ping" in str(info.value).replace("pingpong", "")


def test_a_node_error_from_a_nested_graph_is_reported_at_the_outer_node(driver):
    def deep(state):
        raise ValueError("inner failure")

    inner_graph = StateGraph("inner")
    inner_graph.add_node("deep", deep).add_edge(START, "deep").add_edge("deep", END)
    inner = inner_graph.compile()

    outer = StateGraph("outer")
    outer.add_node("first", lambda s: {}).add_node("wrapper", lambda s: inner.invoke({}).data())
    outer.add_edge(START, "first").add_edge("first", "wrapper").add_edge("wrapper", END)
    with pytest.raises(NodeError) as info:
        driver.invoke(outer.compile(), {})
    assert (info.value.node, info.value.step) == ("wrapper", 1)
    assert isinstance(info.value.__cause__, NodeError)


def test_a_refused_answer_drops_only_the_answer_that_was_refused(driver):
    def two_questions(state):
        first = interrupt("first?")
        second = interrupt("second?")
        if second == "bad":
            raise InvalidResumeError("the second answer must not be 'bad'")
        return {"answers": [first, second]}

    g = StateGraph("two")
    g.add_node("q", two_questions).add_edge(START, "q").add_edge("q", END)
    app = g.compile(CompileConfig(saver=MemorySaver()))
    driver.invoke(app, {}, CFG)
    driver.invoke(app, Command(resume="A"), CFG)
    with pytest.raises(InvalidResumeError):
        driver.invoke(app, Command(resume="bad"), CFG)
    assert [i.value for i in app.get_state(CFG).interrupts] == ["second?"]
    assert driver.invoke(app, Command(resume="B"), CFG)["answers"] == ["A", "B"]


async def test_a_second_ainvoke_on_a_running_thread_is_refused_at_once_even_if_the_first_ends_soon():
    async def quick(state):
        await asyncio.sleep(0.01)  # ends well within the old 47 ms of retries
        return {"log": "quick"}

    g = StateGraph("quick", key_strategies={"log": AppendStrategy()})
    g.add_node("q", quick).add_edge(START, "q").add_edge("q", END)
    app = g.compile(CompileConfig(saver=MemorySaver()))

    first, second = await asyncio.gather(
        app.ainvoke({}, CFG), app.ainvoke({}, CFG), return_exceptions=True
    )

    assert first["log"] == ["quick"]
    assert isinstance(second, ThreadBusyError)
    assert (await app.ainvoke({}, CFG))["log"] == ["quick", "quick"]  # free again afterwards


async def test_breaking_out_of_an_agents_astream_frees_the_thread_for_the_next_call():
    from graph_agent import ReactAgent
    from graph_agent.models import ScriptedChatModel

    agent = ReactAgent("a", ScriptedChatModel(["one two three", "again"]))
    async for _output in agent.astream("hi", CFG):
        break
    state = await agent.ainvoke("next", CFG)
    assert state["messages"][-1].text in ("one two three", "again")
