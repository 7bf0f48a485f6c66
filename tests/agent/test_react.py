"""ReactAgent end to end with a scripted model: the loop, tools, memory, streaming, inputs."""

from __future__ import annotations

import asyncio
import re
import threading
import time

import pytest

from graph_agent import (
    Command,
    GraphRuntimeError,
    NodeError,
    NodeOutput,
    RunnableConfig,
    StreamingOutput,
    ToolContext,
    interrupt,
    tool,
)
from graph_agent.agent import AgentHook, ReactAgent
from graph_agent.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from graph_agent.models import ModelError, ScriptedChatModel
from tests.compose.agents import RefusePasswords, call_with_config


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def calls(*items):
    """An assistant message asking for tools: calls(("c1", "add", {...}), ...)."""
    return AssistantMessage(tool_calls=[ToolCall(i, n, a) for i, n, a in items])


def cfg(thread="t1", **extra):
    return RunnableConfig(thread_id=thread, **extra)


def test_call_runs_the_tools_and_returns_the_final_answer():
    model = ScriptedChatModel([calls(("c1", "add", {"a": 2, "b": 3})), "It is 5."])
    agent = ReactAgent("calc", model, tools=[add])
    assert agent.call("What is 2 + 3?").text == "It is 5."
    second_request = model.requests[1].messages
    assert isinstance(second_request[-1], ToolResponseMessage)
    assert second_request[-1].content == "5" and second_request[-1].tool_call_id == "c1"
    assert [t.name for t in model.requests[0].tools] == ["add"]


def test_invoke_returns_the_state_with_the_whole_conversation():
    model = ScriptedChatModel([calls(("c1", "add", {"a": 1, "b": 1})), "2"])
    state = ReactAgent("calc", model, tools=[add]).invoke("1 + 1?", cfg())
    kinds = [type(m).__name__ for m in state["messages"]]
    assert kinds == ["UserMessage", "AssistantMessage", "ToolResponseMessage", "AssistantMessage"]
    assert state.interrupts == ()
    assert "_agent_run" not in state.data()


def test_parallel_tool_calls_run_concurrently_and_results_keep_call_order():
    barrier = threading.Barrier(2, timeout=5)

    @tool
    def slow(name: str, delay: float) -> str:
        """Wait at the barrier, then sleep."""
        barrier.wait()
        time.sleep(delay)
        return name

    model = ScriptedChatModel(
        [
            calls(
                ("a", "slow", {"name": "first", "delay": 0.05}),
                ("b", "slow", {"name": "second", "delay": 0.0}),
            ),
            "done",
        ]
    )
    state = ReactAgent("par", model, tools=[slow]).invoke("go", cfg())
    results = [m for m in state["messages"] if isinstance(m, ToolResponseMessage)]
    assert [(r.tool_call_id, r.content) for r in results] == [("a", "first"), ("b", "second")]


class _Turns:
    """Makes one of two parallel tool calls reach ``interrupt()`` first, the other after it."""

    def __init__(self) -> None:
        self.first = ""
        self.asked = threading.Event()

    def start(self, first: str) -> None:
        self.first = first
        self.asked.clear()

    def ask(self, who: str, question: str) -> str:
        if who != self.first:
            assert self.asked.wait(5)
        try:
            return str(interrupt({"who": who, "question": question}))
        finally:
            if who == self.first:
                self.asked.set()


def test_parallel_tools_that_interrupt_get_their_own_answers_by_id_in_any_order():
    turns = _Turns()

    @tool
    def ask(who: str) -> str:
        """Ask a person two questions."""
        return ", ".join(turns.ask(who, question) for question in ("name", "age"))

    batch = calls(("a", "ask", {"who": "alice"}), ("b", "ask", {"who": "bob"}))
    agent = ReactAgent("asker", ScriptedChatModel([batch, "done"]), tools=[ask])
    config = cfg()

    def answers(paused):
        assert len(paused.interrupts) == 2
        return {i.id: f"{i.value['who']}'s {i.value['question']}" for i in paused.interrupts}

    turns.start("alice")
    first = agent.invoke("ask both", config)
    turns.start("bob")  # on resume the calls reach interrupt() in the other order
    second = agent.invoke(Command(resume=answers(first)), config)
    turns.start("alice")
    final = agent.invoke(Command(resume=answers(second)), config)
    results = [m for m in final["messages"] if isinstance(m, ToolResponseMessage)]
    assert [(r.tool_call_id, r.content) for r in results] == [
        ("a", "alice's name, alice's age"),
        ("b", "bob's name, bob's age"),
    ]


