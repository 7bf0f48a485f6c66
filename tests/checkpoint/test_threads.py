"""Threads through a compiled graph: checkpoints per step, interrupts, resume, time travel."""

from __future__ import annotations

import threading

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
    SerializationError,
    StateGraph,
    ThreadBusyError,
    interrupt,
)

CFG = RunnableConfig(thread_id="t1")


def article_graph(saver, **compile_options):
    """draft -> review -> publish, appending to `log`."""
    g = StateGraph("article", key_strategies={"log": AppendStrategy()})
    g.add_node("draft", lambda s: {"log": "draft", "draft": f"about {s['topic']}"})
    g.add_node("review", lambda s: {"log": "review"})
    g.add_node("publish", lambda s: {"log": "publish", "published": s["draft"]})
    g.add_edge(START, "draft").add_edge("draft", "review").add_edge("review", "publish")
    g.add_edge("publish", END)
    return g.compile(CompileConfig(saver=saver, **compile_options))


def test_a_saver_backed_call_needs_a_thread_id(saver, driver):
    with pytest.raises(ValueError, match=r"RunnableConfig\(thread_id="):
        driver.invoke(article_graph(saver), {"topic": "x"})


def test_a_checkpoint_is_written_after_every_superstep(saver, driver):
    app = article_graph(saver)
    driver.invoke(app, {"topic": "x"}, CFG)
    history = list(app.get_state_history(CFG))
    assert [s.metadata["step"] for s in history] == [2, 1, 0, -1]
    assert [s.metadata["source"] for s in history] == ["loop", "loop", "loop", "input"]
    assert [s.metadata["writers"] for s in history] == [
        ["publish"],
        ["review"],
        ["draft"],
        ["__start__"],
    ]
    assert [s.next for s in history] == [(), ("publish",), ("review",), ("draft",)]
    assert history[1].values["log"] == ["draft", "review"]
    assert history[0].parent_config.checkpoint_id == history[1].config.checkpoint_id


def test_streamed_outputs_name_their_checkpoint(saver, driver):
    app = article_graph(saver)
    outputs = driver.stream(app, {"topic": "x"}, CFG)
    ids = [o.checkpoint_id for o in outputs]
    history = [s.config.checkpoint_id for s in app.get_state_history(CFG)]
    assert ids == list(reversed(history))


def test_the_same_thread_continues_from_its_saved_state(saver, driver):
    app = article_graph(saver)
    driver.invoke(app, {"topic": "x"}, CFG)
    result = driver.invoke(app, {"topic": "y"}, CFG)
    assert result["log"] == ["draft", "review", "publish"] * 2
    assert result["published"] == "about y"
    assert app.get_state(CFG).metadata["step"] == 6


def test_interrupt_before_pauses_and_none_passes_the_breakpoint_once(saver, driver):
    app = article_graph(saver, interrupt_before=["publish"])
    paused = driver.invoke(app, {"topic": "x"}, CFG)
    assert "published" not in paused
    assert [(i.node, i.value) for i in paused.interrupts] == [("publish", "interrupt_before")]
    snapshot = app.get_state(CFG)
    assert snapshot.next == ("publish",)
    assert snapshot.values == paused.data()
    assert snapshot.interrupts == paused.interrupts
    app.update_state(CFG, {"draft": "fixed"})
    done = driver.invoke(app, None, CFG)
    assert done["published"] == "fixed" and done.interrupts == ()
    assert app.get_state(CFG).next == ()


def test_interrupt_after_pauses_with_the_nodes_writes_included(saver, driver):
    app = article_graph(saver, interrupt_after=["draft"])
    paused = driver.invoke(app, {"topic": "x"}, CFG)
    assert paused["draft"] == "about x" and paused.interrupts[0].node == "draft"
    assert app.get_state(CFG).next == ("review",)
    assert driver.invoke(app, None, CFG)["log"] == ["draft", "review", "publish"]


