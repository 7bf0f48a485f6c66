"""Send: a router or a node's Command starts tasks of a node, each with an input of its own
(map-reduce), through both drivers; with checkpoints, interrupts, streaming and errors."""

from __future__ import annotations

import threading
import time

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    Command,
    CompileConfig,
    InvalidUpdateError,
    MemorySaver,
    NodeError,
    RunnableConfig,
    Send,
    StateGraph,
    interrupt,
)
from graph_agent.graph.saver import SENDS_KEY, WRITE


def square(item):
    return item["n"] * item["n"] + 1


def map_reduce(node=None, *, saver=None, key_strategies=None):
    """START -> plan -> Send("work", {"n": i}) per item -> reduce -> END."""
    strategies = {"results": AppendStrategy(), **(key_strategies or {})}
    g = StateGraph("map_reduce", key_strategies=strategies)
    g.add_node("plan", lambda state: {"planned": len(state["items"])})
    g.add_node("work", node or (lambda item: {"results": [(item["n"], square(item))]}))
    g.add_node("reduce", lambda state: {"count": len(state["results"])})
    g.add_edge(START, "plan")
    g.add_conditional_edges(
        "plan", lambda state: [Send("work", {"n": n}) for n in state["items"]], sends=["work"]
    )
    g.add_edge("work", "reduce").add_edge("reduce", END)
    return g.compile(CompileConfig(saver=saver))


def test_map_reduce_over_100_items_gives_what_a_loop_gives(driver):
    items = list(range(100))
    final = driver.invoke(map_reduce(), {"items": items})
    expected = [(n, square({"n": n})) for n in items]  # the same work, in a loop
    assert list(final["results"]) == expected  # merged in Send order
    assert final["count"] == 100 and final["planned"] == 100


def test_each_send_task_sees_its_input_as_its_whole_state(driver):
    seen = []
    lock = threading.Lock()

    def work(state):
        with lock:
            seen.append(dict(state))
        return {"results": [state["n"]]}

    final = driver.invoke(map_reduce(work), {"items": [1, 2], "secret": "shared"})
    assert sorted(seen, key=lambda s: s["n"]) == [{"n": 1}, {"n": 2}]
    assert final["secret"] == "shared"


def test_a_node_triggered_by_an_edge_and_by_sends_runs_once_plus_once_per_send(driver):
    g = StateGraph("both", key_strategies={"log": AppendStrategy()})
    g.add_node("a", lambda state: None)
    g.add_node("w", lambda state: {"log": state.value("tag", "plain")})
    g.add_edge(START, "a").add_edge("a", "w")
    g.add_conditional_edges("a", lambda s: [Send("w", {"tag": "x"}), Send("w", {"tag": "y"})])
    g.add_edge("w", END)
    assert list(driver.invoke(g.compile(), {})["log"]) == ["plain", "x", "y"]


def test_a_node_sends_with_command_goto_to_its_declared_destinations(driver):
    g = StateGraph("goto", key_strategies={"log": AppendStrategy()})

    def plan(state):
        return Command(goto=[Send("w", {"n": 1}), Send("w", {"n": 2}), "after"], update={"x": 1})

    g.add_node("plan", plan, destinations=("w", "after"))
    g.add_node("w", lambda s: {"log": f"w{s['n']}"})
    g.add_node("after", lambda s: {"log": f"after x={s['x']}"})
    g.add_edge(START, "plan").add_edge("w", END).add_edge("after", END)
    assert list(driver.invoke(g.compile(), {})["log"]) == ["w1", "w2", "after x=1"]


def test_a_lone_send_in_command_goto_runs(driver):
    g = StateGraph("one")
    g.add_node("plan", lambda s: Command(goto=Send("w", {"n": 7})), destinations=("w",))
    g.add_node("w", lambda s: {"got": s["n"]})
    g.add_edge(START, "plan").add_edge("w", END)
    assert driver.invoke(g.compile(), {})["got"] == 7


