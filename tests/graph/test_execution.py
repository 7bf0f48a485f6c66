"""Supersteps, routing, barriers, errors and limits, through both drivers."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Literal

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    Command,
    CompileConfig,
    GraphRecursionError,
    InvalidUpdateError,
    MemorySaver,
    NodeError,
    RunnableConfig,
    StateGraph,
)


def logger(name, **extra):
    def node(state):
        return {"log": name, **extra}

    node.__name__ = name
    return node


def fan_graph():
    """START -> a -> (b, c) -> join, looping back to a until x reaches 3."""
    g = StateGraph("demo", key_strategies={"log": AppendStrategy()})
    g.add_node("a", lambda s: {"log": "a", "x": s.value("x", 0) + 1})
    g.add_node("b", logger("b"))
    g.add_node("c", logger("c"))
    g.add_node("join", logger("join"))
    g.add_edge(START, "a").add_edge("a", "b").add_edge("a", "c")
    g.add_edge("b", "join").add_edge("c", "join")
    g.add_conditional_edges(
        "join", lambda s: "again" if s["x"] < 3 else "done", {"again": "a", "done": END}
    )
    return g.compile()


def test_a_chain_runs_each_node_once_in_order(driver):
    g = StateGraph("chain", key_strategies={"log": AppendStrategy()})
    for name in ("one", "two", "three"):
        g.add_node(name, logger(name))
    g.add_edge(START, "one").add_edge("one", "two").add_edge("two", "three")
    g.add_edge("three", END)
    assert driver.invoke(g.compile(), {})["log"] == ["one", "two", "three"]


def test_fan_out_fan_in_runs_the_join_once_per_round(driver):
    result = driver.invoke(fan_graph(), {"x": 0})
    assert result["log"] == ["a", "b", "c", "join"] * 3
    assert result["x"] == 3


def test_parallel_writes_merge_in_add_node_order_not_finish_order(driver):
    g = StateGraph("order", key_strategies={"log": AppendStrategy()})

    def slow(state):
        time.sleep(0.05)
        return {"log": "slow"}

    async def quick(state):
        return {"log": "quick"}

    g.add_node("slow", slow).add_node("quick", quick)
    g.add_edge(START, "slow").add_edge(START, "quick")
    g.add_edge("slow", END).add_edge("quick", END)
    assert driver.invoke(g.compile(), {})["log"] == ["slow", "quick"]


def test_branches_run_concurrently_even_on_two_cores(driver):
    barrier = threading.Barrier(3, timeout=5)

    def branch(name):
        def node(state):
            barrier.wait()  # BrokenBarrierError unless all three run at once
            return {"log": name}

        return node

    g = StateGraph("par", key_strategies={"log": AppendStrategy()})
    for name in ("b1", "b2", "b3"):
        g.add_node(name, branch(name))
        g.add_edge(START, name)
        g.add_edge(name, END)
    assert driver.invoke(g.compile(), {})["log"] == ["b1", "b2", "b3"]


def test_async_branches_run_concurrently(driver):
    g = StateGraph("apar", key_strategies={"log": AppendStrategy()})
    started = []

    def branch(name):
        async def node(state):
            started.append(name)
            for _ in range(200):
                if len(started) == 3:
                    return {"log": name}
                await asyncio.sleep(0.01)
            raise TimeoutError("the other branches never started")

        return node

    for name in ("b1", "b2", "b3"):
        g.add_node(name, branch(name))
        g.add_edge(START, name).add_edge(name, END)
    assert driver.invoke(g.compile(), {})["log"] == ["b1", "b2", "b3"]


def test_max_concurrency_one_runs_parallel_nodes_one_at_a_time(driver):
    running = []
    peak = []

    def branch(name):
        def node(state):
            running.append(name)
            peak.append(len(running))
            time.sleep(0.01)
            running.remove(name)
            return {"log": name}

        return node

    g = StateGraph("serial", key_strategies={"log": AppendStrategy()})
    for name in ("b1", "b2", "b3"):
        g.add_node(name, branch(name))
        g.add_edge(START, name).add_edge(name, END)
    result = driver.invoke(g.compile(), {}, RunnableConfig(max_concurrency=1))
    assert result["log"] == ["b1", "b2", "b3"]
    assert max(peak) == 1


def test_a_barrier_waits_for_branches_of_different_lengths(driver):
    g = StateGraph("barrier", key_strategies={"log": AppendStrategy()})
    for name in ("fan", "short", "long1", "long2", "join"):
        g.add_node(name, logger(name))
    g.add_edge(START, "fan").add_edge("fan", "short").add_edge("fan", "long1")
    g.add_edge("long1", "long2")
    g.add_edge(["short", "long2"], "join")
    g.add_edge("join", END)
    outputs = driver.stream(g.compile(), {})
    steps = {o.node: o.step for o in outputs}
    assert [o.node for o in outputs if o.node == "join"] == ["join"]
    assert steps["join"] == steps["long2"] + 1
    assert driver.invoke(g.compile(), {})["log"] == ["fan", "short", "long1", "long2", "join"]


def test_plain_edges_from_branches_of_different_lengths_run_the_target_twice(driver):
    g = StateGraph("nobarrier", key_strategies={"log": AppendStrategy()})
    for name in ("fan", "short", "long1", "long2", "join"):
        g.add_node(name, logger(name))
    g.add_edge(START, "fan").add_edge("fan", "short").add_edge("fan", "long1")
    g.add_edge("long1", "long2").add_edge("short", "join").add_edge("long2", "join")
    g.add_edge("join", END)
    assert list(driver.invoke(g.compile(), {})["log"]).count("join") == 2


def test_a_branch_routed_to_end_stops_while_the_others_go_on(driver):
    g = StateGraph("partial", key_strategies={"log": AppendStrategy()})
    for name in ("fan", "quitter", "worker1", "worker2"):
        g.add_node(name, logger(name))
    g.add_edge(START, "fan").add_edge("fan", "quitter").add_edge("fan", "worker1")
    g.add_conditional_edges("quitter", lambda s: END)
    g.add_edge("worker1", "worker2").add_edge("worker2", END)
    assert driver.invoke(g.compile(), {})["log"] == ["fan", "quitter", "worker1", "worker2"]


def test_a_loop_without_an_exit_raises_graph_recursion_error(driver):
    g = StateGraph("forever")
    g.add_node("spin", lambda s: {"n": s.value("n", 0) + 1})
    g.add_edge(START, "spin")
    g.add_conditional_edges("spin", lambda s: "again", {"again": "spin", "done": END})
    with pytest.raises(GraphRecursionError, match=r"ran 7 supersteps.*max_steps=7.*spin"):
        driver.invoke(g.compile(), {}, RunnableConfig(max_steps=7))


def test_max_steps_defaults_to_one_hundred(driver):
    g = StateGraph("count")
    g.add_node("inc", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "inc")
    g.add_conditional_edges("inc", lambda s: "inc" if s["n"] < 100 else END)
    assert driver.invoke(g.compile(), {"n": 0})["n"] == 100
    with pytest.raises(GraphRecursionError):
        driver.invoke(g.compile(), {"n": -1})


def test_a_router_can_fan_out_with_a_list_of_keys(driver):
    g = StateGraph("fanout", key_strategies={"log": AppendStrategy()})
    for name in ("pick", "x", "y", "z"):
        g.add_node(name, logger(name))
    g.add_edge(START, "pick")
    g.add_conditional_edges(
        "pick", lambda s: ["to_z", "to_x"], {"to_x": "x", "to_y": "y", "to_z": "z"}
    )
    for name in ("x", "y", "z"):
        g.add_edge(name, END)
    assert driver.invoke(g.compile(), {})["log"] == ["pick", "x", "z"]


def test_a_node_with_a_static_edge_and_a_router_triggers_both_targets(driver):
    g = StateGraph("both", key_strategies={"log": AppendStrategy()})
    for name in ("pick", "always", "chosen"):
        g.add_node(name, logger(name))
    g.add_edge(START, "pick").add_edge("pick", "always")
    g.add_conditional_edges("pick", lambda s: "chosen", {"chosen": "chosen"})
    g.add_edge("always", END).add_edge("chosen", END)
    assert driver.invoke(g.compile(), {})["log"] == ["pick", "always", "chosen"]


def test_a_router_naming_one_node_twice_runs_it_once(driver):
    g = StateGraph("twice", key_strategies={"log": AppendStrategy()})
    g.add_node("pick", logger("pick")).add_node("x", logger("x"))
    g.add_edge(START, "pick").add_edge("x", END)
    g.add_conditional_edges("pick", lambda s: ["x", "x"])
    assert driver.invoke(g.compile(), {})["log"] == ["pick", "x"]


def test_a_node_with_a_router_and_a_barrier_counts_toward_the_barrier(driver):
    g = StateGraph("mixed", key_strategies={"log": AppendStrategy()})
    for name in ("a", "b", "join", "side"):
        g.add_node(name, logger(name))
    g.add_edge(START, "a").add_edge(START, "b")
    g.add_conditional_edges("a", lambda s: "side", {"side": "side"})
    g.add_edge(["a", "b"], "join")
    g.add_edge("side", END).add_edge("join", END)
    assert driver.invoke(g.compile(), {})["log"] == ["a", "b", "join", "side"]


def test_a_router_without_path_map_returns_node_names(driver):
    g = StateGraph("names", key_strategies={"log": AppendStrategy()})
    g.add_node("pick", logger("pick")).add_node("chosen", logger("chosen"))
    g.add_edge(START, "pick").add_edge("chosen", END)
    g.add_conditional_edges("pick", lambda s: "chosen" if not s.value("done") else END)
    assert driver.invoke(g.compile(), {})["log"] == ["pick", "chosen"]


def test_a_router_answer_outside_its_path_map_names_source_value_and_keys(driver):
    g = StateGraph("bad")
    g.add_node("pick", lambda s: {})
    g.add_edge(START, "pick")
    g.add_conditional_edges("pick", lambda s: "sideways", {"left": END, "right": END})
    with pytest.raises(InvalidUpdateError, match=r"'pick' returned 'sideways'.*'left', 'right'"):
        driver.invoke(g.compile(), {})


def test_a_router_naming_an_unknown_node_is_a_clear_error(driver):
    g = StateGraph("bad")
    g.add_node("pick", lambda s: {})
    g.add_edge(START, "pick")
    g.add_conditional_edges("pick", lambda s: "nowhere")
    with pytest.raises(InvalidUpdateError, match=r"returned 'nowhere', which is not a node"):
        driver.invoke(g.compile(), {})


def test_a_router_that_raises_becomes_a_node_error(driver):
    def broken(state):
        raise KeyError("missing")

    g = StateGraph("bad")
    g.add_node("pick", lambda s: {})
    g.add_edge(START, "pick")
    g.add_conditional_edges("pick", broken, {"x": END})
    with pytest.raises(NodeError, match="router on 'pick' raised KeyError") as info:
        driver.invoke(g.compile(), {})
    assert isinstance(info.value.__cause__, KeyError)


class StrRaises(Exception):
    def __str__(self):
        raise ValueError("no text")


def test_a_node_or_router_exception_whose_str_raises_is_still_a_node_error(driver):
    def broken(state):
        raise StrRaises()

    for where in ("node", "router"):
        g = StateGraph("bad")
        g.add_node("pick", broken if where == "node" else lambda s: {})
        g.add_edge(START, "pick")
        if where == "router":
            g.add_conditional_edges("pick", broken, {"x": END})
        else:
            g.add_edge("pick", END)
        with pytest.raises(NodeError, match=r"raised StrRaises: StrRaises\(\)") as info:
            driver.invoke(g.compile(), {})
        assert isinstance(info.value.__cause__, StrRaises)


def test_a_literal_return_annotation_serves_as_path_map(driver):
    def route(state) -> Literal["yes", "no"]:
        return "yes"

    g = StateGraph("literal", key_strategies={"log": AppendStrategy()})
    g.add_node("ask", logger("ask")).add_node("yes", logger("yes")).add_node("no", logger("no"))
    g.add_edge(START, "ask").add_edge("yes", END).add_edge("no", END)
    g.add_conditional_edges("ask", route)
    app = g.compile()
    assert driver.invoke(app, {})["log"] == ["ask", "yes"]
    assert "yes" in app.view.nodes and any(e.target == "no" for e in app.view.edges)


def test_a_command_updates_and_routes_to_declared_destinations(driver):
    g = StateGraph("cmd", key_strategies={"log": AppendStrategy()})
    g.add_node(
        "decide",
        lambda s: Command(goto="right", update={"log": "decide"}),
        destinations=("left", "right"),
    )
    g.add_node("left", logger("left")).add_node("right", logger("right"))
    g.add_edge(START, "decide").add_edge("left", END).add_edge("right", END)
    assert driver.invoke(g.compile(), {})["log"] == ["decide", "right"]


def test_a_command_goto_adds_to_static_edges(driver):
    g = StateGraph("cmd", key_strategies={"log": AppendStrategy()})
    g.add_node("decide", lambda s: Command(goto=["extra"]), destinations=("extra",))
    g.add_node("always", logger("always")).add_node("extra", logger("extra"))
    g.add_edge(START, "decide").add_edge("decide", "always")
    g.add_edge("always", END).add_edge("extra", END)
    assert driver.invoke(g.compile(), {})["log"] == ["always", "extra"]


def test_a_goto_outside_the_declared_destinations_is_an_error(driver):
    g = StateGraph("cmd")
    g.add_node("decide", lambda s: Command(goto="other"), destinations=("ok",))
    g.add_node("ok", lambda s: {}).add_node("other", lambda s: {})
    g.add_edge(START, "decide").add_edge("ok", END).add_edge("other", END)
    g.add_edge("decide", "other")
    with pytest.raises(InvalidUpdateError, match=r"Command\(goto='other'\).*declared: ok"):
        driver.invoke(g.compile(), {})


def test_a_goto_to_start_is_an_error_saying_start_is_no_goto_target(driver):
    g = StateGraph("cmd")
    g.add_node("decide", lambda s: Command(goto=START), destinations=("ok",))
    g.add_node("ok", lambda s: {})
    g.add_edge(START, "decide").add_edge("decide", "ok").add_edge("ok", END)
    with pytest.raises(InvalidUpdateError) as info:
        driver.invoke(g.compile(), {})
    assert "START cannot be a goto target" in str(info.value)
    assert "destinations=" not in str(info.value)


@pytest.mark.parametrize("goto", [5, 2.5, [5], [["ok"]]])
def test_a_goto_that_is_not_node_names_is_an_error_naming_node_step_and_value(driver, goto):
    g = StateGraph("cmd")
    g.add_node("decide", lambda s: Command(goto=goto), destinations=("ok",))
    g.add_node("ok", lambda s: {})
    g.add_edge(START, "decide").add_edge("ok", END)
    with pytest.raises(InvalidUpdateError, match=r"node 'decide' \(step 0\).*goto takes") as info:
        driver.invoke(g.compile(), {})
    assert info.value.node == "decide" and info.value.step == 0
    assert repr(goto)[:20] in str(info.value)


def test_two_parallel_writes_to_a_replace_key_are_an_error(driver):
    g = StateGraph("clash")
    g.add_node("b", lambda s: {"x": 1}).add_node("c", lambda s: {"x": 2})
    g.add_edge(START, "b").add_edge(START, "c").add_edge("b", END).add_edge("c", END)
    with pytest.raises(InvalidUpdateError, match=r"'b' and 'c' both wrote the key 'x' in step 0"):
        driver.invoke(g.compile(), {})


@pytest.mark.parametrize("bad", [42, "text", ["list"], object()])
def test_a_node_returning_a_non_dict_gets_an_error_naming_it(driver, bad):
    g = StateGraph("bad")
    g.add_node("oops", lambda s: bad)
    g.add_edge(START, "oops").add_edge("oops", END)
    with pytest.raises(InvalidUpdateError, match=r"node 'oops' \(step 0\) returned") as info:
        driver.invoke(g.compile(), {})
    assert (info.value.node, info.value.step) == ("oops", 0)
    assert "dict of state updates" in str(info.value)


def test_a_node_returning_non_string_keys_gets_an_error(driver):
    g = StateGraph("bad")
    g.add_node("oops", lambda s: {1: "x"})
    g.add_edge(START, "oops").add_edge("oops", END)
    with pytest.raises(InvalidUpdateError, match="state keys must be strings"):
        driver.invoke(g.compile(), {})


def test_a_raising_node_becomes_node_error_with_the_cause_chained(driver):
    def boom(state):
        raise ValueError("kaput")

    g = StateGraph("err")
    g.add_node("ok", lambda s: {}).add_node("boom", boom)
    g.add_edge(START, "ok").add_edge("ok", "boom").add_edge("boom", END)
    with pytest.raises(NodeError, match=r"node 'boom' raised ValueError: kaput \(step 1\)") as info:
        driver.invoke(g.compile(), {})
    assert (info.value.node, info.value.step) == ("boom", 1)
    assert isinstance(info.value.__cause__, ValueError)


def test_when_siblings_fail_the_first_in_merge_order_is_raised_with_notes(driver):
    def fail(message):
        def node(state):
            raise RuntimeError(message)

        return node

    g = StateGraph("errs")
    g.add_node("first", fail("one")).add_node("second", fail("two")).add_node("fine", lambda s: {})
    for name in ("first", "second", "fine"):
        g.add_edge(START, name).add_edge(name, END)
    with pytest.raises(NodeError) as info:
        driver.invoke(g.compile(), {})
    assert info.value.node == "first"
    assert any("'second' also failed" in note for note in info.value.__notes__)


def test_a_node_taking_config_gets_its_task_and_the_call_context(driver):
    seen = {}

    def node(state, config):
        seen["context"] = dict(config.context)
        seen["task"] = (config.task.node, config.task.step)
        seen["id"] = config.task.id
        return {}

    g = StateGraph("cfg")
    g.add_node("node", node)
    g.add_edge(START, "node").add_edge("node", END)
    driver.invoke(g.compile(), {}, RunnableConfig(context={"user": "u1"}))
    assert seen["context"] == {"user": "u1"}
    assert seen["task"] == ("node", 0)
    assert len(seen["id"]) == 24


def test_the_input_must_be_a_dict(driver):
    with pytest.raises(InvalidUpdateError, match=r"input must be a dict"):
        driver.invoke(fan_graph(), "hello")


def test_input_keys_must_be_strings_as_node_keys_must(driver):
    with pytest.raises(InvalidUpdateError, match=r"the input has the key 1: state keys must be"):
        driver.invoke(fan_graph(), {1: "x"})


def test_a_sync_function_returning_a_coroutine_is_awaited(driver):
    async def later(state):
        return {"x": 5}

    g = StateGraph("coro")
    g.add_node("node", lambda s: later(s))
    g.add_edge(START, "node").add_edge("node", END)
    assert driver.invoke(g.compile(), {})["x"] == 5


def test_sync_and_async_drivers_give_identical_streams():
    from tests.conftest import Caller

    def summary(outputs):
        return [
            (o.node, o.step, dict(o.update), o.state.data() if o.state else None) for o in outputs
        ]

    sync = summary(Caller("sync").stream(fan_graph(), {"x": 0}))
    asynchronous = summary(Caller("async").stream(fan_graph(), {"x": 0}))
    assert sync == asynchronous
    assert len(sync) == 1 + 4 * 3


async def test_invoke_works_inside_a_running_event_loop_with_async_nodes():
    async def node(state):
        await asyncio.sleep(0)
        return {"x": state["x"] + 1}

    g = StateGraph("nested")
    g.add_node("node", node)
    g.add_edge(START, "node").add_edge("node", END)
    app = g.compile()
    assert asyncio.get_running_loop().is_running()
    assert app.invoke({"x": 1})["x"] == 2


def test_a_graph_invoked_inside_an_async_node_does_not_deadlock():
    async def inner_node(state):
        return {"y": 1}

    inner = StateGraph("inner")
    inner.add_node("i", inner_node).add_edge(START, "i").add_edge("i", END)
    inner_app = inner.compile()

    async def outer_node(state):
        return {"y": inner_app.invoke({})["y"] + 1}

    outer = StateGraph("outer")
    outer.add_node("o", outer_node).add_edge(START, "o").add_edge("o", END)
    assert outer.compile().invoke({})["y"] == 2


def one_node(fn):
    g = StateGraph("one")
    g.add_node("n", fn).add_edge(START, "n").add_edge("n", END)
    return g.compile()


async def answers(state):
    return {"ok": True}


def invoke_in_time(app, seconds=5.0):
    """``app.invoke({})`` on another thread, failing (instead of hanging) if it does not end."""
    result = {}
    worker = threading.Thread(target=lambda: result.update(out=app.invoke({})), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"invoke() still running after {seconds}s"
    return result["out"]


@pytest.mark.parametrize("error", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("kind", ["async node", "sync node returning a coroutine"])
def test_an_async_node_stopping_the_process_reaches_the_caller_and_spares_the_loop(error, kind):
    async def stops(state):
        raise error()

    node = stops if kind == "async node" else (lambda s: stops(s))
    with pytest.raises(error):
        one_node(node).invoke({})
    assert invoke_in_time(one_node(answers)) == {"ok": True}


def test_a_private_loop_whose_thread_died_is_replaced():
    from graph_agent.graph._concurrency import _loop_threads

    invoke_in_time(one_node(answers))
    loop, depth = _loop_threads.loop()
    loop.call_soon_threadsafe(loop.stop)  # run_forever returns: the loop's thread ends
    _loop_threads._threads[depth].join(5)
    assert invoke_in_time(one_node(answers)) == {"ok": True}
    assert _loop_threads.loop()[0] is not loop


def test_ordered_writes_of_one_node_survive_a_sibling_failure_and_apply_in_order_on_resume(driver):
    """An engine-internal node (the agent's tool node) may return several writes to merge in
    order; in a step of several nodes they are stored as they were returned, and a resume
    that only re-runs the failed sibling merges them the same way."""
    from graph_agent.graph._writes import Updates

    failures = [True]

    def many(state):
        return Updates((("", {"log": ["first"], "n": 1}), ("second", {"log": ["second"], "n": 2})))

    def sibling(state):
        if failures and failures.pop():
            raise RuntimeError("not yet")
        return {"log": "sibling"}

    g = StateGraph(
        "parts", key_strategies={"log": AppendStrategy(), "n": lambda old, new: (old or 0) + new}
    )
    g.add_node("many", many).add_node("sibling", sibling)
    g.add_edge(START, "many").add_edge(START, "sibling")
    g.add_edge("many", END).add_edge("sibling", END)
    app = g.compile(CompileConfig(saver=MemorySaver()))
    config = RunnableConfig(thread_id="t")
    with pytest.raises(NodeError):
        driver.invoke(app, {"n": 10}, config)

    final = driver.invoke(app, None, config)

    assert final["log"] == ["first", "second", "sibling"]
    assert final["n"] == 13  # each write merged in turn: 10 + 1 + 2
