"""How AnthropicChatModel fails: the API's error bodies as clear errors, retries on 429/529/5xx
honouring retry-after, malformed answers, streams cut before message_stop, and no key shown."""

from __future__ import annotations

import pytest

from graph_agent.messages import UserMessage
from graph_agent.models import (
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelContextLengthError,
    ModelNotFoundError,
    ModelRateLimitError,
    ModelResponseError,
    ModelServerError,
    ModelStreamCutError,
)

from .anthropic_fake_server import (
    API_KEY,
    FakeAnthropicServer,
    anthropic_error,
    message,
    message_events,
    reply_events,
    text,
)
from .conftest import AnthropicFactory, Driver
from .openai_fake_server import reply_json, reply_raw

HI = [UserMessage("hi")]
ANSWER = message(text("one two three"), usage={"input_tokens": 4, "output_tokens": 3})
EVENTS = message_events(ANSWER)  # message_start, ping, block start, 4 deltas, block stop, ...
CUT_AFTER_TEXT = EVENTS.index({"type": "content_block_stop", "index": 0})
CUT_BEFORE_STOP = len(EVENTS) - 1  # everything but message_stop


def test_a_400_with_an_error_body_fails_at_once_with_the_servers_message(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver
) -> None:
    anthropic.enqueue(anthropic_error(400, "invalid_request_error", "temperature: too hot"))
    with pytest.raises(ModelBadRequestError) as caught:
        calls.generate(make_anthropic(), HI)
    assert caught.value.status_code == 400
    assert str(caught.value) == (
        f"model 'claude-test' at {anthropic.base_url} answered HTTP 400 Bad Request: "
        "temperature: too hot"
    )
    assert len(anthropic.requests) == 1