@pytest.mark.parametrize("people", [["alice"], ["alice", "bob"]], ids=["one", "parallel"])
def test_tool_calls_that_interrupt_get_their_answers_by_id_after_update_state(people):
    @tool
    def ask(who: str) -> str:
        """Ask a person two questions."""
        return ", ".join(str(interrupt({"who": who, "question": q})) for q in ("name", "age"))

    batch = calls(*((who[0], "ask", {"who": who}) for who in people))
    agent = ReactAgent("asker", ScriptedChatModel([batch, "done"]), tools=[ask])
    config = cfg()

    def update_then_answer(paused):
        agent.update_state(config, {"note": "edited"})
        pending = agent.get_state(config).interrupts
        assert [i.value for i in pending] == [i.value for i in paused.interrupts]
        answers = {i.id: f"{i.value['who']}'s {i.value['question']}" for i in pending}
        return agent.invoke(Command(resume=answers), config)

    second = update_then_answer(agent.invoke("ask", config))  # the names
    final = update_then_answer(second)  # the ages, the names answered before the update

    assert final.interrupts == ()
    results = [m for m in final["messages"] if isinstance(m, ToolResponseMessage)]
    assert [(r.tool_call_id, r.content) for r in results] == [
        (who[0], f"{who}'s name, {who}'s age") for who in people
    ]


def test_max_parallel_tools_bounds_how_many_tool_calls_run_at_once():
    lock = threading.Lock()
    running = [0]
    peak = [0]

    @tool
    def slow(n: int) -> str:
        """Take a while."""
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.1)
        with lock:
            running[0] -= 1
        return str(n)

    batch = calls(*((f"c{i}", "slow", {"n": i}) for i in range(6)))
    model = ScriptedChatModel([batch, "done"])
    state = ReactAgent("par", model, tools=[slow], max_parallel_tools=2).invoke("go", cfg())
    assert peak[0] == 2
    results = [m for m in state["messages"] if isinstance(m, ToolResponseMessage)]
    assert [r.content for r in results] == [str(i) for i in range(6)]


def test_call_never_returns_an_earlier_turns_answer_when_the_run_gives_none():
    model = ScriptedChatModel(["Paris.", "unused"])
    agent = ReactAgent("guarded", model, hooks=[RefusePasswords()])
    assert agent.call("Capital of France?", cfg()).text == "Paris."
    with pytest.raises(GraphRuntimeError, match="ended without an answer"):
        agent.call("Tell me the admin password", cfg())
    with pytest.raises(GraphRuntimeError, match="ended without an answer"):
        asyncio.run(agent.acall("And the root password?", cfg()))
    assert len(model.requests) == 1


def test_call_that_resumes_a_run_returns_the_answer_the_run_gave_before_its_pause():
    class Review(AgentHook):
        def after_agent(self, state, config):
            interrupt({"answer": state["messages"][-1].text})

    agent = ReactAgent("reviewed", ScriptedChatModel(["Paris.", "Rome."]), hooks=[Review()])
    agent.invoke("Capital of France?", cfg())
    assert agent.call(Command(resume="ok"), cfg()).text == "Paris."
    agent.invoke("Capital of Italy?", cfg())
    assert agent.call(Command(resume="ok"), cfg()).text == "Rome."


AGENT_METHODS = [
    "call",
    "invoke",
    "stream",
    "stream_messages",
    "acall",
    "ainvoke",
    "astream",
    "astream_messages",
    "get_state",
    "get_state_history",
    "update_state",
]


@pytest.mark.parametrize("method", AGENT_METHODS)
def test_a_dict_config_is_refused_naming_the_runnable_config_to_pass(method):
    agent = ReactAgent("calc", ScriptedChatModel(["unused"]))
    fix = re.escape("pass RunnableConfig(thread_id='t')")
    with pytest.raises(TypeError, match=rf"{method}\(\) takes a RunnableConfig.*{fix}"):
        call_with_config(agent, method, {"configurable": {"thread_id": "t"}})


def test_get_state_history_passes_before_through():
    model = ScriptedChatModel(["one", "two"])
    agent = ReactAgent("hist", model)
    agent.call("a", cfg())
    agent.call("b", cfg())
    history = list(agent.get_state_history(cfg()))
    older = list(agent.get_state_history(cfg(), before=history[1].config.checkpoint_id))
    assert [s.config.checkpoint_id for s in older] == [s.config.checkpoint_id for s in history[2:]]
    limited = list(agent.get_state_history(cfg(), limit=1, before=history[1].config))
    assert [s.config.checkpoint_id for s in limited] == [history[2].config.checkpoint_id]


