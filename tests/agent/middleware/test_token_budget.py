"""TokenBudgetHook: the run stops before a model call once the token budget is used."""

from __future__ import annotations

import pytest

from graph_agent import NodeError, RunnableConfig, tool
from graph_agent.agent import AgentLimitError, ReactAgent
from graph_agent.agent.middleware import TokenBudgetHook
from graph_agent.messages import AssistantMessage, ToolCall, Usage
from graph_agent.models import ScriptedChatModel

CFG = RunnableConfig(thread_id="t1")


@tool
def search(query: str) -> str:
    """Search."""
    return f"results for {query}"


def searching(call_id: str, tokens: int) -> AssistantMessage:
    calls = [ToolCall(call_id, "search", {"query": call_id})]
    return AssistantMessage(tool_calls=calls, usage=Usage(total_tokens=tokens))


def scripted(*replies: AssistantMessage | str) -> ScriptedChatModel:
    return ScriptedChatModel(list(replies))


def test_the_run_ends_with_a_message_once_the_run_budget_is_used():
    model = scripted(searching("c1", 60), searching("c2", 60), searching("c3", 60), "never")
    agent = ReactAgent("agent", model, tools=[search], hooks=[TokenBudgetHook(run_limit=100)])
    answer = agent.call("dig", CFG)
    assert len(model.requests) == 2
    assert answer.finish_reason == "token_budget"
    assert answer.text == "Stopped: the run's token budget (100) was used up (120 tokens)."


def test_prompt_and_completion_count_when_the_total_is_missing():
    reply = AssistantMessage("hi", usage=Usage(prompt_tokens=70, completion_tokens=40))
    model = scripted(reply, "never")
    agent = ReactAgent("agent", model, hooks=[TokenBudgetHook(thread_limit=100)])
    agent.call("one", CFG)
    assert agent.call("two", CFG).finish_reason == "token_budget"
    assert len(model.requests) == 1


def test_the_thread_budget_counts_earlier_runs():
    model = scripted(
        AssistantMessage("first", usage=Usage(total_tokens=80)),
        searching("c1", 30),
        "never",
    )
    agent = ReactAgent("agent", model, tools=[search], hooks=[TokenBudgetHook(thread_limit=100)])
    agent.call("one", CFG)
    answer = agent.call("two", CFG)  # 80 < 100: one call; then 110
    assert len(model.requests) == 2
    assert "thread's token budget (100)" in answer.text


def test_a_new_run_gets_a_fresh_run_budget():
    model = scripted(
        AssistantMessage("first", usage=Usage(total_tokens=150)),
        AssistantMessage("second", usage=Usage(total_tokens=150)),
    )
    agent = ReactAgent("agent", model, hooks=[TokenBudgetHook(run_limit=100)])
    assert agent.call("one", CFG).text == "first"
    assert agent.call("two", CFG).text == "second"


def test_a_model_that_reports_no_usage_uses_no_budget():
    model = scripted(searching("c1", 0), searching("c2", 0), "done")
    agent = ReactAgent("agent", model, tools=[search], hooks=[TokenBudgetHook(run_limit=1)])
    assert agent.call("dig", CFG).text == "done"


def test_error_behavior_raises_agent_limit_error():
    model = scripted(searching("c1", 500), "never")
    hook = TokenBudgetHook(run_limit=100, exit_behavior="error")
    agent = ReactAgent("agent", model, tools=[search], hooks=[hook])
    with pytest.raises(NodeError) as caught:
        agent.call("dig", CFG)
    assert isinstance(caught.value.__cause__, AgentLimitError)
    assert len(model.requests) == 1


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="needs thread_limit and/or run_limit"):
        TokenBudgetHook()
    with pytest.raises(TypeError, match="run_limit must be an int"):
        TokenBudgetHook(run_limit=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exit_behavior must be"):
        TokenBudgetHook(run_limit=1, exit_behavior="stop")  # type: ignore[arg-type]
