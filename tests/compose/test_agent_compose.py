"""Agents inside other graphs: as a node (``as_node`` options), as a tool (``as_tool``), and
handing off from a tool with ``Command.PARENT``."""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    AssistantMessage,
    Command,
    CompileConfig,
    GraphCancelledError,
    HumanInTheLoopHook,
    InvalidUpdateError,
    MemorySaver,
    RunnableConfig,
    StateGraph,
    StreamingOutput,
    SystemMessage,
    ThreadBusyError,
    ToolContext,
    ToolResponseMessage,
    UserMessage,
    tool,
)
from graph_agent.agent import ToolRetryInterceptor
from graph_agent.agent.compose import agent_tool, agent_tool_namespace
from graph_agent.graph.task import task_id_for
from tests.compose.agents import calls, echo, scripted, texts

CFG = RunnableConfig(thread_id="t1")
looked_up: list[str] = []


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    looked_up.append(topic)
    return f"notes on {topic}"


@pytest.fixture(autouse=True)
def clear_lookups() -> None:
    looked_up.clear()


def host(node: Any, saver: Any = None) -> Any:
    """A graph whose only node is ``node``, with ``messages`` appended."""
    graph = StateGraph("host", key_strategies={"messages": AppendStrategy()})
    graph.add_node("helper", node).add_edge(START, "helper").add_edge("helper", END)
    return graph.compile(CompileConfig(saver=saver))


HISTORY = [UserMessage("old question"), AssistantMessage("old answer"), UserMessage("latest")]


def researcher(**options: Any) -> Any:
    return scripted(
        "researcher",
        calls(("c1", "lookup", {"topic": "graphs"})),
        "Graphs are nodes and edges.",
        tools=[lookup],
        **options,
    )


# as a node


def test_an_agent_as_a_node_sees_the_conversation_and_adds_only_its_final_answer(caller):
    agent = researcher(instruction="Be brief.")

    final = caller.invoke(host(agent), {"messages": HISTORY})

    assert texts(final) == ["old question", "old answer", "latest", "Graphs are nodes and edges."]
    assert final.data().keys() == {"messages", "output"}  # output: the agent's output_key
    assert final["output"] == "Graphs are nodes and edges."
    first_request = agent.model.requests[0].messages
    assert [m.text for m in first_request] == ["Be brief.", "old question", "old answer", "latest"]
    assert looked_up == ["graphs"]


def test_include_contents_false_shows_the_agent_only_the_latest_message():
    agent = researcher()

    host(agent.as_node(include_contents=False)).invoke({"messages": HISTORY})

    assert [m.text for m in agent.model.requests[0].messages] == ["latest"]


def test_without_contents_a_latest_assistant_message_reaches_the_agent_as_a_request():
    agent = echo("critic")
    history = [UserMessage("write"), AssistantMessage("a draft")]

    final = host(agent.as_node(include_contents=False)).invoke({"messages": history})

    (request,) = agent.model.requests
    assert [(type(m), m.text) for m in request.messages] == [(UserMessage, "a draft")]
    assert texts(final) == ["write", "a draft", "critic: a draft"]


def test_return_reasoning_contents_brings_back_tool_calls_and_results():
    agent = researcher(instruction="Be brief.")

    final = host(agent.as_node(return_reasoning_contents=True)).invoke({"messages": HISTORY})

    added = final["messages"][3:]
    assert [type(m) for m in added] == [AssistantMessage, ToolResponseMessage, AssistantMessage]
    assert added[0].tool_calls[0].name == "lookup"
    assert added[1].content == "notes on graphs"
    assert not any(isinstance(m, SystemMessage) for m in final["messages"])


def test_output_key_also_stores_the_answer_text():
    final = host(researcher().as_node(output_key="research")).invoke({"messages": HISTORY})

    assert final["research"] == "Graphs are nodes and edges."
    assert texts(final)[-1] == "Graphs are nodes and edges."


def test_an_agent_node_keeps_its_run_in_the_hosts_thread():
    saver = MemorySaver()
    agent = researcher()
    app = host(agent, saver)

    app.invoke({"messages": HISTORY}, CFG)

    (before,) = [s for s in app.get_state_history(CFG) if s.next == ("helper",)]
    namespace = f"helper:{task_id_for('t1', before.config.checkpoint_id, 'helper')}"
    inside = app.get_state(RunnableConfig(thread_id="t1", checkpoint_ns=namespace))
    assert [type(m) for m in inside.values["messages"][3:]] == [
        AssistantMessage,
        ToolResponseMessage,
        AssistantMessage,
    ]
    assert list(agent.saver.list("t1")) == []


