"""Fixtures of the agent tests that talk to a real local OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from graph_agent.models import OpenAIChatModel, RetryPolicy
from tests.models.openai_fake_server import (
    API_KEY,
    FakeOpenAIServer,
    RecordedRequest,
    dynamic,
    reply_json,
    reply_sse,
)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        yield running


@pytest.fixture
def model(server: FakeOpenAIServer) -> Iterator[OpenAIChatModel]:
    """A client of ``server`` that does not retry."""
    retry = RetryPolicy(max_retries=0, sleep=lambda _: None)
    with OpenAIChatModel(
        "fake-model", base_url=server.base_url, api_key=API_KEY, timeout=5.0, retry=retry
    ) as client:
        yield client


def streamed_or_whole(streamed: list[dict[str, Any]], whole: dict[str, Any]) -> Any:
    """One answer, as SSE ``streamed`` chunks when the request asks for a stream, else
    ``whole``."""

    def choose(request: RecordedRequest) -> Any:
        return reply_sse(streamed) if request.body.get("stream") else reply_json(whole)

    return dynamic(choose)
