"""What the server sends, read with LangChain's own classes (langchain-core): every message
type and streamed chunks."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core import messages as langchain
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    ToolMessage,
    convert_to_messages,
    messages_from_dict,
)

from graph_agent.messages import (
    AssistantMessage,
    AssistantMessageChunk,
    ImagePart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from graph_agent.serve.wire import (
    to_json,
)

USAGE = Usage(prompt_tokens=12, completion_tokens=3, total_tokens=15, cache_read_tokens=8)
EVERY_TYPE = [
    (UserMessage("Hi", id="h1"), HumanMessage),
    (UserMessage([TextPart("What is this?"), ImagePart(url="https://x.test/a.png")]), HumanMessage),
    (SystemMessage("Be brief.", id="s1"), langchain.SystemMessage),
    (
        AssistantMessage(
            "Let me add.",
            id="a1",
            tool_calls=[ToolCall("c1", "add", {"a": 1, "b": 2})],
            finish_reason="tool_calls",
            usage=USAGE,
        ),
        AIMessage,
    ),
    (ToolResponseMessage(tool_call_id="c1", name="add", content="3", is_error=True), ToolMessage),
]


@pytest.mark.parametrize(("ours", "theirs"), EVERY_TYPE, ids=lambda v: getattr(v, "role", ""))
def test_every_message_we_send_validates_as_langchains_own_class(ours: Any, theirs: type) -> None:
    sent = to_json(ours)
    message = theirs(**sent)
    assert message.id == ours.id and message.content == sent["content"]
    assert message.model_dump() == {**message.model_dump(), **sent}  # nothing lost or changed


@pytest.mark.parametrize(("ours", "theirs"), EVERY_TYPE, ids=lambda v: getattr(v, "role", ""))
def test_convert_to_messages_reads_our_messages_as_it_reads_langchains_own(
    ours: Any, theirs: type
) -> None:
    sent = to_json(ours)
    langchains_own = theirs(**sent).model_dump()
    assert convert_to_messages([sent]) == convert_to_messages([langchains_own])


@pytest.mark.parametrize(("ours", "theirs"), EVERY_TYPE, ids=lambda v: getattr(v, "role", ""))
def test_messages_from_dict_rebuilds_our_messages(ours: Any, theirs: type) -> None:
    sent = to_json(ours)
    (message,) = messages_from_dict([{"type": sent["type"], "data": sent}])
    assert message == theirs(**sent)


def test_an_ai_messages_tool_calls_and_usage_arrive_in_langchains_fields() -> None:
    message = AIMessage(**to_json(EVERY_TYPE[3][0]))
    assert message.tool_calls == [
        {"id": "c1", "name": "add", "args": {"a": 1, "b": 2}, "type": "tool_call"}
    ]
    assert message.usage_metadata == {
        "input_tokens": 12,
        "output_tokens": 3,
        "total_tokens": 15,
        "input_token_details": {"cache_read": 8},
    }


def test_a_streamed_chunk_validates_as_langchains_ai_message_chunk() -> None:
    chunk = AssistantMessageChunk(
        "Let",
        id="a1",
        tool_call_deltas=[ToolCallDelta(index=0, id="c1", name="add", arguments='{"a": 1')],
        finish_reason="tool_calls",
        usage=USAGE,
    )
    message = AIMessageChunk(**to_json(chunk))
    assert (
        message.content == "Let"
        and message.usage_metadata
        == AIMessage(**to_json(AssistantMessage(usage=USAGE))).usage_metadata
    )
    assert [(c["index"], c["id"], c["name"], c["args"]) for c in message.tool_call_chunks] == [
        (0, "c1", "add", '{"a": 1')
    ]