# as a tool


def boss_over(*tools: Any, replies: tuple[Any, ...]) -> Any:
    return scripted("boss", *replies, tools=list(tools))


def tool_namespace(agent: Any, tool_name: str, call_id: str, attempt: int = 0) -> str:
    """The namespace of the agent tool's run for the call ``call_id`` on thread t1."""
    message = next(
        m
        for m in agent.get_state(CFG).values["messages"]
        if isinstance(m, AssistantMessage) and any(c.id == call_id for c in m.tool_calls)
    )
    key = f"t1:{message.id}:{call_id}"  # ToolContext.idempotency_key
    context = ToolContext(call_id=call_id, idempotency_key=key, attempt=attempt)
    return agent_tool_namespace(tool_name, context)


def test_an_agent_as_a_tool_answers_the_parents_call_with_its_final_answer(caller):
    child = echo("researcher", description="Finds facts.")
    boss = boss_over(
        child.as_tool(),
        replies=(
            calls(("c1", "researcher", {"request": "capital of France?"})),
            lambda request: f"boss: {request.messages[-1].text}",
        ),
    )

    final = caller.invoke(boss, "Ask the researcher.", CFG)

    result = final["messages"][2]
    assert isinstance(result, ToolResponseMessage)
    assert (result.tool_call_id, result.content) == ("c1", "researcher: capital of France?")
    assert texts(final)[-1] == "boss: researcher: capital of France?"
    (tool_schema,) = boss.model.requests[0].tools
    assert tool_schema.name == "researcher" and tool_schema.description == "Finds facts."


def test_an_agent_tool_runs_on_its_own_namespace_of_the_callers_thread():
    child = echo("researcher")
    boss = boss_over(
        child.as_tool(name="ask_research", description="Ask research."),
        replies=(calls(("c7", "ask_research", {"request": "facts"})), "done"),
    )
    boss.invoke("go", CFG)

    namespace = tool_namespace(boss, "ask_research", "c7")
    inside = boss.get_state(RunnableConfig(thread_id="t1", checkpoint_ns=namespace))

    assert namespace.startswith("ask_research:c7:")

    assert texts(inside.values) == ["facts", "researcher: facts"]
    assert texts(boss.get_state(CFG).values) == ["go", "", "researcher: facts", "done"]
    assert list(child.saver.list("t1")) == []


def test_two_calls_of_one_agent_tool_run_apart():
    child = echo("researcher")
    boss = boss_over(
        child.as_tool(),
        replies=(
            calls(
                ("c1", "researcher", {"request": "one"}), ("c2", "researcher", {"request": "two"})
            ),
            "done",
        ),
    )

    final = boss.invoke("go", CFG)

    results = {
        m.tool_call_id: m.content for m in final["messages"] if isinstance(m, ToolResponseMessage)
    }
    assert results == {"c1": "researcher: one", "c2": "researcher: two"}
    for call_id, request in (("c1", "one"), ("c2", "two")):
        namespace = tool_namespace(boss, "researcher", call_id)
        inside = boss.get_state(RunnableConfig(thread_id="t1", checkpoint_ns=namespace))
        assert texts(inside.values)[0] == request


def test_an_agent_tool_that_times_out_stops_at_its_next_step_instead_of_running_on():
    model_calls: list[float] = []

    def slow_step(request: Any) -> AssistantMessage:
        model_calls.append(time.monotonic())
        time.sleep(0.05)
        return calls((f"w{len(model_calls)}", "lookup", {"topic": "more"}))

    worker = scripted("worker", *[slow_step] * 40, tools=[lookup], max_iterations=40)
    boss = scripted(
        "boss",
        calls(("c1", "worker", {"request": "dig"})),
        "gave up on the worker",
        tools=[worker.as_tool()],
        tool_timeout=0.12,
    )

    final = boss.invoke("go", CFG)

    result = final["messages"][2]
    assert result.is_error and "did not finish within 0.12 s" in result.content
    assert texts(final)[-1] == "gave up on the worker"
    deadline = time.monotonic() + 5
    inside = RunnableConfig(thread_id="t1", checkpoint_ns=tool_namespace(boss, "worker", "c1"))
    while time.monotonic() < deadline and worker_running(boss, inside):
        time.sleep(0.02)
    stopped_at = len(model_calls)
    time.sleep(0.3)
    assert len(model_calls) == stopped_at < 8  # it stopped, long before its 40 iterations
    # its last step is stored and its namespace is free: it can be carried on
    assert boss.get_state(inside).next


