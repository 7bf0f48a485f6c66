"""A thread whose answer is a ``return_direct`` tool's image goes on, on both HTTP models.

The answer is an ``AssistantMessage`` holding an ``ImagePart``; neither API takes images in
assistant turns (each local server refuses them, as the real one does), so the next turn's
request carries the answer as text with a placeholder. Its image is not sent again: the tool
result before it holds the same image, which the model sees there.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from graph_agent import RunnableConfig, tool
from graph_agent.agent import ReactAgent
from graph_agent.agent.return_direct import RETURN_DIRECT
from graph_agent.messages import ImagePart, TextPart
from graph_agent.models import AnthropicChatModel, OpenAIChatModel, RetryPolicy
from graph_agent.models.http_chat import HTTPChatModel
from tests.media import PNG
from tests.models.anthropic_fake_server import FakeAnthropicServer, message, text, tool_use
from tests.models.openai_fake_server import (
    API_KEY,
    FakeOpenAIServer,
    completion,
    reply_json,
    tool_call,
)

CHART = ImagePart(data=PNG, media_type="image/png")
PLACEHOLDER = "Your chart: [image: image/png, 12 KB]"


@tool(return_direct=True)
def chart() -> list[object]:
    """Draw the sales chart."""
    return [TextPart("Your chart:"), CHART]


class Provider:
    """A local server of one API, a model talking to it, and that API's replies."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.server = FakeAnthropicServer() if name == "anthropic" else FakeOpenAIServer()
        retry = RetryPolicy(max_retries=0, sleep=lambda _: None)
        cls: type[HTTPChatModel] = AnthropicChatModel if name == "anthropic" else OpenAIChatModel
        self.model = cls(
            "claude-test" if name == "anthropic" else "fake-model",
            base_url=self.server.base_url,
            api_key=API_KEY,
            timeout=5.0,
            retry=retry,
        )

    def calls_chart(self) -> Any:
        if self.name == "anthropic":
            return reply_json(message(tool_use("toolu_c", "chart", {}), stop_reason="tool_use"))
        return reply_json(
            completion("", tool_calls=[tool_call("c1", "chart", {})], finish_reason="tool_calls")
        )

    def says(self, words: str) -> Any:
        return reply_json(message(text(words)) if self.name == "anthropic" else completion(words))


@pytest.fixture(params=["anthropic", "openai"])
def provider(request: pytest.FixtureRequest) -> Iterator[Provider]:
    made = Provider(request.param)
    with made.server, made.model:
        yield made


def test_a_thread_goes_on_after_an_image_answer(provider: Provider) -> None:
    provider.server.enqueue(provider.calls_chart(), provider.says("Sales rise."))
    agent = ReactAgent("plots", provider.model, tools=[chart])
    config = RunnableConfig(thread_id="t")

    first = agent.invoke("Chart the sales.", config)
    assert first["messages"][-1].finish_reason == RETURN_DIRECT
    assert first["messages"][-1].content == [TextPart("Your chart:"), CHART]
    follow_up = agent.invoke("What does it show?", config)

    assert follow_up["messages"][-1].text == "Sales rise."
    turns = provider.server.bodies[-1]["messages"]
    # the answer goes as text; its image, which the tool result already showed, is not
    # sent a second time
    if provider.name == "anthropic":
        result, answer, question = turns[2:]
        assert [block["type"] for block in result["content"][0]["content"]] == ["text", "image"]
        assert answer == {"role": "assistant", "content": [{"type": "text", "text": PLACEHOLDER}]}
        assert question == {"role": "user", "content": "What does it show?"}
    else:
        roles = [turn["role"] for turn in turns]
        assert roles == ["user", "assistant", "tool", "user", "assistant", "user"]
        assert turns[3]["content"][1]["image_url"]["url"] == f"data:image/png;base64,{PNG}"
        assert turns[4] == {"role": "assistant", "content": PLACEHOLDER}
        assert turns[5] == {"role": "user", "content": "What does it show?"}
