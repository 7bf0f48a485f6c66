"""How OpenAIChatModel fails: retries, Retry-After, timeouts, dropped streams, clear errors."""

from __future__ import annotations

import json
import logging
import re
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from graph_agent.graph.errors import GraphAgentError, ModelError
from graph_agent.messages import UserMessage
from graph_agent.models import (
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelConnectionError,
    ModelContextLengthError,
    ModelNotFoundError,
    ModelRateLimitError,
    ModelResponseError,
    ModelServerError,
    ModelTimeoutError,
    OpenAIChatModel,
    RetryPolicy,
    fold_chunks,
)
from graph_agent.models import retry as retry_module

from .conftest import Driver
from .openai_fake_server import (
    Behaviour,
    FakeOpenAIServer,
    chunk,
    completion,
    reply_error,
    reply_json,
    reply_raw,
    reply_sse,
    stall,
)

ModelFactory = Callable[..., OpenAIChatModel]
HI = [UserMessage("hi")]
TEXT_STREAM = [chunk({"content": piece}) for piece in ["one ", "two ", "three"]] + [
    chunk({}, finish_reason="stop")
]


def test_a_500_is_retried_and_the_answer_after_it_returned(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver, sleeps: list[float]
) -> None:
    server.enqueue(reply_error(500, "boom"), reply_json(completion("fine")))
    assert calls.generate(make_model(), HI).text == "fine"
    assert len(server.requests) == 2
    assert len(sleeps) == 1


@pytest.mark.parametrize("status", [408, 409, 502, 503, 504])
def test_timeouts_conflicts_and_gateway_errors_are_retried(
    server: FakeOpenAIServer, make_model: ModelFactory, status: int
) -> None:
    server.enqueue(reply_raw(status), reply_json(completion("fine")))
    assert make_model().generate(HI).text == "fine"


def test_a_429_with_retry_after_waits_as_long_as_the_server_asks(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver, sleeps: list[float]
) -> None:
    server.enqueue(
        reply_error(429, "slow down", headers={"Retry-After": "3"}), reply_json(completion("ok"))
    )
    assert calls.generate(make_model(), HI).text == "ok"
    assert sleeps == [3.0]


def test_a_429_with_retry_after_is_really_waited_for(server: FakeOpenAIServer) -> None:
    server.enqueue(
        reply_error(429, "slow down", headers={"Retry-After": "1"}), reply_json(completion("ok"))
    )
    with OpenAIChatModel("fake-model", base_url=server.base_url) as model:
        started = time.monotonic()
        assert model.generate(HI).text == "ok"
    assert time.monotonic() - started >= 0.95


def test_retry_after_ms_is_preferred_to_retry_after(
    server: FakeOpenAIServer, make_model: ModelFactory, sleeps: list[float]
) -> None:
    headers = {"Retry-After": "2", "retry-after-ms": "150"}
    server.enqueue(reply_error(429, "slow down", headers=headers), reply_json(completion("ok")))
    make_model().generate(HI)
    assert sleeps == [0.15]


