"""A stream without a finish reason is incomplete (LESSONS #29): retried from the start when
nothing of it was shown yet, a clear error once something was, and never kept as an answer.

llama-cpp-python's server ends a stream this way when another request arrives while it streams:
it sends ``[DONE]`` after the chunks it had, with no ``finish_reason``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator

import pytest

from graph_agent import NodeError, RunnableConfig, StreamingOutput
from graph_agent.agent import ReactAgent
from graph_agent.checkpoint import MemorySaver
from graph_agent.messages import AssistantMessage, UserMessage
from graph_agent.models import (
    ModelConnectionError,
    ModelError,
    ModelStreamCutError,
    OpenAIChatModel,
    RetryPolicy,
    fold_chunks,
)

from .conftest import Driver
from .openai_fake_server import API_KEY, Behaviour, FakeOpenAIServer, chunk, reply_sse

ModelFactory = Callable[..., OpenAIChatModel]
HI = [UserMessage("hi")]
WORDS = ["one ", "two ", "three"]
WHOLE_STREAM = [chunk({"content": word}) for word in WORDS] + [chunk({}, finish_reason="stop")]
CUT_AFTER_TWO_WORDS = reply_sse(WHOLE_STREAM[:2])  # [DONE] follows, with no finish_reason
EMPTY_STREAM = reply_sse([])  # nothing but [DONE]
ROLE_ONLY_STREAM = reply_sse([chunk({"role": "assistant", "content": ""})])


def test_a_stream_that_sends_done_without_a_finish_reason_after_text_fails_and_is_not_retried(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver, sleeps: list[float]
) -> None:
    server.enqueue(CUT_AFTER_TWO_WORDS, reply_sse(WHOLE_STREAM))
    chunks, error = calls.stream_until_error(make_model(), HI)
    assert [c.text for c in chunks] == ["one ", "two "]
    assert isinstance(error, ModelStreamCutError)
    assert isinstance(error, ModelConnectionError)
    assert "[DONE] came without a finish_reason" in str(error)
    assert "not retried: part of the answer had already been streamed" in str(error)
    assert str(error).startswith("model 'fake-model' at http://127.0.0.1:")
    assert len(server.requests) == 1
    assert sleeps == []


@pytest.mark.parametrize(
    "cut", [EMPTY_STREAM, ROLE_ONLY_STREAM], ids=["only-done", "role-chunk-then-done"]
)
def test_a_stream_that_sends_done_without_a_finish_reason_before_any_chunk_is_retried(
    server: FakeOpenAIServer,
    make_model: ModelFactory,
    calls: Driver,
    sleeps: list[float],
    caplog: pytest.LogCaptureFixture,
    cut: Behaviour,
) -> None:
    server.enqueue(cut, reply_sse(WHOLE_STREAM))
    with caplog.at_level(logging.WARNING, logger="graph_agent.models.openai"):
        chunks = calls.stream(make_model(), HI)
    assert [c.text for c in chunks] == [*WORDS, ""]
    assert fold_chunks(chunks).finish_reason == "stop"
    assert len(server.requests) == 2
    assert server.bodies[0] == server.bodies[1]
    assert len(sleeps) == 1  # the backoff before the retry
    (warning,) = [record.getMessage() for record in caplog.records]
    assert "attempt 1 of 3 failed (ModelStreamCutError); retrying in" in warning


def test_streams_without_a_finish_reason_are_retried_only_max_retries_times(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver, sleeps: list[float]
) -> None:
    server.enqueue(EMPTY_STREAM, EMPTY_STREAM, reply_sse(WHOLE_STREAM))
    chunks, error = calls.stream_until_error(make_model(max_retries=1), HI)
    assert chunks == []
    assert isinstance(error, ModelStreamCutError)
    assert "[DONE] came without a finish_reason" in str(error)
    assert "gave up after 2 attempts" in str(error)
    assert len(server.requests) == 2
    assert len(sleeps) == 1


def test_with_max_retries_zero_an_empty_stream_fails_at_once(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver, sleeps: list[float]
) -> None:
    server.enqueue(EMPTY_STREAM, reply_sse(WHOLE_STREAM))
    chunks, error = calls.stream_until_error(make_model(max_retries=0), HI)
    assert (chunks, type(error)) == ([], ModelStreamCutError)
    assert len(server.requests) == 1
    assert sleeps == []


def test_a_stream_with_a_finish_reason_and_done_is_complete(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_sse(WHOLE_STREAM))
    assert fold_chunks(calls.stream(make_model(), HI)).text == "one two three"
    assert len(server.requests) == 1


@pytest.fixture
def agent_model(server: FakeOpenAIServer) -> Iterator[OpenAIChatModel]:
    retry = RetryPolicy(max_retries=2, sleep=lambda _: None, async_sleep=_no_wait)
    with OpenAIChatModel(
        "fake-model", base_url=server.base_url, api_key=API_KEY, timeout=5.0, retry=retry
    ) as model:
        yield model


async def _no_wait(_: float) -> None:
    pass


def _run_streaming(
    agent: ReactAgent, model: OpenAIChatModel, config: RunnableConfig, mode: str
) -> list[object]:
    """Stream one run through the sync or the async face; the outputs, and the error last."""
    outputs: list[object] = []
    if mode == "sync":
        try:
            outputs.extend(agent.stream("Count to three", config))
        except Exception as exc:
            outputs.append(exc)
        return outputs

    async def run() -> None:
        try:
            async for output in agent.astream("Count to three", config):
                outputs.append(output)
        except Exception as exc:
            outputs.append(exc)
        finally:
            await model.aclose()

    asyncio.run(run())
    return outputs


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_agent_streaming_a_cut_answer_fails_and_its_thread_keeps_no_answer(
    server: FakeOpenAIServer, agent_model: OpenAIChatModel, mode: str
) -> None:
    server.enqueue(CUT_AFTER_TWO_WORDS, reply_sse(WHOLE_STREAM))
    saver = MemorySaver()
    agent = ReactAgent("counter", agent_model, saver=saver)
    config = RunnableConfig(thread_id="t")

    *outputs, error = _run_streaming(agent, agent_model, config, mode)

    shown = "".join(o.chunk for o in outputs if isinstance(o, StreamingOutput))
    assert shown == "one two "
    assert isinstance(error, NodeError)
    assert error.node == "__model__"
    assert isinstance(error.__cause__, ModelError)
    assert "[DONE] came without a finish_reason" in str(error.__cause__)
    last = agent.get_state(config).values["messages"]
    assert [m.text for m in last] == ["Count to three"]
    assert not any(isinstance(m, AssistantMessage) for m in last)
    assert len(server.requests) == 1


def test_an_agent_whose_first_stream_was_empty_gets_the_whole_answer_from_the_retry(
    server: FakeOpenAIServer, agent_model: OpenAIChatModel
) -> None:
    server.enqueue(EMPTY_STREAM, reply_sse(WHOLE_STREAM))
    agent = ReactAgent("counter", agent_model, saver=MemorySaver())
    config = RunnableConfig(thread_id="t")

    outputs = list(agent.stream("Count to three", config))

    shown = "".join(o.chunk for o in outputs if isinstance(o, StreamingOutput))
    assert shown == "one two three"
    answer = agent.get_state(config).values["messages"][-1]
    assert isinstance(answer, AssistantMessage)
    assert (answer.text, answer.finish_reason) == ("one two three", "stop")
    assert len(server.requests) == 2