def test_a_static_breakpoint_stops_again_on_the_next_run(saver, driver):
    app = article_graph(saver, interrupt_before=["publish"])
    driver.invoke(app, {"topic": "x"}, CFG)
    driver.invoke(app, None, CFG)
    again = driver.invoke(app, {"topic": "y"}, CFG)
    assert [i.node for i in again.interrupts] == ["publish"]


def test_resume_with_a_command_also_passes_a_static_breakpoint(saver, driver):
    app = article_graph(saver, interrupt_before=["publish"])
    driver.invoke(app, {"topic": "x"}, CFG)
    assert driver.invoke(app, Command(resume="go"), CFG)["published"] == "about x"


def approval_graph(saver, runs):
    def ask(state):
        runs.append("ask")
        answer = interrupt({"question": "publish?", "draft": state["draft"]})
        return {"answer": answer}

    g = StateGraph("approval")
    g.add_node("ask", ask)
    g.add_edge(START, "ask").add_edge("ask", END)
    return g.compile(CompileConfig(saver=saver))


def test_interrupt_pauses_and_resume_returns_the_value_to_the_node(saver, driver):
    runs = []
    app = approval_graph(saver, runs)
    paused = driver.invoke(app, {"draft": "d"}, CFG)
    (pending,) = paused.interrupts
    assert pending.value == {"question": "publish?", "draft": "d"} and pending.node == "ask"
    assert app.get_state(CFG).interrupts == (pending,)
    assert paused.data() == {"draft": "d"}
    done = driver.invoke(app, Command(resume="yes"), CFG)
    assert done["answer"] == "yes" and done.interrupts == ()
    assert runs == ["ask", "ask"]


def test_continuing_with_none_raises_the_same_interrupt_again(saver, driver):
    app = approval_graph(saver, [])
    first = driver.invoke(app, {"draft": "d"}, CFG).interrupts
    again = driver.invoke(app, None, CFG).interrupts
    assert first == again


def test_the_stream_of_a_paused_call_ends_with_the_interrupts(saver, driver):
    app = approval_graph(saver, [])
    outputs = driver.stream(app, {"draft": "d"}, CFG)
    assert outputs[-1].interrupts and outputs[-1].node == "ask"
    assert outputs[-1].interrupts == app.get_state(CFG).interrupts


def test_two_interrupts_in_one_node_are_answered_in_turn(saver, driver):
    def two_questions(state):
        first = interrupt("first?")
        second = interrupt("second?")
        return {"answers": [first, second]}

    g = StateGraph("two")
    g.add_node("q", two_questions).add_edge(START, "q").add_edge("q", END)
    app = g.compile(CompileConfig(saver=saver))
    assert driver.invoke(app, {}, CFG).interrupts[0].value == "first?"
    assert driver.invoke(app, Command(resume=1), CFG).interrupts[0].value == "second?"
    assert driver.invoke(app, Command(resume=2), CFG)["answers"] == [1, 2]


def parallel_questions(saver, runs):
    def asker(name):
        def node(state):
            runs.append(name)
            return {name: interrupt(f"{name}?")}

        return node

    g = StateGraph("par")
    g.add_node("left", asker("left")).add_node("right", asker("right"))
    g.add_node("calm", lambda s: runs.append("calm") or {"calm": True})
    for name in ("left", "right", "calm"):
        g.add_edge(START, name).add_edge(name, END)
    return g.compile(CompileConfig(saver=saver))


def test_parallel_interrupts_have_distinct_ids_and_resume_by_id(saver, driver):
    runs = []
    app = parallel_questions(saver, runs)
    paused = driver.invoke(app, {}, CFG)
    by_node = {i.node: i for i in paused.interrupts}
    assert set(by_node) == {"left", "right"} and by_node["left"].id != by_node["right"].id
    with pytest.raises(InvalidResumeError, match="2 interrupts are pending"):
        driver.invoke(app, Command(resume="both"), CFG)
    with pytest.raises(InvalidResumeError, match="unknown ids: 'nope'"):
        driver.invoke(app, Command(resume={"nope": 1}), CFG)
    partial = driver.invoke(app, Command(resume={by_node["left"].id: "L"}), CFG)
    assert [i.node for i in partial.interrupts] == ["right"]
    assert partial.interrupts[0].id == by_node["right"].id
    done = driver.invoke(app, Command(resume={by_node["right"].id: "R"}), CFG)
    assert (done["left"], done["right"], done["calm"]) == ("L", "R", True)
    assert runs.count("calm") == 1


