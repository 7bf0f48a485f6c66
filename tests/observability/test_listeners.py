"""Lifecycle listeners: what the engine and an agent tell them, through both drivers, and
that a listener's error never changes a run."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    AssistantMessage,
    Command,
    CompileConfig,
    Listener,
    MemorySaver,
    ReactAgent,
    RunnableConfig,
    Send,
    StateGraph,
    ToolCall,
    interrupt,
    tool,
)
from graph_agent.cli.unstreamed import UnstreamedModel
from graph_agent.graph import listeners as listeners_module
from graph_agent.graph._flow import _Flow
from graph_agent.graph._observed import flow_call, observed_spec
from graph_agent.models.recording import RecordingChatModel
from graph_agent.models.scripted import ScriptedChatModel
from graph_agent.observability import add_listener, remove_listener
from tests.observability.graphs import failing


class Recorder(Listener):
    """Every event it gets, as ``(hook, event)``."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def hooks(self, *, graph: str | None = None) -> list[tuple[str, str | None]]:
        return [(hook, event.node) for hook, event in self.events if graph in (None, event.graph)]


def _recording(hook: str) -> Callable[[Recorder, Any], None]:
    def record(self: Recorder, event: Any) -> None:
        self.events.append((hook, event))

    return record


for _hook in listeners_module.HOOKS:
    setattr(Recorder, _hook, _recording(_hook))


def run(app: Any, input: Any, config: RunnableConfig | None, use_async: bool) -> Any:
    if use_async:
        return asyncio.run(app.ainvoke(input, config))
    return app.invoke(input, config)


def chain(listeners: list[Any], saver: Any = None) -> Any:
    g = StateGraph("chain")
    g.add_node("first", lambda state: {"x": state["x"] + 1})

    async def second(state: Any) -> dict[str, Any]:
        return {"x": state["x"] * 10}

    g.add_node("second", second)
    g.add_edge(START, "first").add_edge("first", "second").add_edge("second", END)
    return g.compile(CompileConfig(saver=saver, listeners=listeners))


def consume(app: Any, input: Any, how: str) -> Any:
    """The final state of a run made with ``how``: invoke, ainvoke, stream or astream."""
    if how == "invoke":
        return app.invoke(input)
    if how == "ainvoke":
        return asyncio.run(app.ainvoke(input))
    if how == "stream":
        return [output.state for output in app.stream(input)][-1]

    async def astream() -> Any:
        return [output.state async for output in app.astream(input)][-1]

    return asyncio.run(astream())


@pytest.mark.parametrize("how", ["invoke", "ainvoke", "stream", "astream"])
def test_a_run_reports_its_start_each_node_and_its_end(how: str) -> None:
    recorder = Recorder()
    final = consume(chain([recorder]), {"x": 1}, how)
    assert final["x"] == 20
    assert recorder.hooks() == [
        ("on_run_start", None),
        ("before_node", "first"),
        ("after_node", "first"),
        ("before_node", "second"),
        ("after_node", "second"),
        ("on_run_end", None),
    ]
    start, end = recorder.events[0][1], recorder.events[-1][1]
    assert start is end and end.status == "finished" and end.duration > 0
    nodes = [event for hook, event in recorder.events if hook == "after_node"]
    assert [(e.step, e.run_id, e.graph) for e in nodes] == [
        (0, start.run_id, "chain"),
        (1, start.run_id, "chain"),
    ]
    assert nodes[1].result == {"x": 20}
    assert nodes[0].task_id != nodes[1].task_id


def test_a_saved_run_carries_its_thread_and_the_serve_run_id() -> None:
    recorder = Recorder()
    app = chain([recorder], MemorySaver())
    config = RunnableConfig(thread_id="t-1", metadata={"run_id": "r-42"})
    app.invoke({"x": 1}, config)
    assert {(e.thread_id, e.run_id, e.ns) for _, e in recorder.events} == {("t-1", "r-42", "")}


