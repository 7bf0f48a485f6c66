"""``output_key`` stores an agent's final answer; ``{key}`` placeholders in its instruction read
the state at model time (SAA's outputKey and instruction templates)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from graph_agent import (
    LlmRoutingAgent,
    NodeError,
    ParallelAgent,
    ReactAgent,
    RunnableConfig,
    SequentialAgent,
    tool,
)
from graph_agent.agent import InstructionKeyError
from graph_agent.messages import AssistantMessage, SystemMessage, ToolCall
from graph_agent.models import ScriptedChatModel


@tool
def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


def test_the_final_answers_text_lands_at_the_default_output_key(caller):
    agent = ReactAgent("a", ScriptedChatModel(["The answer."]))
    assert caller.invoke(agent, "question")["output"] == "The answer."


def test_output_key_names_where_the_answer_lands_and_tool_call_replies_do_not(caller):
    model = ScriptedChatModel(
        [AssistantMessage(tool_calls=[ToolCall("c1", "word_count", {"text": "a b"})]), "2 words."]
    )
    agent = ReactAgent("counter", model, tools=[word_count], output_key="count")
    outputs = caller.stream(agent, "count a b")
    writes = [
        (output.node, output.update["count"]) for output in outputs if "count" in output.update
    ]
    assert writes == [("__model__", "2 words.")]  # the answer, not the reply asking for a tool
    assert outputs[-1].state["count"] == "2 words."
    assert "output" not in outputs[-1].state


def test_each_run_on_a_thread_stores_its_own_answer():
    agent = ReactAgent("a", ScriptedChatModel(["first", "second"]), output_key="answer")
    config = RunnableConfig(thread_id="t")
    agent.invoke("one", config)
    assert agent.invoke("two", config)["answer"] == "second"


def test_with_a_schema_the_validated_object_lands_at_output_key():
    class Verdict(BaseModel):
        ok: bool

    agent = ReactAgent(
        "judge", ScriptedChatModel(['{"ok": true}']), output_schema=Verdict, output_key="verdict"
    )
    assert agent.invoke("judge this")["verdict"] == Verdict(ok=True)


def test_the_summary_at_max_iterations_is_the_output_too():
    call = AssistantMessage(tool_calls=[ToolCall("c1", "word_count", {"text": "a"})])
    agent = ReactAgent(
        "a", ScriptedChatModel([call, "summary"]), tools=[word_count], max_iterations=1
    )
    assert agent.invoke("go")["output"] == "summary"


@pytest.mark.parametrize("key", ["", "messages", "_agent_run", "jump_to"])
def test_an_output_key_that_cannot_hold_the_answer_is_refused(key):
    with pytest.raises(ValueError, match=rf"output_key={key!r} cannot hold the answer"):
        ReactAgent("a", ScriptedChatModel(["x"]), output_key=key)


def test_instruction_placeholders_are_filled_from_the_state_at_model_time(caller):
    model = ScriptedChatModel(["Bonjour Ada."])
    agent = ReactAgent("greeter", model, instruction="Greet {user_name} in {lang}.")
    state = caller.invoke(agent, {"messages": "hi", "user_name": "Ada", "lang": "French"})
    (request,) = model.requests
    assert request.messages[0] == SystemMessage("Greet Ada in French.", id="instruction")
    assert state["messages"][0].text == "Greet {user_name} in {lang}."  # the template is kept


def test_a_placeholder_reads_the_value_at_each_model_call():
    model = ScriptedChatModel(["one", "two"])
    agent = ReactAgent("a", model, instruction="Mood: {mood}.")
    config = RunnableConfig(thread_id="t")
    agent.invoke({"messages": "hi", "mood": "calm"}, config)
    agent.invoke({"messages": "again", "mood": "cheerful"}, config)
    assert [r.messages[0].text for r in model.requests] == ["Mood: calm.", "Mood: cheerful."]


def test_braces_that_are_not_placeholders_stay_as_written():
    model = ScriptedChatModel(["ok"])
    instruction = 'Answer as {"ok": true} or {{not_a_key}}; {} too.'
    ReactAgent("a", model, instruction=instruction).invoke("x")
    assert model.requests[0].messages[0].text == 'Answer as {"ok": true} or {not_a_key}; {} too.'


def test_a_missing_placeholder_key_is_an_error_naming_it_and_the_fix():
    model = ScriptedChatModel(["never"])
    agent = ReactAgent("greeter", model, instruction="Greet {user_name}.")
    with pytest.raises(NodeError) as caught:
        agent.invoke("hi")
    error = caught.value.__cause__
    assert isinstance(error, InstructionKeyError)
    assert "agent 'greeter': its instruction reads {user_name}" in str(error)
    assert "{{user_name}} for literal braces" in str(error)
    assert model.requests == []


def test_a_sequential_team_hands_each_agents_output_to_the_next_ones_instruction(caller):
    writer = ReactAgent("writer", ScriptedChatModel(["A rough draft."]), output_key="draft")
    editor_model = ScriptedChatModel([lambda request: request.messages[0].text.upper()])
    editor = ReactAgent(
        "editor", editor_model, instruction="Improve this draft: {draft}", output_key="final"
    )
    state = caller.invoke(SequentialAgent("pipeline", [writer, editor]), "write")
    assert state["draft"] == "A rough draft."
    assert state["final"] == "IMPROVE THIS DRAFT: A ROUGH DRAFT."


def test_a_team_passes_its_callers_keys_to_an_agents_instruction():
    model = ScriptedChatModel(["ok"])
    agent = ReactAgent("a", model, instruction="Write for {audience}.")
    SequentialAgent("team", [agent]).invoke({"messages": "go", "audience": "children"})
    assert model.requests[0].messages[0].text == "Write for children."


def test_parallel_agents_sharing_an_output_key_run_side_by_side_without_clashing(caller):
    first = ReactAgent("first", ScriptedChatModel(["1"]))
    second = ReactAgent("second", ScriptedChatModel(["2"]))
    third = ReactAgent("third", ScriptedChatModel(["3"]), output_key="third_answer")
    state = caller.invoke(ParallelAgent("all", [first, second, third]), "go")
    assert state["outputs"] == {"first": "1", "second": "2", "third": "3"}
    assert state["third_answer"] == "3"  # its own key comes back
    assert "output" not in state  # two agents share it: it stays in their own state


def test_a_routing_team_that_chose_one_agent_hands_on_its_output_even_when_keys_are_shared():
    first = ReactAgent("first", ScriptedChatModel(["from first"]), description="one")
    second = ReactAgent("second", ScriptedChatModel(["from second"]), description="two")
    router = ScriptedChatModel(['{"agents": ["second"]}'])
    team = LlmRoutingAgent("desk", router, [first, second])
    editor_model = ScriptedChatModel([lambda request: request.messages[0].text])
    editor = ReactAgent("editor", editor_model, instruction="Improve: {output}")

    state = SequentialAgent("pipeline", [team, editor]).invoke("go")

    assert editor_model.requests[0].messages[0].text == "Improve: from second"
    assert state["output"] == "Improve: from second"


def test_a_routing_team_that_chose_several_agents_sharing_a_key_hands_on_neither():
    first = ReactAgent("first", ScriptedChatModel(["from first"]))
    second = ReactAgent("second", ScriptedChatModel(["from second"]))
    router = ScriptedChatModel(['{"agents": ["first", "second"]}'])

    state = LlmRoutingAgent("desk", router, [first, second]).invoke("go")

    assert "output" not in state
    assert state["outputs"] == {"first": "from first", "second": "from second"}
