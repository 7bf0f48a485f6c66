"""The agent end to end through ``AnthropicChatModel`` and a real local Messages API server.

The server (``tests/models/anthropic_fake_server.py``) enforces the API's rules: tool results
in one user turn right after the ``tool_use`` blocks, and, with thinking on, the signed
thinking blocks sent back first in the assistant turn that called the tool. It answers each
request streamed or whole, as the request asks, with the same content.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graph_agent import RunnableConfig, tool
from graph_agent.agent import ReactAgent
from graph_agent.checkpoint import SqliteSaver
from graph_agent.messages import ThinkingBlock, ToolResponseMessage
from graph_agent.models import AnthropicChatModel, RetryPolicy
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

ANSWER = "It is sunny in Hangzhou, 25 degrees."


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city name.
    """
    return f"Sunny, 25 celsius in {city}"


def streamed_or_whole(whole: dict[str, Any]) -> Any:
    def choose(request: RecordedRequest) -> Any:
        if request.body.get("stream"):
            return reply_events(message_events(whole, piece=5))
        return reply_json(whole)

    return dynamic(choose)


def script() -> list[Any]:
    asks = message(
        thinking("The user wants the weather; I should call the tool.", "sig-weather"),
        text("Let me check."),
        tool_use("toolu_w1", "get_weather", {"city": "Hangzhou"}),
        stop_reason="tool_use",
        usage={"input_tokens": 40, "output_tokens": 12},
    )
    answers = message(text(ANSWER), usage={"input_tokens": 70, "output_tokens": 9})
    return [streamed_or_whole(asks), streamed_or_whole(answers)]


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as running:
        yield running


@pytest.fixture
def model(server: FakeAnthropicServer) -> Iterator[AnthropicChatModel]:
    retry = RetryPolicy(max_retries=0, sleep=lambda _: None)
    with AnthropicChatModel(
        "claude-test",
        base_url=server.base_url,
        api_key=API_KEY,
        timeout=5.0,
        retry=retry,
        thinking=1024,
        max_tokens=2048,
    ) as client:
        yield client


def make_agent(model: AnthropicChatModel, **kwargs: Any) -> ReactAgent:
    return ReactAgent(
        "weather_agent", model, tools=[get_weather], instruction="Be helpful.", **kwargs
    )


def check_the_conversation(server: FakeAnthropicServer, messages: list[Any]) -> None:
    assert [type(m).__name__ for m in messages] == [
        "SystemMessage",
        "UserMessage",
        "AssistantMessage",
        "ToolResponseMessage",
        "AssistantMessage",
    ]
    ask = messages[2]
    assert ask.text == "Let me check."
    assert ask.thinking_blocks == [
        ThinkingBlock(
            thinking="The user wants the weather; I should call the tool.", signature="sig-weather"
        )
    ]
    assert isinstance(messages[3], ToolResponseMessage)
    assert messages[3].tool_call_id == "toolu_w1"
    assert messages[-1].text == ANSWER

    first, second = server.bodies
    assert first["system"] == "Be helpful." and second["system"] == "Be helpful."
    assert second["messages"][1] == {
        "role": "assistant",
        "content": [
            {
                "type": "thinking",
                "thinking": "The user wants the weather; I should call the tool.",
                "signature": "sig-weather",
            },
            {"type": "text", "text": "Let me check."},
            {
                "type": "tool_use",
                "id": "toolu_w1",
                "name": "get_weather",
                "input": {"city": "Hangzhou"},
            },
        ],
    }
    assert second["messages"][2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_w1",
                "content": "Sunny, 25 celsius in Hangzhou",
            }
        ],
    }


@pytest.mark.parametrize("mode", ["invoke", "stream", "ainvoke"])
def test_a_tool_use_round_trip_runs_the_tool_and_sends_the_thinking_back(
    server: FakeAnthropicServer, model: AnthropicChatModel, mode: str
) -> None:
    server.enqueue(*script())
    agent = make_agent(model)
    config = RunnableConfig(thread_id="t")
    if mode == "invoke":
        state = agent.invoke("Weather in Hangzhou?", config)
    elif mode == "stream":
        outputs = list(agent.stream("Weather in Hangzhou?", config))
        state = outputs[-1].state
    else:

        async def run() -> Any:
            try:
                return await agent.ainvoke("Weather in Hangzhou?", config)
            finally:
                await model.aclose()

        state = asyncio.run(run())
    assert state is not None
    check_the_conversation(server, list(state["messages"]))
    assert all(body.get("stream") is (mode == "stream" or None) for body in server.bodies)


def test_the_call_after_max_iterations_offers_no_tool_and_the_api_accepts_its_history(
    server: FakeAnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(*script())
    state = make_agent(model, max_iterations=1).invoke(
        "Weather in Hangzhou?", RunnableConfig(thread_id="t")
    )

    assert state["messages"][-1].text == ANSWER
    last = server.bodies[-1]
    assert last["tool_choice"] == {"type": "none"}
    assert [tool["name"] for tool in last["tools"]] == ["get_weather"]


def test_thinking_blocks_survive_a_sqlite_checkpoint_and_go_back_after_a_reload(
    server: FakeAnthropicServer, model: AnthropicChatModel, tmp_path: Path
) -> None:
    path = tmp_path / "threads.db"
    server.enqueue(*script())
    config = RunnableConfig(thread_id="t")
    make_agent(model, saver=SqliteSaver(path)).invoke("Weather in Hangzhou?", config)

    reloaded = make_agent(model, saver=SqliteSaver(path))
    messages = list(reloaded.get_state(config).values["messages"])
    assert messages[2].thinking_blocks[0].signature == "sig-weather"
    server.enqueue(dynamic(lambda request: reply_json(message(text("Still sunny.")))))
    follow_up = reloaded.invoke("And now?", config)
    assert follow_up["messages"][-1].text == "Still sunny."
    assert server.bodies[2]["messages"][1]["content"][0]["signature"] == "sig-weather"