def test_parallel_branches_and_sends_each_report_their_node() -> None:
    recorder = Recorder()
    g = StateGraph("fan", key_strategies={"seen": AppendStrategy()})
    g.add_node("a", lambda state: {"a": 1})
    g.add_node("b", lambda state: {"b": 1})
    g.add_node("each", lambda state: {"seen": [state["item"]]})
    g.add_edge(START, "a").add_edge(START, "b")
    g.add_conditional_edges("a", lambda state: [Send("each", {"item": i}) for i in range(3)])
    g.add_edge("b", END).add_edge("each", END)
    app = g.compile(CompileConfig(listeners=[recorder]))
    assert sorted(app.invoke({})["seen"]) == [0, 1, 2]
    ended = [e.node for hook, e in recorder.events if hook == "after_node"]
    assert sorted(ended) == ["a", "b", "each", "each", "each"]
    assert len({e.task_id for hook, e in recorder.events if hook == "after_node"}) == 5


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_subgraph_reports_to_its_callers_listeners_with_its_namespace(use_async: bool) -> None:
    recorder = Recorder()
    inner = StateGraph("inner")
    inner.add_node("work", lambda state: {"x": state["x"] + 1})
    inner.add_edge(START, "work").add_edge("work", END)
    outer = StateGraph("outer")
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "sub").add_edge("sub", END)
    app = outer.compile(CompileConfig(saver=MemorySaver(), listeners=[recorder]))
    run(app, {"x": 1}, RunnableConfig(thread_id="t"), use_async)
    starts = [e for hook, e in recorder.events if hook == "on_run_start"]
    assert [e.graph for e in starts] == ["outer", "inner"]
    outer_run, inner_run = starts
    assert inner_run.parent_run_id == outer_run.run_id
    sub_node = next(e for h, e in recorder.events if h == "before_node" and e.node == "sub")
    assert inner_run.parent_task_id == sub_node.task_id
    assert inner_run.ns.startswith("sub:") and outer_run.ns == ""
    work = next(e for h, e in recorder.events if h == "after_node" and e.node == "work")
    assert work.ns == inner_run.ns
    assert recorder.hooks(graph="inner") == [
        ("on_run_start", None),
        ("before_node", "work"),
        ("after_node", "work"),
        ("on_run_end", None),
    ]


def test_a_failing_node_reports_its_error_and_the_run_ends_in_error() -> None:
    recorder = Recorder()
    with pytest.raises(Exception, match="no luck"):
        failing("failing", "no luck", [recorder]).invoke({})
    hooks = [hook for hook, _ in recorder.events]
    assert hooks == ["on_run_start", "before_node", "on_node_error", "on_run_end"]
    assert isinstance(recorder.events[2][1].error, ValueError)
    assert recorder.events[3][1].status == "error"


def test_an_interrupt_is_reported_and_the_resumed_run_sees_what_the_paused_one_kept() -> None:
    class Keeping(Recorder):
        def on_run_start(self, event: Any) -> None:
            event.carrier["mark"] = f"kept by {event.run_id}"
            self.events.append(("on_run_start", event))

    recorder = Keeping()
    g = StateGraph("ask")
    g.add_node("ask", lambda state: {"answer": interrupt("ok?")})
    g.add_edge(START, "ask").add_edge("ask", END)
    app = g.compile(CompileConfig(saver=MemorySaver(), listeners=[recorder]))
    config = RunnableConfig(thread_id="t")
    first = RunnableConfig(thread_id="t", metadata={"run_id": "first"})
    assert app.invoke({}, first).interrupts
    interrupted = [e for h, e in recorder.events if h == "on_interrupt"]
    assert [e.node for e in interrupted] == ["ask"] and interrupted[0].interrupts
    paused = next(e for h, e in recorder.events if h == "on_run_end")
    assert paused.status == "interrupted" and paused.interrupts
    recorder.events.clear()
    assert app.invoke(Command(resume="yes"), config)["answer"] == "yes"
    resumed = recorder.events[0][1]
    assert resumed.resumed and resumed.resumed_from == {"mark": "kept by first"}


def test_a_listener_that_raises_is_logged_once_and_changes_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(Listener):
        def before_node(self, event: Any) -> None:
            raise RuntimeError("listener bug")

        def on_run_end(self, event: Any) -> None:
            raise RuntimeError("listener bug")

    quiet = chain([])
    watched = chain([Broken()])
    with caplog.at_level(logging.DEBUG, logger="graph_agent"):
        results = [watched.invoke({"x": n}) for n in range(3)]
    assert [r.data() for r in results] == [quiet.invoke({"x": n}).data() for n in range(3)]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "Broken" in errors[0].getMessage()
    assert errors[0].exc_info is not None
    assert len([r for r in caplog.records if r.levelno == logging.DEBUG]) == 8