def test_an_agent_tool_call_that_reuses_an_earlier_call_id_runs_the_agent_again():
    child = echo("researcher")

    def answer(request: Any) -> str:
        return f"boss: {request.messages[-1].text}"

    boss = boss_over(
        child.as_tool(),
        replies=(
            "hi!",
            calls(("call_0", "researcher", {"request": "capital of France?"})),
            answer,
            calls(("call_0", "researcher", {"request": "2 + 2?"})),  # the id again, on a fork
            answer,
        ),
    )
    boss.invoke("hello", CFG)
    fork = RunnableConfig(thread_id="t1", checkpoint_id=boss.get_state(CFG).config.checkpoint_id)

    assert boss.call("Capital?", CFG).text == "boss: researcher: capital of France?"
    assert boss.call("Sum?", fork).text == "boss: researcher: 2 + 2?"


def test_an_agent_tool_retried_after_a_timeout_runs_again_beside_the_abandoned_attempt():
    release = threading.Event()
    replies: list[str] = []

    def first_slow(request: Any) -> str:
        if not replies:
            replies.append("first")
            release.wait(5)  # until the test ends: the abandoned attempt is still running
            return "too late"
        replies.append("retry")
        return "answer from the retry"

    worker = scripted("worker", *[first_slow] * 3)
    boss = scripted(
        "boss",
        calls(("c1", "worker", {"request": "dig"})),
        "done",
        tools=[worker.as_tool()],
        tool_timeout=0.1,
        tool_interceptors=[ToolRetryInterceptor(1)],
    )
    try:
        final = boss.invoke("go", CFG)
    finally:
        release.set()

    result = final["messages"][2]
    assert (result.is_error, result.content) == (False, "answer from the retry")
    assert replies == ["first", "retry"]
    retry = RunnableConfig(thread_id="t1", checkpoint_ns=tool_namespace(boss, "worker", "c1", 1))
    assert texts(boss.get_state(retry).values) == ["dig", "answer from the retry"]


def test_a_retried_agent_tool_that_pauses_resumes_in_the_attempt_that_paused():
    model_calls: list[str] = []

    def flaky(request: Any) -> Any:
        model_calls.append(type(request.messages[-1]).__name__)
        if len(model_calls) == 1:
            raise RuntimeError("transient model failure")  # attempt 0 fails here
        if isinstance(request.messages[-1], ToolResponseMessage):
            return "mail sent"
        return calls((f"s{len(model_calls)}", "lookup", {"topic": "mail"}))

    gate = HumanInTheLoopHook(approve={"lookup": "needs approval"})
    worker = scripted("worker", *[flaky] * 6, tools=[lookup], hooks=[gate])
    boss = scripted(
        "boss",
        calls(("c1", "worker", {"request": "mail bob"})),
        lambda request: f"boss: {request.messages[-1].text}",
        tools=[worker.as_tool()],
        tool_interceptors=[ToolRetryInterceptor(1)],
    )

    (pause,) = boss.invoke("go", CFG).interrupts  # attempt 1 asks for approval
    assert [c["id"] for c in pause.value["tool_calls"]] == ["s2"]
    final = boss.invoke(Command(resume={"s2": "approve"}), CFG)

    assert final.interrupts == () and texts(final)[-1] == "boss: mail sent"
    assert looked_up == ["mail"]
    assert len(model_calls) == 3  # the failure, the call asking approval, the answer


def test_a_cancel_while_an_agent_tool_works_stops_the_caller_and_the_tool_runs_on_later():
    cancel = threading.Event()

    def cancelling(request: Any) -> Any:
        cancel.set()  # the caller is cancelled while the worker is mid-run
        return calls(("w1", "lookup", {"topic": "x"}))

    worker = scripted("worker", cancelling, "worker answer", tools=[lookup])
    boss = scripted(
        "boss",
        calls(("c1", "worker", {"request": "dig"})),
        lambda request: f"boss: {request.messages[-1].text}",
        tools=[worker.as_tool()],
        tool_interceptors=[ToolRetryInterceptor(2)],
    )

    with pytest.raises(GraphCancelledError, match="during step 1, which runs __tool__"):
        boss.invoke("go", RunnableConfig(thread_id="t1", cancel=cancel))
    stored = boss.get_state(CFG).values["messages"]
    assert not any(isinstance(m, ToolResponseMessage) for m in stored)  # nothing recorded

    final = boss.invoke(None, CFG)
    assert texts(final)[-1] == "boss: worker answer"


