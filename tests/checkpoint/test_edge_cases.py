"""Durability edge cases found in review: history iterators, interrupt order, long leases,
clocks that step back."""

from __future__ import annotations

import threading
import time

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    CompileConfig,
    RunnableConfig,
    StateGraph,
    ThreadBusyError,
    interrupt,
)
from graph_agent.checkpoint.sqlite import SqliteSaver
from graph_agent.graph import saver as base  # checkpoint ids and times are made there


def chat_graph(saver, turns_key="turns"):
    g = StateGraph("chat", key_strategies={"messages": AppendStrategy()})
    g.add_node(
        "speak", lambda s: {"messages": {"id": f"m{len(s['messages'])}", "n": len(s["messages"])}}
    )
    g.add_edge(START, "speak")
    g.add_conditional_edges(
        "speak", lambda s: "speak" if len(s["messages"]) < s[turns_key] else END
    )
    return g.compile(CompileConfig(saver=saver))


def test_a_half_consumed_history_iterator_does_not_block_other_threads(saver):
    chat_graph(saver).invoke({"turns": 3, "messages": []}, RunnableConfig(thread_id="t1"))
    history = saver.list("t1")
    next(history)
    finished = threading.Event()

    def other_thread():
        saver.get("t1")
        finished.set()

    worker = threading.Thread(target=other_thread, daemon=True)
    worker.start()
    try:
        assert finished.wait(timeout=3), "saver.get() in another thread blocked on list()"
    finally:
        history.close()  # releases the lock so the worker can finish
        worker.join(timeout=5)


def test_parallel_interrupts_keep_one_order_in_invoke_get_state_and_resume(saver):
    names = [f"q{i}" for i in range(6)]
    g = StateGraph("par")
    for name in names:
        g.add_node(name, (lambda n: lambda s: {n: interrupt(n)})(name))
        g.add_edge(START, name).add_edge(name, END)
    app = g.compile(CompileConfig(saver=saver))
    config = RunnableConfig(thread_id="t1")
    paused = app.invoke({}, config).interrupts
    assert [i.node for i in paused] == names
    assert app.get_state(config).interrupts == paused
    assert app.invoke(None, config).interrupts == paused


def test_a_run_that_outlives_lease_ttl_keeps_its_thread(tmp_path):
    path = tmp_path / "runs.db"
    first_saver, second_saver = SqliteSaver(path, lease_ttl=0.3), SqliteSaver(path, lease_ttl=0.3)

    def build(saver):
        def slow(state):
            time.sleep(1.0)
            return {"done": True}

        g = StateGraph("slow")
        g.add_node("slow", slow).add_edge(START, "slow").add_edge("slow", END)
        return g.compile(CompileConfig(saver=saver))

    config = RunnableConfig(thread_id="t1")
    outcome: dict[str, object] = {}

    def first_run():
        try:
            outcome["first"] = build(first_saver).invoke({}, config)["done"]
        except Exception as exc:
            outcome["first"] = exc

    worker = threading.Thread(target=first_run)
    worker.start()
    time.sleep(0.6)  # the first run is alive and still inside its node
    try:
        with pytest.raises(ThreadBusyError):
            build(second_saver).invoke({}, config)
    finally:
        worker.join(timeout=10)
    assert outcome["first"] is True


def test_a_thread_stays_writable_after_the_wall_clock_steps_back(tmp_path, monkeypatch):
    path = tmp_path / "runs.db"
    config = RunnableConfig(thread_id="t1", max_steps=1000)
    chat_graph(SqliteSaver(path)).invoke({"turns": 2, "messages": []}, config)

    class SteppedBackClock:
        @staticmethod
        def time_ns() -> int:
            return time.time_ns() - 3600 * 10**9

    monkeypatch.setattr(base, "time", SteppedBackClock)
    monkeypatch.setattr(base, "_last_id", 0)  # a new process
    restarted = chat_graph(SqliteSaver(path))
    result = restarted.invoke({"turns": 5}, config)
    assert len(result["messages"]) == 5
    assert restarted.get_state(config).values["messages"] == result["messages"]


def test_time_travel_from_a_process_whose_clock_is_behind_forks(saver, monkeypatch):
    g = StateGraph("g", key_strategies={"log": AppendStrategy()})
    g.add_node("a", lambda s: {"log": "a"}).add_node("b", lambda s: {"log": "b"})
    g.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    app = g.compile(CompileConfig(saver=saver))
    config = RunnableConfig(thread_id="t1")
    app.invoke({"log": []}, config)
    before_b = next(s for s in app.get_state_history(config) if s.next == ("b",))

    class BehindClock:  # the process that travels back runs a second behind the writer's
        @staticmethod
        def time_ns() -> int:
            return time.time_ns() - 10**9

    monkeypatch.setattr(base, "time", BehindClock)
    monkeypatch.setattr(base, "_last_id", 0)  # a new process

    result = app.invoke(None, before_b.config)  # re-runs b on a fork

    assert list(result["log"]) == ["a", "b"]
    newest = app.get_state(config)
    assert newest.metadata["source"] == "loop" and newest.values == result.data()


def test_the_engines_fast_checkpoint_constructor_equals_the_dataclass(monkeypatch):
    from datetime import UTC, datetime

    from graph_agent.graph import saver as base
    from graph_agent.graph.saver import Blob

    moment = datetime(2026, 11, 30, tzinfo=UTC)
    monkeypatch.setattr(base, "now", lambda: moment)
    fields = {
        "thread_id": "t",
        "checkpoint_ns": "ns",
        "parent_id": "p",
        "step": 4,
        "next": ("a", "b"),
        "versions": {"x": "c1"},
        "barriers": {"a+b->j": ("a",)},
        "blobs": {"x": Blob("full", 1)},
        "metadata": {"source": "loop", "step": 4, "writers": ["a"]},
    }
    fast = base.new_checkpoint("c1", *fields.values())
    assert fast == base.Checkpoint(id="c1", **fields, created_at=moment)
    assert fast.created_at == moment and fast.values == {} and fast.pending_writes == ()
