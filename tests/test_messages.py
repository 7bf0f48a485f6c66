"""Messages: frozen pydantic models with ids, positional text, and the shapes of DESIGN §9."""

from __future__ import annotations

import uuid

import pydantic
import pytest

from graph_agent import messages as messages_module
from graph_agent.checkpoint import serde
from graph_agent.graph.state import RemoveMessage as StateRemoveMessage
from graph_agent.graph.state import ReplaceAll as StateReplaceAll
from graph_agent.messages import (
    AssistantMessage,
    AssistantMessageChunk,
    Message,
    RemoveMessage,
    ReplaceAll,
    SystemMessage,
    ToolCall,
    ToolCallDelta,
    ToolResponseMessage,
    Usage,
    UserMessage,
    message_from_dict,
)


def test_a_user_message_takes_its_text_positionally() -> None:
    assert UserMessage("hi").content == UserMessage(content="hi").content == "hi"


def test_a_system_message_takes_its_text_positionally() -> None:
    assert SystemMessage("Be brief.").content == "Be brief."


def test_an_assistant_message_takes_its_text_positionally() -> None:
    assert AssistantMessage("Sunny.").content == "Sunny."


def test_giving_the_text_twice_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="multiple values"):
        UserMessage("a", content="b")  # type: ignore[misc]


def test_every_message_gets_a_fresh_id_when_none_is_given() -> None:
    ids = {UserMessage("same").id for _ in range(50)}
    assert len(ids) == 50
    assert all(isinstance(i, str) and i for i in ids)


def test_fresh_ids_are_distinct_uuid4_hex_across_batches() -> None:
    fresh_ids = [UserMessage("x").id for _ in range(1000)]  # ids come in batches of 128
    for fresh in fresh_ids:
        assert len(fresh) == 32
        parsed = uuid.UUID(hex=fresh)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert parsed.hex == fresh
    assert len(set(fresh_ids)) == 1000


def test_an_explicit_id_is_kept() -> None:
    assert SystemMessage("x", id="instruction").id == "instruction"