def worker_running(agent: Any, config: RunnableConfig) -> bool:
    """True while a run holds the namespace (another run there would be refused)."""
    saver = agent.graph.saver
    try:
        saver.release(saver.acquire(config.thread_id, config.checkpoint_ns))
    except ThreadBusyError:
        return True
    return False


def test_an_approval_inside_an_agent_tool_pauses_the_caller_and_resumes_inside_the_tool():
    sent: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        sent.append(to)
        return f"sent to {to}"

    mailer = scripted(
        "mailer",
        calls(("m1", "send_email", {"to": "bob"})),
        "Mailed bob.",
        tools=[send_email],
        hooks=[HumanInTheLoopHook(approve={"send_email": "sends mail"})],
    )
    boss = boss_over(
        mailer.as_tool(),
        replies=(calls(("c1", "mailer", {"request": "mail bob"})), "Bob is told."),
    )

    paused = boss.invoke("go", CFG)
    (pending,) = paused.interrupts
    assert pending.value["tool_calls"][0]["id"] == "m1"
    assert sent == []
    final = boss.invoke(Command(resume={"m1": {"decision": "approve"}}), CFG)

    assert sent == ["bob"]
    assert texts(final) == ["go", "", "Mailed bob.", "Bob is told."]
    assert final.interrupts == ()


def approving_mailers(sent: list[str]) -> Any:
    """Makes agents named ``name`` that mail their request's text with ``send_email`` (which
    appends to ``sent``) once a human approves, then answer ``"<name> mailed"``."""

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        sent.append(to)
        return f"sent to {to}"

    def mailer(name: str) -> Any:
        return scripted(
            name,
            lambda request: calls((f"m-{name}", "send_email", {"to": request.messages[-1].text})),
            f"{name} mailed",
            tools=[send_email],
            hooks=[HumanInTheLoopHook(approve={"send_email": "sends mail"})],
        )

    return mailer


def test_approvals_in_two_parallel_agent_tools_pause_the_caller_once_with_both():
    sent: list[str] = []
    mailer = approving_mailers(sent)

    boss = boss_over(
        mailer("left").as_tool(),
        mailer("right").as_tool(),
        replies=(
            calls(("c1", "left", {"request": "bob"}), ("c2", "right", {"request": "eve"})),
            "done",
        ),
    )

    paused = boss.invoke("go", CFG)

    assert [i.value["tool_calls"][0]["id"] for i in paused.interrupts] == ["m-left", "m-right"]
    assert sent == []
    answers = {
        i.id: {i.value["tool_calls"][0]["id"]: {"decision": "approve"}} for i in paused.interrupts
    }
    final = boss.invoke(Command(resume=answers), CFG)
    assert sorted(sent) == ["bob", "eve"]
    assert texts(final) == ["go", "", "left mailed", "right mailed", "done"]


@pytest.mark.parametrize("names", [["left"], ["left", "right"]], ids=["one", "parallel"])
def test_answers_reach_paused_agent_tools_after_update_state_on_the_caller(names: list[str]):
    sent: list[str] = []
    mailer = approving_mailers(sent)

    requests = [(f"c-{name}", name, {"request": f"to-{name}"}) for name in names]
    boss = boss_over(
        *(mailer(name).as_tool() for name in names), replies=(calls(*requests), "done")
    )
    paused = boss.invoke("go", CFG)
    assert len(paused.interrupts) == len(names)

    boss.update_state(CFG, {"note": "checked"})

    assert boss.get_state(CFG).interrupts == paused.interrupts
    answers = {
        i.id: {i.value["tool_calls"][0]["id"]: {"decision": "approve"}} for i in paused.interrupts
    }
    final = boss.invoke(Command(resume=answers), CFG)
    assert final.interrupts == ()
    assert sorted(sent) == [f"to-{name}" for name in names]
    assert texts(final) == ["go", "", *(f"{name} mailed" for name in names), "done"]
    assert final["note"] == "checked"


class _GraphAgent:
    """A compiled graph posing as an agent, so an agent tool can run a graph with breakpoints."""

    def __init__(self, name: str, graph: Any) -> None:
        self.name, self.description, self.graph = name, f"The {name} agent.", graph

    def _max_steps(self) -> int:
        return 10