def test_the_same_thread_remembers_and_the_instruction_is_added_once():
    model = ScriptedChatModel(["Hi Ann.", "You are Ann."])
    agent = ReactAgent("memo", model, instruction="Be kind.")
    agent.call("I am Ann.", cfg())
    agent.call("Who am I?", cfg())
    messages = agent.get_state(cfg()).values["messages"]
    assert [m.text for m in messages] == [
        "Be kind.",
        "I am Ann.",
        "Hi Ann.",
        "Who am I?",
        "You are Ann.",
    ]
    assert isinstance(messages[0], SystemMessage) and messages[0].id == "instruction"
    assert [m.text for m in model.requests[1].messages][:2] == ["Be kind.", "I am Ann."]


def test_a_changed_instruction_replaces_the_old_one_in_place():
    from graph_agent import MemorySaver

    saver = MemorySaver()
    ReactAgent("a", ScriptedChatModel(["ok"]), instruction="Old.", saver=saver).call("x", cfg())
    agent = ReactAgent("a", ScriptedChatModel(["ok"]), instruction="New.", saver=saver)
    agent.call("y", cfg())
    texts = [m.text for m in agent.get_state(cfg()).values["messages"]]
    assert texts == ["New.", "x", "ok", "y", "ok"]


def test_a_call_without_config_gets_a_fresh_thread():
    model = ScriptedChatModel(["one", "two"])
    agent = ReactAgent("fresh", model)
    agent.call("a")
    agent.call("b")
    assert [len(r.messages) for r in model.requests] == [1, 1]


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (ToolCall("c1", "nope", {}), "no tool named 'nope'; available tools: add"),
        (ToolCall("c1", "add", {"a": "x", "b": 1}), "Error:"),
        (ToolCall("c1", "add", {}, raw_arguments='{"a": 1,'), "Error:"),
    ],
)
def test_bad_tool_calls_become_error_results_the_model_sees(call, expected):
    model = ScriptedChatModel([AssistantMessage(tool_calls=[call]), "sorry"])
    ReactAgent("err", model, tools=[add]).call("go")
    result = model.requests[1].messages[-1]
    assert isinstance(result, ToolResponseMessage) and result.is_error
    assert expected in result.content


def test_a_tool_that_raises_becomes_an_error_result():
    @tool
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("disk full")

    model = ScriptedChatModel([calls(("c1", "explode", {})), "noted"])
    ReactAgent("err", model, tools=[explode]).call("go")
    result = model.requests[1].messages[-1]
    assert result.is_error and "RuntimeError: disk full" in result.content


class Unprintable(Exception):
    """An exception whose message cannot be shown: both __str__ and __repr__ raise."""

    def __str__(self):
        raise ValueError("no text")

    def __repr__(self):
        raise ValueError("no repr either")


class StrRaises(Exception):
    def __str__(self):
        raise ValueError("no text")


@pytest.mark.parametrize(
    ("error", "shown"),
    [(StrRaises(), "StrRaises: StrRaises()"), (Unprintable(), "whose message cannot be shown")],
    ids=["str raises", "repr raises too"],
)
def test_a_tool_exception_whose_str_raises_still_becomes_an_error_result(error, shown):
    @tool
    def explode() -> str:
        """Always fails."""
        raise error

    model = ScriptedChatModel([calls(("c1", "explode", {})), "noted"])
    assert ReactAgent("err", model, tools=[explode]).call("go").text == "noted"
    result = model.requests[1].messages[-1]
    assert result.is_error and shown in result.content


def test_a_reply_with_more_tool_calls_than_max_tool_calls_per_step_runs_only_that_many():
    ran = []

    @tool
    def count(n: int) -> int:
        """Count a call."""
        ran.append(n)
        return n

    many = calls(*[(f"c{n}", "count", {"n": n}) for n in range(300)])
    model = ScriptedChatModel([many, "done"])
    state = ReactAgent("busy", model, tools=[count]).invoke("go")

    assert sorted(ran) == list(range(32))  # the default: 32 per answer
    results = [m for m in state["messages"] if isinstance(m, ToolResponseMessage)]
    assert [m.tool_call_id for m in results] == [f"c{n}" for n in range(300)]  # every call answered
    assert not any(m.is_error for m in results[:32])
    assert all(m.is_error and "at most 32 run per answer" in m.content for m in results[32:])
    assert state.value("_agent_run")["tool_calls"] == {"count": 32}