def test_a_router_with_a_path_map_may_send_to_the_nodes_it_maps_to(driver):
    g = StateGraph("langgraph_style", key_strategies={"log": AppendStrategy()})
    g.add_node("plan", lambda s: None)
    g.add_node("w", lambda s: {"log": s["n"]})
    g.add_edge(START, "plan").add_edge("w", END)
    g.add_conditional_edges("plan", lambda s: [Send("w", {"n": n}) for n in (3, 4)], ["w"])
    assert list(driver.invoke(g.compile(), {})["log"]) == [3, 4]


def test_a_router_returning_no_sends_ends_that_branch(driver):
    final = driver.invoke(map_reduce(), {"items": []})
    assert final["planned"] == 0 and "count" not in final


def test_sends_reach_a_subgraph_as_its_input(driver):
    child = StateGraph("child")
    child.add_node("double", lambda s: {"doubled": [s["n"] * 2]})
    child.add_edge(START, "double").add_edge("double", END)
    g = StateGraph("parent", key_strategies={"doubled": AppendStrategy()})
    g.add_node("plan", lambda s: None)
    g.add_node("child", child.compile())
    g.add_edge(START, "plan").add_edge("child", END)
    g.add_conditional_edges("plan", lambda s: [Send("child", {"n": n}) for n in (1, 2, 3)])
    saver = MemorySaver()
    app = g.compile(CompileConfig(saver=saver))
    final = driver.invoke(app, {}, RunnableConfig(thread_id="t"))
    assert list(final["doubled"]) == [2, 4, 6]


def test_sends_run_one_agent_per_item(driver):
    from graph_agent import AssistantMessage, ReactAgent, UserMessage
    from graph_agent.models import ScriptedChatModel

    def answer(request):
        return AssistantMessage(f"summary of {request.messages[-1].content}")

    agent = ReactAgent(name="summarizer", model=ScriptedChatModel([answer] * 4))
    # each agent hands back its answer under its output key: N of them append to it
    strategies = {"messages": AppendStrategy(), "output": AppendStrategy()}
    g = StateGraph("team", key_strategies=strategies)
    g.add_node("plan", lambda s: None)
    g.add_node("summarizer", agent)
    g.add_edge(START, "plan").add_edge("summarizer", END)
    docs = ["a", "b", "c", "d"]

    def fan_out(state):
        return [Send("summarizer", {"messages": [UserMessage(f"doc {d}")]}) for d in docs]

    g.add_conditional_edges("plan", fan_out, sends=["summarizer"])
    final = driver.invoke(g.compile(), {"messages": []})
    assert [m.text for m in final["messages"]] == [f"summary of doc {d}" for d in docs]
    assert list(final["output"]) == [f"summary of doc {d}" for d in docs]


def test_send_tasks_run_at_most_max_concurrency_at_once(driver):
    running, peak = [0], [0]
    lock = threading.Lock()

    def work(item):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.005)
        with lock:
            running[0] -= 1
        return {"results": [item["n"]]}

    final = driver.invoke(
        map_reduce(work), {"items": list(range(12))}, RunnableConfig(max_concurrency=3)
    )
    assert list(final["results"]) == list(range(12))
    assert 1 <= peak[0] <= 3


def test_streaming_tells_each_send_task_by_its_index(driver):
    outputs = driver.stream(map_reduce(), {"items": [5, 6, 7]})
    work = [o for o in outputs if o.node == "work"]
    assert [o.send_index for o in work] == [0, 1, 2]
    assert [o.update["results"][0][0] for o in work] == [5, 6, 7]
    assert all(o.send_index is None for o in outputs if o.node != "work")


def test_a_lone_send_task_streams_its_index():
    outputs = list(map_reduce().stream({"items": [9]}))
    assert [(o.node, o.send_index) for o in outputs] == [
        ("__start__", None),
        ("plan", None),
        ("work", 0),
        ("reduce", None),
    ]


def test_writes_of_two_sends_to_a_replaced_key_name_both_sends(driver):
    with pytest.raises(InvalidUpdateError) as raised:
        driver.invoke(map_reduce(lambda item: {"last": item["n"]}), {"items": [1, 2]})
    assert "'work (Send 0)' and 'work (Send 1)' both wrote the key 'last'" in str(raised.value)


