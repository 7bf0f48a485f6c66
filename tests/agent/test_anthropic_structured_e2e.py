"""What asks a model for ``response_format`` works on ``AnthropicChatModel``, end to end against
the local Messages API server: ``LLMToolSelectorInterceptor``, ``LlmRoutingAgent`` and
``ReactAgent(output_schema=...)`` (with tools, with and without thinking).

The server answers like the model would: a request forcing a tool (``tool_choice`` of type
``tool``) gets that tool called with the scripted input; it refuses what the real API refuses
(a forced tool with thinking on, a ``response_format`` field).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from graph_agent import RunnableConfig, tool
from graph_agent.agent import LlmRoutingAgent, ReactAgent
from graph_agent.agent.middleware import LLMToolSelectorInterceptor
from graph_agent.models import AnthropicChatModel, RetryPolicy, ScriptedChatModel
from tests.models.anthropic_fake_server import (
    API_KEY,
    FakeAnthropicServer,
    message,
    message_events,
    reply_events,
    text,
    thinking,
    tool_use,
)
from tests.models.openai_fake_server import RecordedRequest, dynamic, reply_json

Reply = Callable[[RecordedRequest], dict[str, Any]]


class Weather(BaseModel):
    """The weather in a city."""

    city: str
    celsius: int


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city name.
    """
    return f"Sunny, 21 celsius in {city}"


@tool
def get_stock(symbol: str) -> str:
    """The share price of a company.

    Args:
        symbol: The ticker symbol.
    """
    return f"{symbol}: 100"


def as_asked(reply: Reply) -> Any:
    """The message ``reply`` makes for a request, streamed when the request asks for that."""

    def choose(request: RecordedRequest) -> Any:
        whole = reply(request)
        if request.body.get("stream"):
            return reply_events(message_events(whole, piece=4))
        return reply_json(whole)

    return dynamic(choose)


def forced_tool(request: RecordedRequest) -> str:
    """The tool the request forces; fails the test when it forces none."""
    choice = request.body.get("tool_choice") or {}
    assert choice.get("type") == "tool", f"expected a forced tool, got {choice}"
    return str(choice["name"])


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as running:
        yield running


@pytest.fixture
def connect(server: FakeAnthropicServer) -> Iterator[Callable[..., AnthropicChatModel]]:
    made: list[AnthropicChatModel] = []

    def make(**options: Any) -> AnthropicChatModel:
        retry = RetryPolicy(max_retries=0, sleep=lambda _: None)
        model = AnthropicChatModel(
            "claude-test",
            base_url=server.base_url,
            api_key=API_KEY,
            timeout=5.0,
            retry=retry,
            **options,
        )
        made.append(model)
        return model

    yield make
    for model in made:
        model.close()


def test_the_tool_selector_chooses_through_an_anthropic_model(
    server: FakeAnthropicServer, connect: Callable[..., AnthropicChatModel]
) -> None:
    selection = message(tool_use("toolu_s", "ToolSelection", {"tools": ["get_weather"]}))
    server.enqueue(reply_json(selection), reply_json(message(text("Sunny."))))
    selector = LLMToolSelectorInterceptor(connect(), on_invalid="error")
    agent = ReactAgent(
        "helper", connect(), tools=[get_weather, get_stock], model_interceptors=[selector]
    )

    answer = agent.call("Is it sunny in Rome?")

    assert answer.text == "Sunny."
    choose, ask = server.bodies
    assert choose["tool_choice"] == {"type": "tool", "name": "ToolSelection"}
    assert [t["name"] for t in ask["tools"]] == ["get_weather"]


