"""OpenTelemetry spans and metrics of runs, read back through the SDK's in-memory exporter and
reader: parents across threads, async tasks, subgraphs, agents used as tools and a resume;
names, GenAI attributes and statuses."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.metrics import NoOpCounter, NoOpHistogram, NoOpMeter, NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracer, NoOpTracerProvider, StatusCode

from graph_agent import (
    END,
    START,
    AppendStrategy,
    AssistantMessage,
    Command,
    CompileConfig,
    HumanInTheLoopHook,
    MemorySaver,
    ReactAgent,
    RetryPolicy,
    RunnableConfig,
    StateGraph,
    ToolCall,
    Usage,
    UserMessage,
    tool,
)
from graph_agent.models import AnthropicChatModel, OpenAIChatModel
from graph_agent.models.scripted import ScriptedChatModel
from graph_agent.observability import instrument, uninstrument
from tests.models.anthropic_fake_server import FakeAnthropicServer, message, text
from tests.models.openai_fake_server import API_KEY, FakeOpenAIServer, completion, reply_json
from tests.observability.graphs import failing


class Telemetry:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer_provider = provider
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def spans(self) -> list[ReadableSpan]:
        return sorted(self.exporter.get_finished_spans(), key=lambda span: span.start_time or 0)

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans() if span.name == name]

    def parent_of(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        found = [s for s in self.spans() if s.context.span_id == span.parent.span_id]
        return found[0] if found else None

    def metric_points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        points: list[Any] = []
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        points.extend(metric.data.data_points)
        return points


@pytest.fixture
def telemetry(request: pytest.FixtureRequest) -> Iterator[Telemetry]:
    found = Telemetry()
    capture = getattr(request, "param", False)
    instrument(found.tracer_provider, found.meter_provider, capture_content=capture)
    try:
        yield found
    finally:
        uninstrument()


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def send_email(to: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def _call(call_id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def team() -> tuple[ReactAgent, StateGraph]:
    """A ReactAgent calling ``add`` and a helper agent in parallel, then ``send_email``
    (approved by a human), run as a subgraph of a workflow."""
    helper = ReactAgent(
        "helper",
        ScriptedChatModel(
            [AssistantMessage(content="", tool_calls=[_call("h1", "add", a=2, b=2)]), "4"]
        ),
        tools=[add],
    )
    model = ScriptedChatModel(
        [
            AssistantMessage(
                content="",
                tool_calls=[_call("c1", "add", a=1, b=2), _call("c2", "helper", request="2+2")],
                usage=Usage(prompt_tokens=11, completion_tokens=5, total_tokens=16),
                finish_reason="tool_calls",
            ),
            AssistantMessage(content="", tool_calls=[_call("c3", "send_email", to="ann")]),
            AssistantMessage(
                content="all done",
                usage=Usage(prompt_tokens=20, completion_tokens=2, total_tokens=22),
                finish_reason="stop",
            ),
        ]
    )
    boss = ReactAgent(
        "boss",
        model,
        tools=[add, helper.as_tool(), send_email],
        hooks=[HumanInTheLoopHook(approve={"send_email": "sends mail"})],
    )
    workflow = StateGraph("workflow", key_strategies={"messages": AppendStrategy()})
    workflow.add_node("prepare", lambda state: {"messages": [UserMessage("go")]})
    workflow.add_node("assistant", boss)
    workflow.add_edge(START, "prepare").add_edge("prepare", "assistant")
    workflow.add_edge("assistant", END)
    return boss, workflow


def _run_team(use_async: bool) -> Any:
    _, workflow = team()
    app = workflow.compile(CompileConfig(saver=MemorySaver()))
    config = RunnableConfig(thread_id="t-team")
    resume = Command(resume={"c3": {"decision": "approve"}})

    async def both() -> Any:
        paused = await app.ainvoke({}, config)
        assert paused.interrupts
        return await app.ainvoke(resume, config)

    if use_async:
        return asyncio.run(both())
    assert app.invoke({}, config).interrupts
    return app.invoke(resume, config)


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_the_span_tree_of_an_agent_run_with_tools_a_subagent_and_a_resume(
    telemetry: Telemetry, use_async: bool
) -> None:
    final = _run_team(use_async)
    assert final["messages"][-1].text == "all done"
    t = telemetry
    workflows = t.named("invoke_agent workflow")
    assert len(workflows) == 2  # the paused run and the resumed one
    paused_run, resumed_run = workflows
    assert {s.context.trace_id for s in t.spans() if s.start_time <= paused_run.end_time} == {
        paused_run.context.trace_id
    }
    # the resumed run links to the run it resumed
    assert [link.context.span_id for link in resumed_run.links] == [paused_run.context.span_id]
    assert paused_run.attributes["graph_agent.status"] == "interrupted"
    assert resumed_run.attributes["graph_agent.status"] == "finished"
    assert resumed_run.attributes["graph_agent.resumed"] is True
    assert paused_run.attributes["gen_ai.conversation.id"] == "t-team"

    # the agent runs inside the workflow's node, as a subgraph, in each run
    boss_runs = t.named("invoke_agent boss")
    assert len(boss_runs) == 2
    for boss_run, workflow_run in zip(boss_runs, workflows, strict=True):
        node = t.parent_of(boss_run)
        assert node is not None and node.name == "node assistant"
        assert t.parent_of(node) is workflow_run
        assert boss_run.attributes["graph_agent.checkpoint_ns"].startswith("assistant:")

    # the model's first call, with the GenAI attributes
    chats = [
        s
        for s in t.named("chat ScriptedChatModel")
        if t.parent_of(t.parent_of(s)).name == "invoke_agent boss"
    ]  # type: ignore[union-attr]
    first = chats[0]
    assert t.parent_of(first).name == "node __model__"  # type: ignore[union-attr]
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.request.model"] == "ScriptedChatModel"
    assert first.attributes["gen_ai.usage.input_tokens"] == 11
    assert first.attributes["gen_ai.usage.output_tokens"] == 5
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert "gen_ai.input.messages" not in first.attributes  # no content unless asked

    # the parallel tool calls: both under the one tool node, the sub-agent under its call
    tool_spans = {
        s.attributes["gen_ai.tool.call.id"]: s
        for s in t.spans()
        if s.name.startswith("execute_tool")
    }
    assert set(tool_spans) == {"c1", "c2", "c3", "h1"}
    c1_node, c2_node = t.parent_of(tool_spans["c1"]), t.parent_of(tool_spans["c2"])
    assert c1_node is c2_node and c1_node is not None and c1_node.name == "node __tool__"
    assert tool_spans["c1"].attributes["gen_ai.tool.name"] == "add"
    assert tool_spans["c1"].attributes["gen_ai.operation.name"] == "execute_tool"
    helper_run = t.named("invoke_agent helper")[0]
    assert t.parent_of(helper_run) is tool_spans["c2"]
    h1_node = t.parent_of(tool_spans["h1"])
    assert h1_node is not None and t.parent_of(h1_node) is helper_run

    # the human's pause: the hook's node span is marked interrupted; the approved call ran
    # in the resumed run
    interrupted = [s for s in t.spans() if s.attributes.get("graph_agent.interrupted")]
    # (the hook's node in the agent, and the workflow's node the agent runs in)
    assert sorted(s.name for s in interrupted) == [
        "node HumanInTheLoopHook.human_in_the_loop.afterModel",
        "node assistant",
    ]
    for span in interrupted:
        assert span.status.status_code is StatusCode.UNSET
        assert span.attributes["graph_agent.status"] == "interrupted"
    c3_run = t.parent_of(t.parent_of(tool_spans["c3"]))  # type: ignore[arg-type]
    assert c3_run is boss_runs[1]
    assert all(
        s.attributes.get("graph_agent.step") is not None
        for s in t.spans()
        if s.name.startswith("node ")
    )


def test_a_failing_node_span_carries_the_exception(telemetry: Telemetry) -> None:
    with pytest.raises(Exception, match="the disk is full"):
        failing("failing", "the disk is full").invoke({})
    node = telemetry.named("node broken")[0]
    assert node.status.status_code is StatusCode.ERROR
    assert node.attributes["graph_agent.status"] == "error"
    assert node.attributes["error.type"] == "ValueError"
    (event,) = [e for e in node.events if e.name == "exception"]
    assert event.attributes["exception.type"] == "ValueError"
    assert event.attributes["exception.message"] == "the disk is full"
    run = telemetry.named("invoke_agent failing")[0]
    assert run.status.status_code is StatusCode.ERROR
    assert telemetry.parent_of(node) is run


def test_node_spans_of_parallel_branches_parent_to_their_run(telemetry: Telemetry) -> None:
    g = StateGraph("fan")

    async def slow(state: Any) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        return {"b": 1}

    g.add_node("a", lambda state: {"a": 1})
    g.add_node("b", slow)
    g.add_edge(START, "a").add_edge(START, "b").add_edge("a", END).add_edge("b", END)
    g.compile().invoke({})
    run = telemetry.named("invoke_agent fan")[0]
    for name in ("node a", "node b"):
        (span,) = telemetry.named(name)
        assert telemetry.parent_of(span) is run


@pytest.mark.parametrize("telemetry", [True], indirect=True)
def test_content_is_recorded_only_when_asked(telemetry: Telemetry) -> None:
    model = ScriptedChatModel(
        [AssistantMessage(content="", tool_calls=[_call("c1", "add", a=1, b=2)]), "3"]
    )
    ReactAgent("calc", model, tools=[add]).call("what is 1+2?")
    chat = telemetry.named("chat ScriptedChatModel")[0]
    sent = json.loads(chat.attributes["gen_ai.input.messages"])
    assert sent[-1] == {"role": "user", "parts": [{"type": "text", "content": "what is 1+2?"}]}
    answered = json.loads(chat.attributes["gen_ai.output.messages"])
    assert answered[0]["parts"][0]["name"] == "add"
    tool_span = telemetry.named("execute_tool add")[0]
    assert json.loads(tool_span.attributes["gen_ai.tool.call.arguments"]) == {"a": 1, "b": 2}
    assert tool_span.attributes["gen_ai.tool.call.result"] == "3"


def test_metrics_count_tokens_by_model_and_time_runs_and_nodes(telemetry: Telemetry) -> None:
    model = ScriptedChatModel(
        [AssistantMessage(content="hi", usage=Usage(prompt_tokens=7, completion_tokens=3))]
    )
    ReactAgent("greeter", model).call("hello")
    tokens = {
        point.attributes["gen_ai.token.type"]: point.value
        for point in telemetry.metric_points("graph_agent.model.tokens")
    }
    assert tokens == {"input": 7, "output": 3}
    (run,) = telemetry.metric_points("graph_agent.run.duration")
    assert run.count == 1 and run.attributes["graph_agent.status"] == "finished"
    nodes = telemetry.metric_points("graph_agent.node.duration")
    assert {p.attributes["graph_agent.node"] for p in nodes} >= {"__model__"}
    (chat,) = telemetry.metric_points("gen_ai.client.operation.duration")
    assert chat.attributes["gen_ai.request.model"] == "ScriptedChatModel"


def test_a_run_continues_the_traceparent_of_its_metadata(telemetry: Telemetry) -> None:
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    g = StateGraph("one")
    g.add_node("only", lambda state: {"x": 1})
    g.add_edge(START, "only").add_edge("only", END)
    metadata = {"traceparent": f"00-{trace_id}-{span_id}-01"}
    g.compile().invoke({}, RunnableConfig(metadata=metadata))
    run = telemetry.named("invoke_agent one")[0]
    assert format(run.context.trace_id, "032x") == trace_id
    assert run.parent is not None and format(run.parent.span_id, "016x") == span_id


@pytest.mark.parametrize("use_async", [False, True], ids=["stream", "astream"])
def test_a_streamed_agent_run_keeps_its_parents(telemetry: Telemetry, use_async: bool) -> None:
    model = ScriptedChatModel(
        [AssistantMessage(content="", tool_calls=[_call("c1", "add", a=1, b=2)]), "three"]
    )
    agent = ReactAgent("streamer", model, tools=[add])

    async def astream() -> list[Any]:
        return [output async for output in agent.astream("add")]

    outputs = asyncio.run(astream()) if use_async else list(agent.stream("add"))
    assert outputs
    t = telemetry
    (run,) = t.named("invoke_agent streamer")
    chats = t.named("chat ScriptedChatModel")
    assert len(chats) == 2
    for chat in chats:
        node = t.parent_of(chat)
        assert node is not None and node.name == "node __model__" and t.parent_of(node) is run
    (tool_span,) = t.named("execute_tool add")
    assert t.parent_of(t.parent_of(tool_span)) is run  # type: ignore[arg-type]


def test_a_retried_node_span_counts_its_attempts(telemetry: Telemetry) -> None:
    tries: list[int] = []

    def flaky(state: Any) -> dict[str, Any]:
        tries.append(1)
        if len(tries) < 3:
            raise ConnectionError("try again")
        return {"x": len(tries)}

    g = StateGraph("flaky")
    g.add_node("flaky", flaky, retry=RetryPolicy(max_attempts=3, initial_interval=0.0))
    g.add_edge(START, "flaky").add_edge("flaky", END)
    assert g.compile().invoke({})["x"] == 3
    (span,) = telemetry.named("node flaky")
    assert span.attributes["graph_agent.attempt"] == 3
    assert span.attributes["graph_agent.status"] == "ok"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_chat_span_names_the_provider_of_the_model(telemetry: Telemetry, provider: str) -> None:
    model: OpenAIChatModel | AnthropicChatModel
    if provider == "openai":
        server: FakeOpenAIServer = FakeOpenAIServer()
        server.enqueue(reply_json(completion("hi")))
        model = OpenAIChatModel(
            "gpt-test", base_url=server.base_url, api_key=API_KEY, max_retries=0
        )
    else:
        server = FakeAnthropicServer()
        server.enqueue(reply_json(message(text("hi"))))
        model = AnthropicChatModel(
            "claude-test", base_url=server.base_url, api_key=API_KEY, max_retries=0
        )
    with server, model:
        assert ReactAgent("greeter", model).call("hello").text == "hi"
    (chat,) = [span for span in telemetry.spans() if span.name.startswith("chat ")]
    assert chat.attributes["gen_ai.provider.name"] == provider
    (duration,) = telemetry.metric_points("gen_ai.client.operation.duration")
    assert duration.attributes["gen_ai.provider.name"] == provider


def test_a_local_model_names_no_provider(telemetry: Telemetry) -> None:
    ReactAgent("greeter", ScriptedChatModel(["hi"])).call("hello")
    (chat,) = telemetry.named("chat ScriptedChatModel")
    assert "gen_ai.provider.name" not in chat.attributes


class CountingNoOpTracer(NoOpTracer):
    """OpenTelemetry's no-op tracer, counting the spans asked of it."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Any]] = []

    def start_span(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self.asked.append((name, kwargs.get("attributes")))
        return super().start_span(name, *args, **kwargs)


class CountingNoOpTracerProvider(NoOpTracerProvider):
    def __init__(self) -> None:
        self.tracer = CountingNoOpTracer()

    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        return self.tracer


class CountingNoOpMeterProvider(NoOpMeterProvider):
    """OpenTelemetry's no-op meter provider, counting what its instruments are given."""

    def __init__(self) -> None:
        self.given: list[Any] = []

    def get_meter(self, *args: Any, **kwargs: Any) -> Any:
        given = self.given

        class Histogram(NoOpHistogram):
            def record(self, amount: Any, attributes: Any = None, context: Any = None) -> None:
                given.append(attributes)

        class Counter(NoOpCounter):
            def add(self, amount: Any, attributes: Any = None, context: Any = None) -> None:
                given.append(attributes)

        class Meter(NoOpMeter):
            def create_histogram(self, name: str, *args: Any, **kwargs: Any) -> Any:
                return Histogram(name)

            def create_counter(self, name: str, *args: Any, **kwargs: Any) -> Any:
                return Counter(name)

        return Meter("counting")


@pytest.fixture
def no_op() -> Iterator[tuple[CountingNoOpTracer, list[Any]]]:
    tracers, meters = CountingNoOpTracerProvider(), CountingNoOpMeterProvider()
    instrument(tracers, meters)
    try:
        yield tracers.tracer, meters.given
    finally:
        uninstrument()


def test_on_the_no_op_tracer_and_meter_a_run_builds_no_span_attributes_or_metrics(
    no_op: tuple[CountingNoOpTracer, list[Any]],
) -> None:
    tracer, measured = no_op
    model = ScriptedChatModel(
        [AssistantMessage(content="", tool_calls=[_call("c1", "add", a=1, b=2)]), "3"]
    )
    assert ReactAgent("calc", model, tools=[add]).call("1+2?").text == "3"
    # the run's span alone (it carries on a caller's trace context, if any); no attributes
    assert tracer.asked == [("invoke_agent calc", None)]
    assert measured == []


def test_on_the_no_op_tracer_a_node_still_runs_in_the_callers_trace(
    no_op: tuple[CountingNoOpTracer, list[Any]],
) -> None:
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    seen: list[str] = []

    def look(state: Any) -> dict[str, Any]:
        seen.append(format(otel_trace.get_current_span().get_span_context().trace_id, "032x"))
        return {"x": 1}

    g = StateGraph("one")
    g.add_node("look", look)
    g.add_edge(START, "look").add_edge("look", END)
    metadata = {"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"}
    g.compile().invoke({}, RunnableConfig(metadata=metadata))
    g.compile().invoke({})
    assert seen == [trace_id, "0" * 32]


_SET_UP_LATER = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from graph_agent import END, START, StateGraph
from graph_agent.observability import instrument

instrument()  # before any SDK: the global tracer is OpenTelemetry's no-op proxy
g = StateGraph("one")
g.add_node("only", lambda state: {"x": 1})
g.add_edge(START, "only").add_edge("only", END)
app = g.compile()
app.invoke({})
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
app.invoke({})
print(sorted(span.name for span in exporter.get_finished_spans()))
"""


def test_runs_after_an_sdk_is_set_up_are_traced_by_a_listener_made_before() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SET_UP_LATER], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['invoke_agent one', 'node only']"