def test_a_failing_send_task_is_named_with_its_index(driver):
    def work(item):
        if item["n"] == 2:
            raise ValueError("bad item")
        return {"results": [item["n"]]}

    with pytest.raises(NodeError) as raised:
        driver.invoke(map_reduce(work), {"items": [1, 2, 3]})
    assert "node 'work' (Send 1) raised ValueError: bad item" in str(raised.value)


# bad Sends: each error names what to fix


def router_graph(router, **options):
    g = StateGraph("bad")
    g.add_node("plan", lambda s: None)
    g.add_node("w", lambda s: None)
    g.add_node("other", lambda s: None)
    g.add_edge(START, "plan").add_edge(START, "other").add_edge("w", END).add_edge("other", END)
    g.add_conditional_edges("plan", router, **options)
    return g.compile()


def test_a_send_to_an_unknown_node_names_the_nodes(driver):
    with pytest.raises(InvalidUpdateError) as raised:
        driver.invoke(router_graph(lambda s: [Send("nope", {})]), {})
    message = str(raised.value)
    assert "the router on 'plan' returned Send('nope', ...)" in message
    assert "'nope' is not a node" in message and "nodes: plan, w, other" in message


def test_a_send_to_an_undeclared_node_says_how_to_declare_it(driver):
    app = router_graph(lambda s: [Send("other", {})], sends=["w"])
    with pytest.raises(InvalidUpdateError) as raised:
        driver.invoke(app, {})
    assert "sends=[..., 'other']" in str(raised.value)


def test_a_plain_answer_from_a_router_declaring_only_sends_says_so(driver):
    with pytest.raises(InvalidUpdateError) as raised:
        driver.invoke(router_graph(lambda s: "w", sends=["w"]), {})
    assert "declared only Send targets (sends=['w'])" in str(raised.value)


def test_a_send_to_end_is_refused_saying_how_to_end_a_branch(driver):
    with pytest.raises(NodeError) as raised:
        driver.invoke(router_graph(lambda s: [Send(END, {})]), {})
    assert "END (or nothing) instead" in str(raised.value)
    with pytest.raises(ValueError, match="is no node"):
        Send(START, {})


def test_a_send_with_an_input_that_is_no_dict_says_what_input_is(driver):
    with pytest.raises(NodeError) as raised:
        driver.invoke(router_graph(lambda s: [Send("w", [1, 2])]), {})
    assert "the input must be a dict of state keys" in str(raised.value)
    with pytest.raises(TypeError, match="state keys are strings"):
        Send("w", {1: "x"})


def test_a_goto_send_to_an_undeclared_node_says_how_to_declare_it(driver):
    g = StateGraph("goto")
    g.add_node("plan", lambda s: Command(goto=[Send("w", {})]), destinations=("other",))
    g.add_node("w", lambda s: None)
    g.add_node("other", lambda s: None)
    g.add_edge(START, "plan").add_edge("other", "w").add_edge("w", END)
    with pytest.raises(InvalidUpdateError) as raised:
        driver.invoke(g.compile(), {})
    assert "add_node('plan', fn, destinations=(..., 'w'))" in str(raised.value)


def test_sends_naming_unknown_nodes_fail_at_compile_time():
    g = StateGraph("bad")
    g.add_node("plan", lambda s: None)
    g.add_edge(START, "plan")
    g.add_conditional_edges("plan", lambda s: [], sends=["ghost"])
    with pytest.raises(ValueError, match="ghost"):
        g.compile()


def test_sends_compare_by_node_and_input():
    assert Send("w", {"n": 1}) == Send("w", {"n": 1}) != Send("w", {"n": 2})
    assert repr(Send("w", {"n": 1})) == "Send(node='w', input={'n': 1})"
    assert {Send("w", {}): 1}.get("w") is None  # hashable, never equal to a node name


# checkpoints: Sends are stored with the step that runs them, and their tasks keep their ids


