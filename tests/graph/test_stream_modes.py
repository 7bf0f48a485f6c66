"""stream(..., stream_mode=...): LangGraph's stream modes, each through the sync and the async
driver, and the task events the engine tells for them."""

from __future__ import annotations

import asyncio
import contextlib
import operator
import threading
from typing import Annotated, Any, TypedDict

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    Command,
    CompileConfig,
    Interrupt,
    MemorySaver,
    NodeError,
    NodeOutput,
    RunnableConfig,
    Send,
    StateGraph,
    emit_chunk,
    interrupt,
)
from graph_agent.graph import _task_events
from graph_agent.graph.stream_modes import STREAM_MODES, TaskEvent, check_stream_mode
from graph_agent.messages import AssistantMessageChunk


def collect(driver: Any, runnable: Any, input: Any, config: Any = None, **options: Any) -> list:
    """What ``stream`` (or ``astream``, for the async driver) yields for ``options``."""
    if driver.kind == "sync":
        return list(runnable.stream(input, config, **options))

    async def gather() -> list:
        return [item async for item in runnable.astream(input, config, **options)]

    return asyncio.run(gather())


def follow(driver: Any, runnable: Any, input: Any, take: Any, **options: Any) -> None:
    """Stream through ``driver``, handing each item to ``take`` as it arrives."""
    if driver.kind == "sync":
        for item in runnable.stream(input, **options):
            take(item)
        return

    async def main() -> None:
        async for item in runnable.astream(input, **options):
            take(item)

    asyncio.run(main())


def fork_join(saver: Any = None) -> Any:
    """``a`` then ``b`` and ``c`` in parallel, then ``d`` after both."""
    g = StateGraph("fork", key_strategies={"log": AppendStrategy()})
    g.add_node("a", lambda s: {"x": s["x"] + 1, "log": ["a"]})
    g.add_node("b", lambda s: {"log": ["b"]})
    g.add_node("c", lambda s: {"log": ["c"]})
    g.add_node("d", lambda s: {"log": ["d"]})
    g.add_edge(START, "a").add_edge("a", "b").add_edge("a", "c")
    g.add_edge(["b", "c"], "d").add_edge("d", END)
    return g.compile(CompileConfig(saver=saver))


def one_node(fn: Any, saver: Any = None, name: str = "node") -> Any:
    g = StateGraph("one")
    g.add_node(name, fn)
    g.add_edge(START, name).add_edge(name, END)
    return g.compile(CompileConfig(saver=saver))


def test_tasks_mode_tells_each_tasks_start_with_its_input_then_its_result(driver):
    items = collect(driver, fork_join(), {"x": 1, "log": []}, stream_mode="tasks")
    a_start, a_end = items[:2]
    assert a_start == {
        "id": a_start["id"],
        "name": "a",
        "input": {"x": 1, "log": []},
        "triggers": ["branch:to:a"],
    }
    assert a_end == {
        "id": a_start["id"],
        "name": "a",
        "error": None,
        "result": {"x": 2, "log": ["a"]},
        "interrupts": [],
    }
    assert [(item["name"], "result" in item) for item in items[2:]] == [
        ("b", False),
        ("c", False),
        ("b", True),
        ("c", True),
        ("d", False),
        ("d", True),
    ]
    assert items[6]["input"] == {"x": 2, "log": ["a", "b", "c"]}


def test_the_tasks_of_a_parallel_step_start_together_before_any_of_them_runs(driver):
    ran: list[str] = []

    def branch(name: str) -> Any:
        def node(state: Any) -> dict:
            ran.append(name)
            return {"log": [name]}

        return node

    g = StateGraph("par", key_strategies={"log": AppendStrategy()})
    g.add_node("b", branch("b")).add_node("c", branch("c"))
    g.add_edge(START, "b").add_edge(START, "c").add_edge("b", END).add_edge("c", END)
    seen: list[tuple[str, str, list[str]]] = []

    def take(item: NodeOutput) -> None:
        if type(item) is TaskEvent:
            seen.append((item.type, item.node, list(ran)))

    follow(driver, g.compile(), {"log": []}, take, task_events=True)
    assert seen[:2] == [("task", "b", []), ("task", "c", [])]  # nothing ran yet
    assert sorted((kind, node) for kind, node, _ in seen[2:]) == [
        ("task_result", "b"),
        ("task_result", "c"),
    ]


