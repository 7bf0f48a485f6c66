"""The built-in limits, summarising and structured output, and ``max_iterations``."""

from __future__ import annotations

import enum
import json

import pytest
from pydantic import BaseModel

from graph_agent import Command, GraphSetupError, NodeError, RunnableConfig, SqliteSaver, tool
from graph_agent.agent import (
    AgentLimitError,
    HumanInTheLoopHook,
    JumpTo,
    ModelCallLimitHook,
    ModelHook,
    ReactAgent,
    StructuredOutputError,
    SummarizationHook,
    ToolCallLimitHook,
)
from graph_agent.checkpoint.serde import register
from graph_agent.messages import (
    AssistantMessage,
    BaseMessage,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from graph_agent.models import ScriptedChatModel


class Weather(BaseModel):
    city: str
    celsius: int


register(Weather, 121)

ran: list[str] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    ran.append("add")
    return a + b


@tool
def search(query: str) -> str:
    """Search the web."""
    ran.append("search")
    return f"results for {query}"


@pytest.fixture(autouse=True)
def clear_ran():
    ran.clear()


def calls(*items: tuple[str, str, dict]) -> AssistantMessage:
    """An assistant message asking for tools: calls(("c1", "add", {...}), ...)."""
    return AssistantMessage(tool_calls=[ToolCall(i, n, a) for i, n, a in items])


def adding(call_id: str) -> AssistantMessage:
    return calls((call_id, "add", {"a": 1, "b": 1}))


def cfg(thread: str = "t") -> RunnableConfig:
    return RunnableConfig(thread_id=thread)


def assert_valid_history(messages: list[BaseMessage]) -> None:
    """Every tool call is followed by exactly one result, before the next non-tool message."""
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            answers = []
            for later in messages[index + 1 :]:
                if not isinstance(later, ToolResponseMessage):
                    break
                answers.append(later.tool_call_id)
            assert sorted(answers) == sorted(c.id for c in message.tool_calls), messages


# ModelCallLimitHook


def test_model_call_run_limit_ends_the_run_with_a_message_before_the_next_call():
    model = ScriptedChatModel([adding("c1"), adding("c2"), adding("c3"), "never"])
    agent = ReactAgent("a", model, tools=[add], hooks=[ModelCallLimitHook(run_limit=2)])
    state = agent.invoke("go", cfg())
    assert len(model.requests) == 2
    last = state["messages"][-1]
    assert last.finish_reason == "model_call_limit" and "limit (2)" in last.text
    assert_valid_history(list(state["messages"]))


def test_model_call_run_limit_starts_again_with_each_new_input():
    model = ScriptedChatModel([adding("c1"), "first done", adding("c2"), "second done"])
    agent = ReactAgent("a", model, tools=[add], hooks=[ModelCallLimitHook(run_limit=2)])
    assert agent.call("one", cfg()).text == "first done"
    assert agent.call("two", cfg()).text == "second done"
    assert len(model.requests) == 4


def test_model_call_thread_limit_counts_the_calls_of_every_run_on_the_thread():
    model = ScriptedChatModel([adding("c1"), "first done", adding("c2"), "never"])
    agent = ReactAgent("a", model, tools=[add], hooks=[ModelCallLimitHook(thread_limit=3)])
    assert agent.call("one", cfg()).text == "first done"
    second = agent.call("two", cfg())
    assert second.finish_reason == "model_call_limit"
    assert len(model.requests) == 3
    assert agent.call("two", cfg("other thread")).text == "never"  # another thread, fresh count


def test_model_call_run_limit_counts_across_an_approval_pause():
    model = ScriptedChatModel([calls(("s1", "search", {"query": "q"})), "never"])
    agent = ReactAgent(
        "a",
        model,
        tools=[search],
        hooks=[
            HumanInTheLoopHook(approve={"search": "costs money"}),
            ModelCallLimitHook(run_limit=1),
        ],
    )
    assert agent.invoke("look it up", cfg()).interrupts
    state = agent.invoke(Command(resume={"s1": {"decision": "approve"}}), cfg())
    assert ran == ["search"]
    assert len(model.requests) == 1
    assert state["messages"][-1].finish_reason == "model_call_limit"


def test_model_call_limit_with_error_behavior_raises_agent_limit_error():
    model = ScriptedChatModel([adding("c1"), "never"])
    hook = ModelCallLimitHook(run_limit=1, exit_behavior="error")
    agent = ReactAgent("a", model, tools=[add], hooks=[hook])
    with pytest.raises(NodeError) as raised:
        agent.invoke("go", cfg())
    assert isinstance(raised.value.__cause__, AgentLimitError)
    assert raised.value.node == "ModelCallLimitHook.model_call_limit.beforeModel"
    assert len(model.requests) == 1


@pytest.mark.parametrize("make", [ModelCallLimitHook, ToolCallLimitHook])
def test_an_exit_behavior_other_than_end_or_error_is_refused(make):
    with pytest.raises(ValueError, match=r"exit_behavior must be 'end' .* or 'error'.*'stop'"):
        make(run_limit=1, exit_behavior="stop")


@pytest.mark.parametrize("make", [ModelCallLimitHook, ToolCallLimitHook])
@pytest.mark.parametrize("argument", ["run_limit", "thread_limit"])
@pytest.mark.parametrize(
    ("value", "error"), [("2", TypeError), (2.0, TypeError), (True, TypeError), (-1, ValueError)]
)
def test_a_limit_that_is_not_an_int_of_zero_or_more_is_refused_naming_the_argument(
    make, argument, value, error
):
    with pytest.raises(error, match=rf"{make.__name__}: {argument} must be an int of 0 or more"):
        make(**{argument: value})


def test_a_tool_call_limit_of_zero_never_runs_the_tool():
    ran = []

    @tool
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    call = AssistantMessage(tool_calls=[ToolCall("d1", "delete", {"path": "/tmp/x"})])
    hook = ToolCallLimitHook("delete", run_limit=0)
    agent = ReactAgent("a", ScriptedChatModel([call, "never"]), tools=[delete], hooks=[hook])

    state = agent.invoke("clean up", RunnableConfig(thread_id="t"))

    assert ran == []
    assert "limit (0) was reached" in state["messages"][-1].content


def test_a_tool_call_limit_on_a_tool_the_agent_lacks_is_refused_when_the_graph_is_built():
    hook = ToolCallLimitHook("sarch", run_limit=1)
    agent = ReactAgent("a", ScriptedChatModel([]), tools=[add, search], hooks=[hook])
    with pytest.raises(
        GraphSetupError, match=r"limits the tool 'sarch'.*agent 'a'.*its tools: 'add', 'search'"
    ):
        agent.get_graph()


def test_a_tool_name_that_is_not_a_string_is_refused():
    with pytest.raises(TypeError, match=r"tool_name must be a tool's name.*got \['search'\]"):
        ToolCallLimitHook(["search"], run_limit=1)


def test_model_call_limit_needs_a_limit():
    with pytest.raises(ValueError, match="thread_limit"):
        ModelCallLimitHook()


# ToolCallLimitHook


def test_tool_call_run_limit_answers_the_whole_batch_with_errors_and_ends():
    model = ScriptedChatModel(
        [calls(*((f"c{i}", "add", {"a": i, "b": 0}) for i in range(3))), "never"]
    )
    agent = ReactAgent("a", model, tools=[add], hooks=[ToolCallLimitHook(run_limit=2)])
    state = agent.invoke("go", cfg())
    assert ran == []
    assert len(model.requests) == 1
    messages = list(state["messages"])
    errors = [m for m in messages if isinstance(m, ToolResponseMessage)]
    assert [m.tool_call_id for m in errors] == ["c0", "c1", "c2"]
    assert all(m.is_error and "limit (2)" in m.content for m in errors)
    assert messages[-1].finish_reason == "tool_call_limit"
    assert_valid_history(messages)


def test_tool_call_run_limit_lets_calls_up_to_the_limit_run():
    model = ScriptedChatModel([adding("c1"), adding("c2"), adding("c3"), "never"])
    agent = ReactAgent("a", model, tools=[add], hooks=[ToolCallLimitHook(run_limit=2)])
    state = agent.invoke("go", cfg())
    assert ran == ["add", "add"]
    assert state["messages"][-1].finish_reason == "tool_call_limit"
    assert_valid_history(list(state["messages"]))


def test_a_per_tool_limit_counts_only_that_tool():
    model = ScriptedChatModel(
        [
            calls(("s1", "search", {"query": "a"})),
            adding("c1"),
            adding("c2"),
            calls(("s2", "search", {"query": "b"}), ("c3", "add", {"a": 1, "b": 2})),
            "never",
        ]
    )
    agent = ReactAgent(
        "a", model, tools=[add, search], hooks=[ToolCallLimitHook("search", run_limit=1)]
    )
    state = agent.invoke("go", cfg())
    assert ran == ["search", "add", "add"]
    last_results = [m for m in state["messages"][-3:-1]]
    assert [(m.tool_call_id, m.is_error) for m in last_results] == [("s2", True), ("c3", True)]
    assert "'search' tool call limit (1)" in state["messages"][-1].text
    assert_valid_history(list(state["messages"]))


def test_per_tool_limit_hooks_for_two_tools_can_sit_side_by_side():
    hooks = [ToolCallLimitHook("search", run_limit=1), ToolCallLimitHook("add", run_limit=1)]
    model = ScriptedChatModel([adding("c1"), "done"])
    agent = ReactAgent("a", model, tools=[add, search], hooks=hooks)
    assert agent.call("go", cfg()).text == "done"


def test_tool_call_thread_limit_counts_the_calls_of_every_run_on_the_thread():
    model = ScriptedChatModel([adding("c1"), "first done", adding("c2"), "never"])
    agent = ReactAgent("a", model, tools=[add], hooks=[ToolCallLimitHook(thread_limit=1)])
    assert agent.call("one", cfg()).text == "first done"
    second = agent.call("two", cfg())
    assert second.finish_reason == "tool_call_limit"
    assert ran == ["add"]


def test_tool_call_limit_with_error_behavior_raises_without_running_the_tools():
    model = ScriptedChatModel(
        [calls(("c1", "add", {"a": 1, "b": 1}), ("c2", "add", {"a": 2, "b": 2}))]
    )
    agent = ReactAgent(
        "a", model, tools=[add], hooks=[ToolCallLimitHook(run_limit=1, exit_behavior="error")]
    )
    with pytest.raises(NodeError) as raised:
        agent.invoke("go", cfg())
    assert isinstance(raised.value.__cause__, AgentLimitError)
    assert ran == []


def test_a_call_a_human_rejected_does_not_count_towards_the_tool_call_limit():
    model = ScriptedChatModel(
        [calls(("s1", "search", {"query": "x"}), ("c1", "add", {"a": 1, "b": 2})), "done"]
    )
    # afterModel hooks run last-registered first: the approval, then the limit
    hooks = [ToolCallLimitHook(run_limit=1), HumanInTheLoopHook(approve={"search": "searches"})]
    agent = ReactAgent("a", model, tools=[add, search], hooks=hooks)
    assert agent.invoke("go", cfg()).interrupts
    state = agent.invoke(Command(resume={"s1": {"decision": "reject", "reason": "no"}}), cfg())
    assert ran == ["add"]
    results = {
        m.tool_call_id: m.text for m in state["messages"] if isinstance(m, ToolResponseMessage)
    }
    assert results == {"s1": "A human rejected this tool call: no", "c1": "3"}
    assert state["messages"][-1].text == "done"


def test_when_the_tool_call_limit_ends_the_run_a_rejected_call_keeps_the_humans_reason():
    model = ScriptedChatModel(
        [
            calls(
                ("s1", "search", {"query": "x"}),
                ("c1", "add", {"a": 1, "b": 2}),
                ("c2", "add", {"a": 3, "b": 4}),
            ),
            "never",
        ]
    )
    hooks = [ToolCallLimitHook(run_limit=1), HumanInTheLoopHook(approve={"search": "searches"})]
    agent = ReactAgent("a", model, tools=[add, search], hooks=hooks)
    agent.invoke("go", cfg())
    state = agent.invoke(Command(resume={"s1": {"decision": "reject", "reason": "no"}}), cfg())
    assert ran == []
    results = {
        m.tool_call_id: m.text for m in state["messages"] if isinstance(m, ToolResponseMessage)
    }
    assert results["s1"] == "A human rejected this tool call: no"
    assert "tool call limit (1)" in results["c1"] and "tool call limit (1)" in results["c2"]
    assert state["messages"][-1].finish_reason == "tool_call_limit"
    assert_valid_history(list(state["messages"]))


# SummarizationHook


def long(text: str) -> str:
    return (text + " ") * 100  # about 125 estimated tokens


def test_history_under_the_budget_is_left_alone():
    model = ScriptedChatModel(["short answer"])
    agent = ReactAgent("a", model, hooks=[SummarizationHook(max_tokens=1000)])
    state = agent.invoke("hi", cfg())
    assert len(model.requests) == 1
    assert [m.text for m in state["messages"]] == ["hi", "short answer"]


def test_history_over_the_budget_is_replaced_by_a_summary_written_by_the_agents_model():
    model = ScriptedChatModel(["first answer", "SUMMARY: user asked about cats", "second answer"])
    agent = ReactAgent(
        "a",
        model,
        instruction="Be brief.",
        hooks=[SummarizationHook(max_tokens=140, messages_to_keep=1)],
    )
    agent.invoke(long("cats"), cfg())
    state = agent.invoke("and dogs?", cfg())

    summary_request = model.requests[1]
    assert summary_request.messages[0].text == SummarizationHook.prompt
    assert (
        "cats" in summary_request.messages[1].text
        and "first answer" in summary_request.messages[1].text
    )
    assert summary_request.tools == []
    messages = list(state["messages"])
    assert isinstance(messages[0], SystemMessage) and messages[0].id == "instruction"
    assert isinstance(messages[1], UserMessage)
    assert "SUMMARY: user asked about cats" in messages[1].text
    assert [m.text for m in messages[2:]] == ["and dogs?", "second answer"]
    assert model.requests[2].messages == messages[:-1]


def test_a_summarising_model_can_be_given():
    model = ScriptedChatModel(["first answer", "second answer"])
    summariser = ScriptedChatModel(["a short summary"])
    agent = ReactAgent(
        "a", model, hooks=[SummarizationHook(max_tokens=100, messages_to_keep=1, model=summariser)]
    )
    agent.invoke(long("cats"), cfg())
    state = agent.invoke("and dogs?", cfg())
    assert len(summariser.requests) == 1 and len(model.requests) == 2
    assert "a short summary" in state["messages"][0].text


def test_summarising_never_separates_a_tool_call_from_its_results():
    model = ScriptedChatModel(
        [
            calls(("c1", "search", {"query": "a"}), ("c2", "search", {"query": "b"})),
            "the summary",
            "final",
        ]
    )
    agent = ReactAgent(
        "a",
        model,
        tools=[search],
        instruction="Be brief.",
        hooks=[SummarizationHook(max_tokens=120, messages_to_keep=1)],
    )
    state = agent.invoke(long("question"), cfg())

    # keeping one message would start the kept part at c2's result; the cut moves back to the call
    kinds = [type(m).__name__ for m in state["messages"]]
    assert kinds == [
        "SystemMessage",
        "UserMessage",  # the summary
        "AssistantMessage",
        "ToolResponseMessage",
        "ToolResponseMessage",
        "AssistantMessage",
    ]
    assert "the summary" in state["messages"][1].text
    assert model.requests[2].messages == list(state["messages"])[:-1]
    assert_valid_history(list(state["messages"]))


class NoteAfterModel(ModelHook):
    """Adds a message after each model answer, so that it sits between calls and results."""

    def after_model(self, state, config):
        return {"messages": SystemMessage("(audit: the model answered)")}


def test_summarising_keeps_a_call_with_its_result_when_a_note_sits_between_them():
    model = ScriptedChatModel([calls(("c1", "search", {"query": "a"})), "final"])
    summariser = ScriptedChatModel(["the summary"])
    hooks = [SummarizationHook(max_tokens=50, messages_to_keep=1, model=summariser)]
    agent = ReactAgent("a", model, tools=[search], hooks=[*hooks, NoteAfterModel()])
    agent.invoke(long("question"), cfg())

    sent = model.requests[1].messages
    assert [type(m).__name__ for m in sent] == [
        "UserMessage",  # the summary
        "AssistantMessage",
        "SystemMessage",
        "ToolResponseMessage",
    ]
    assert "the summary" in sent[0].text and sent[1].tool_calls[0].id == "c1"


class AskAgainOnceAfterASummary(ModelHook):
    """Sends the run back to the loop entry once, right after a summary, with nothing new."""

    can_jump_to = (JumpTo.MODEL,)

    def __init__(self) -> None:
        self.jumped = False

    def before_model(self, state, config):
        summarised = state["messages"][0].text.startswith("Summary of the earlier")
        if summarised and not self.jumped:
            self.jumped = True
            return {"jump_to": JumpTo.MODEL}
        return None


def test_the_summary_alone_is_not_summarised_again():
    model = ScriptedChatModel(["first answer", "second answer"])
    summariser = ScriptedChatModel(["the summary", "a summary of the summary"])
    hooks = [
        SummarizationHook(max_tokens=50, messages_to_keep=1, model=summariser),
        AskAgainOnceAfterASummary(),
    ]
    agent = ReactAgent("a", model, hooks=hooks)
    agent.invoke(long("cats"), cfg())
    state = agent.invoke(long("dogs"), cfg())

    assert hooks[1].jumped
    assert len(summariser.requests) == 1
    assert "the summary" in state["messages"][0].text
    assert state["messages"][-1].text == "second answer"


def test_summaries_have_ids_of_their_own_so_two_never_replace_each_other():
    ids = []
    for topic in ("cats", "dogs"):  # e.g. two agents of a team sharing one history
        hook = SummarizationHook(max_tokens=50, messages_to_keep=1, model=ScriptedChatModel(["s"]))
        agent = ReactAgent("a", ScriptedChatModel(["first", "second"]), hooks=[hook])
        agent.invoke(long(topic), cfg())
        ids.append(agent.invoke(long(topic), cfg())["messages"][0].id)
    assert all(i.startswith("summary-") for i in ids) and ids[0] != ids[1]


# structured output


def test_a_valid_json_answer_is_stored_at_the_output_key():
    model = ScriptedChatModel(['{"city": "Paris", "celsius": 21}'])
    agent = ReactAgent("a", model, output_schema=Weather)
    state = agent.invoke("weather in Paris?", cfg())
    assert state["output"] == Weather(city="Paris", celsius=21)
    assert model.requests[0].options["response_format"] is Weather
    assert agent.get_state(cfg()).values["output"] == Weather(city="Paris", celsius=21)


def test_a_json_answer_in_a_code_fence_is_accepted_and_output_key_is_respected():
    model = ScriptedChatModel(['```json\n{"city": "Oslo", "celsius": -3}\n```'])
    agent = ReactAgent("a", model, output_schema=Weather, output_key="weather")
    assert agent.invoke("weather in Oslo?", cfg())["weather"] == Weather(city="Oslo", celsius=-3)


def test_an_invalid_answer_is_fed_back_once_with_the_validation_error():
    model = ScriptedChatModel(['{"city": "Paris"}', '{"city": "Paris", "celsius": 21}'])
    agent = ReactAgent("a", model, output_schema=Weather)
    state = agent.invoke("weather in Paris?", cfg())
    assert state["output"] == Weather(city="Paris", celsius=21)
    feedback = model.requests[1].messages[-1]
    assert isinstance(feedback, UserMessage) and "celsius" in feedback.text
    assert model.requests[1].messages[-2].text == '{"city": "Paris"}'
    assert state["messages"][-1].text == '{"city": "Paris", "celsius": 21}'


def test_two_invalid_answers_raise_a_structured_output_error():
    model = ScriptedChatModel(["sunny, I think", '{"city": 3}', "never"])
    agent = ReactAgent("a", model, output_schema=Weather)
    with pytest.raises(NodeError) as raised:
        agent.invoke("weather?", cfg())
    assert isinstance(raised.value.__cause__, StructuredOutputError)
    assert "Weather" in str(raised.value.__cause__)
    assert len(model.requests) == 2


def test_tool_calls_run_before_the_structured_answer_is_validated():
    model = ScriptedChatModel(
        [calls(("s1", "search", {"query": "paris"})), '{"city": "Paris", "celsius": 20}']
    )
    agent = ReactAgent("a", model, tools=[search], output_schema=Weather)
    assert agent.invoke("weather?", cfg())["output"].celsius == 20
    assert ran == ["search"]


class Transport(enum.Enum):
    TRAIN = "train"
    PLANE = "plane"


class Leg(BaseModel):
    to: str
    by: Transport


class Trip(BaseModel):
    """Nobody registers these three with the serializer: the agent does, by name."""

    legs: list[Leg]
    first: Leg | None = None


def test_an_output_schema_nobody_registered_round_trips_through_sqlite(tmp_path):
    answer = {"legs": [{"to": "Rome", "by": "train"}], "first": {"to": "Rome", "by": "train"}}
    path = tmp_path / "agent.db"
    writer = ReactAgent(
        "a", ScriptedChatModel([json.dumps(answer)]), output_schema=Trip, saver=SqliteSaver(path)
    )
    assert writer.invoke("plan a trip", cfg())["output"] == Trip.model_validate(answer)
    reader = ReactAgent("a", ScriptedChatModel([]), output_schema=Trip, saver=SqliteSaver(path))
    loaded = reader.get_state(cfg()).values["output"]
    assert loaded == Trip.model_validate(answer)
    assert type(loaded.legs[0].by) is Transport


def test_two_output_schemas_with_one_name_are_refused_naming_the_agent():
    def schema():
        class Answer(BaseModel):
            text: str

        return Answer

    ReactAgent("first", ScriptedChatModel([]), output_schema=schema())
    with pytest.raises(GraphSetupError, match=r"agent 'second': cannot register Answer"):
        ReactAgent("second", ScriptedChatModel([]), output_schema=schema())


def test_the_summarising_call_has_no_response_format_and_a_valid_summary_is_stored():
    model = ScriptedChatModel([adding("c1"), '{"city": "Paris", "celsius": 20}'])
    agent = ReactAgent("a", model, tools=[add], max_iterations=1, output_schema=Weather)
    state = agent.invoke("go", cfg())
    assert model.requests[0].options["response_format"] is Weather
    assert "response_format" not in model.requests[1].options
    assert state["messages"][-1].finish_reason == "max_iterations"
    assert state["output"] == Weather(city="Paris", celsius=20)


def test_a_summary_that_does_not_match_the_schema_ends_the_run_without_output():
    model = ScriptedChatModel([adding("c1"), "I could not find out."])
    agent = ReactAgent("a", model, tools=[add], max_iterations=1, output_schema=Weather)
    state = agent.invoke("go", cfg())
    assert state["messages"][-1].text == "I could not find out."
    assert "output" not in state.data() and len(model.requests) == 2


# structured output through a final tool (output_mode="tool")


def final_answer(call_id: str, **arguments) -> AssistantMessage:
    return calls((call_id, "final_answer", arguments))


def test_in_tool_mode_the_model_is_offered_a_final_answer_tool_and_no_response_format():
    model = ScriptedChatModel([final_answer("f1", city="Paris", celsius=21)])
    agent = ReactAgent("a", model, tools=[search], output_schema=Weather, output_mode="tool")
    state = agent.invoke("weather in Paris?", cfg())
    offered = model.requests[0].tools
    assert [t.name for t in offered] == ["search", "final_answer"]
    assert offered[1].parameters == Weather.model_json_schema()
    assert "response_format" not in model.requests[0].options
    assert state["output"] == Weather(city="Paris", celsius=21)
    answer = state["messages"][-1]
    assert isinstance(answer, AssistantMessage) and answer.tool_calls == []
    assert Weather.model_validate_json(answer.text) == Weather(city="Paris", celsius=21)
    assert ran == []


def test_in_tool_mode_the_history_stays_valid_for_the_next_turn():
    model = ScriptedChatModel(
        [
            calls(("s1", "search", {"query": "paris"})),
            final_answer("f1", city="Paris", celsius=20),
            final_answer("f2", city="Oslo", celsius=-3),
        ]
    )
    agent = ReactAgent("a", model, tools=[search], output_schema=Weather, output_mode="tool")
    agent.invoke("weather in Paris?", cfg())
    state = agent.invoke("and Oslo?", cfg())
    assert ran == ["search"] and state["output"] == Weather(city="Oslo", celsius=-3)
    assert_valid_history(list(state["messages"]))
    assert_valid_history(model.requests[2].messages)
    assert not any(
        c.name == "final_answer"
        for m in model.requests[2].messages
        if isinstance(m, AssistantMessage)
        for c in m.tool_calls
    )


def test_in_tool_mode_invalid_arguments_are_answered_with_the_errors_once():
    model = ScriptedChatModel(
        [final_answer("f1", city="Paris"), final_answer("f2", city="Paris", celsius=21)]
    )
    agent = ReactAgent("a", model, output_schema=Weather, output_mode="tool")
    state = agent.invoke("weather?", cfg())
    assert state["output"] == Weather(city="Paris", celsius=21)
    feedback = model.requests[1].messages[-1]
    assert isinstance(feedback, ToolResponseMessage) and feedback.is_error
    assert feedback.tool_call_id == "f1" and "celsius" in feedback.text
    assert_valid_history(list(state["messages"]))


def test_in_tool_mode_two_invalid_final_answers_raise_a_structured_output_error():
    model = ScriptedChatModel([final_answer("f1", city=3), final_answer("f2", celsius="warm")])
    agent = ReactAgent("a", model, output_schema=Weather, output_mode="tool")
    with pytest.raises(NodeError) as raised:
        agent.invoke("weather?", cfg())
    assert isinstance(raised.value.__cause__, StructuredOutputError)
    assert len(model.requests) == 2


def test_in_tool_mode_a_text_answer_is_asked_to_go_through_the_final_tool():
    model = ScriptedChatModel(["It is warm.", final_answer("f1", city="Rome", celsius=30)])
    agent = ReactAgent("a", model, output_schema=Weather, output_mode="tool")
    assert agent.invoke("weather?", cfg())["output"] == Weather(city="Rome", celsius=30)
    assert "Call the final_answer tool" in model.requests[1].messages[-1].text


def test_in_tool_mode_a_final_answer_beside_other_calls_waits_for_their_results():
    beside = AssistantMessage(
        tool_calls=[
            ToolCall("s1", "search", {"query": "rome"}),
            ToolCall("f1", "final_answer", {"city": "Rome", "celsius": 1}),
        ]
    )
    model = ScriptedChatModel([beside, final_answer("f2", city="Rome", celsius=30)])
    agent = ReactAgent("a", model, tools=[search], output_schema=Weather, output_mode="tool")
    state = agent.invoke("weather?", cfg())
    assert ran == ["search"] and state["output"] == Weather(city="Rome", celsius=30)
    assert [c.id for c in state["messages"][1].tool_calls] == ["s1"]
    assert_valid_history(list(state["messages"]))


def test_in_tool_mode_a_streamed_run_ends_in_the_same_state_as_an_invoked_one():
    def run(streamed: bool):
        model = ScriptedChatModel(
            [calls(("s1", "search", {"query": "oslo"})), final_answer("f1", city="Oslo", celsius=2)]
        )
        agent = ReactAgent("a", model, tools=[search], output_schema=Weather, output_mode="tool")
        if streamed:
            list(agent.stream("weather?", cfg()))
        else:
            agent.invoke("weather?", cfg())
        values = agent.get_state(cfg()).values
        return values["output"], [m.model_dump(exclude={"id"}) for m in values["messages"]]

    assert run(streamed=True) == run(streamed=False)


def test_output_mode_tool_refuses_an_agent_tool_named_final_answer():
    @tool
    def final_answer(text: str) -> str:
        """Clashes with the structured-output tool."""
        return text

    with pytest.raises(GraphSetupError, match="already has one"):
        ReactAgent(
            "a",
            ScriptedChatModel([]),
            tools=[final_answer],
            output_schema=Weather,
            output_mode="tool",
        )


def test_an_unknown_output_mode_is_refused():
    with pytest.raises(ValueError, match="output_mode must be"):
        ReactAgent("a", ScriptedChatModel([]), output_mode="json")  # type: ignore[arg-type]


# max_iterations


def test_after_max_iterations_the_next_call_gets_no_tools_and_a_summarising_instruction():
    model = ScriptedChatModel([adding("c1"), adding("c2"), "best effort answer", "never"])
    agent = ReactAgent("a", model, tools=[add], max_iterations=2)
    state = agent.invoke("go", cfg())
    assert len(model.requests) == 3
    assert [t.name for t in model.requests[1].tools] == ["add"]
    last_request = model.requests[2]
    assert last_request.tools == []
    assert isinstance(last_request.messages[-1], UserMessage)
    assert "maximum number of tool-calling steps" in last_request.messages[-1].text
    answer = state["messages"][-1]
    assert answer.text == "best effort answer" and answer.finish_reason == "max_iterations"
    # the summarising instruction shaped the request only; it is not in the conversation
    assert not any("maximum number" in m.text for m in state["messages"])


def test_tool_calls_in_the_summarising_answer_are_dropped_and_the_run_ends():
    model = ScriptedChatModel([adding("c1"), adding("c2"), "never"])
    agent = ReactAgent("a", model, tools=[add], max_iterations=1)
    state = agent.invoke("go", cfg())
    assert len(model.requests) == 2
    assert ran == ["add"]
    assert state["messages"][-1].tool_calls == []
    assert state["messages"][-1].finish_reason == "max_iterations"
    assert_valid_history(list(state["messages"]))


def test_max_iterations_zero_calls_the_model_once_without_tools():
    model = ScriptedChatModel(["straight answer"])
    agent = ReactAgent("a", model, tools=[add], max_iterations=0)
    assert agent.call("go", cfg()).finish_reason == "max_iterations"
    assert model.requests[0].tools == []


def test_max_iterations_count_per_run_not_per_thread():
    model = ScriptedChatModel([adding("c1"), "first", adding("c2"), "second"])
    agent = ReactAgent("a", model, tools=[add], max_iterations=1)
    assert agent.call("one", cfg()).finish_reason == "max_iterations"
    agent.call("two", cfg())
    # the second run starts with a fresh budget: its first call is offered the tools again
    assert [[t.name for t in r.tools] for r in model.requests] == [["add"], [], ["add"], []]


class Noop(ModelHook):
    def before_model(self, state, config):
        return None

    def after_model(self, state, config):
        return None


def test_a_large_max_iterations_binds_before_the_graph_step_limit():
    iterations = 60
    model = ScriptedChatModel([*(adding(f"c{i}") for i in range(iterations + 5))])
    agent = ReactAgent(
        "a",
        model,
        tools=[add],
        hooks=[Noop(), Second()],
        instruction="go on",
        max_iterations=iterations,
    )
    state = agent.invoke("go", cfg())
    assert len(model.requests) == iterations + 1
    assert state["messages"][-1].finish_reason == "max_iterations"


class Second(Noop):
    pass