def test_a_failed_send_task_reruns_alone_and_the_finished_ones_keep_their_writes(driver):
    attempts: dict[int, int] = {}
    lock = threading.Lock()

    def work(item):
        with lock:
            attempts[item["n"]] = attempts.get(item["n"], 0) + 1
        if item["n"] == 3 and attempts[3] == 1:
            raise RuntimeError("flaky")
        return {"results": [item["n"]]}

    saver = MemorySaver()
    app = map_reduce(work, saver=saver)
    config = RunnableConfig(thread_id="t")
    with pytest.raises(NodeError):
        driver.invoke(app, {"items": list(range(10))}, config)
    snapshot = app.get_state(config)
    assert snapshot.next == ("work",) * 10
    assert SENDS_KEY not in snapshot.values
    assert len({task.id for task in snapshot.tasks}) == 10
    head = saver.get("t")
    assert sum(w.channel == WRITE for w in head.pending_writes) == 9
    final = driver.invoke(app, None, config)
    assert attempts == {n: 2 if n == 3 else 1 for n in range(10)}
    assert list(final["results"]) == list(range(10))
    assert app.get_state(config).next == ()


def test_an_interrupt_inside_send_tasks_is_answered_by_id(driver):
    runs: list[int] = []

    def work(item):
        runs.append(item["n"])
        answer = interrupt(f"approve {item['n']}?")
        return {"results": [(item["n"], answer)]}

    app = map_reduce(work, saver=MemorySaver())
    config = RunnableConfig(thread_id="t")
    paused = driver.invoke(app, {"items": [1, 2, 3]}, config)
    asked = {i.value: i.id for i in paused.interrupts}
    assert set(asked) == {"approve 1?", "approve 2?", "approve 3?"}
    assert len(set(asked.values())) == 3
    again = driver.invoke(app, Command(resume={asked["approve 2?"]: "yes"}), config)
    assert {i.value for i in again.interrupts} == {"approve 1?", "approve 3?"}
    rest = {asked["approve 1?"]: "no", asked["approve 3?"]: "ok"}
    final = driver.invoke(app, Command(resume=rest), config)
    assert list(final["results"]) == [(1, "no"), (2, "yes"), (3, "ok")]
    assert runs.count(2) == 2  # asked, then answered; not run after its write was kept


def test_update_state_while_send_tasks_wait_keeps_their_answers_reachable(driver):
    def work(item):
        return {"results": [(item["n"], interrupt(item["n"]))]}

    app = map_reduce(work, saver=MemorySaver())
    config = RunnableConfig(thread_id="t")
    paused = driver.invoke(app, {"items": [1, 2]}, config)
    app.update_state(config, {"note": "edited"})
    moved = app.get_state(config)
    assert moved.next == ("work", "work")
    answers = {i.id: i.value * 10 for i in moved.interrupts}
    assert len(answers) == 2 and answers.keys() != {i.id for i in paused.interrupts}
    final = driver.invoke(app, Command(resume=answers), config)
    assert list(final["results"]) == [(1, 10), (2, 20)]
    assert final["note"] == "edited"


def test_a_new_run_on_a_thread_drops_the_sends_it_stopped_before(driver):
    def work(item):
        return {"results": [(item["n"], interrupt("wait"))]}

    app = map_reduce(work, saver=MemorySaver())
    config = RunnableConfig(thread_id="t")
    driver.invoke(app, {"items": [1, 2]}, config)
    final = driver.invoke(app, {"items": []}, config)
    assert final.interrupts == ()
    assert app.get_state(config).next == ()


def test_the_diagram_draws_a_routers_send_edges_dashed_and_labelled():
    text = map_reduce().get_graph("mermaid")
    assert 'plan -. "Send" .-> work' in text
    dot = map_reduce().get_graph("dot")
    assert '"plan" -> "work" [label="Send", style=dashed];' in dot
    assert "plan -.Send.-> work" in map_reduce().get_graph("ascii")
    assert "s0 -[dashed]-> s1 : Send" in map_reduce().get_graph("plantuml")


def test_destinations_given_as_labels_label_the_goto_edges():
    g = StateGraph("labels")
    g.add_node("plan", lambda s: Command(goto=Send("w", {})), destinations={"w": "Send"})
    g.add_node("w", lambda s: None)
    g.add_edge(START, "plan").add_edge("w", END)
    assert '"plan" -> "w" [label="Send", style=dashed];' in g.compile().get_graph("dot")