def test_a_task_start_reaches_a_sync_stream_while_its_node_still_runs():
    told = threading.Event()

    def waits(state: Any) -> dict:
        # the consumer sets `told` once it holds this task's start: proof it came first
        return {"told": told.wait(timeout=5)}

    results = []
    for item in one_node(waits).stream({}, stream_mode="tasks"):
        if "input" in item:
            told.set()
        else:
            results.append(item["result"])
    assert results == [{"told": True}]


def test_a_task_start_reaches_an_async_stream_while_its_async_node_still_runs():
    async def main() -> list:
        told = asyncio.Event()

        async def waits(state: Any) -> dict:
            try:
                await asyncio.wait_for(told.wait(), timeout=5)
            except TimeoutError:
                return {"told": False}
            return {"told": True}

        results = []
        async for item in one_node(waits).astream({}, stream_mode="tasks"):
            if "input" in item:
                told.set()
            else:
                results.append(item["result"])
        return results

    assert asyncio.run(main()) == [{"told": True}]


def test_a_parallel_steps_starts_reach_the_stream_while_its_nodes_wait_for_them(driver):
    told = {"b": threading.Event(), "c": threading.Event()}

    def waits(name: str) -> Any:
        return lambda state: {name: told[name].wait(timeout=5)}

    g = StateGraph("par")
    g.add_node("b", waits("b")).add_node("c", waits("c"))
    g.add_edge(START, "b").add_edge(START, "c").add_edge("b", END).add_edge("c", END)
    results: dict[str, Any] = {}

    def take(item: dict) -> None:
        if "input" in item:
            told[item["name"]].set()
        else:
            results.update(item["result"])

    follow(driver, g.compile(), {}, take, stream_mode="tasks")
    assert results == {"b": True, "c": True}


def test_a_failing_task_ends_with_what_it_raised_and_the_stream_raises_the_node_error(driver):
    boom = ValueError("boom")

    def fails(state: Any) -> dict:
        raise boom

    items: list[Any] = []

    async def agather() -> None:
        async for item in one_node(fails, name="check").astream({}, stream_mode="tasks"):
            items.append(item)

    with pytest.raises(NodeError) as raised:
        if driver.kind == "sync":
            items.extend(one_node(fails, name="check").stream({}, stream_mode="tasks"))
        else:
            asyncio.run(agather())
    assert raised.value.__cause__ is boom
    assert [item["name"] for item in items] == ["check", "check"]
    assert items[1]["error"] is boom
    assert items[1]["result"] == {} and items[1]["interrupts"] == []


def test_an_interrupted_task_ends_with_its_interrupts_and_no_error(driver):
    app = one_node(lambda s: {"answer": interrupt("ask")}, MemorySaver(), name="ask")
    config = RunnableConfig(thread_id="t")
    items = collect(driver, app, {"q": 1}, config, stream_mode="tasks")
    result = items[-1]
    assert result["error"] is None and result["result"] == {}
    [asked] = result["interrupts"]
    assert isinstance(asked, Interrupt) and asked.value == "ask" and asked.node == "ask"
    assert asked.id == app.get_state(config).interrupts[0].id
    resumed = collect(driver, app, Command(resume="yes"), config, stream_mode="tasks")
    assert resumed[0]["id"] == result["id"]  # the same task runs again
    assert resumed[-1]["result"] == {"answer": "yes"} and resumed[-1]["interrupts"] == []


def test_checkpoints_mode_yields_each_checkpoint_saved_as_get_state_shows_it(driver):
    app = fork_join(MemorySaver())
    config = RunnableConfig(thread_id="t")
    items = collect(driver, app, {"x": 1, "log": []}, config, stream_mode="checkpoints")
    history = list(app.get_state_history(config))[::-1]
    assert len(items) == len(history) == 4
    for payload, snapshot in zip(items, history, strict=True):
        assert payload["config"] == snapshot.config
        assert payload["parent_config"] == snapshot.parent_config
        assert payload["values"] == snapshot.values
        assert payload["metadata"] == snapshot.metadata
        assert payload["next"] == list(snapshot.next)
        assert payload["tasks"] == [
            {"id": task.id, "name": task.name, "interrupts": (), "state": None}
            for task in snapshot.tasks
        ]