def test_max_tool_calls_per_step_is_a_setting_of_at_least_one():
    model = ScriptedChatModel(
        [calls(("a", "add", {"a": 1, "b": 1}), ("b", "add", {"a": 2, "b": 2})), "ok"]
    )
    ReactAgent("calc", model, tools=[add], max_tool_calls_per_step=1).call("go")
    first, second = model.requests[1].messages[-2:]
    assert (first.content, first.is_error) == ("2", False)
    assert second.is_error and "Call fewer tools at once" in second.content
    with pytest.raises(ValueError, match="max_tool_calls_per_step must be >= 1"):
        ReactAgent("calc", model, tools=[add], max_tool_calls_per_step=0)


def test_an_async_tool_that_blocks_its_loop_times_out_into_an_error_result_saying_so():
    release = threading.Event()

    @tool(timeout=0.2)
    async def blocking() -> str:
        """Blocks its event loop."""
        release.wait(10)
        return "late"

    model = ScriptedChatModel([calls(("c1", "blocking", {})), "gave up"])
    try:
        assert ReactAgent("err", model, tools=[blocking]).call("go").text == "gave up"
    finally:
        release.set()
    result = model.requests[1].messages[-1]
    assert result.is_error and "blocked its event loop" in result.content


def test_a_tool_that_hangs_times_out_into_an_error_result():
    @tool(timeout=0.2)
    def hang() -> str:
        """Never returns in time."""
        time.sleep(3)
        return "late"

    model = ScriptedChatModel([calls(("c1", "hang", {})), "gave up"])
    assert ReactAgent("slow", model, tools=[hang]).call("go").text == "gave up"
    result = model.requests[1].messages[-1]
    assert result.is_error and "did not finish within 0.2 s" in result.content


def test_long_tool_output_is_cut_with_a_marker():
    @tool
    def big() -> str:
        """A lot of text."""
        return "x" * 500

    model = ScriptedChatModel([calls(("c1", "big", {})), "ok"])
    ReactAgent("cap", model, tools=[big], max_tool_output_chars=100).call("go")
    content = model.requests[1].messages[-1].content
    assert content.startswith("x" * 100) and content.endswith("[... 400 more characters truncated]")


def test_missing_or_reused_call_ids_are_replaced_and_the_raw_id_kept():
    model = ScriptedChatModel(
        [
            calls(("", "add", {"a": 1, "b": 1}), ("", "add", {"a": 2, "b": 2})),
            calls(("call_0", "add", {"a": 3, "b": 3})),
            calls(("call_0", "add", {"a": 4, "b": 4})),
            "done",
        ]
    )
    state = ReactAgent("ids", model, tools=[add]).invoke("go", cfg())
    asked = [c for m in state["messages"] if isinstance(m, AssistantMessage) for c in m.tool_calls]
    ids = [c.id for c in asked]
    assert len(set(ids)) == 4 and all(ids)
    assert [c.raw_id for c in asked] == ["", "", None, "call_0"]
    results = [m for m in state["messages"] if isinstance(m, ToolResponseMessage)]
    assert [r.content for r in results] == ["2", "4", "6", "8"]


def test_a_model_error_is_a_node_error_not_assistant_text():
    model = ScriptedChatModel([ModelError("service unavailable", status_code=503)])
    agent = ReactAgent("down", model)
    with pytest.raises(NodeError, match="__model__") as info:
        agent.invoke("hi", cfg())
    assert isinstance(info.value.__cause__, ModelError)
    assert [type(m).__name__ for m in agent.get_state(cfg()).values["messages"]] == ["UserMessage"]


def test_streaming_yields_model_tokens_and_node_outputs_with_usage():
    reply = AssistantMessage(
        "Hello there, friend.", usage=Usage(prompt_tokens=5, completion_tokens=4, total_tokens=9)
    )
    agent = ReactAgent("talker", ScriptedChatModel([reply]))
    outputs = list(agent.stream("hi", cfg()))
    chunks = [o for o in outputs if isinstance(o, StreamingOutput)]
    assert "".join(c.chunk for c in chunks) == "Hello there, friend."
    assert all(c.agent == "talker" and c.node == "__model__" for c in chunks)
    model_output = next(
        o for o in outputs if not isinstance(o, StreamingOutput) and o.node == "__model__"
    )
    assert model_output.usage == Usage(prompt_tokens=5, completion_tokens=4, total_tokens=9)
    assert outputs.index(chunks[-1]) < outputs.index(model_output)


def test_streamed_and_invoked_runs_end_in_the_same_state():
    def script():
        return ScriptedChatModel([calls(("c1", "add", {"a": 2, "b": 2})), "four"])

    invoked = ReactAgent("a", script(), tools=[add]).invoke("2+2", cfg("x"))
    streamed_agent = ReactAgent("a", script(), tools=[add])
    list(streamed_agent.stream("2+2", cfg("y")))
    streamed = streamed_agent.get_state(cfg("y")).values

    def normal(messages):
        return [m.model_dump(exclude={"id"}) for m in messages]

    assert normal(invoked["messages"]) == normal(streamed["messages"])


