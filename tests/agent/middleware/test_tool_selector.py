"""LLMToolSelectorInterceptor: a selection model narrows the tools of each model call."""

from __future__ import annotations

import logging

import pytest

from graph_agent import NodeError, RunnableConfig, tool
from graph_agent.agent import ReactAgent
from graph_agent.agent.middleware import (
    LLMToolSelectorInterceptor,
    ToolSelection,
    ToolSelectionError,
)
from graph_agent.messages import AssistantMessage, ToolCall
from graph_agent.models import ScriptedChatModel

CFG = RunnableConfig(thread_id="t1")


def make_tool(name: str, description: str):
    def run() -> str:
        return name

    return tool(run, name=name, description=description)


TOOLS = [
    make_tool("weather", "Current weather of a city."),
    make_tool("stocks", "Share prices."),
    make_tool("translate", "Translate a text."),
    make_tool("clock", "The time now."),
]


def run_with(selector_answers: list[str], **options) -> tuple[ScriptedChatModel, ScriptedChatModel]:
    selector_model = ScriptedChatModel(selector_answers)
    model = ScriptedChatModel(["done"])
    selector = LLMToolSelectorInterceptor(selector_model, **options)
    agent = ReactAgent("agent", model, tools=TOOLS, model_interceptors=[selector])
    agent.invoke("Is it raining in Oslo?", CFG)
    return selector_model, model


def offered(model: ScriptedChatModel) -> list[str]:
    return [t.name for t in model.requests[0].tools]


def test_the_model_gets_only_the_chosen_tools_and_those_always_included():
    selector_model, model = run_with(['{"tools": ["weather"]}'], always_include=["clock"])
    assert offered(model) == ["weather", "clock"]
    ask = selector_model.requests[0]
    assert ask.options["response_format"] is ToolSelection
    assert ask.messages[-1].text == "Is it raining in Oslo?"
    listing = ask.messages[0].text
    assert "- weather: Current weather of a city." in listing
    assert "- clock:" not in listing  # always sent: not offered for choice


def test_max_tools_keeps_the_selectors_first_choices():
    _, model = run_with(['{"tools": ["translate", "weather", "stocks"]}'], max_tools=2)
    assert offered(model) == ["weather", "translate"]


def test_unknown_names_are_ignored_when_known_ones_are_chosen():
    _, model = run_with(['{"tools": ["umbrella", "weather"]}'])
    assert offered(model) == ["weather"]


def test_an_empty_choice_sends_only_the_tools_always_included():
    _, model = run_with(['{"tools": []}'], always_include=["clock"])
    assert offered(model) == ["clock"]


def test_a_bad_answer_falls_back_to_every_tool_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="graph_agent.agent"):
        _, model = run_with(["I think the weather tool"])
    assert offered(model) == ["weather", "stocks", "translate", "clock"]
    assert "sending every tool" in caplog.text


def test_only_unknown_names_also_fall_back_to_every_tool():
    _, model = run_with(['{"tools": ["umbrella"]}'])
    assert len(offered(model)) == 4


def test_a_bad_answer_is_an_error_when_asked():
    with pytest.raises(NodeError) as caught:
        run_with(['{"tools": ["umbrella"]}'], on_invalid="error")
    assert isinstance(caught.value.__cause__, ToolSelectionError)
    assert "only unknown tools" in str(caught.value.__cause__)


def test_a_misspelled_always_include_is_an_error():
    with pytest.raises(NodeError) as caught:
        run_with(['{"tools": []}'], always_include=["clok"])
    assert "always_include names ['clok']" in str(caught.value.__cause__)


def test_a_call_without_tools_asks_no_selection():
    selector_model = ScriptedChatModel([])
    selector = LLMToolSelectorInterceptor(selector_model)
    model = ScriptedChatModel(["summary"])
    agent = ReactAgent("agent", model, tools=TOOLS, model_interceptors=[selector], max_iterations=0)
    agent.invoke("hi", CFG)  # max_iterations=0: the one call summarises, with no tools
    assert selector_model.requests == []


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="max_tools must be >= 1"):
        LLMToolSelectorInterceptor(ScriptedChatModel([]), max_tools=0)
    with pytest.raises(ValueError, match="cache_size must be >= 0"):
        LLMToolSelectorInterceptor(ScriptedChatModel([]), cache_size=-1)
    with pytest.raises(ValueError, match="on_invalid must be"):
        LLMToolSelectorInterceptor(ScriptedChatModel([]), on_invalid="guess")  # type: ignore[arg-type]


def test_the_choice_is_asked_once_per_user_request():
    selector_model = ScriptedChatModel(['{"tools": ["weather"]}', '{"tools": ["stocks"]}'])
    selector = LLMToolSelectorInterceptor(selector_model)
    calls = [ToolCall("c1", "weather", {})]
    model = ScriptedChatModel([AssistantMessage(tool_calls=calls), "rainy", "up 3%"])
    agent = ReactAgent("agent", model, tools=TOOLS, model_interceptors=[selector])
    agent.invoke("Is it raining in Oslo?", CFG)
    assert len(selector_model.requests) == 1
    assert offered(model) == [t.name for t in model.requests[1].tools] == ["weather"]
    agent.invoke("And ACME shares?", CFG)
    assert len(selector_model.requests) == 2
    assert [t.name for t in model.requests[2].tools] == ["stocks"]


def test_without_a_cache_every_call_asks():
    selector_model = ScriptedChatModel(['{"tools": ["weather"]}'] * 2)
    selector = LLMToolSelectorInterceptor(selector_model, cache_size=0)
    calls = [ToolCall("c1", "weather", {})]
    model = ScriptedChatModel([AssistantMessage(tool_calls=calls), "rainy"])
    ReactAgent("agent", model, tools=TOOLS, model_interceptors=[selector]).invoke("Oslo?", CFG)
    assert len(selector_model.requests) == 2