def test_a_checkpoints_tasks_have_the_ids_its_next_tasks_run_under(driver):
    app = fork_join(MemorySaver())
    config = RunnableConfig(thread_id="t")
    items = collect(driver, app, {"x": 1, "log": []}, config, stream_mode=["tasks", "checkpoints"])
    announced = [
        (task["id"], task["name"])
        for mode, payload in items
        if mode == "checkpoints"
        for task in payload["tasks"]
    ]
    started = [
        (payload["id"], payload["name"])
        for mode, payload in items
        if mode == "tasks" and "input" in payload
    ]
    assert announced == started
    assert [name for _, name in started] == ["a", "b", "c", "d"]


def test_checkpoints_mode_yields_nothing_without_a_saver(driver):
    assert collect(driver, fork_join(), {"x": 1, "log": []}, stream_mode="checkpoints") == []


def test_debug_mode_wraps_task_starts_results_and_checkpoints_typed_with_their_step(driver):
    app = one_node(lambda s: {"x": 2}, MemorySaver())
    config = RunnableConfig(thread_id="t")
    items = collect(driver, app, {"x": 1}, config, stream_mode="debug")
    assert [(item["type"], item["step"]) for item in items] == [
        ("checkpoint", -1),
        ("task", 0),
        ("task_result", 0),
        ("checkpoint", 0),
    ]
    assert all(set(item) == {"type", "timestamp", "step", "payload"} for item in items)
    assert items[1]["payload"]["name"] == "node" and items[2]["payload"]["result"] == {"x": 2}
    assert items[3]["payload"]["values"] == {"x": 2} and items[3]["payload"]["next"] == []
    assert all(item["timestamp"].endswith("+00:00") for item in items)
    assert items[0]["timestamp"] <= items[3]["timestamp"]


def test_values_mode_yields_the_state_after_the_input_and_each_step_once(driver):
    items = collect(driver, fork_join(), {"x": 1, "log": []}, stream_mode="values")
    assert items == [
        {"x": 1, "log": []},
        {"x": 2, "log": ["a"]},
        {"x": 2, "log": ["a", "b", "c"]},
        {"x": 2, "log": ["a", "b", "c", "d"]},
    ]


def test_updates_mode_yields_each_nodes_update_by_its_name(driver):
    items = collect(driver, fork_join(), {"x": 1, "log": []}, stream_mode="updates")
    assert items == [
        {"a": {"x": 2, "log": ["a"]}},
        {"b": {"log": ["b"]}},
        {"c": {"log": ["c"]}},
        {"d": {"log": ["d"]}},
    ]


def test_a_pause_yields_its_interrupts_in_updates_and_values(driver):
    app = one_node(lambda s: {"answer": interrupt("ask")}, MemorySaver(), name="ask")
    config = RunnableConfig(thread_id="t")
    items = collect(driver, app, {"q": 1}, config, stream_mode=["updates", "values"])
    asked = app.get_state(config).interrupts
    assert items == [
        ("values", {"q": 1}),
        ("updates", {"__interrupt__": asked}),
        ("values", {"q": 1, "__interrupt__": asked}),
    ]


def test_custom_and_messages_modes_split_what_nodes_emit(driver):
    token = AssistantMessageChunk(id="m1", content="Hel")

    def talks(state: Any) -> dict:
        emit_chunk("tick")
        emit_chunk({"progress": 1})
        emit_chunk(token)
        return {}

    items = collect(driver, one_node(talks), {}, stream_mode=["custom", "messages"])
    assert items == [
        ("custom", "tick"),
        ("custom", {"progress": 1}),
        ("messages", (token, {"langgraph_node": "node", "langgraph_step": 0})),
    ]


def test_one_mode_in_a_list_yields_mode_and_payload_tuples(driver):
    items = collect(driver, one_node(lambda s: {"x": 2}), {"x": 1}, stream_mode=["updates"])
    assert items == [("updates", {"node": {"x": 2}})]


