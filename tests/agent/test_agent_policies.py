"""ReactAgent(model_retry=, model_timeout=, tool_retry=): node policies on the agent's model and
tool nodes."""

from __future__ import annotations

import time

import pytest

from graph_agent import NodeTimeoutError, ReactAgent, RetryPolicy, RunnableConfig, UserMessage
from graph_agent.models import ScriptedChatModel
from graph_agent.models.errors import ModelConnectionError


def no_wait_retry(waits):
    async def async_sleep(seconds):
        waits.append(seconds)

    return RetryPolicy(jitter=False, sleep=waits.append, async_sleep=async_sleep)


def flaky_model(failures):
    """A scripted model whose first ``failures`` calls lose the connection."""
    calls = []

    def answer(request):
        calls.append(1)
        if len(calls) <= failures:
            raise ModelConnectionError("connection reset")
        return "fine"

    return ScriptedChatModel([answer, answer, answer]), calls


def test_model_retry_makes_a_failed_model_call_again(caller):
    waits = []
    model, calls = flaky_model(2)
    agent = ReactAgent("retrying", model, model_retry=no_wait_retry(waits))
    result = caller.invoke(agent, {"messages": [UserMessage("hi")]}, RunnableConfig(thread_id="t"))
    assert result["messages"][-1].text == "fine"
    assert len(calls) == 3 and waits == [0.5, 1.0]
    assert [m.text for m in result["messages"]] == ["hi", "fine"]  # no trace of the failures


def test_without_model_retry_the_first_failure_ends_the_run(caller):
    model, calls = flaky_model(1)
    with pytest.raises(Exception, match="connection reset"):
        caller.invoke(
            ReactAgent("plain", model),
            {"messages": [UserMessage("hi")]},
            RunnableConfig(thread_id="t"),
        )
    assert len(calls) == 1


def test_model_timeout_cuts_a_model_call_that_hangs():
    # the sync face: the model node runs on a thread it abandons (a scripted model answers
    # on the caller's loop under ainvoke, and a call blocking its loop cannot be cut)
    def hang(request):
        time.sleep(0.5)
        return "late"

    agent = ReactAgent("slow", ScriptedChatModel([hang]), model_timeout=0.05)
    with pytest.raises(NodeTimeoutError) as raised:
        agent.invoke({"messages": [UserMessage("hi")]}, RunnableConfig(thread_id="t"))
    assert raised.value.node == "__model__"
