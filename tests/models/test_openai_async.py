"""The async face of OpenAIChatModel, used the way an async agent node uses it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from graph_agent.messages import UserMessage
from graph_agent.models import ModelConnectionError, OpenAIChatModel, fold_chunks

from .openai_fake_server import FakeOpenAIServer, chunk, completion, reply_json, reply_sse

ModelFactory = Callable[..., OpenAIChatModel]
HI = [UserMessage("hi")]
STREAM = [chunk({"content": p}) for p in ["a", "b", "c"]] + [chunk({}, finish_reason="stop")]


async def test_agenerate_returns_the_answer(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.enqueue(reply_json(completion("async hello")))
    async with make_model() as model:
        assert (await model.agenerate(HI)).text == "async hello"


async def test_astream_yields_chunks_that_fold_into_the_answer(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.enqueue(reply_sse(STREAM))
    async with make_model() as model:
        chunks = [c async for c in model.astream(HI)]
    assert [c.text for c in chunks] == ["a", "b", "c", ""]
    assert fold_chunks(chunks).text == "abc"


async def test_astream_dropped_mid_stream_raises_after_the_chunks_it_got(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.enqueue(reply_sse(STREAM, drop_after=2))
    received: list[str] = []
    async with make_model() as model:
        with pytest.raises(ModelConnectionError):
            async for c in model.astream(HI):
                received.append(c.text)
    assert received == ["a", "b"]
    assert len(server.requests) == 1


async def test_the_async_client_reuses_one_connection_within_a_loop(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.enqueue(*[reply_json(completion("ok"))] * 3)
    async with make_model() as model:
        for _ in range(3):
            await model.agenerate(HI)
    assert len({request.client_port for request in server.requests}) == 1


async def test_concurrent_async_calls_share_the_model(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.enqueue(*[reply_json(completion("ok"))] * 4)
    async with make_model() as model:
        replies = await asyncio.gather(*(model.agenerate(HI) for _ in range(4)))
    assert [r.text for r in replies] == ["ok"] * 4


def test_one_model_works_across_separate_event_loops(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.enqueue(reply_json(completion("one")), reply_json(completion("two")))
    model = make_model()

    async def ask() -> str:
        return (await model.agenerate(HI)).text

    assert asyncio.run(ask()) == "one"
    assert asyncio.run(ask()) == "two"


@pytest.mark.parametrize("face", ["sync", "async"])
def test_a_caller_can_stop_reading_a_stream_and_call_again(
    server: FakeOpenAIServer, make_model: ModelFactory, face: str
) -> None:
    server.enqueue(reply_sse(STREAM, stall_after=2), reply_json(completion("next")))
    model = make_model()

    def sync_face() -> tuple[str, str]:
        stream = model.stream(HI)
        first = next(iter(stream)).text
        stream.close()  # type: ignore[attr-defined]
        return first, model.generate(HI).text

    async def async_face() -> tuple[str, str]:
        stream = model.astream(HI)
        first = (await anext(aiter(stream))).text
        await stream.aclose()  # type: ignore[attr-defined]
        try:
            return first, (await model.agenerate(HI)).text
        finally:
            await model.aclose()

    answers = sync_face() if face == "sync" else asyncio.run(async_face())
    assert answers == ("a", "next")