def test_retry_after_as_an_http_date_is_honoured(
    server: FakeOpenAIServer,
    make_model: ModelFactory,
    sleeps: list[float],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pinned = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    monkeypatch.setattr(retry_module, "now", lambda: pinned)
    when = format_datetime(pinned + timedelta(seconds=7), usegmt=True)
    server.enqueue(reply_raw(503, headers={"Retry-After": when}), reply_json(completion("ok")))
    make_model().generate(HI)
    assert sleeps == [7.0]


def test_a_retry_after_above_120_seconds_fails_at_once_saying_so(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver, sleeps: list[float]
) -> None:
    server.enqueue(reply_error(429, "quota", headers={"Retry-After": "600"}))
    with pytest.raises(ModelRateLimitError, match="600 s") as caught:
        calls.generate(make_model(), HI)
    assert caught.value.status_code == 429
    assert caught.value.retry_after == 600.0
    assert "120 s" in str(caught.value)
    assert len(server.requests) == 1
    assert sleeps == []


@pytest.mark.parametrize("headers", [{"Retry-After": "nan"}, {"retry-after-ms": "NaN"}])
def test_a_retry_after_that_is_not_a_number_is_ignored_for_the_backoff(
    server: FakeOpenAIServer,
    make_model: ModelFactory,
    calls: Driver,
    sleeps: list[float],
    headers: dict[str, str],
) -> None:
    server.enqueue(reply_error(429, "slow down", headers=headers), reply_json(completion("ok")))
    assert calls.generate(make_model(), HI).text == "ok"
    assert len(sleeps) == 1
    assert 0.375 <= sleeps[0] <= 0.5  # the first backoff of the default policy


def test_a_retry_after_ms_that_is_not_a_number_falls_back_to_retry_after(
    server: FakeOpenAIServer, make_model: ModelFactory, sleeps: list[float]
) -> None:
    headers = {"Retry-After": "2", "retry-after-ms": "nan"}
    server.enqueue(reply_error(429, "slow down", headers=headers), reply_json(completion("ok")))
    make_model().generate(HI)
    assert sleeps == [2.0]


def test_an_infinite_retry_after_fails_at_once_as_too_long(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver, sleeps: list[float]
) -> None:
    server.enqueue(reply_error(429, "quota", headers={"Retry-After": "inf"}))
    with pytest.raises(ModelRateLimitError, match="longer than the 120 s") as caught:
        calls.generate(make_model(), HI)
    assert caught.value.retry_after == float("inf")
    assert len(server.requests) == 1
    assert sleeps == []


def test_without_retry_after_the_backoff_doubles_with_jitter(
    server: FakeOpenAIServer, make_model: ModelFactory, sleeps: list[float]
) -> None:
    server.enqueue(*[reply_raw(500)] * 3, reply_json(completion("ok")))
    model = make_model(max_retries=3, retry=RetryPolicy(initial_delay=1.0, sleep=sleeps.append))
    model.generate(HI)
    assert len(sleeps) == 3
    for number, delay in enumerate(sleeps):
        assert 0.75 * 2**number <= delay <= 2**number


def test_retries_end_after_max_retries_with_a_server_error(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(*[reply_error(503, "overloaded")] * 3)
    with pytest.raises(ModelServerError, match="overloaded") as caught:
        calls.generate(make_model(), HI)
    assert caught.value.status_code == 503
    assert "after 3 attempts" in str(caught.value)
    assert len(server.requests) == 3


def test_a_429_that_persists_raises_a_rate_limit_error(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.enqueue(*[reply_error(429, "rate limited")] * 2)
    with pytest.raises(ModelRateLimitError, match="rate limited"):
        make_model(max_retries=1).generate(HI)


def test_max_retries_zero_never_retries(server: FakeOpenAIServer, make_model: ModelFactory) -> None:
    server.enqueue(reply_error(500, "boom"))
    with pytest.raises(ModelServerError):
        make_model(max_retries=0).generate(HI)
    assert len(server.requests) == 1


def test_a_400_raises_a_bad_request_error_with_the_server_message_and_no_retry(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_error(400, "temperature must be at most 2"))
    with pytest.raises(ModelBadRequestError) as caught:
        calls.generate(make_model(), HI)
    assert caught.value.status_code == 400
    assert "HTTP 400" in str(caught.value)
    assert "temperature must be at most 2" in str(caught.value)
    assert "fake-model" in str(caught.value)
    assert len(server.requests) == 1


def test_an_error_body_that_is_plain_text_is_shown_as_is(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.enqueue(reply_raw(422, b"Input validation error: `top_k` must be positive"))
    with pytest.raises(ModelBadRequestError, match="top_k"):
        make_model().generate(HI)


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("This model's maximum context length is 8192 tokens.", "context_length_exceeded"),
        ("the request exceeds the available context size, try increasing it", None),
    ],
)
def test_a_conversation_too_long_for_the_model_is_a_context_length_error(
    server: FakeOpenAIServer, make_model: ModelFactory, message: str, code: str | None
) -> None:
    server.enqueue(reply_error(400, message, code=code))
    with pytest.raises(ModelContextLengthError):
        make_model().generate(HI)


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_raises_an_authentication_error(
    server: FakeOpenAIServer, make_model: ModelFactory, status: int
) -> None:
    server.enqueue(reply_error(status, "Incorrect API key provided"))
    with pytest.raises(ModelAuthenticationError, match="check the API key"):
        make_model().generate(HI)
    assert len(server.requests) == 1


def test_a_401_without_a_key_says_that_none_was_given(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.enqueue(reply_error(401, "missing key"))
    with pytest.raises(ModelAuthenticationError, match="no API key was given"):
        make_model(api_key=None).generate(HI)


def test_a_404_points_at_the_model_name_and_base_url(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.enqueue(reply_error(404, "model 'fake-model' not found"))
    with pytest.raises(ModelNotFoundError, match="base_url"):
        make_model().generate(HI)


def test_model_errors_belong_to_the_graph_agent_error_tree(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    server.enqueue(reply_error(400, "bad"))
    with pytest.raises(ModelError) as caught:
        make_model().generate(HI)
    assert isinstance(caught.value, GraphAgentError)
    assert isinstance(caught.value, RuntimeError)


def test_an_unreachable_server_raises_a_connection_error_after_the_retries(
    make_model: ModelFactory, calls: Driver, sleeps: list[float]
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    model = make_model(base_url=f"http://127.0.0.1:{free_port}/v1", max_retries=1)
    with pytest.raises(ModelConnectionError, match="connection failed"):
        calls.generate(model, HI)
    assert len(sleeps) == 1


def test_a_read_timeout_raises_a_timeout_error_after_the_retries(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(stall(), stall())
    with pytest.raises(ModelTimeoutError, match="did not answer in time"):
        calls.generate(make_model(timeout=0.2, max_retries=1), HI)
    assert len(server.requests) == 2


def test_a_connection_dropped_mid_stream_raises_and_is_not_retried(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_sse(TEXT_STREAM, drop_after=2), reply_sse(TEXT_STREAM))
    chunks, error = calls.stream_until_error(make_model(), HI)
    assert [c.text for c in chunks] == ["one ", "two "]
    assert isinstance(error, ModelConnectionError)
    assert len(server.requests) == 1


def test_a_stream_stalling_mid_way_raises_a_timeout_and_is_not_retried(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_sse(TEXT_STREAM, stall_after=1))
    chunks, error = calls.stream_until_error(make_model(timeout=0.2), HI)
    assert [c.text for c in chunks] == ["one "]
    assert isinstance(error, ModelTimeoutError)
    assert len(server.requests) == 1


STREAM_BREAKS = {
    "connection dropped": (reply_sse(TEXT_STREAM, drop_after=2), ModelConnectionError),
    "ended without finish": (reply_sse(TEXT_STREAM[:2], done=False), ModelConnectionError),
    "stalled": (reply_sse(TEXT_STREAM, stall_after=2), ModelTimeoutError),
}


@pytest.mark.parametrize("kind", STREAM_BREAKS)
def test_a_stream_broken_after_a_chunk_announces_no_retry_it_will_not_make(
    server: FakeOpenAIServer,
    make_model: ModelFactory,
    calls: Driver,
    sleeps: list[float],
    caplog: pytest.LogCaptureFixture,
    kind: str,
) -> None:
    behaviour, error_type = STREAM_BREAKS[kind]
    server.enqueue(behaviour, reply_sse(TEXT_STREAM))
    with caplog.at_level(logging.DEBUG, logger="graph_agent.models.openai"):
        chunks, error = calls.stream_until_error(make_model(timeout=0.2), HI)
    assert [c.text for c in chunks] == ["one ", "two "]
    assert isinstance(error, error_type)
    assert "not retried: part of the answer had already been streamed" in str(error)
    assert "gave up after" not in str(error)
    logged = [record.getMessage() for record in caplog.records]
    assert not [line for line in logged if "retrying" in line], logged
    assert [line for line in logged if "not retried" in line]
    assert sleeps == []
    assert len(server.requests) == 1


def test_a_stream_broken_after_a_retry_and_a_chunk_says_it_was_not_retried_again(
    server: FakeOpenAIServer,
    make_model: ModelFactory,
    calls: Driver,
    sleeps: list[float],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.enqueue(reply_error(503, "warming up"), reply_sse(TEXT_STREAM, drop_after=1))
    with caplog.at_level(logging.WARNING, logger="graph_agent.models.openai"):
        chunks, error = calls.stream_until_error(make_model(), HI)
    assert [c.text for c in chunks] == ["one "]
    assert isinstance(error, ModelConnectionError)
    assert "not retried" in str(error)
    (warning,) = [record.getMessage() for record in caplog.records]
    assert "attempt 1 of 3 failed (HTTP 503); retrying in" in warning
    assert len(sleeps) == 1
    assert len(server.requests) == 2


def test_a_stream_dropped_before_its_first_chunk_logs_the_retry_it_makes(
    server: FakeOpenAIServer,
    make_model: ModelFactory,
    calls: Driver,
    sleeps: list[float],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.enqueue(reply_sse(TEXT_STREAM, drop_after=0), reply_sse(TEXT_STREAM))
    with caplog.at_level(logging.WARNING, logger="graph_agent.models.openai"):
        assert fold_chunks(calls.stream(make_model(), HI)).text == "one two three"
    (warning,) = [record.getMessage() for record in caplog.records]
    match = re.search(
        r"attempt 1 of 3 failed \(ModelStreamCutError\); retrying in ([\d.]+) s", warning
    )
    assert match is not None, warning
    assert sleeps == [pytest.approx(float(match.group(1)), abs=0.005)]


def test_a_connection_dropped_before_the_first_chunk_is_retried(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_sse(TEXT_STREAM, drop_after=0), reply_sse(TEXT_STREAM))
    reply = fold_chunks(calls.stream(make_model(), HI))
    assert reply.text == "one two three"
    assert len(server.requests) == 2


def test_a_stream_refused_with_500_is_retried_before_anything_was_yielded(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_error(500, "warming up"), reply_sse(TEXT_STREAM))
    assert fold_chunks(calls.stream(make_model(), HI)).text == "one two three"
    assert len(server.requests) == 2


def test_a_stream_refused_with_400_raises_the_server_message(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_error(400, "unknown field"))
    with pytest.raises(ModelBadRequestError, match="unknown field"):
        calls.stream(make_model(), HI)


def test_a_stream_cut_off_cleanly_before_its_finish_reason_is_not_a_whole_answer(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(reply_sse(TEXT_STREAM[:2], done=False))
    chunks, error = calls.stream_until_error(make_model(), HI)
    assert [c.text for c in chunks] == ["one ", "two "]
    assert isinstance(error, ModelConnectionError)
    assert "ended before the answer was finished" in str(error)
    assert len(server.requests) == 1


def test_a_consumer_that_stops_early_leaves_the_model_usable(
    server: FakeOpenAIServer, make_model: ModelFactory
) -> None:
    model = make_model()
    server.enqueue(reply_sse(TEXT_STREAM), reply_json(completion("again")))
    stream = model.stream(HI)
    assert next(iter(stream)).text == "one "
    stream.close()  # type: ignore[attr-defined]
    assert model.generate(HI).text == "again"


def bad_gzip(status: int, content_type: str) -> Behaviour:
    """A body sent as gzip that is not (as a misconfigured proxy does)."""
    body = json.dumps(completion("hi")).encode()
    return reply_raw(status, body, content_type=content_type, headers={"Content-Encoding": "gzip"})


@pytest.mark.parametrize(
    ("call", "reply"),
    [
        ("generate", bad_gzip(200, "application/json")),
        ("generate", bad_gzip(400, "application/json")),
        ("stream", bad_gzip(200, "text/event-stream")),
        ("stream", bad_gzip(200, "application/json")),
        ("stream", bad_gzip(400, "application/json")),
    ],
    ids=["generate", "generate-400", "stream", "stream-answered-whole", "stream-400"],
)
def test_a_body_that_cannot_be_decompressed_is_a_response_error_naming_the_model(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver, call: str, reply: Behaviour
) -> None:
    server.enqueue(reply)
    model = make_model()
    if call == "generate":
        with pytest.raises(ModelResponseError) as caught:
            calls.generate(model, HI)
        error: Exception | None = caught.value
    else:
        _, error = calls.stream_until_error(model, HI)
    assert isinstance(error, ModelResponseError)
    assert str(error).startswith("model 'fake-model' at http://127.0.0.1:")
    assert "does not match its Content-Encoding" in str(error)
    assert "'Accept-Encoding': 'identity'" in str(error)
    assert len(server.requests) == 1


def test_a_body_that_cannot_be_decompressed_leaves_the_model_usable(
    server: FakeOpenAIServer, make_model: ModelFactory, calls: Driver
) -> None:
    server.enqueue(bad_gzip(200, "text/event-stream"), reply_json(completion("fine")))
    model = make_model()
    assert isinstance(calls.stream_until_error(model, HI)[1], ModelResponseError)
    assert calls.generate(model, HI).text == "fine"
