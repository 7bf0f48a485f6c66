"""Stopping a run from outside: ``RunnableConfig(cancel=event)``."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    CompileConfig,
    GraphCancelledError,
    MemorySaver,
    NodeError,
    RunnableConfig,
    StateGraph,
)
from graph_agent.graph._engine import DualNode


def counting_chain(cancel: threading.Event, *, cancel_after: str | None = None) -> Any:
    """a → b → c, each appending its name to ``log``; the edge out of ``cancel_after`` sets
    ``cancel`` (once that node's step has ended, before the next one starts)."""
    g = StateGraph("chain", key_strategies={"log": AppendStrategy()})
    for name in "abc":
        g.add_node(name, lambda state, name=name: {"log": name})
    g.add_edge(START, "a")
    for source, target in (("a", "b"), ("b", "c")):
        if source == cancel_after:
            g.add_conditional_edges(source, lambda state, target=target: cancelling(target))
        else:
            g.add_edge(source, target)
    g.add_edge("c", END)

    def cancelling(target: str) -> str:
        cancel.set()
        return target

    return g


def cleaned_as_it_raised(
    driver: Any, app: Any, config: RunnableConfig, cleaned: list[str], match: str
) -> list[str]:
    """Call ``app`` (it must raise GraphCancelledError matching ``match``) and return
    ``cleaned`` as it was when the call raised: under ``ainvoke``, before ``asyncio.run``
    cancels what the call left running."""
    if driver.kind == "sync":
        with pytest.raises(GraphCancelledError, match=match):
            app.invoke({"log": []}, config)
        return list(cleaned)

    async def call() -> list[str]:
        with pytest.raises(GraphCancelledError, match=match):
            await app.ainvoke({"log": []}, config)
        return list(cleaned)

    return asyncio.run(call())


def cancel_once(*started: threading.Event, cancel: threading.Event) -> threading.Thread:
    """Set ``cancel`` from another thread once every event of ``started`` is (the node to be
    stopped sets one as it starts to await)."""

    def wait_then_cancel() -> None:
        if all(event.wait(30) for event in started):
            cancel.set()

    thread = threading.Thread(target=wait_then_cancel, daemon=True)
    thread.start()
    return thread


LONG = 30.0
"""How long a node to be stopped awaits: a call stopped at once ends long before."""

AT_ONCE = 10.0
"""The seconds a stopped call may take, however loaded the machine."""


def test_a_set_cancel_stops_the_run_before_the_next_step_and_the_thread_carries_on_later():
    cancel = threading.Event()
    app = counting_chain(cancel, cancel_after="a").compile(CompileConfig(saver=MemorySaver()))
    config = RunnableConfig(thread_id="t1", cancel=cancel)

    with pytest.raises(GraphCancelledError) as caught:
        app.invoke({"log": []}, config)

    assert caught.value.step == 1
    message = str(caught.value)
    assert "before step 1" in message and "would run b" in message
    assert "thread 't1'" in message and "invoke(None, config)" in message
    snapshot = app.get_state(config)
    assert list(snapshot.values["log"]) == ["a"]  # a's step was committed, b never started
    assert snapshot.next == ("b",)

    final = app.invoke(None, RunnableConfig(thread_id="t1"))  # the lease was released
    assert list(final["log"]) == ["a", "b", "c"]


def test_without_a_saver_the_error_says_nothing_was_kept():
    cancel = threading.Event()
    app = counting_chain(cancel, cancel_after="b").compile()

    with pytest.raises(GraphCancelledError, match=r"before step 2.*nothing was kept"):
        app.invoke({"log": []}, RunnableConfig(cancel=cancel))


def test_a_cancel_set_before_the_call_runs_no_node():
    cancel = threading.Event()
    cancel.set()
    ran: list[str] = []
    g = StateGraph("one")
    g.add_node("only", lambda state: ran.append("only"))
    g.add_edge(START, "only")
    g.add_edge("only", END)
    app = g.compile(CompileConfig(saver=MemorySaver()))

    with pytest.raises(GraphCancelledError, match="before step 0"):
        app.invoke({}, RunnableConfig(thread_id="t1", cancel=cancel))
    assert ran == []


def test_a_sync_node_running_when_the_call_is_cancelled_ends_but_its_writes_are_dropped(driver):
    cancel = threading.Event()
    started, release, ended = threading.Event(), threading.Event(), threading.Event()
    ran: list[str] = []

    def slow(state: Any) -> dict[str, Any]:  # a sync node cannot be stopped
        started.set()
        assert release.wait(5)
        ran.append("slow")
        ended.set()
        return {"log": "slow"}

    g = StateGraph("g", key_strategies={"log": AppendStrategy()})
    g.add_node("slow", slow)
    g.add_node("after", lambda state: ran.append("after"))
    g.add_edge(START, "slow")
    g.add_edge("slow", "after")
    g.add_edge("after", END)
    app = g.compile(CompileConfig(saver=MemorySaver()))
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            driver.invoke(app, {"log": []}, RunnableConfig(thread_id="t1", cancel=cancel))
        except BaseException as exc:
            outcome.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    assert started.wait(5)
    cancel.set()
    release.set()
    runner.join(5)
    assert ended.wait(5)  # (ainvoke left it on its thread: it ends there, later)

    assert len(outcome) == 1 and isinstance(outcome[0], GraphCancelledError)
    assert "during step 0, which runs slow" in str(outcome[0])
    assert ran == ["slow"]
    snapshot = app.get_state(RunnableConfig(thread_id="t1"))
    assert list(snapshot.values["log"]) == [] and snapshot.next == ("slow",)
    release.clear()
    release.set()
    final = driver.invoke(app, None, RunnableConfig(thread_id="t1"))  # it runs again
    assert list(final["log"]) == ["slow"] and ran == ["slow", "slow", "after"]


@pytest.mark.parametrize("streamed", [False, True], ids=["invoke", "stream"])
def test_a_cancel_stops_an_awaiting_async_node_at_once_and_drops_its_writes(driver, streamed):
    cancel, awaiting = threading.Event(), threading.Event()
    cleaned: list[str] = []
    g = StateGraph("g", key_strategies={"log": AppendStrategy()})
    g.add_node("first", lambda state: {"log": "first"})

    async def wait(state: Any) -> dict[str, Any]:
        awaiting.set()
        try:
            await asyncio.sleep(LONG if not cleaned else 0)  # long the first time only
        finally:
            cleaned.append("wait")
        return {"log": "wait"}

    g.add_node("wait", wait)
    g.add_edge(START, "first").add_edge("first", "wait").add_edge("wait", END)
    app = g.compile(CompileConfig(saver=MemorySaver()))
    call = driver.stream if streamed else driver.invoke
    canceller = cancel_once(awaiting, cancel=cancel)
    started = time.monotonic()

    with pytest.raises(GraphCancelledError, match="during step 1, which runs wait"):
        call(app, {"log": []}, RunnableConfig(thread_id="t1", cancel=cancel))

    assert time.monotonic() - started < AT_ONCE
    assert cleaned == ["wait"]  # cancelled, its finally ran, before the call returned
    snapshot = app.get_state(RunnableConfig(thread_id="t1"))
    assert list(snapshot.values["log"]) == ["first"] and snapshot.next == ("wait",)
    final = driver.invoke(app, None, RunnableConfig(thread_id="t1"))
    assert list(final["log"]) == ["first", "wait"]
    canceller.join()


def test_a_cancel_stops_an_async_node_waited_for_under_a_timeout_policy(driver):
    cancel, awaiting = threading.Event(), threading.Event()
    cleaned: list[str] = []

    async def wait(state: Any) -> dict[str, Any]:
        awaiting.set()
        try:
            await asyncio.sleep(LONG)
        finally:
            cleaned.append("wait")
        return {"log": "wait"}

    g = StateGraph("g", key_strategies={"log": AppendStrategy()})
    g.add_node("wait", wait, timeout=2 * LONG).add_edge(START, "wait").add_edge("wait", END)
    app = g.compile(CompileConfig(saver=MemorySaver()))
    canceller = cancel_once(awaiting, cancel=cancel)
    config = RunnableConfig(thread_id="t1", cancel=cancel)
    started = time.monotonic()

    during = "during step 0, which runs wait"
    # cancelled with the call, not left running to its end
    assert cleaned_as_it_raised(driver, app, config, cleaned, during) == ["wait"]
    assert time.monotonic() - started < AT_ONCE
    canceller.join()


class Waiting(DualNode):
    """A node with two faces (as the agent's model node): the async one awaits 30 s."""

    def __init__(self) -> None:
        self.cleaned: list[str] = []
        self.awaiting = threading.Event()

    def __call__(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        return {"log": "sync face"}

    async def acall(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        self.awaiting.set()
        try:
            await asyncio.sleep(LONG)
        finally:
            self.cleaned.append("async face")
        return {"log": "async face"}


@pytest.mark.parametrize("streamed", [False, True], ids=["ainvoke", "astream"])
def test_a_cancel_stops_the_async_face_of_a_dual_node_at_once(streamed):
    cancel = threading.Event()
    node = Waiting()
    g = StateGraph("g", key_strategies={"log": AppendStrategy()})
    g.add_node("both", node).add_edge(START, "both").add_edge("both", END)
    app = g.compile(CompileConfig(saver=MemorySaver()))
    config = RunnableConfig(thread_id="t1", cancel=cancel)

    async def call() -> list[str]:
        with pytest.raises(GraphCancelledError, match="during step 0, which runs both"):
            if streamed:
                async for _ in app.astream({"log": []}, config):
                    pass
            else:
                await app.ainvoke({"log": []}, config)
        return list(node.cleaned)

    canceller = cancel_once(node.awaiting, cancel=cancel)
    started = time.monotonic()
    assert asyncio.run(call()) == ["async face"]
    assert time.monotonic() - started < AT_ONCE
    assert list(app.get_state(RunnableConfig(thread_id="t1")).values["log"]) == []
    canceller.join()


class WritesSeen(MemorySaver):
    """A MemorySaver that says when it has stored a task's pending writes."""

    def __init__(self) -> None:
        super().__init__()
        self.stored = threading.Event()

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        super().put_writes(*args, **kwargs)
        self.stored.set()


def test_a_sibling_that_ended_before_the_cancel_keeps_its_write_and_is_not_run_again(driver):
    cancel, awaiting = threading.Event(), threading.Event()
    runs: list[str] = []
    g = StateGraph("fan", key_strategies={"log": AppendStrategy()})

    def fast(state: Any) -> dict[str, Any]:
        runs.append("fast")
        return {"log": "fast"}

    async def slow(state: Any) -> dict[str, Any]:
        runs.append("slow")
        awaiting.set()
        await asyncio.sleep(LONG if runs.count("slow") == 1 else 0)
        return {"log": "slow"}

    g.add_node("fast", fast).add_node("slow", slow)
    g.add_edge(START, "fast").add_edge(START, "slow")
    g.add_edge("fast", END).add_edge("slow", END)
    saver = WritesSeen()
    app = g.compile(CompileConfig(saver=saver))
    canceller = cancel_once(awaiting, saver.stored, cancel=cancel)  # fast's write is stored
    started = time.monotonic()

    with pytest.raises(GraphCancelledError, match="during step 0, which runs fast, slow"):
        driver.invoke(app, {"log": []}, RunnableConfig(thread_id="t1", cancel=cancel))

    assert time.monotonic() - started < AT_ONCE
    assert sorted(runs) == ["fast", "slow"]
    final = driver.invoke(app, None, RunnableConfig(thread_id="t1"))
    assert sorted(runs) == ["fast", "slow", "slow"]  # fast's pending write was kept
    assert list(final["log"]) == ["fast", "slow"]
    canceller.join()


def test_a_cancel_stops_a_subgraph_node_whose_node_awaits(driver):
    cancel, awaiting = threading.Event(), threading.Event()
    cleaned: list[str] = []
    child = StateGraph("child", key_strategies={"log": AppendStrategy()})

    async def wait(state: Any) -> dict[str, Any]:
        awaiting.set()
        try:
            await asyncio.sleep(LONG if not cleaned else 0)
        finally:
            cleaned.append("wait")
        return {"log": "wait"}

    child.add_node("wait", wait).add_edge(START, "wait").add_edge("wait", END)
    parent = StateGraph("parent", key_strategies={"log": AppendStrategy()})
    parent.add_node("inner", child.compile())
    parent.add_edge(START, "inner").add_edge("inner", END)
    app = parent.compile(CompileConfig(saver=MemorySaver()))
    config = RunnableConfig(thread_id="t1", cancel=cancel)
    canceller = cancel_once(awaiting, cancel=cancel)
    started = time.monotonic()

    during = "during step 0, which runs inner"
    assert cleaned_as_it_raised(driver, app, config, cleaned, during) == ["wait"]
    assert time.monotonic() - started < AT_ONCE
    assert list(app.get_state(RunnableConfig(thread_id="t1")).values["log"]) == []
    final = driver.invoke(app, None, RunnableConfig(thread_id="t1"))
    assert list(final["log"]) == ["wait"]
    canceller.join()


def test_stream_yields_the_finished_steps_then_raises():
    cancel = threading.Event()
    app = counting_chain(cancel, cancel_after="b").compile(CompileConfig(saver=MemorySaver()))
    seen: list[str] = []

    with pytest.raises(GraphCancelledError):
        for output in app.stream({"log": []}, RunnableConfig(thread_id="t1", cancel=cancel)):
            seen.append(output.node)

    assert seen == [START, "a", "b"]


def test_ainvoke_stops_the_same_way():
    cancel = threading.Event()
    app = counting_chain(cancel, cancel_after="a").compile(CompileConfig(saver=MemorySaver()))

    with pytest.raises(GraphCancelledError, match="before step 1"):
        asyncio.run(app.ainvoke({"log": []}, RunnableConfig(thread_id="t1", cancel=cancel)))

    final = asyncio.run(app.ainvoke(None, RunnableConfig(thread_id="t1")))
    assert list(final["log"]) == ["a", "b", "c"]


def test_a_subgraph_stops_with_its_parent_and_the_parent_reports_the_cancel():
    cancel = threading.Event()
    child = counting_chain(cancel, cancel_after="a").compile()
    parent = StateGraph("parent", key_strategies={"log": AppendStrategy()})
    parent.add_node("inner", child)
    parent.add_node("next", lambda state: {"log": "next"})
    parent.add_edge(START, "inner")
    parent.add_edge("inner", "next")
    parent.add_edge("next", END)
    app = parent.compile(CompileConfig(saver=MemorySaver()))
    config = RunnableConfig(thread_id="t1", cancel=cancel)

    with pytest.raises(GraphCancelledError, match="during step 0, which runs inner") as caught:
        app.invoke({"log": []}, config)

    assert not isinstance(caught.value, NodeError)
    assert isinstance(caught.value.__cause__, GraphCancelledError)  # the child's own
    final = app.invoke(None, RunnableConfig(thread_id="t1"))
    # the child carries on inside its namespace: a ran before the cancel and is not run again
    assert list(final["log"]) == ["a", "b", "c", "next"]


@pytest.mark.parametrize("branches", [1, 2], ids=["one sync node", "parallel sync nodes"])
def test_cancelling_ainvoke_while_a_sync_node_runs_is_quiet_and_the_thread_resumes(branches):
    started = threading.Event()
    release = threading.Event()
    g = StateGraph("slow", key_strategies={"log": AppendStrategy()})
    for index in range(branches):
        name = f"n{index}"

        def node(state: Any, name: str = name) -> dict[str, Any]:
            started.set()
            release.wait(5)
            return {"log": name}

        g.add_node(name, node).add_edge(START, name).add_edge(name, END)
    app = g.compile(CompileConfig(saver=MemorySaver()))
    config = RunnableConfig(thread_id="t")
    reported: list[dict[str, Any]] = []

    async def main() -> Any:
        asyncio.get_running_loop().set_exception_handler(
            lambda _, context: reported.append(context)
        )
        call = asyncio.create_task(app.ainvoke({}, config))
        await asyncio.to_thread(started.wait, 5)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        release.set()
        del call
        import gc

        gc.collect()  # a future nobody retrieved reports itself when it is collected
        await asyncio.sleep(0)
        return await app.ainvoke(None, config)

    final = asyncio.run(main())

    assert reported == []
    assert sorted(final["log"]) == [f"n{index}" for index in range(branches)]


class Flag:
    """A cancel signal that is not a threading.Event: only read, never heard."""

    def __init__(self) -> None:
        self.value = False

    def is_set(self) -> bool:
        return self.value


def test_a_signal_of_another_kind_drops_the_writes_of_the_step_it_was_set_in(driver):
    flag = Flag()
    g = StateGraph("g", key_strategies={"log": AppendStrategy()})

    async def flagging(state: Any) -> dict[str, Any]:
        flag.value = True
        await asyncio.sleep(0)
        return {"log": "flagging"}

    g.add_node("first", lambda state: {"log": "first"}).add_node("flagging", flagging)
    g.add_edge(START, "first").add_edge("first", "flagging").add_edge("flagging", END)
    app = g.compile(CompileConfig(saver=MemorySaver()))

    with pytest.raises(GraphCancelledError, match="during step 1, which runs flagging"):
        driver.invoke(app, {"log": []}, RunnableConfig(thread_id="t1", cancel=flag))

    assert list(app.get_state(RunnableConfig(thread_id="t1")).values["log"]) == ["first"]


def test_an_event_that_cancels_no_call_is_left_holding_no_watch(driver):
    cancel = threading.Event()
    g = StateGraph("g")
    g.add_node("a", lambda state: {"a": 1}).add_node("b", lambda state: {"b": 1})
    g.add_edge(START, "a").add_edge(START, "b").add_edge("a", END).add_edge("b", END)
    app = g.compile()

    for _ in range(3):
        driver.invoke(app, {}, RunnableConfig(cancel=cancel))

    assert len(cancel._cond._waiters) == 0  # each call's watch left the event with the call


def test_under_ainvoke_a_lone_awaited_node_runs_on_the_callers_task_with_a_cancel_signal_too():
    """No task of its own per step (several times the step's cost, on every served run):
    a cancel stops it through the caller's task."""
    ran_on: list[Any] = []

    async def node(state: Any) -> dict[str, Any]:
        ran_on.append(asyncio.current_task())
        return {"x": 1}

    g = StateGraph("g")
    g.add_node("only", node).add_edge(START, "only").add_edge("only", END)
    app = g.compile()

    async def call() -> Any:
        await app.ainvoke({}, RunnableConfig(cancel=threading.Event()))
        return asyncio.current_task()

    assert ran_on == [asyncio.run(call())]


def awaiting_graph(awaiting: threading.Event, cleaned: list[str]) -> Any:
    """``wait`` awaits 30 s the first time it runs (saying when it starts), at once later."""

    async def wait(state: Any) -> dict[str, Any]:
        awaiting.set()
        try:
            await asyncio.sleep(LONG if not cleaned else 0)
        finally:
            cleaned.append("wait")
        return {"log": "wait"}

    g = StateGraph("g", key_strategies={"log": AppendStrategy()})
    g.add_node("wait", wait).add_edge(START, "wait").add_edge("wait", END)
    return g


def test_cancelling_the_ainvoke_task_while_a_watched_lone_node_awaits_is_a_cancellation():
    awaiting, cleaned = threading.Event(), []
    app = awaiting_graph(awaiting, cleaned).compile(CompileConfig(saver=MemorySaver()))
    config = RunnableConfig(thread_id="t1", cancel=threading.Event())  # never set

    async def main() -> Any:
        call = asyncio.create_task(app.ainvoke({"log": []}, config))
        assert await asyncio.to_thread(awaiting.wait, LONG)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):  # the caller's own: not a GraphCancelledError
            await call
        assert cleaned == ["wait"]
        return await app.ainvoke(None, config)  # the thread's lease was given back

    assert list(asyncio.run(main())["log"]) == ["wait"]


def test_a_subgraph_stopped_with_its_parent_under_ainvoke_is_the_cause_of_the_parents_cancel():
    cancel, awaiting, cleaned = threading.Event(), threading.Event(), []
    parent = StateGraph("parent", key_strategies={"log": AppendStrategy()})
    parent.add_node("inner", awaiting_graph(awaiting, cleaned).compile())
    parent.add_edge(START, "inner").add_edge("inner", END)
    app = parent.compile(CompileConfig(saver=MemorySaver()))
    canceller = cancel_once(awaiting, cancel=cancel)
    started = time.monotonic()

    with pytest.raises(GraphCancelledError, match="during step 0, which runs inner") as caught:
        asyncio.run(app.ainvoke({"log": []}, RunnableConfig(thread_id="t1", cancel=cancel)))

    assert time.monotonic() - started < AT_ONCE and cleaned == ["wait"]
    assert isinstance(caught.value.__cause__, GraphCancelledError)  # the child's own
    assert "graph 'g'" in str(caught.value.__cause__)
    canceller.join()


def test_a_signal_set_when_any_of_its_events_is_stops_an_awaiting_node_at_once(driver):
    from graph_agent.graph._cancel import AnySignal

    caller, call, awaiting, cleaned = threading.Event(), threading.Event(), threading.Event(), []
    app = awaiting_graph(awaiting, cleaned).compile()
    signal = AnySignal(caller, AnySignal(Flag(), call))  # (an agent tool's, nested in another's)
    canceller = cancel_once(awaiting, cancel=call)
    started = time.monotonic()

    with pytest.raises(GraphCancelledError, match="during step 0, which runs wait"):
        driver.invoke(app, {"log": []}, RunnableConfig(cancel=signal))

    assert time.monotonic() - started < AT_ONCE and cleaned == ["wait"]
    assert len(caller._cond._waiters) == 0  # the watch left every event with the call
    canceller.join()