def test_resume_with_nothing_pending_is_an_error(saver, driver):
    app = article_graph(saver)
    with pytest.raises(InvalidResumeError, match="has none"):
        driver.invoke(app, Command(resume="x"), CFG)
    driver.invoke(app, {"topic": "x"}, CFG)
    with pytest.raises(InvalidResumeError, match="finished"):
        driver.invoke(app, None, CFG)
    with pytest.raises(InvalidResumeError, match="no checkpoint"):
        driver.invoke(app, None, RunnableConfig(thread_id="fresh"))


def test_new_input_starts_a_new_run_and_drops_pending_interrupts(saver, driver):
    runs = []
    app = approval_graph(saver, runs)
    first = driver.invoke(app, {"draft": "d1"}, CFG).interrupts[0]
    second = driver.invoke(app, {"draft": "d2"}, CFG).interrupts[0]
    assert second.id != first.id and second.value["draft"] == "d2"
    assert [i.id for i in app.get_state(CFG).interrupts] == [second.id]
    # the old id is no longer pending, so the dict is simply the answer to the new interrupt
    answered = driver.invoke(app, Command(resume={first.id: "old"}), CFG)
    assert answered["answer"] == {first.id: "old"}


def test_time_travel_forks_without_overwriting_history(saver, driver):
    app = article_graph(saver)
    driver.invoke(app, {"topic": "x"}, CFG)
    history = list(app.get_state_history(CFG))
    after_draft = next(s for s in history if s.next == ("review",))
    forked = driver.invoke(app, None, after_draft.config)
    assert forked["log"] == ["draft", "review", "publish"]
    new_history = list(app.get_state_history(CFG))
    assert len(new_history) == len(history) + 3  # the fork's copy, review, publish
    assert {s.config.checkpoint_id for s in history} <= {
        s.config.checkpoint_id for s in new_history
    }
    fork_point = new_history[2]
    assert fork_point.metadata["source"] == "fork" and fork_point.next == ("review",)
    assert fork_point.parent_config.checkpoint_id == after_draft.config.checkpoint_id
    assert fork_point.values == after_draft.values


def test_replaying_from_before_an_interrupt_asks_again_and_resumes_on_the_fork(saver, driver):
    runs = []
    app = approval_graph(saver, runs)
    driver.invoke(app, {"draft": "d"}, CFG)
    assert driver.invoke(app, Command(resume="yes"), CFG)["answer"] == "yes"
    start = next(s for s in app.get_state_history(CFG) if s.next == ("ask",))
    asked_again = driver.invoke(app, None, start.config)
    assert asked_again.interrupts and runs == ["ask", "ask", "ask"]
    assert driver.invoke(app, Command(resume="no"), CFG)["answer"] == "no"


def test_update_state_as_node_routes_as_if_that_node_wrote(saver, driver):
    app = article_graph(saver, interrupt_before=["review"])
    driver.invoke(app, {"topic": "x"}, CFG)
    config = app.update_state(CFG, {"log": "edited", "draft": "new"}, as_node="review")
    snapshot = app.get_state(CFG)
    assert snapshot.next == ("publish",) and snapshot.config == config
    assert snapshot.metadata["source"] == "update"
    assert snapshot.values["log"] == ["draft", "edited"]
    assert driver.invoke(app, None, CFG)["published"] == "new"


def test_update_state_rejects_an_unknown_node():
    from graph_agent import MemorySaver

    app = article_graph(MemorySaver())
    with pytest.raises(ValueError, match="as_node='nope'"):
        app.update_state(CFG, {}, as_node="nope")