@pytest.mark.parametrize("names", [["left"], ["left", "right"]], ids=["one", "parallel"])
def test_none_passes_static_breakpoints_inside_agent_tools_once(names: list[str]):
    ran: list[str] = []

    def reviewer(name: str) -> Any:
        graph = StateGraph(name, key_strategies={"messages": AppendStrategy()})
        graph.add_node("draft", lambda state: None)
        graph.add_node(
            "publish",
            lambda state: ran.append(name) or {"messages": [AssistantMessage(f"{name} ok")]},
        )
        graph.add_edge(START, "draft").add_edge("draft", "publish").add_edge("publish", END)
        compiled = graph.compile(CompileConfig(saver=MemorySaver(), interrupt_before=["publish"]))
        return agent_tool(_GraphAgent(name, compiled))

    requests = [(f"c-{name}", name, {"request": "check"}) for name in names]
    boss = boss_over(*(reviewer(name) for name in names), replies=(calls(*requests), "done"))
    paused = boss.invoke("go", CFG)
    assert [(i.node, i.value) for i in paused.interrupts] == [
        ("publish", "interrupt_before")
    ] * len(names)

    final = boss.invoke(None, CFG)

    assert final.interrupts == ()
    assert sorted(ran) == names
    assert texts(final) == ["go", "", *(f"{name} ok" for name in names), "done"]


def test_tokens_of_an_agent_tool_stream_with_the_tool_agents_name():
    child = scripted("researcher", "Paris is the capital.")
    boss = boss_over(child.as_tool(), replies=(calls(("c1", "researcher", {"request": "?"})), "ok"))

    chunks = [o for o in boss.stream("go") if isinstance(o, StreamingOutput) and o.chunk]

    nested = [o for o in chunks if o.agent == "researcher"]
    assert "".join(o.chunk for o in nested) == "Paris is the capital."
    assert {(o.node, o.path) for o in nested} == {("__model__", ("__tool__",))}
    assert [o.chunk for o in chunks if o.agent == "boss"] == ["ok"]


# handoff from a tool


@tool
def transfer_to_billing(reason: str) -> Command:
    """Hand the conversation to the billing desk."""
    return Command(goto="billing", graph=Command.PARENT, update={"topic": reason})


def desk(triage: Any) -> Any:
    graph = StateGraph("desk", key_strategies={"messages": AppendStrategy()})
    graph.add_node("triage", triage, destinations=("billing", "support"))
    graph.add_node(
        "billing", lambda state: {"messages": AssistantMessage(f"billing: {state['topic']}")}
    )
    graph.add_node("support", lambda state: {"messages": AssistantMessage("support")})
    graph.add_edge(START, "triage").add_edge("triage", END)
    graph.add_edge("billing", END).add_edge("support", END)
    return graph.compile(CompileConfig(saver=MemorySaver()))


def test_a_tool_inside_a_child_agent_hands_off_to_the_parent_with_an_update(caller):
    runs: collections.Counter[str] = collections.Counter()

    @tool
    def note(text: str) -> str:
        """Write a note."""
        runs[text] += 1
        return "noted"

    triage = scripted(
        "triage",
        calls(
            ("c1", "note", {"text": "first"}), ("c2", "transfer_to_billing", {"reason": "refund"})
        ),
        "never reached",
        tools=[note, transfer_to_billing],
    )

    final = caller.invoke(desk(triage), {"messages": [UserMessage("I want my money back")]}, CFG)

    assert final["topic"] == "refund"
    assert texts(final) == ["I want my money back", "billing: refund"]
    assert triage.model.remaining == 1
    assert runs == {"first": 1}


def test_a_streamed_handoff_shows_the_child_stop_and_the_parent_route(caller):
    triage = scripted(
        "triage",
        calls(("c1", "transfer_to_billing", {"reason": "refund"})),
        tools=[transfer_to_billing],
    )

    outputs = caller.stream(
        desk(triage), {"messages": [UserMessage("Refund?")]}, CFG, subgraphs=True
    )

    finished = [(o.path, o.node) for o in outputs if o.state is not None]
    assert finished == [
        ((), "__start__"),
        (("triage",), "__start__"),
        (("triage",), "__model__"),
        ((), "triage"),
        ((), "billing"),
    ]
    assert outputs[-2].update == {"topic": "refund"}


def test_a_tool_handoff_in_a_top_level_agent_is_an_invalid_update():
    agent = scripted(
        "triage",
        calls(("c1", "transfer_to_billing", {"reason": "refund"})),
        tools=[transfer_to_billing],
    )

    with pytest.raises(
        InvalidUpdateError, match=r"node '__tool__' \(step 1\) of graph 'triage' handed off"
    ):
        agent.invoke("refund please")
