"""Fixtures for the model tests: the fake OpenAI server, models pointed at it, and the
guarantee that no test reaches the internet or reads real provider keys."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import pytest

from graph_agent.messages import AssistantMessage, AssistantMessageChunk, Message
from graph_agent.models import AnthropicChatModel, OpenAIChatModel, RetryPolicy
from graph_agent.models.base import ToolLike
from graph_agent.models.http_chat import HTTPChatModel

from .anthropic_fake_server import FakeAnthropicServer
from .openai_fake_server import API_KEY, FakeOpenAIServer

AnthropicFactory = Callable[..., AnthropicChatModel]
M = TypeVar("M", bound=HTTPChatModel)

_PROVIDER_VARIABLES = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "DASHSCOPE_API_KEY",
    "DASHSCOPE_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
)


def _is_loopback(host: object) -> bool:
    if not isinstance(host, str):
        return True  # unix sockets and the like
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to resolve or connect to a non-loopback host fails the test loudly."""
    real_connect = socket.socket.connect
    real_getaddrinfo = socket.getaddrinfo

    def connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address[0]):
            raise AssertionError(f"a test tried to reach the internet: {address!r}")
        return real_connect(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, bytes):
            host = host.decode()
        if host is not None and not _is_loopback(host):
            raise AssertionError(f"a test tried to resolve a public name: {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture(autouse=True)
def no_provider_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _PROVIDER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        yield running


@pytest.fixture
def sleeps() -> list[float]:
    """The delays the retrying client asked to sleep (it does not really sleep)."""
    return []


def _models_of(
    cls: type[M], name: str, base_url: str, sleeps: list[float]
) -> Iterator[Callable[..., M]]:
    """A factory of ``cls`` models talking to ``base_url``, with recorded, instant retries;
    every model it made is closed at the end of the test."""
    made: list[M] = []

    async def record_async_sleep(delay: float) -> None:
        sleeps.append(delay)

    def make(**overrides: Any) -> M:
        arguments: dict[str, Any] = {
            "base_url": base_url,
            "api_key": API_KEY,
            "timeout": 5.0,
            "retry": RetryPolicy(sleep=sleeps.append, async_sleep=record_async_sleep),
        }
        arguments.update(overrides)
        model = cls(name, **arguments)
        made.append(model)
        return model

    yield make
    for model in made:
        model.close()


@pytest.fixture
def make_model(
    server: FakeOpenAIServer, sleeps: list[float]
) -> Iterator[Callable[..., OpenAIChatModel]]:
    """Build an OpenAIChatModel talking to the fake server, with recorded, instant retries."""
    yield from _models_of(OpenAIChatModel, "fake-model", server.base_url, sleeps)


@pytest.fixture
def anthropic() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as running:
        yield running


@pytest.fixture
def make_anthropic(
    anthropic: FakeAnthropicServer, sleeps: list[float]
) -> Iterator[AnthropicFactory]:
    """Build an AnthropicChatModel talking to the fake Messages server, as ``make_model``."""
    yield from _models_of(AnthropicChatModel, "claude-test", anthropic.base_url, sleeps)


class Driver:
    """Runs a model call through the sync or the async API, so one test covers both."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def generate(
        self,
        model: HTTPChatModel,
        messages: Sequence[Message],
        tools: Sequence[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AssistantMessage:
        if self.mode == "sync":
            return model.generate(messages, tools, options)

        async def run() -> AssistantMessage:
            try:
                return await model.agenerate(messages, tools, options)
            finally:
                await model.aclose()

        return asyncio.run(run())

    def stream(
        self,
        model: HTTPChatModel,
        messages: Sequence[Message],
        tools: Sequence[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> list[AssistantMessageChunk]:
        chunks, error = self.stream_until_error(model, messages, tools, options)
        if error is not None:
            raise error
        return chunks

    def stream_until_error(
        self,
        model: HTTPChatModel,
        messages: Sequence[Message],
        tools: Sequence[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> tuple[list[AssistantMessageChunk], Exception | None]:
        """The chunks received, and the exception that ended the stream (if one did)."""
        chunks: list[AssistantMessageChunk] = []
        if self.mode == "sync":
            try:
                for chunk in model.stream(messages, tools, options):
                    chunks.append(chunk)
            except Exception as exc:
                return chunks, exc
            return chunks, None

        async def run() -> Exception | None:
            try:
                async for chunk in model.astream(messages, tools, options):
                    chunks.append(chunk)
            except Exception as exc:
                return exc
            finally:
                await model.aclose()
            return None

        return chunks, asyncio.run(run())


@pytest.fixture(params=["sync", "async"])
def calls(request: pytest.FixtureRequest) -> Driver:
    """The sync or the async face of a model (each test using it runs twice)."""
    return Driver(request.param)
