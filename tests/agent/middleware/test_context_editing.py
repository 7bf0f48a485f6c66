"""ContextEditingInterceptor: old tool results cleared past a token budget, pairs kept."""

from __future__ import annotations

import pytest

from graph_agent import RunnableConfig, tool
from graph_agent.agent import ReactAgent
from graph_agent.agent.middleware import CLEARED_PLACEHOLDER, ContextEditingInterceptor
from graph_agent.messages import AssistantMessage, ToolCall, ToolResponseMessage
from graph_agent.models import ScriptedChatModel

CFG = RunnableConfig(thread_id="t1")


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}: " + "x" * 2_000


@tool
def note(text: str) -> str:
    """Keep a note."""
    return text + " " + "n" * 2_000


def pages_then_answer(*names: str) -> list[AssistantMessage | str]:
    calls = [
        AssistantMessage(tool_calls=[ToolCall(f"c{i}", name, _arguments(name, i))])
        for i, name in enumerate(names)
    ]
    return [*calls, "read them all"]


def _arguments(name: str, index: int) -> dict[str, object]:
    return {"page": index} if name == "fetch" else {"text": f"note {index}"}


def results_sent(model: ScriptedChatModel, call: int) -> list[ToolResponseMessage]:
    return [m for m in model.requests[call].messages if isinstance(m, ToolResponseMessage)]


def test_old_results_past_the_budget_are_cleared_keeping_the_newest():
    model = ScriptedChatModel(pages_then_answer("fetch", "fetch", "fetch", "fetch"))
    editing = ContextEditingInterceptor(trigger_tokens=1_000, keep=2)
    agent = ReactAgent("reader", model, tools=[fetch], model_interceptors=[editing])
    agent.invoke("read four pages", CFG)
    last = results_sent(model, 4)
    assert [r.content == CLEARED_PLACEHOLDER for r in last] == [True, True, False, False]
    assert last[3].content.startswith("page 3: ")


def test_every_call_keeps_its_result_message():
    model = ScriptedChatModel(pages_then_answer("fetch", "fetch", "fetch"))
    editing = ContextEditingInterceptor(trigger_tokens=500, keep=1)
    ReactAgent("reader", model, tools=[fetch], model_interceptors=[editing]).invoke("go", CFG)
    sent = model.requests[3].messages
    calls = [c.id for m in sent if isinstance(m, AssistantMessage) for c in m.tool_calls]
    answered = [m.tool_call_id for m in sent if isinstance(m, ToolResponseMessage)]
    assert calls == answered == ["c0", "c1", "c2"]
    for index, message in enumerate(sent):  # each result right after its call
        if isinstance(message, ToolResponseMessage):
            assert sent[index - 1].tool_calls[0].id == message.tool_call_id


def test_the_threads_history_keeps_every_result():
    model = ScriptedChatModel(pages_then_answer("fetch", "fetch", "fetch"))
    editing = ContextEditingInterceptor(trigger_tokens=500, keep=1)
    agent = ReactAgent("reader", model, tools=[fetch], model_interceptors=[editing])
    agent.invoke("go", CFG)
    stored = [m for m in agent.get_state(CFG).values["messages"] if m.role == "tool"]
    assert all(m.content.startswith("page ") for m in stored)


def test_below_the_budget_nothing_is_cleared():
    model = ScriptedChatModel(pages_then_answer("fetch", "fetch"))
    editing = ContextEditingInterceptor(trigger_tokens=100_000, keep=0)
    ReactAgent("reader", model, tools=[fetch], model_interceptors=[editing]).invoke("go", CFG)
    assert all(r.content.startswith("page ") for r in results_sent(model, 2))


def test_clearing_stops_once_under_the_budget():
    editing = ContextEditingInterceptor(trigger_tokens=700, keep=0)
    model = ScriptedChatModel(pages_then_answer("fetch", "fetch", "fetch"))
    ReactAgent("reader", model, tools=[fetch], model_interceptors=[editing]).invoke("go", CFG)
    # three pages of ~500 tokens: clearing the oldest two is enough
    cleared = [r.content == CLEARED_PLACEHOLDER for r in results_sent(model, 3)]
    assert cleared == [True, True, False]


def test_excluded_tools_keep_their_results():
    model = ScriptedChatModel(pages_then_answer("note", "fetch", "fetch"))
    editing = ContextEditingInterceptor(trigger_tokens=100, keep=0, exclude_tools=["note"])
    agent = ReactAgent("reader", model, tools=[fetch, note], model_interceptors=[editing])
    agent.invoke("go", CFG)
    contents = [r.content for r in results_sent(model, 3)]
    assert contents[0].startswith("note 0")
    assert contents[1:] == [CLEARED_PLACEHOLDER, CLEARED_PLACEHOLDER]


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="trigger_tokens must be >= 1"):
        ContextEditingInterceptor(trigger_tokens=0)
    with pytest.raises(ValueError, match="keep must be >= 0"):
        ContextEditingInterceptor(keep=-1)