def test_an_agent_reports_its_model_and_tool_calls_in_parallel() -> None:
    recorder = Recorder()

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    calls = [ToolCall(id=f"c{i}", name="add", arguments={"a": i, "b": 1}) for i in range(2)]
    model = ScriptedChatModel([AssistantMessage(content="", tool_calls=calls), "done"])
    agent = ReactAgent("calc", model, tools=[add], listeners=[recorder])
    assert agent.call("add up").text == "done"
    model_calls = [e for h, e in recorder.events if h == "on_model_call"]
    assert len(model_calls) == 2 and all(e.node == "__model__" for e in model_calls)
    assert model_calls[0].reply.tool_calls and model_calls[0].latency is not None
    assert model_calls[0].request.messages[-1].text == "add up"
    tool_calls = sorted(
        ((e.call.id, e.result.content) for h, e in recorder.events if h == "on_tool_call"),
    )
    assert tool_calls == [("c0", "1"), ("c1", "2")]
    befores = [h for h, _ in recorder.events if h in ("before_model_call", "before_tool_call")]
    assert befores.count("before_tool_call") == 2


class NamedScriptedModel(ScriptedChatModel):
    """A scripted model that names itself as a provider's model does."""

    model = "gpt-test"
    provider = "openai"


def test_a_model_call_names_the_model_inside_its_wrappers_not_a_wrapper(tmp_path: Any) -> None:
    recorder = Recorder()
    inner = NamedScriptedModel(["hi"])
    wrapped = UnstreamedModel(RecordingChatModel(inner, tmp_path / "answers.json"))
    agent = ReactAgent("greeter", wrapped, listeners=[recorder])

    assert agent.call("hello").text == "hi"

    (call,) = [e for h, e in recorder.events if h == "on_model_call"]
    assert (call.model, call.provider) == ("gpt-test", "openai")


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_an_agent_used_as_a_tool_reports_to_the_callers_listeners(use_async: bool) -> None:
    recorder = Recorder()
    helper = ReactAgent("helper", ScriptedChatModel(["four"]))
    call = ToolCall(id="h1", name="helper", arguments={"request": "2+2"})
    model = ScriptedChatModel([AssistantMessage(content="", tool_calls=[call]), "it is four"])
    agent = ReactAgent("boss", model, tools=[helper.as_tool()], listeners=[recorder])
    run(agent, "ask", RunnableConfig(thread_id="t"), use_async)
    starts = {e.graph: e for h, e in recorder.events if h == "on_run_start"}
    assert set(starts) == {"boss", "helper"}
    assert starts["helper"].parent_run_id == starts["boss"].run_id
    helper_model = [e for h, e in recorder.events if h == "on_model_call" and e.graph == "helper"]
    assert [e.reply.text for e in helper_model] == ["four"]


def test_a_global_listener_sees_every_graph_until_removed() -> None:
    recorder = Recorder()
    app = chain([])
    add_listener(recorder)
    try:
        app.invoke({"x": 1})
    finally:
        remove_listener(recorder)
    seen = len(recorder.events)
    app.invoke({"x": 1})
    assert seen == 6 and len(recorder.events) == 6


def test_without_listeners_a_call_runs_the_graphs_own_flow() -> None:
    app = chain([])
    flow = _Flow(app._run, RunnableConfig(), False)
    assert inspect.getgeneratorstate(flow_call(flow, {"x": 1})) == inspect.GEN_CREATED
    assert flow.watch is None and flow.spec is app._run.spec


def test_listeners_wrap_a_graphs_nodes_once_and_only_when_they_watch_nodes() -> None:
    app = chain([Recorder()])
    dispatch = listeners_module.dispatch_for(app._run.listeners, None)
    assert dispatch is not None and dispatch.watches_nodes
    spec = app._run.spec
    assert observed_spec(spec, dispatch) is observed_spec(spec, dispatch)
    assert observed_spec(spec, dispatch).nodes["first"].fn is not spec.nodes["first"].fn

    class RunsOnly(Listener):
        def on_run_end(self, event: Any) -> None:
            pass

    only_runs = listeners_module.dispatch_for((RunsOnly(),), None)
    assert only_runs is not None and not only_runs.watches_nodes


def test_listeners_made_per_call_are_not_kept_alive_forever() -> None:
    app = chain([])
    for _ in range(listeners_module._MAX_DISPATCHES + 10):
        with_own = listeners_module.dispatch_for((Listener(),), None)
        assert with_own is not None
    assert len(listeners_module._dispatches) <= listeners_module._MAX_DISPATCHES
    assert app.invoke({"x": 1})["x"] == 20
