"""Deferred nodes (``add_node(..., defer=True)``) and ``config.task.remaining_steps``, through
both drivers."""

from __future__ import annotations

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    Command,
    CompileConfig,
    GraphRecursionError,
    GraphSetupError,
    MemorySaver,
    RunnableConfig,
    Send,
    StateGraph,
    interrupt,
)


def note(name):
    return lambda state: {"log": name}


def uneven(*, defer, saver=None, ask=False):
    """START -> a -> agg and START -> b1 -> b2 -> b3 -> agg: branches of lengths 1 and 3."""
    g = StateGraph("uneven", key_strategies={"log": AppendStrategy()})
    g.add_node("a", note("a"))
    g.add_node("b1", note("b1"))
    g.add_node("b2", (lambda s: {"log": f"b2 {interrupt('go?')}"}) if ask else note("b2"))
    g.add_node("b3", note("b3"))
    g.add_node("agg", lambda s: {"log": f"agg saw {len(s['log'])}"}, defer=defer)
    g.add_edge(START, "a").add_edge(START, "b1").add_edge("b1", "b2").add_edge("b2", "b3")
    g.add_edge("a", "agg").add_edge("b3", "agg").add_edge("agg", END)
    return g.compile(CompileConfig(saver=saver))


def test_a_deferred_aggregator_after_uneven_branches_runs_once_after_both(driver):
    log = list(driver.invoke(uneven(defer=True), {})["log"])
    assert log == ["a", "b1", "b2", "b3", "agg saw 4"]


def test_without_defer_the_aggregator_runs_once_per_branch(driver):
    log = list(driver.invoke(uneven(defer=False), {})["log"])
    assert [entry for entry in log if entry.startswith("agg")] == ["agg saw 2", "agg saw 5"]


def test_a_deferred_node_waiting_across_a_pause_still_runs_once(driver):
    app = uneven(defer=True, saver=MemorySaver(), ask=True)
    config = RunnableConfig(thread_id="t")
    paused = driver.invoke(app, {}, config)
    assert [i.value for i in paused.interrupts] == ["go?"]
    assert app.get_state(config).next == ("b2",)  # agg waits, stored with the checkpoint
    log = list(driver.invoke(app, Command(resume="yes"), config)["log"])
    assert log == ["a", "b1", "b2 yes", "b3", "agg saw 4"]


def test_a_deferred_aggregator_after_sends_and_a_longer_branch_runs_once(driver):
    g = StateGraph("map_reduce", key_strategies={"log": AppendStrategy()})
    g.add_node("plan", note("plan"))
    g.add_node("work", lambda item: {"log": f"w{item['n']}"})
    g.add_node("slow1", note("slow1"))
    g.add_node("slow2", note("slow2"))
    g.add_node("agg", lambda s: {"log": f"agg saw {len(s['log'])}"}, defer=True)
    g.add_edge(START, "plan").add_edge(START, "slow1").add_edge("slow1", "slow2")
    g.add_conditional_edges("plan", lambda s: [Send("work", {"n": n}) for n in range(3)])
    g.add_edge("work", "agg").add_edge("slow2", "agg").add_edge("agg", END)
    log = list(driver.invoke(g.compile(), {})["log"])
    assert log == ["plan", "slow1", "w0", "w1", "w2", "slow2", "agg saw 6"]


def test_a_deferred_node_also_waits_for_sends_of_its_own_step(driver):
    g = StateGraph("wait_for_sends", key_strategies={"log": AppendStrategy()})

    def plan(state):
        return Command(goto=[Send("work", {"n": 1}), Send("work", {"n": 2}), "agg"])

    g.add_node("plan", plan, destinations=("work", "agg"))
    g.add_node("work", lambda item: {"log": f"w{item['n']}"})
    g.add_node("agg", lambda s: {"log": f"agg saw {len(s['log'])}"}, defer=True)
    g.add_edge(START, "plan").add_edge("work", END).add_edge("agg", END)
    assert list(driver.invoke(g.compile(), {})["log"]) == ["w1", "w2", "agg saw 2"]


def test_defer_must_be_a_bool():
    with pytest.raises(GraphSetupError, match="True or False"):
        StateGraph("g").add_node("a", note("a"), defer="yes")  # type: ignore[arg-type]


def test_a_node_reads_how_many_steps_remain(driver):
    seen = []

    def count(state, config):
        seen.append(config.task.remaining_steps)
        return {"n": state["n"] + 1}

    g = StateGraph("loop")
    g.add_node("count", count)
    g.add_edge(START, "count")
    g.add_conditional_edges("count", lambda s: "count" if s["n"] < 10 else END, ["count", END])
    with pytest.raises(GraphRecursionError):
        driver.invoke(g.compile(), {"n": 0}, RunnableConfig(max_steps=4))
    assert seen == [4, 3, 2, 1]


def test_a_node_wraps_up_on_its_last_step_instead_of_hitting_the_limit(driver):
    def work(state, config):
        if config.task.remaining_steps < 2:
            return {"done": "wrapped up", "n": state["n"] + 1}
        return {"n": state["n"] + 1}

    g = StateGraph("agentish")
    g.add_node("work", work)
    g.add_edge(START, "work")
    g.add_conditional_edges("work", lambda s: END if "done" in s else "work", ["work", END])
    final = driver.invoke(g.compile(), {"n": 0}, RunnableConfig(max_steps=5))
    assert final["done"] == "wrapped up" and final["n"] == 5


def test_a_resumed_call_gets_a_fresh_step_budget(driver):
    seen = []

    def ask(state, config):
        seen.append(config.task.remaining_steps)
        return {"answer": interrupt("?")}

    g = StateGraph("budget")
    g.add_node("first", lambda s, config: {"first": config.task.remaining_steps})
    g.add_node("ask", ask)
    g.add_edge(START, "first").add_edge("first", "ask").add_edge("ask", END)
    app = g.compile(CompileConfig(saver=MemorySaver()))
    config = RunnableConfig(thread_id="t", max_steps=3)
    assert driver.invoke(app, {}, config)["first"] == 3
    driver.invoke(app, Command(resume="ok"), config)
    assert seen == [2, 3]