def test_a_request_the_api_refuses_is_a_bad_request_naming_the_rule(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    conversation = [UserMessage("")]  # an empty text block
    with pytest.raises(ModelBadRequestError, match="text content blocks must be non-empty"):
        make_anthropic().generate(conversation)


def test_a_prompt_too_long_is_a_context_length_error(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    anthropic.enqueue(
        anthropic_error(
            400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"
        )
    )
    with pytest.raises(ModelContextLengthError):
        make_anthropic().generate(HI)


def test_a_401_is_an_authentication_error_without_the_key(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver
) -> None:
    anthropic.enqueue(anthropic_error(401, "authentication_error", f"invalid x-api-key {API_KEY}"))
    with pytest.raises(ModelAuthenticationError) as caught:
        calls.generate(make_anthropic(), HI)
    assert "check the API key" in str(caught.value)
    assert API_KEY not in str(caught.value) and "invalid x-api-key ***" in str(caught.value)
    assert len(anthropic.requests) == 1


def test_a_401_without_a_key_says_none_was_given(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    anthropic.enqueue(anthropic_error(401, "authentication_error", "x-api-key header is required"))
    with pytest.raises(ModelAuthenticationError, match="no API key was given"):
        make_anthropic(api_key=None).generate(HI)
    assert "x-api-key" not in anthropic.requests[0].headers


def test_a_404_hints_at_the_model_name_and_the_base_url(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    anthropic.enqueue(anthropic_error(404, "not_found_error", "model: claude-nope"))
    with pytest.raises(ModelNotFoundError, match="requests go to its /v1/messages"):
        make_anthropic().generate(HI)


def test_a_429_then_success_waits_as_long_as_retry_after_says(
    anthropic: FakeAnthropicServer,
    make_anthropic: AnthropicFactory,
    calls: Driver,
    sleeps: list[float],
) -> None:
    anthropic.enqueue(
        anthropic_error(429, "rate_limit_error", "slow down", headers={"retry-after": "3"}),
        reply_json(ANSWER),
    )
    assert calls.generate(make_anthropic(), HI).text == "one two three"
    assert sleeps == [3.0]
    assert len(anthropic.requests) == 2


def test_a_429_asking_for_too_long_a_wait_fails_at_once(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, sleeps: list[float]
) -> None:
    anthropic.enqueue(
        anthropic_error(429, "rate_limit_error", "quota", headers={"retry-after": "600"})
    )
    with pytest.raises(ModelRateLimitError, match="600 s") as caught:
        make_anthropic().generate(HI)
    assert caught.value.retry_after == 600.0 and sleeps == []


def test_a_529_overloaded_is_retried_and_the_answer_after_it_returned(
    anthropic: FakeAnthropicServer,
    make_anthropic: AnthropicFactory,
    calls: Driver,
    sleeps: list[float],
) -> None:
    anthropic.enqueue(anthropic_error(529, "overloaded_error", "Overloaded"), reply_json(ANSWER))
    assert calls.generate(make_anthropic(), HI).text == "one two three"
    assert len(sleeps) == 1 and len(anthropic.requests) == 2


def test_a_529_that_lasts_fails_after_the_retries_with_the_servers_message(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver
) -> None:
    anthropic.enqueue(*[anthropic_error(529, "overloaded_error", "Overloaded")] * 3)
    with pytest.raises(ModelServerError, match="Overloaded") as caught:
        calls.stream(make_anthropic(max_retries=2), HI)
    assert caught.value.status_code == 529
    assert "gave up after 3 attempts" in str(caught.value)
    assert len(anthropic.requests) == 3


def test_an_answer_that_is_not_json_is_a_response_error(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver
) -> None:
    anthropic.enqueue(reply_raw(200, b"<html>gateway</html>", content_type="text/html"))
    with pytest.raises(ModelResponseError, match="not JSON"):
        calls.generate(make_anthropic(), HI)


def test_an_answer_of_the_wrong_shape_is_a_response_error_naming_the_field(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    anthropic.enqueue(reply_json({"type": "message", "content": "not a list"}))
    with pytest.raises(ModelResponseError, match="content should be a list"):
        make_anthropic().generate(HI)


def test_a_stream_event_that_is_not_json_is_a_response_error(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver
) -> None:
    anthropic.enqueue(reply_events([EVENTS[0], '{"type": "content_block_delta", "ind']))
    with pytest.raises(ModelResponseError, match="invalid JSON"):
        calls.stream(make_anthropic(), HI)


def test_a_connection_cut_mid_stream_fails_after_the_chunks_already_given(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver
) -> None:
    anthropic.enqueue(reply_events(EVENTS, drop_after=CUT_AFTER_TEXT))
    chunks, error = calls.stream_until_error(make_anthropic(), HI)
    assert "".join(c.text for c in chunks) == "one two three"
    assert isinstance(error, ModelStreamCutError)
    assert "not retried" in str(error)
    assert len(anthropic.requests) == 1


def test_a_stream_ending_without_message_stop_after_text_is_cut_not_complete(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver
) -> None:
    anthropic.enqueue(reply_events(EVENTS[:CUT_BEFORE_STOP]))
    chunks, error = calls.stream_until_error(make_anthropic(), HI)
    assert isinstance(error, ModelStreamCutError)
    assert "stop_reason 'stop' came, but no message_stop" in str(error)
    assert all(c.finish_reason is None for c in chunks)  # nothing passed for a whole answer
    assert len(anthropic.requests) == 1


def test_an_empty_stream_cut_before_message_stop_is_retried_from_the_start(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver
) -> None:
    empty = message(usage={"input_tokens": 4, "output_tokens": 0})
    cut = message_events(empty)[:-1]
    anthropic.enqueue(reply_events(cut), reply_events(EVENTS))
    chunks = calls.stream(make_anthropic(), HI)
    assert "".join(c.text for c in chunks) == "one two three"
    assert chunks[-1].finish_reason == "stop"
    assert len(anthropic.requests) == 2


def test_an_overloaded_error_event_before_any_text_is_retried(
    anthropic: FakeAnthropicServer,
    make_anthropic: AnthropicFactory,
    calls: Driver,
    sleeps: list[float],
) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    anthropic.enqueue(reply_events([EVENTS[0], overloaded]), reply_events(EVENTS))
    chunks = calls.stream(make_anthropic(), HI)
    assert "".join(c.text for c in chunks) == "one two three"
    assert len(sleeps) == 1 and len(anthropic.requests) == 2


def test_an_error_event_after_text_fails_naming_the_error(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory, calls: Driver
) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    anthropic.enqueue(reply_events([*EVENTS[:CUT_AFTER_TEXT], overloaded]))
    chunks, error = calls.stream_until_error(make_anthropic(), HI)
    assert chunks and isinstance(error, ModelServerError)
    assert "overloaded_error: Overloaded" in str(error) and "not retried" in str(error)
    assert str(error).startswith(f"model 'claude-test' at {anthropic.base_url}: ")
    assert len(anthropic.requests) == 1


def test_an_error_event_echoing_the_key_does_not_show_it(
    anthropic: FakeAnthropicServer, make_anthropic: AnthropicFactory
) -> None:
    leak = {"type": "error", "error": {"type": "invalid_request_error", "message": API_KEY}}
    anthropic.enqueue(reply_events([EVENTS[0], leak]))
    with pytest.raises(ModelResponseError) as caught:
        list(make_anthropic().stream(HI))
    assert API_KEY not in str(caught.value) and "***" in str(caught.value)