def test_a_failed_sibling_reruns_alone_on_resume(saver, driver):
    runs = {"ok": 0, "flaky": 0, "after": 0}
    broken = {"flaky": True}

    def counted(name):
        def node(state):
            runs[name] += 1
            if broken.get(name):
                raise RuntimeError("not yet")
            return {name: runs[name]}

        return node

    g = StateGraph("siblings")
    for name in ("ok", "flaky", "after"):
        g.add_node(name, counted(name))
    g.add_edge(START, "ok").add_edge(START, "flaky")
    g.add_edge(["ok", "flaky"], "after").add_edge("after", END)
    app = g.compile(CompileConfig(saver=saver))
    with pytest.raises(NodeError, match="flaky"):
        driver.invoke(app, {}, CFG)
    broken["flaky"] = False
    result = driver.invoke(app, None, CFG)
    assert runs == {"ok": 1, "flaky": 2, "after": 1}
    assert (result["ok"], result["flaky"], result["after"]) == (1, 2, 1)


def test_a_recursion_error_leaves_the_thread_resumable(saver, driver):
    g = StateGraph("count")
    g.add_node("inc", lambda s: {"n": s["n"] + 1}).add_edge(START, "inc")
    g.add_conditional_edges("inc", lambda s: "inc" if s["n"] < 8 else END)
    app = g.compile(CompileConfig(saver=saver))
    with pytest.raises(GraphRecursionError):
        driver.invoke(app, {"n": 0}, RunnableConfig(thread_id="t1", max_steps=5))
    assert app.get_state(CFG).values["n"] == 5
    assert driver.invoke(app, None, RunnableConfig(thread_id="t1", max_steps=5))["n"] == 8


def test_task_records_survive_a_failure_and_come_back_on_rerun(saver, driver):
    calls = []
    attempts = []

    def node(state, config):
        task = config.task
        attempts.append(1)
        if task.recorded("charge") is None:
            calls.append("charged")
            task.record("charge", {"receipt": 17})
        if len(attempts) == 1:
            raise ConnectionError("network dropped after charging")
        return {"receipt": task.recorded("charge")["receipt"]}

    g = StateGraph("pay")
    g.add_node("pay", node).add_edge(START, "pay").add_edge("pay", END)
    app = g.compile(CompileConfig(saver=saver))
    with pytest.raises(NodeError):
        driver.invoke(app, {}, CFG)
    app_state = app.get_state(CFG)
    assert app_state.next == ("pay",)
    assert driver.invoke(app, None, CFG)["receipt"] == 17
    assert calls == ["charged"]


def test_an_unserializable_value_fails_at_save_time_naming_the_key(saver, driver):
    class Opaque:
        pass

    g = StateGraph("bad")
    g.add_node("ok", lambda s: {"fine": 1}).add_node("bad", lambda s: {"thing": [1, Opaque()]})
    g.add_edge(START, "ok").add_edge("ok", "bad").add_edge("bad", END)
    app = g.compile(CompileConfig(saver=saver))
    with pytest.raises(SerializationError, match=r"state\['thing'\].*Opaque"):
        driver.invoke(app, {}, CFG)
    snapshot = app.get_state(CFG)
    assert snapshot.values == {"fine": 1} and snapshot.next == ("bad",)


def test_a_second_run_on_a_busy_thread_is_refused(saver):
    entered, release = threading.Event(), threading.Event()

    def slow(state, config):
        if config.thread_id == "t1":  # only the first run waits
            entered.set()
            release.wait(timeout=10)
        return {"done": True}

    g = StateGraph("slow")
    g.add_node("slow", slow).add_edge(START, "slow").add_edge("slow", END)
    app = g.compile(CompileConfig(saver=saver))
    worker = threading.Thread(target=app.invoke, args=({}, CFG))
    worker.start()
    try:
        assert entered.wait(timeout=10)
        with pytest.raises(ThreadBusyError, match="busy"):
            app.invoke({}, CFG)
        assert app.invoke({}, RunnableConfig(thread_id="other"))["done"] is True
    finally:
        release.set()
        worker.join(timeout=10)
    assert app.invoke({}, CFG)["done"] is True