def test_message_ids_come_from_a_pinnable_module_function(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(messages_module, "new_message_id", lambda: "pinned")
    assert UserMessage("x").id == "pinned"


def test_two_messages_with_equal_fields_and_id_are_equal() -> None:
    assert UserMessage("x", id="m1") == UserMessage(content="x", id="m1")
    assert UserMessage("x", id="m1") != UserMessage("x", id="m2")


def test_messages_are_frozen() -> None:
    message = UserMessage("hi")
    with pytest.raises(pydantic.ValidationError):
        message.content = "changed"


def test_unknown_fields_are_refused_so_typos_show() -> None:
    with pytest.raises(pydantic.ValidationError, match="text"):
        UserMessage(text="hi")


def test_text_is_an_alias_of_content() -> None:
    assert AssistantMessage("a").text == "a"
    assert UserMessage("u").text == "u"


def test_an_assistant_message_has_the_documented_defaults() -> None:
    message = AssistantMessage()
    assert (message.content, message.tool_calls, message.finish_reason) == ("", [], None)
    assert (message.usage, message.reasoning, message.role) == (None, None, "assistant")


def test_an_assistant_message_carries_tool_calls_finish_reason_and_usage() -> None:
    usage = Usage(prompt_tokens=3, completion_tokens=2, total_tokens=5)
    message = AssistantMessage(
        content="",
        tool_calls=[ToolCall(id="c1", name="add", arguments={"a": 1})],
        finish_reason="tool_calls",
        usage=usage,
    )
    assert message.tool_calls[0].arguments == {"a": 1}
    assert message.usage == usage


def test_null_content_from_a_server_becomes_empty_text() -> None:
    assert AssistantMessage.model_validate({"content": None, "tool_calls": None}).content == ""


def test_a_tool_call_takes_id_name_and_arguments_positionally() -> None:
    assert ToolCall("c1", "add", {"a": 1}) == ToolCall(id="c1", name="add", arguments={"a": 1})


def test_a_tool_call_with_raw_arguments_is_marked_malformed() -> None:
    good = ToolCall("c1", "add", {"a": 1})
    bad = ToolCall("c2", "add", {}, raw_arguments='{"a": ')
    assert (good.has_malformed_arguments, bad.has_malformed_arguments) == (False, True)


def test_a_tool_response_is_not_an_error_unless_said() -> None:
    response = ToolResponseMessage(tool_call_id="c1", name="add", content="2")
    assert (response.is_error, response.role, response.text) == (False, "tool", "2")


def test_usages_add_up() -> None:
    total = Usage(prompt_tokens=1, completion_tokens=2, total_tokens=3) + Usage(
        prompt_tokens=10, completion_tokens=20, total_tokens=30
    )
    assert total == Usage(prompt_tokens=11, completion_tokens=22, total_tokens=33)
    assert sum([Usage(total_tokens=1)] * 3, Usage()) == Usage(total_tokens=3)


def test_the_breakdown_of_usages_adds_up_too() -> None:
    first = Usage(prompt_tokens=10, cache_read_tokens=8, reasoning_tokens=1)
    second = Usage(prompt_tokens=5, cache_creation_tokens=5, completion_audio_tokens=2)
    assert first + second == Usage(
        prompt_tokens=15,
        cache_read_tokens=8,
        cache_creation_tokens=5,
        reasoning_tokens=1,
        completion_audio_tokens=2,
    )


def test_a_usage_shows_its_breakdown_only_where_it_is_not_zero() -> None:
    assert (
        repr(Usage(prompt_tokens=1))
        == "Usage(prompt_tokens=1, completion_tokens=0, total_tokens=0)"
    )
    assert "reasoning_tokens=4" in repr(Usage(reasoning_tokens=4))
    assert "cache_read_tokens" not in repr(Usage(reasoning_tokens=4))


def test_a_usage_without_a_breakdown_is_stored_as_before_there_was_one() -> None:
    stored = serde.dumps(Usage(prompt_tokens=1, completion_tokens=2, total_tokens=3))
    assert b"cache" not in stored and b"reasoning" not in stored and b"audio" not in stored


def test_a_chunk_holds_only_its_new_text() -> None:
    chunk = AssistantMessageChunk("Hel", tool_call_deltas=[ToolCallDelta(index=0, arguments="{")])
    assert (chunk.text, chunk.content, chunk.finish_reason, chunk.usage) == (
        "Hel",
        "Hel",
        None,
        None,
    )


ONE_OF_EACH: list[Message] = [
    SystemMessage("s"),
    UserMessage("u"),
    AssistantMessage("a", tool_calls=[ToolCall("c", "f", {"x": 1})], usage=Usage(total_tokens=1)),
    ToolResponseMessage(tool_call_id="c", name="f", content="r", is_error=True),
]


@pytest.mark.parametrize("message", ONE_OF_EACH, ids=lambda m: m.role)
def test_a_message_is_rebuilt_from_its_dump_by_role(message: Message) -> None:
    assert message_from_dict(message.model_dump()) == message
    assert message_from_dict(message.model_dump(mode="json")) == message


def test_remove_message_and_replace_all_are_the_graph_state_markers() -> None:
    assert RemoveMessage is StateRemoveMessage
    assert ReplaceAll is StateReplaceAll


@pytest.mark.parametrize(
    "value",
    [
        *ONE_OF_EACH,
        AssistantMessageChunk("x", tool_call_deltas=[ToolCallDelta(index=0, id="c", name="f")]),
        ToolCall("c1", "f", {}, raw_arguments="{"),
        Usage(prompt_tokens=1),
        Usage(prompt_tokens=9, cache_read_tokens=4, reasoning_tokens=2, prompt_audio_tokens=1),
    ],
    ids=lambda v: type(v).__name__,
)
def test_messages_round_trip_through_the_checkpoint_serializer(value: object) -> None:
    assert serde.loads(serde.dumps([value])) == [value]


def test_fresh_ids_are_unique_across_batches_and_threads() -> None:
    import threading

    seen: list[list[str]] = [[] for _ in range(4)]

    def make(into: list[str]) -> None:
        into.extend(UserMessage("x").id for _ in range(500))

    workers = [threading.Thread(target=make, args=(ids,)) for ids in seen]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    every = [i for ids in seen for i in ids]
    assert len(set(every)) == len(every) == 2000


def test_a_forked_child_makes_ids_its_parent_never_makes() -> None:
    import os

    UserMessage("warm the batch up")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        os.close(read)
        os.write(write, " ".join(UserMessage("x").id for _ in range(8)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child_ids = set(pipe.read().split())
    os.waitpid(pid, 0)
    parent_ids = {UserMessage("x").id for _ in range(8)}
    assert len(child_ids) == 8 and not child_ids & parent_ids
