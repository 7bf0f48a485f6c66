"""The async face of OpenAIChatModel, used the way an async agent node uses it."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Callable

import httpx
import pytest

import graph_agent.models.http_chat as http_chat
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


async def test_calls_beyond_the_in_flight_limit_wait_and_reuse_its_connections(
    server: FakeOpenAIServer, make_model: ModelFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_chat, "MAX_REQUESTS_IN_FLIGHT", 2)
    server.enqueue(*[reply_json(completion("ok"))] * 6)
    async with make_model() as model:
        calls = asyncio.gather(*(model.agenerate(HI) for _ in range(6)))
        replies = await asyncio.wait_for(calls, timeout=10)
    assert [r.text for r in replies] == ["ok"] * 6
    assert len({request.client_port for request in server.requests}) <= 2


async def test_a_closed_or_failed_request_frees_its_place_in_flight(
    server: FakeOpenAIServer, make_model: ModelFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_chat, "MAX_REQUESTS_IN_FLIGHT", 1)
    server.enqueue(
        reply_sse(STREAM, stall_after=2),
        reply_sse(STREAM, drop_after=1),
        reply_json(completion("next")),
    )
    async with make_model(max_retries=0) as model:
        stream = model.astream(HI)
        assert (await anext(aiter(stream))).text == "a"
        await stream.aclose()  # type: ignore[attr-defined]
        with pytest.raises(ModelConnectionError):
            async for _ in model.astream(HI):
                pass
        reply = await asyncio.wait_for(model.agenerate(HI), timeout=10)
    assert reply.text == "next"


def test_one_model_works_across_separate_event_loops(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.enqueue(reply_json(completion("one")), reply_json(completion("two")))
    model = make_model()

    async def ask() -> str:
        return (await model.agenerate(HI)).text

    assert asyncio.run(ask()) == "one"
    assert asyncio.run(ask()) == "two"


def test_event_loops_that_finished_leave_no_client_and_are_freed(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.enqueue(*[reply_json(completion("ok"))] * 30)
    model = make_model()
    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []
    clients: list[httpx.AsyncClient] = []

    async def ask() -> None:  # without aclose(): asyncio.run's shutdown must clean up
        loop = asyncio.get_running_loop()
        loops.append(weakref.ref(loop))
        await model.agenerate(HI)
        clients.append(model._async_clients[loop][0])

    for _ in range(30):
        asyncio.run(ask())
    gc.collect()
    assert model._async_clients == {}
    assert all(client.is_closed for client in clients)
    assert [ref for ref in loops if ref() is not None] == []


def test_a_loop_closed_without_finalizing_its_generators_is_dropped_by_the_next_loop(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.enqueue(reply_json(completion("one")), reply_json(completion("two")))
    model = make_model()
    bare_loop = asyncio.new_event_loop()
    assert bare_loop.run_until_complete(model.agenerate(HI)).text == "one"
    bare_loop.close()  # no shutdown_asyncgens(): the closer never runs

    async def ask() -> tuple[str, int]:
        return (await model.agenerate(HI)).text, len(model._async_clients)

    assert asyncio.run(ask()) == ("two", 1)
    assert model._async_clients == {}


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