async def test_a_second_async_run_on_a_busy_thread_is_refused(saver):
    import asyncio

    entered = asyncio.Event()
    release = asyncio.Event()

    async def slow(state):
        entered.set()
        await release.wait()
        return {"done": True}

    g = StateGraph("slow")
    g.add_node("slow", slow).add_edge(START, "slow").add_edge("slow", END)
    app = g.compile(CompileConfig(saver=saver))
    first = asyncio.ensure_future(app.ainvoke({}, CFG))
    await asyncio.wait_for(entered.wait(), 10)
    with pytest.raises(ThreadBusyError):
        await app.ainvoke({}, CFG)
    release.set()
    assert (await asyncio.wait_for(first, 10))["done"] is True


async def test_cancelling_a_run_releases_the_thread(saver):
    import asyncio

    entered = asyncio.Event()

    async def forever(state):
        entered.set()
        await asyncio.sleep(60)
        return {}

    g = StateGraph("cancel")
    g.add_node("forever", forever).add_edge(START, "forever").add_edge("forever", END)
    app = g.compile(CompileConfig(saver=saver))
    run = asyncio.ensure_future(app.ainvoke({}, CFG))
    await asyncio.wait_for(entered.wait(), 10)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert app.get_state(CFG).next == ("forever",)
    saver.release(saver.acquire("t1"))


async def test_cancelling_a_run_while_it_takes_the_lease_releases_the_thread(saver, monkeypatch):
    import asyncio

    entered, proceed, taken = threading.Event(), threading.Event(), threading.Event()
    acquire = saver.acquire

    def gated_acquire(thread_id, checkpoint_ns=""):
        entered.set()
        proceed.wait(timeout=10)
        try:
            return acquire(thread_id, checkpoint_ns)
        finally:
            taken.set()

    async def threaded_aacquire(thread_id, checkpoint_ns=""):
        return await asyncio.to_thread(saver.acquire, thread_id, checkpoint_ns)

    monkeypatch.setattr(saver, "acquire", gated_acquire)
    if isinstance(saver, MemorySaver):  # a saver taking its lease in a worker thread, as SQLite's
        monkeypatch.setattr(saver, "aacquire", threaded_aacquire)
    app = article_graph(saver)
    run = asyncio.ensure_future(app.ainvoke({"topic": "x"}, CFG))
    assert await asyncio.to_thread(entered.wait, 10)
    run.cancel()  # while the worker thread is taking the lease
    proceed.set()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert await asyncio.to_thread(taken.wait, 10)
    assert driver_free(saver)
    assert (await app.ainvoke({"topic": "x"}, CFG))["published"] == "about x"


def test_closing_a_stream_early_releases_the_thread(saver):
    app = article_graph(saver)
    stream = app.stream({"topic": "x"}, CFG)
    next(stream)
    stream.close()
    assert driver_free(saver)
    assert app.invoke(None, CFG)["published"] == "about x"


def driver_free(saver) -> bool:
    saver.release(saver.acquire("t1"))
    return True


def test_a_copied_thread_goes_on_from_its_sources_state_and_leaves_the_source_alone(saver, driver):
    app = article_graph(saver)
    driver.invoke(app, {"topic": "x"}, CFG)
    copy = RunnableConfig(thread_id="copy")
    saver.copy_thread("t1", "copy")
    assert app.get_state(copy).values == app.get_state(CFG).values
    saver.delete_thread("t1")

    result = driver.invoke(app, {"topic": "y"}, copy)
    assert result["log"] == ["draft", "review", "publish"] * 2
    assert result["published"] == "about y"
    *_, first_draft = (s for s in app.get_state_history(copy) if s.next == ("review",))
    forked = driver.invoke(app, None, first_draft.config)  # time travel on the copy
    assert forked["log"] == ["draft", "review", "publish"]
    assert app.get_state(CFG).values == {}