def test_a_send_task_starts_with_its_own_input_and_the_push_trigger(driver):
    g = StateGraph("map", key_strategies={"out": AppendStrategy()})
    g.add_node("fan", lambda s: {})
    g.add_node("work", lambda s: {"out": [s["item"] * 2]})
    g.add_edge(START, "fan")
    g.add_conditional_edges("fan", lambda s: [Send("work", {"item": i}) for i in (1, 2)])
    g.add_edge("work", END)
    items = collect(driver, g.compile(), {"out": []}, stream_mode="tasks")
    starts = [item for item in items if "input" in item and item["name"] == "work"]
    assert [(s["input"], s["triggers"]) for s in starts] == [
        ({"item": 1}, ["__pregel_push"]),
        ({"item": 2}, ["__pregel_push"]),
    ]
    assert len({s["id"] for s in starts}) == 2


def test_private_keys_stay_out_of_task_inputs_and_results(driver):
    g = StateGraph("private", private_keys=("secret",))
    g.add_node("node", lambda s: {"x": 2, "secret": "s"})
    g.add_edge(START, "node").add_edge("node", END)
    start, end = collect(driver, g.compile(), {"x": 1, "secret": "s"}, stream_mode="tasks")
    assert start["input"] == {"x": 1} and end["result"] == {"x": 2}


def test_task_events_come_among_the_node_outputs_when_asked(driver):
    items = collect(
        driver,
        one_node(lambda s: {"x": 2}, MemorySaver()),
        {"x": 1},
        RunnableConfig(thread_id="t"),
        task_events=True,
    )
    kinds = [item.type if type(item) is TaskEvent else item.node for item in items]
    assert kinds == ["checkpoint", "__start__", "task", "task_result", "checkpoint", "node"]
    assert all(isinstance(item, NodeOutput) for item in items)
    result = items[3]
    assert result.node == "node" and result.step == 0 and result.update == {"x": 2}


def test_task_events_of_some_types_are_the_only_ones_told(driver):
    items = collect(
        driver,
        one_node(lambda s: {"x": 2}, MemorySaver()),
        {"x": 1},
        RunnableConfig(thread_id="t"),
        task_events={"checkpoint"},
    )
    assert [item.type for item in items if type(item) is TaskEvent] == ["checkpoint"] * 2


@pytest.mark.parametrize("task_events", [{"task", "tasks"}, 3, "checkpoints"])
def test_an_unknown_task_event_type_is_a_value_error_naming_the_valid_ones(task_events):
    with pytest.raises(ValueError, match="task_events must be") as raised:
        fork_join().stream({"x": 1}, task_events=task_events)
    assert all(repr(kind) in str(raised.value) for kind in ("task", "task_result", "checkpoint"))


def test_the_tasks_mode_builds_no_checkpoint_payload(driver, monkeypatch):
    built: list[str] = []
    told = _task_events.checkpoint_saved

    def counted(flow: Any, checkpoint: Any) -> Any:
        built.append(checkpoint.id)
        return told(flow, checkpoint)

    monkeypatch.setattr(_task_events, "checkpoint_saved", counted)
    app, config = fork_join(MemorySaver()), RunnableConfig(thread_id="t")
    assert len(collect(driver, app, {"x": 1, "log": []}, config, stream_mode="tasks")) == 8
    assert built == []  # nothing asked for a checkpoint: none was made (its values copied)
    collect(driver, app, {"x": 1, "log": []}, config, stream_mode=["tasks", "checkpoints"])
    assert len(built) == 4


def siblings(saver: Any, failing: set[str]) -> Any:
    """``a`` and ``b`` in parallel, ``b`` raising while ``failing`` holds ``"b"``."""
    g = StateGraph("siblings", key_strategies={"log": AppendStrategy()})

    def b(state: Any) -> dict:
        if "b" in failing:
            raise ValueError("boom")
        return {"log": ["b"]}

    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b", b)
    g.add_edge(START, "a").add_edge(START, "b").add_edge("a", END).add_edge("b", END)
    return g.compile(CompileConfig(saver=saver))


def test_a_resumed_call_first_tells_the_checkpoint_it_resumes_from_with_what_its_tasks_did(
    driver,
):
    failing = {"b"}
    app, config = siblings(MemorySaver(), failing), RunnableConfig(thread_id="t")
    with pytest.raises(NodeError):
        collect(driver, app, {"log": []}, config, stream_mode="checkpoints")
    failing.clear()
    [resumed, *_, last] = collect(driver, app, None, config, stream_mode="checkpoints")
    snapshot = app.get_state_history(config)
    assert resumed["config"] == list(snapshot)[1].config  # the one it resumed from
    a, b = resumed["tasks"]
    assert a == {
        "id": a["id"],
        "name": "a",
        "result": {"log": ["a"]},
        "interrupts": (),
        "state": None,
    }
    assert b == {"id": b["id"], "name": "b", "error": "ValueError: boom", "state": None}
    assert last["values"] == {"log": ["a", "b"]} and last["tasks"] == []