def test_chunks_emitted_in_send_tasks_tell_their_send_index(driver):
    from graph_agent import StreamingOutput, emit_chunk

    def work(item):
        emit_chunk(f"item {item['n']}")
        return {"results": [item["n"]]}

    outputs = driver.stream(map_reduce(work), {"items": [1, 2]})
    chunks = {o.chunk: o.send_index for o in outputs if isinstance(o, StreamingOutput)}
    assert chunks == {"item 1": 0, "item 2": 1}


def test_a_breakpoint_before_a_send_target_pauses_each_send_task_once(driver):
    runs = []
    g = StateGraph("before", key_strategies={"results": AppendStrategy()})
    g.add_node("plan", lambda s: None)
    g.add_node("work", lambda item: runs.append(item["n"]) or {"results": [item["n"]]})
    g.add_edge(START, "plan").add_edge("work", END)
    g.add_conditional_edges("plan", lambda s: [Send("work", {"n": n}) for n in (1, 2)])
    saver = MemorySaver()
    app = g.compile(CompileConfig(saver=saver, interrupt_before=["work"]))
    config = RunnableConfig(thread_id="t")
    paused = driver.invoke(app, {}, config)
    assert [i.value for i in paused.interrupts] == ["interrupt_before"] * 2
    assert len({i.id for i in paused.interrupts}) == 2 and runs == []
    assert list(driver.invoke(app, None, config)["results"]) == [1, 2]


def test_a_breakpoint_after_a_send_target_pauses_once(driver):
    g = StateGraph("after", key_strategies={"results": AppendStrategy()})
    g.add_node("plan", lambda s: None)
    g.add_node("work", lambda item: {"results": [item["n"]]})
    g.add_edge(START, "plan").add_edge("work", END)
    g.add_conditional_edges("plan", lambda s: [Send("work", {"n": n}) for n in (1, 2, 3)])
    app = g.compile(CompileConfig(saver=MemorySaver(), interrupt_after=["work"]))
    config = RunnableConfig(thread_id="t")
    paused = driver.invoke(app, {}, config)
    assert [i.value for i in paused.interrupts] == ["interrupt_after"]
    assert list(paused["results"]) == [1, 2, 3]
    assert driver.invoke(app, None, config).interrupts == ()


def test_time_travel_to_before_a_send_step_runs_its_sends_again(driver):
    calls = []

    def work(item):
        calls.append(item["n"])
        return {"results": [item["n"]]}

    app = map_reduce(work, saver=MemorySaver())
    config = RunnableConfig(thread_id="t")
    driver.invoke(app, {"items": [1, 2]}, config)
    before = next(s for s in app.get_state_history(config) if s.next == ("work", "work"))
    final = driver.invoke(app, None, before.config)
    assert list(final["results"]) == [1, 2]
    assert sorted(calls) == [1, 1, 2, 2]


def test_subgraphs_run_by_sends_pause_and_resume_each_in_a_namespace_of_its_own(driver):
    child = StateGraph("child")
    child.add_node("ask", lambda s: {"doubled": [s["n"] * interrupt(f"factor for {s['n']}?")]})
    child.add_edge(START, "ask").add_edge("ask", END)
    g = StateGraph("parent", key_strategies={"doubled": AppendStrategy()})
    g.add_node("plan", lambda s: None)
    g.add_node("child", child.compile())
    g.add_edge(START, "plan").add_edge("child", END)
    g.add_conditional_edges("plan", lambda s: [Send("child", {"n": n}) for n in (1, 2)])
    app = g.compile(CompileConfig(saver=MemorySaver()))
    config = RunnableConfig(thread_id="t")
    paused = driver.invoke(app, {}, config)
    asked = {i.value: i.id for i in paused.interrupts}
    assert set(asked) == {"factor for 1?", "factor for 2?"}
    tasks = app.get_state(config, subgraphs=True).tasks
    assert [t.name for t in tasks] == ["child", "child"]
    namespaces = {t.state.config.checkpoint_ns for t in tasks}
    assert len(namespaces) == 2
    answers = {asked["factor for 1?"]: 10, asked["factor for 2?"]: 100}
    final = driver.invoke(app, Command(resume=answers), config)
    assert list(final["doubled"]) == [10, 200]
