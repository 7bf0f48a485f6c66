"""How the command line explains the client's errors from a real server: "cannot reach" only
when no connection could be made; a server that answered is never called unreachable."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest

from graph_agent.cli.errors import explain
from graph_agent.messages import UserMessage
from graph_agent.models import (
    ModelConnectionError,
    ModelServerError,
    ModelStreamCutError,
    OpenAIChatModel,
)

from .conftest import Driver
from .openai_fake_server import Behaviour, FakeOpenAIServer, chunk, hang_up, reply_error, reply_sse

ModelFactory = Callable[..., OpenAIChatModel]
HI = [UserMessage("hi")]
TEXT_STREAM = [chunk({"content": word}) for word in ["one ", "two "]]


def failure_of(calls: Driver, how: str, model: OpenAIChatModel) -> Exception | None:
    if how == "generate":
        try:
            calls.generate(model, HI)
        except Exception as exc:
            return exc
        return None
    return calls.stream_until_error(model, HI)[1]


@pytest.mark.parametrize("how", ["generate", "stream"])
def test_a_server_that_answered_an_http_error_then_hung_up_fails_with_that_http_error(
    server: FakeOpenAIServer,
    make_model: ModelFactory,
    calls: Driver,
    sleeps: list[float],
    how: str,
) -> None:
    server.enqueue(reply_error(500, "model is loading"), hang_up, hang_up)
    error = failure_of(calls, how, make_model())
    assert isinstance(error, ModelServerError)
    assert error.status_code == 500
    assert "answered HTTP 500 Internal Server Error: model is loading" in str(error)
    assert "the last attempt's connection then failed: Server disconnected" in str(error)
    assert str(error).endswith("(gave up after 3 attempts)")
    assert isinstance(error.__cause__, Exception)
    assert len(server.requests) == 3
    assert len(sleeps) == 2
    explained = explain(error)
    assert explained is not None
    assert "cannot reach" not in explained.message
    assert explained.message.startswith("the model call failed: ")


@pytest.mark.parametrize(
    "cut",
    [
        reply_sse(TEXT_STREAM),
        reply_sse(TEXT_STREAM, done=False),
        reply_sse(TEXT_STREAM, drop_after=2),
    ],
    ids=["done-without-finish-reason", "no-done-no-finish-reason", "connection-dropped"],
)
def test_a_stream_cut_after_its_first_chunks_is_explained_as_an_answer_that_broke_off(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver, cut: Behaviour
) -> None:
    server.enqueue(cut)
    chunks, error = calls.stream_until_error(make_model(), HI)
    assert [c.text for c in chunks] == ["one ", "two "]
    assert isinstance(error, ModelStreamCutError)
    explained = explain(error)
    assert explained is not None
    assert explained.message.startswith("the model server's answer broke off: model 'fake-model'")
    assert "cannot reach" not in explained.message
    assert "another request" in explained.hint


def test_a_server_nobody_listens_on_is_still_explained_as_unreachable(
    make_model: ModelFactory, calls: Driver
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    model = make_model(base_url=f"http://127.0.0.1:{closed_port}/v1", max_retries=0)
    error = failure_of(calls, "stream", model)
    assert type(error) is ModelConnectionError
    explained = explain(error)
    assert explained is not None
    assert explained.message.startswith("cannot reach the model server: ")