def test_a_new_input_on_a_thread_tells_no_checkpoint_but_those_it_saves(driver):
    app, config = siblings(MemorySaver(), set()), RunnableConfig(thread_id="t")
    first = collect(driver, app, {"log": []}, config, stream_mode="checkpoints")
    again = collect(driver, app, {"log": []}, config, stream_mode="checkpoints")
    assert len(first) == len(again) == 2
    assert (
        again[0]["metadata"]["source"] == "input"
        and again[0]["parent_config"] == first[-1]["config"]
    )


def test_a_resumed_checkpoints_tasks_have_the_shapes_of_langgraphs_own(driver):
    """LangGraph leaves ``interrupts`` out of a failed task and adds a finished one's
    ``result``: the checkpoint a resume starts from, compared with a real LangGraph graph."""
    lg_graph = pytest.importorskip("langgraph.graph")
    lg_memory = pytest.importorskip("langgraph.checkpoint.memory")
    lg_types = pytest.importorskip("langgraph.types")

    class State(TypedDict):
        log: Annotated[list, operator.add]

    failing = {"b"}

    def b(state: Any) -> dict:
        if "b" in failing:
            raise ValueError("boom")
        return {"log": ["b"]}

    def ask(state: Any) -> dict:
        return {"log": [lg_types.interrupt("ok?")]}

    def lg_app(second: Any) -> Any:
        lg = lg_graph.StateGraph(State)
        lg.add_node("a", lambda s: {"log": ["a"]})
        lg.add_node("b", second)
        lg.add_edge(lg_graph.START, "a")
        lg.add_edge(lg_graph.START, "b")
        lg.add_edge("a", lg_graph.END)
        lg.add_edge("b", lg_graph.END)
        return lg.compile(checkpointer=lg_memory.InMemorySaver())

    def our_app(second: Any) -> Any:
        g = StateGraph("siblings", key_strategies={"log": AppendStrategy()})
        g.add_node("a", lambda s: {"log": ["a"]}).add_node("b", second)
        g.add_edge(START, "a").add_edge(START, "b").add_edge("a", END).add_edge("b", END)
        return g.compile(CompileConfig(saver=MemorySaver()))

    def ours_asking(state: Any) -> dict:
        return {"log": [interrupt("ok?")]}

    lg_config = {"configurable": {"thread_id": "t"}}
    config = RunnableConfig(thread_id="t")
    for theirs_second, ours_second, resume in ((b, b, None), (ask, ours_asking, "yes")):
        failing.add("b")
        theirs_app, ours = lg_app(theirs_second), our_app(ours_second)
        with contextlib.suppress(ValueError):
            list(theirs_app.stream({"log": []}, lg_config))
        with contextlib.suppress(NodeError):
            collect(driver, ours, {"log": []}, config)
        failing.clear()
        lg_resume = None if resume is None else lg_types.Command(resume=resume)
        [theirs] = [
            p
            for p in theirs_app.stream(lg_resume, lg_config, stream_mode="checkpoints")
            if p["tasks"]
        ][:1]
        first = collect(
            driver,
            ours,
            None if resume is None else Command(resume=resume),
            config,
            stream_mode="checkpoints",
        )[0]
        assert task_shapes(first) == task_shapes(theirs)


def task_shapes(payload: dict) -> list:
    """Each task of a checkpoint payload: its name, its fields, how many interrupts."""
    return sorted(
        (task["name"], sorted(task), len(task.get("interrupts", ()))) for task in payload["tasks"]
    )


def test_a_stream_without_task_events_has_none(driver):
    items = collect(
        driver, fork_join(MemorySaver()), {"x": 1, "log": []}, RunnableConfig(thread_id="t")
    )
    assert not any(type(item) is TaskEvent for item in items)


