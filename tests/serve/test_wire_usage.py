"""Token usage on the wire: our Usage as LangChain's ``usage_metadata``, checked with
langchain-core's own classes, and read back from that shape (and OpenAI's)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage

from graph_agent.messages import AssistantMessage, Usage
from graph_agent.serve.wire import WireError, message_from_json, to_json
from graph_agent.serve.wire_usage import UsageError, usage_from_json, usage_json

EVERY_COUNT = Usage(
    prompt_tokens=100,
    completion_tokens=30,
    total_tokens=130,
    cache_read_tokens=60,
    cache_creation_tokens=20,
    prompt_audio_tokens=5,
    reasoning_tokens=12,
    completion_audio_tokens=3,
)
AS_LANGCHAIN_SENDS_IT = {
    "input_tokens": 100,
    "output_tokens": 30,
    "total_tokens": 130,
    "input_token_details": {"audio": 5, "cache_creation": 20, "cache_read": 60},
    "output_token_details": {"audio": 3, "reasoning": 12},
}


def test_usage_goes_out_as_langchains_usage_metadata_with_every_known_detail() -> None:
    assert usage_json(EVERY_COUNT) == AS_LANGCHAIN_SENDS_IT


def test_a_usage_without_a_breakdown_sends_the_three_totals_only() -> None:
    usage = Usage(prompt_tokens=3, completion_tokens=2, total_tokens=5)
    assert usage_json(usage) == {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}


def test_only_the_details_that_are_known_are_sent() -> None:
    sent = usage_json(Usage(prompt_tokens=9, completion_tokens=4, reasoning_tokens=3))
    assert "input_token_details" not in sent
    assert sent["output_token_details"] == {"reasoning": 3}


def test_langchains_ai_message_validates_the_usage_of_a_message_we_send() -> None:
    sent = to_json(AssistantMessage("Four.", usage=EVERY_COUNT))
    assert AIMessage(**sent).usage_metadata == AS_LANGCHAIN_SENDS_IT


def test_langchains_usage_metadata_is_read_back_with_its_details() -> None:
    assert usage_from_json(AS_LANGCHAIN_SENDS_IT) == EVERY_COUNT


def test_usage_in_openais_names_is_read_too() -> None:
    older = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    assert usage_from_json(older) == Usage(prompt_tokens=3, completion_tokens=2, total_tokens=5)


def test_a_missing_total_is_the_sum_of_input_and_output() -> None:
    assert usage_from_json({"input_tokens": 3, "output_tokens": 2}) == Usage(
        prompt_tokens=3, completion_tokens=2, total_tokens=5
    )


def test_an_ai_message_sent_back_keeps_its_usage() -> None:
    sent = AIMessage("Four.", id="m1", usage_metadata=AS_LANGCHAIN_SENDS_IT).model_dump()
    message = message_from_json(sent)
    assert isinstance(message, AssistantMessage) and message.usage == EVERY_COUNT
    assert to_json(message)["usage_metadata"] == AS_LANGCHAIN_SENDS_IT


@pytest.mark.parametrize(
    ("usage", "named"),
    [
        ("many", "usage_metadata is an object"),
        ({"input_tokens": "3", "output_tokens": 2}, "usage_metadata.input_tokens"),
        ({"input_tokens": 3, "output_tokens": True}, "usage_metadata.output_tokens"),
        ({"input_tokens": 3, "input_token_details": [1]}, "usage_metadata.input_token_details"),
        (
            {"input_tokens": 3, "output_token_details": {"reasoning": 1.5}},
            "usage_metadata.output_token_details.reasoning",
        ),
    ],
)
def test_a_malformed_usage_metadata_is_refused_naming_what_is_wrong(usage: Any, named: str) -> None:
    with pytest.raises(UsageError, match=named):
        usage_from_json(usage)
    with pytest.raises(WireError, match=named):  # a request's message: a 422
        message_from_json({"type": "ai", "content": "x", "usage_metadata": usage})