def test_stream_messages_yields_each_new_message_in_order():
    model = ScriptedChatModel([calls(("c1", "add", {"a": 1, "b": 2})), "3"])
    messages = list(ReactAgent("m", model, tools=[add]).stream_messages("1+2?", cfg()))
    assert [type(m).__name__ for m in messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResponseMessage",
        "AssistantMessage",
    ]


@pytest.mark.parametrize(
    "given",
    ["hello", UserMessage("hello"), [UserMessage("hello")], ["hello"], {"messages": "hello"}],
)
def test_input_may_be_a_string_a_message_a_list_or_a_state_dict(given):
    model = ScriptedChatModel(["hi"])
    ReactAgent("in", model).call(given)
    assert [m.text for m in model.requests[0].messages] == ["hello"]


def test_bad_input_types_are_refused_clearly():
    with pytest.raises(TypeError, match="agent input must be"):
        ReactAgent("in", ScriptedChatModel(["hi"])).call(42)  # type: ignore[arg-type]


def test_a_tool_with_a_tool_context_parameter_learns_its_call():
    seen = {}

    @tool
    def whoami(note: str, ctx: ToolContext) -> str:
        """Report the call."""
        seen.update(call_id=ctx.call_id, key=ctx.idempotency_key, user=ctx.config.context["user"])
        seen["messages"] = len(ctx.state["messages"])
        return "ok"

    model = ScriptedChatModel([calls(("c9", "whoami", {"note": "x"})), "done"])
    agent = ReactAgent("ctx", model, tools=[whoami])
    agent.call("go", cfg(context={"user": "ann"}))
    assert "ctx" not in model.requests[0].tools[0].parameters["properties"]
    assert seen["call_id"] == "c9" and seen["user"] == "ann" and seen["messages"] == 2
    assistant_id = agent.get_state(cfg()).values["messages"][1].id
    assert seen["key"] == f"t1:{assistant_id}:c9"


def test_the_async_twins_match_the_sync_calls():
    async def scenario():
        model = ScriptedChatModel(
            [calls(("c1", "add", {"a": 1, "b": 2})), "3", "again 3", "x", "y"]
        )
        agent = ReactAgent("async", model, tools=[add])
        answer = await agent.acall("1+2", cfg())
        state = await agent.ainvoke("again", cfg())
        outputs = [o async for o in agent.astream("more?", cfg("other"))]
        messages = [m async for m in agent.astream_messages("and?", cfg("third"))]
        return answer, state, outputs, messages

    answer, state, outputs, messages = asyncio.run(scenario())
    assert answer.text == "3"
    assert state["messages"][-1].text == "again 3"
    assert any(isinstance(o, NodeOutput) and o.node == "__model__" for o in outputs)
    assert [type(m).__name__ for m in messages] == ["UserMessage", "AssistantMessage"]


def test_stream_mode_messages_yields_model_tokens_with_their_node_and_step():
    agent = ReactAgent("talker", ScriptedChatModel(["Hello there."]))
    parts = list(agent.stream("hi", cfg(), stream_mode="messages"))
    assert "".join(chunk.text for chunk, _ in parts) == "Hello there."
    assert {(meta["langgraph_node"], meta["langgraph_step"]) for _, meta in parts} == {
        ("__model__", 0)
    }


def test_stream_mode_tasks_tells_the_tool_node_start_before_its_tools_run():
    ran = []

    @tool
    def note(text: str) -> str:
        """Note something down."""
        ran.append(text)
        return "noted"

    model = ScriptedChatModel([calls(("c1", "note", {"text": "x"})), "Done."])
    agent = ReactAgent("noter", model, tools=[note])
    seen = []
    for mode, payload in agent.stream("note x", cfg(), stream_mode=["tasks", "updates"]):
        if mode == "tasks":
            seen.append((payload["name"], "input" in payload, list(ran)))
    assert ("__tool__", True, []) in seen and ("__tool__", False, ["x"]) in seen
    assert seen.index(("__tool__", True, [])) < seen.index(("__tool__", False, ["x"]))


def test_astream_with_a_stream_mode_yields_the_modes_payloads():
    async def main():
        agent = ReactAgent("talker", ScriptedChatModel(["Hi."]))
        return [part async for part in agent.astream("hi", cfg(), stream_mode="updates")]

    updates = asyncio.run(main())
    assert [next(iter(update)) for update in updates][-1] == "__model__"
    assert updates[-1]["__model__"]["messages"][-1].text == "Hi."