@pytest.mark.parametrize(
    ("stream_mode", "says"),
    [
        ("telepathy", "'telepathy' is not a stream mode"),
        (["updates", "nope"], "'nope' is not a stream mode"),
        ([], "non-empty list"),
        (3, "got 3"),
    ],
)
def test_an_unknown_stream_mode_is_a_value_error_naming_the_valid_ones(stream_mode, says):
    with pytest.raises(ValueError, match=says) as raised:
        fork_join().stream({"x": 1}, stream_mode=stream_mode)
    assert all(repr(mode) in str(raised.value) for mode in STREAM_MODES)


def test_a_stream_mode_with_subgraphs_is_refused_with_what_to_do_instead():
    with pytest.raises(ValueError, match="without a stream_mode"):
        check_stream_mode("updates", subgraphs=True)


def test_payloads_have_the_fields_and_values_of_langgraphs_own(driver):
    """Compared with a real LangGraph graph of the same shape, when LangGraph is installed
    (the ``bench`` extra)."""
    lg_graph = pytest.importorskip("langgraph.graph")
    lg_memory = pytest.importorskip("langgraph.checkpoint.memory")

    class State(TypedDict):
        x: int
        log: Annotated[list, operator.add]

    lg = lg_graph.StateGraph(State)
    lg.add_node("a", lambda s: {"x": s["x"] + 1, "log": ["a"]})
    lg.add_node("b", lambda s: {"log": ["b"]})
    lg.add_node("c", lambda s: {"log": ["c"]})
    lg.add_node("d", lambda s: {"log": ["d"]})
    lg.add_edge(lg_graph.START, "a")
    lg.add_edge("a", "b")
    lg.add_edge("a", "c")
    lg.add_edge(["b", "c"], "d")
    lg.add_edge("d", lg_graph.END)
    modes = ["tasks", "checkpoints", "debug", "values", "updates"]
    theirs = list(
        lg.compile(checkpointer=lg_memory.InMemorySaver()).stream(
            {"x": 1, "log": []}, {"configurable": {"thread_id": "t"}}, stream_mode=modes
        )
    )
    config = RunnableConfig(thread_id="t")
    ours = collect(driver, fork_join(MemorySaver()), {"x": 1, "log": []}, config, stream_mode=modes)
    assert shapes(ours) == shapes(theirs)
    assert [phase for phase, _ in task_order(ours)] == [phase for phase, _ in task_order(theirs)]
    assert sorted(task_order(ours)) == sorted(task_order(theirs))
    assert [p for m, p in ours if m == "values"] == [p for m, p in theirs if m == "values"]
    assert sorted(map(repr, updates(ours))) == sorted(map(repr, updates(theirs)))
    assert sorted(map(repr, results(ours))) == sorted(map(repr, results(theirs)))


def shapes(items: list) -> set:
    """The field names of each kind of payload in ``items`` (``(mode, payload)`` pairs)."""
    found: set = set()
    for mode, payload in items:
        if mode in ("tasks", "checkpoints"):
            found.add((mode, tuple(sorted(payload))))
        if mode == "checkpoints":
            found |= {("checkpoint task", tuple(sorted(task))) for task in payload["tasks"]}
        if mode == "debug":
            found.add((mode, payload["type"], tuple(sorted(payload))))
            found.add(("debug payload", payload["type"], tuple(sorted(payload["payload"]))))
    return found


def task_order(items: list) -> list:
    return [("result" in p, p["name"]) for m, p in items if m == "tasks"]


def updates(items: list) -> list:
    return [p for m, p in items if m == "updates"]


def results(items: list) -> list:
    return [(p["name"], p["result"]) for m, p in items if m == "tasks" and "result" in p]


def test_a_consumer_that_stops_early_frees_the_thread_for_the_next_run(driver):
    app = fork_join(MemorySaver())
    config = RunnableConfig(thread_id="t")
    if driver.kind == "sync":
        stream = app.stream({"x": 1, "log": []}, config, stream_mode="tasks")
        next(stream)
        stream.close()
    else:

        async def main() -> Any:
            stream = app.astream({"x": 1, "log": []}, config, stream_mode="tasks")
            await anext(stream)
            await stream.aclose()
            return await app.ainvoke({"x": 5, "log": []}, config)

        assert asyncio.run(main())["x"] == 6  # no ThreadBusyError
        return
    assert app.invoke({"x": 5, "log": []}, config)["x"] == 6
