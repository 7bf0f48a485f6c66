"""stream()/astream(): NodeOutput fields, order, and live chunks from every kind of node."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import threading
import weakref

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    NodeOutput,
    StateGraph,
    StreamingOutput,
    emit_chunk,
)


def test_node_outputs_carry_node_agent_step_update_and_state(driver):
    g = StateGraph("fields", key_strategies={"log": AppendStrategy()})
    g.add_node("a", lambda s: {"log": "a", "x": 1})
    g.add_node("b", lambda s: None)
    g.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    outputs = driver.stream(g.compile(), {"log": ["in"]})
    assert [(o.node, o.step) for o in outputs] == [("__start__", -1), ("a", 0), ("b", 1)]
    start, a, b = outputs
    assert start.update == {"log": ["in"]}
    assert a.update == {"log": "a", "x": 1}
    assert b.update == {}
    assert all(o.agent == "fields" and o.checkpoint_id is None for o in outputs)
    assert a.state["log"] == ["in", "a"] and b.state["x"] == 1
    assert all(o.interrupts == () and o.usage is None for o in outputs)


def test_outputs_of_a_superstep_come_in_merge_order_with_the_whole_steps_state(driver):
    g = StateGraph("par", key_strategies={"log": AppendStrategy()})
    g.add_node("b", lambda s: {"log": "b"}).add_node("c", lambda s: {"log": "c"})
    g.add_edge(START, "b").add_edge(START, "c").add_edge("b", END).add_edge("c", END)
    outputs = [o for o in driver.stream(g.compile(), {}) if o.node != "__start__"]
    assert [o.node for o in outputs] == ["b", "c"]
    assert outputs[0].state["log"] == ["b", "c"]
    assert outputs[0].state is outputs[1].state


def live_graph(node):
    g = StateGraph("live")
    g.add_node("talk", node)
    g.add_edge(START, "talk").add_edge("talk", END)
    return g.compile()


def test_a_chunk_from_a_lone_sync_node_reaches_the_caller_while_the_node_runs():
    heard = threading.Event()

    def talk(state):
        emit_chunk("hello")
        # the caller sets `heard` when it receives the chunk: proof it was delivered live
        if not heard.wait(timeout=5):
            raise TimeoutError("the chunk was not delivered while the node ran")
        emit_chunk(" world")
        return {"said": "hello world"}

    outputs = []
    for item in live_graph(talk).stream({}):
        outputs.append(item)
        if isinstance(item, StreamingOutput) and item.chunk == "hello":
            heard.set()
    chunks = [o.chunk for o in outputs if isinstance(o, StreamingOutput)]
    assert chunks == ["hello", " world"]
    assert outputs[-1].node == "talk" and outputs[-1].update == {"said": "hello world"}


def test_a_chunk_from_an_async_node_reaches_the_caller_while_the_node_runs():
    heard = threading.Event()

    async def talk(state):
        emit_chunk("ping")
        for _ in range(500):
            if heard.is_set():
                return {"done": True}
            await asyncio.sleep(0.01)
        raise TimeoutError("the chunk was not delivered while the node ran")

    outputs = []
    for item in live_graph(talk).stream({}):
        outputs.append(item)
        if isinstance(item, StreamingOutput):
            heard.set()
    assert [o.chunk for o in outputs if isinstance(o, StreamingOutput)] == ["ping"]


def test_chunks_from_parallel_sync_nodes_on_worker_threads_are_streamed():
    g = StateGraph("par")

    def speaker(name):
        def node(state):
            emit_chunk(f"{name}-1")
            emit_chunk(f"{name}-2")
            return {}

        return node

    g.add_node("b", speaker("b")).add_node("c", speaker("c"))
    g.add_edge(START, "b").add_edge(START, "c").add_edge("b", END).add_edge("c", END)
    outputs = list(g.compile().stream({}))
    chunks = [(o.node, o.chunk) for o in outputs if isinstance(o, StreamingOutput)]
    assert sorted(chunks) == [("b", "b-1"), ("b", "b-2"), ("c", "c-1"), ("c", "c-2")]
    last_chunk = max(i for i, o in enumerate(outputs) if isinstance(o, StreamingOutput))
    first_output = min(
        i
        for i, o in enumerate(outputs)
        if not isinstance(o, StreamingOutput) and o.node in ("b", "c")
    )
    assert last_chunk < first_output


def test_streaming_outputs_have_empty_update_and_no_state(driver):
    class Chunk:
        text = "tok"

    def talk(state):
        emit_chunk(Chunk())
        return {}

    chunk = next(o for o in driver.stream(live_graph(talk), {}) if isinstance(o, StreamingOutput))
    assert isinstance(chunk, NodeOutput)
    assert (chunk.node, chunk.agent, chunk.step, chunk.chunk) == ("talk", "live", 0, "tok")
    assert chunk.update == {} and chunk.state is None and chunk.checkpoint_id is None
    assert isinstance(chunk.message, Chunk)


def test_async_nodes_stream_chunks_through_astream(driver):
    async def talk(state):
        for token in ("a", "b", "c"):
            emit_chunk(token)
            await asyncio.sleep(0)
        return {}

    outputs = driver.stream(live_graph(talk), {})
    assert [o.chunk for o in outputs if isinstance(o, StreamingOutput)] == ["a", "b", "c"]


def test_emit_chunk_during_invoke_is_dropped_quietly(driver):
    def talk(state):
        emit_chunk("ignored")
        return {"ok": True}

    assert driver.invoke(live_graph(talk), {})["ok"] is True


def test_emit_chunk_outside_a_node_is_a_clear_error():
    with pytest.raises(RuntimeError, match="inside a running graph node"):
        emit_chunk("nowhere")


def test_a_consumer_that_stops_early_leaves_no_run_behind():
    g = StateGraph("many")
    g.add_node("n", lambda s: {"i": s["i"] + 1})
    g.add_edge(START, "n")
    g.add_conditional_edges("n", lambda s: "n" if s["i"] < 50 else END)
    stream = g.compile().stream({"i": 0})
    for output in stream:
        if output.node == "n" and output.step == 3:
            break
    stream.close()


def test_lone_sync_nodes_in_consecutive_steps_all_stream_their_chunks_live():
    def speak(state):
        emit_chunk(f"step {state['i']}")
        return {"i": state["i"] + 1}

    g = StateGraph("steps")
    g.add_node("speak", speak).add_edge(START, "speak")
    g.add_conditional_edges("speak", lambda s: "speak" if s["i"] < 3 else END)
    items = list(g.compile().stream({"i": 0}))
    order = [o.chunk if isinstance(o, StreamingOutput) else o.node for o in items]
    assert order == ["__start__", "step 0", "speak", "step 1", "speak", "step 2", "speak"]


def test_a_lone_sync_node_failing_while_streaming_is_a_node_error_and_the_next_stream_works():
    def shaky(state):
        emit_chunk("about to fail")
        if state["fail"]:
            raise ValueError("boom")
        return {"ok": True}

    app = live_graph(shaky)
    with pytest.raises(Exception, match="boom"):
        list(app.stream({"fail": True}))
    assert list(app.stream({"fail": False}))[-1].update == {"ok": True}


def test_closing_a_stream_while_a_node_is_paused_at_a_chunk_runs_the_nodes_cleanup():
    cleaned = threading.Event()

    def talk(state):
        try:
            emit_chunk("one")
            emit_chunk("two")
        finally:
            cleaned.set()
        return {}

    stream = live_graph(talk).stream({})
    for item in stream:
        if isinstance(item, StreamingOutput):
            break
    stream.close()
    assert cleaned.is_set()


def test_consecutive_streams_on_one_thread_each_stream_live_and_see_their_callers_context():
    request: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="none")

    def speak(state):
        emit_chunk(f"{request.get()} {state['i']}")
        request.set("changed by the node")  # stays in the node's copy of the context
        return {"i": state["i"] + 1}

    app = live_graph(speak)
    for name in ("first", "second", "third"):  # the node greenlet is reused between calls
        request.set(name)
        items = list(app.stream({"i": 0}))
        assert [o.chunk for o in items if isinstance(o, StreamingOutput)] == [f"{name} 0"]
        assert request.get() == name


def test_a_streamed_call_reuses_the_node_greenlet_the_previous_one_parked():
    import greenlet

    ran_in: list[object] = []

    def talk(state):
        ran_in.append(greenlet.getcurrent())
        emit_chunk("hi")
        return {}

    app = live_graph(talk)
    for _ in range(3):
        list(app.stream({}))
    assert len(ran_in) == 3 and ran_in[0] is ran_in[1] is ran_in[2]
    assert ran_in[0] is not greenlet.getcurrent()  # a greenlet of its own, not the caller's


def test_a_finished_stream_keeps_nothing_of_its_run_alive():
    class Payload:
        pass

    held = [Payload()]
    alive = weakref.ref(held[0])

    def keep(state):
        emit_chunk("working")
        return {"payload": held[0]}

    outputs = list(live_graph(keep).stream({}))
    assert outputs[-1].update["payload"] is alive()
    del outputs
    held.clear()
    gc.collect()
    assert alive() is None


def test_a_stream_read_inside_a_streaming_node_streams_too():
    def inner_talk(state):
        emit_chunk("inner")
        return {"inner": True}

    inner = live_graph(inner_talk)

    def outer_talk(state):
        emit_chunk("outer before")
        chunks = [o.chunk for o in inner.stream({}) if isinstance(o, StreamingOutput)]
        emit_chunk("outer after")
        return {"seen": chunks}

    items = list(live_graph(outer_talk).stream({}))
    assert [o.chunk for o in items if isinstance(o, StreamingOutput)] == [
        "outer before",
        "outer after",
    ]
    assert items[-1].update == {"seen": ["inner"]}


def test_the_engines_fast_node_output_constructor_equals_the_dataclass():
    from graph_agent.graph.types import node_output

    fast = node_output("a", "agent", 3, {"x": 1}, None, "ckpt", usage=None)
    assert fast == NodeOutput(
        node="a", agent="agent", step=3, update={"x": 1}, state=None, checkpoint_id="ckpt"
    )
    assert type(fast) is NodeOutput and fast.interrupts == () and fast.path == ()
    with pytest.raises(AttributeError):
        fast.node = "b"  # type: ignore[misc]


def test_chunks_from_threads_a_node_waits_on_reach_the_caller_while_it_waits():
    # what a tool node does: start threads, wait for them with wait_delivering
    from concurrent.futures import ThreadPoolExecutor

    from graph_agent.graph._concurrency import wait_delivering

    heard = {name: threading.Event() for name in ("a", "b")}

    def worker(name):
        emit_chunk(f"{name} started")
        # the caller sets heard[name] when the chunk arrives: proof it came while the node waited
        return name if heard[name].wait(timeout=5) else f"{name}: chunk not delivered live"

    def fan(state):
        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(contextvars.copy_context().run, worker, n) for n in heard]
            done, not_done = wait_delivering(futures, return_when="ALL_COMPLETED")
            assert not not_done and done == set(futures)
            return {"said": [f.result() for f in futures]}

    outputs = []
    for item in live_graph(fan).stream({}):
        outputs.append(item)
        if isinstance(item, StreamingOutput):
            heard[item.chunk.split()[0]].set()
    chunks = sorted(o.chunk for o in outputs if isinstance(o, StreamingOutput))
    assert chunks == ["a started", "b started"]
    assert outputs[-1].update == {"said": ["a", "b"]}


def test_wait_delivering_times_out_like_concurrent_futures_wait():
    from concurrent.futures import Future

    from graph_agent.graph._concurrency import wait_delivering

    never: Future[int] = Future()
    seen = []

    def node(state):
        seen.append(wait_delivering([never], timeout=0.05))
        return {}

    list(live_graph(node).stream({}))  # in a stream's node greenlet
    live_graph(node).invoke({})  # and inline
    assert seen == [(set(), {never}), (set(), {never})]