def test_the_routing_agent_routes_through_an_anthropic_model(
    server: FakeAnthropicServer, connect: Callable[..., AnthropicChatModel]
) -> None:
    choice = {"agents": [{"agent": "billing", "query": "Refund order 7"}]}
    server.enqueue(
        dynamic(
            lambda request: reply_json(
                message(tool_use("toolu_r", forced_tool(request), choice), stop_reason="tool_use")
            )
        )
    )
    agents = [
        ReactAgent(name, ScriptedChatModel([f"{name} here"]), description=f"{name} questions")
        for name in ("tech", "billing")
    ]
    team = LlmRoutingAgent("desk", connect(), agents)

    final = team.invoke("I was charged twice for order 7.")

    assert final["outputs"] == {"billing": "billing here"}
    (body,) = server.bodies
    assert body["tool_choice"] == {"type": "tool", "name": "RouteChoice"}
    assert agents[1].model.requests[0].messages[-1].text == "Refund order 7"


def weather_script(*, thinks: bool) -> list[Any]:
    """The model calls get_weather, then gives the structured answer."""
    thought = [thinking("Look it up first.", "sig-1")] if thinks else []
    asks = message(
        *thought, tool_use("toolu_w", "get_weather", {"city": "Rome"}), stop_reason="tool_use"
    )
    answers = message(
        *([thinking("Now answer.", "sig-2")] if thinks else []),
        tool_use("toolu_a", "Weather", {"city": "Rome", "celsius": 21}),
        stop_reason="tool_use",
    )
    return [as_asked(lambda _: asks), as_asked(lambda _: answers)]


@pytest.mark.parametrize("mode", ["invoke", "stream", "ainvoke"])
@pytest.mark.parametrize("thinks", [False, True], ids=["plain", "thinking"])
def test_a_react_agent_with_an_output_schema_answers_through_the_anthropic_model(
    server: FakeAnthropicServer,
    connect: Callable[..., AnthropicChatModel],
    mode: str,
    thinks: bool,
) -> None:
    server.enqueue(*weather_script(thinks=thinks))
    model = connect(thinking=1024, max_tokens=2048) if thinks else connect()
    agent = ReactAgent("weather", model, tools=[get_weather], output_schema=Weather)
    config = RunnableConfig(thread_id="t")
    if mode == "invoke":
        state = agent.invoke("Weather in Rome?", config)
    elif mode == "stream":
        state = list(agent.stream("Weather in Rome?", config))[-1].state
    else:

        async def run() -> Any:
            try:
                return await agent.ainvoke("Weather in Rome?", config)
            finally:
                await model.aclose()

        state = asyncio.run(run())

    assert state["output"] == Weather(city="Rome", celsius=21)
    last = state["messages"][-1]
    assert last.text == '{"city":"Rome","celsius":21}' and last.tool_calls == []
    first, second = server.bodies
    assert [t["name"] for t in first["tools"]] == ["get_weather", "Weather"]
    expected = {"type": "auto"} if thinks else {"type": "any"}
    assert first["tool_choice"] == second["tool_choice"] == expected
    # the tool round trip went back as the API wants it, thinking first when thinking is on
    assistant = second["messages"][1]["content"]
    assert assistant[-1]["name"] == "get_weather"
    assert (assistant[0]["type"] == "thinking") is thinks


def test_a_later_turn_sends_the_structured_answer_back_as_text(
    server: FakeAnthropicServer, connect: Callable[..., AnthropicChatModel]
) -> None:
    server.enqueue(*weather_script(thinks=False))
    agent = ReactAgent("weather", connect(), tools=[get_weather], output_schema=Weather)
    config = RunnableConfig(thread_id="t")
    agent.invoke("Weather in Rome?", config)
    server.enqueue(
        as_asked(lambda _: message(tool_use("toolu_b", "Weather", {"city": "Oslo", "celsius": 4})))
    )

    state = agent.invoke("And Oslo?", config)

    assert state["output"] == Weather(city="Oslo", celsius=4)
    turns = server.bodies[-1]["messages"]
    assert turns[3] == {
        "role": "assistant",
        "content": [{"type": "text", "text": '{"city":"Rome","celsius":21}'}],
    }
