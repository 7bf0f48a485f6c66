"""Private keys (bookkeeping) and ephemeral keys (one-step signals like an agent's jump_to)."""

from __future__ import annotations

import pytest

from graph_agent import (
    END,
    START,
    Command,
    CompileConfig,
    InvalidResumeError,
    MemorySaver,
    RunnableConfig,
    StateGraph,
    interrupt,
)

CFG = RunnableConfig(thread_id="t")


def counting_graph(saver=None):
    g = StateGraph("count", private_keys=["_calls"])
    g.add_node("work", lambda s: {"_calls": s.value("_calls", 0) + 1, "answer": 42})
    g.add_edge(START, "work").add_edge("work", END)
    return g.compile(CompileConfig(saver=saver))


def test_private_keys_are_readable_by_name_but_left_out_of_data(driver):
    result = driver.invoke(counting_graph(), {})
    assert result["_calls"] == 1 and result.value("_calls") == 1
    assert result.data() == {"answer": 42}
    assert list(result) == ["answer"] and len(result) == 1
    assert result == {"answer": 42}


def test_private_keys_are_stored_but_not_in_snapshot_values(driver):
    saver = MemorySaver()
    app = counting_graph(saver)
    driver.invoke(app, {}, CFG)
    assert driver.invoke(app, {}, CFG)["_calls"] == 2
    assert app.get_state(CFG).values == {"answer": 42}
    assert saver.get("t").values["_calls"] == 2


def jump_graph(saver=None):
    g = StateGraph("jump", ephemeral_keys=["jump_to"])
    g.add_node("hook", lambda s: {"jump_to": "skip"} if s["skip"] else {"seen": True})
    g.add_node("middle", lambda s: {"middle": True})
    g.add_edge(START, "hook").add_edge("middle", END)
    g.add_conditional_edges(
        "hook",
        lambda s: "skip" if s.value("jump_to") == "skip" else "next",
        {"skip": END, "next": "middle"},
    )
    return g.compile(CompileConfig(saver=saver))


def test_an_ephemeral_key_routes_its_step_and_then_is_gone(driver):
    assert driver.invoke(jump_graph(), {"skip": False})["middle"] is True
    skipped = driver.invoke(jump_graph(), {"skip": True})
    assert "middle" not in skipped and "jump_to" not in skipped
    assert skipped.value("jump_to") is None


def test_an_ephemeral_key_is_never_streamed_or_stored(driver):
    saver = MemorySaver()
    outputs = driver.stream(jump_graph(saver), {"skip": True}, CFG)
    hook = next(o for o in outputs if o.node == "hook")
    assert hook.update == {} and hook.state.value("jump_to") is None
    assert all("jump_to" not in cp.values for cp in saver.list("t"))


def test_an_ephemeral_key_written_as_none_is_dropped_and_never_stored(driver):
    saver = MemorySaver()
    g = StateGraph("no_jump", ephemeral_keys=["jump_to"])
    g.add_node("hook", lambda s: {"jump_to": None, "seen": True})
    g.add_node("middle", lambda s: {"middle": True})
    g.add_edge(START, "hook").add_edge("middle", END)
    g.add_conditional_edges("hook", lambda s: "middle" if s.value("jump_to") is None else END)
    result = driver.invoke(g.compile(CompileConfig(saver=saver)), {}, CFG)
    assert result == {"seen": True, "middle": True}
    assert all("jump_to" not in cp.values for cp in saver.list("t"))


def test_a_node_refusing_its_resume_value_leaves_the_interrupt_pending(driver):
    def ask(state):
        answer = interrupt("yes or no?")
        if answer not in ("yes", "no"):
            raise InvalidResumeError(f"answer 'yes' or 'no', not {answer!r}")
        return {"answer": answer}

    g = StateGraph("ask")
    g.add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    app = g.compile(CompileConfig(saver=MemorySaver()))
    pending = driver.invoke(app, {}, CFG).interrupts
    with pytest.raises(InvalidResumeError, match="not 'maybe'"):
        driver.invoke(app, Command(resume="maybe"), CFG)
    assert app.get_state(CFG).interrupts == pending
    assert driver.invoke(app, Command(resume="yes"), CFG)["answer"] == "yes"
