"""RecordingChatModel saves a model's answers; ReplayChatModel answers from them offline."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from graph_agent.messages import AssistantMessage, ToolCall, ToolResponseMessage, UserMessage
from graph_agent.models import (
    ChatModel,
    OpenAIChatModel,
    RecordingChatModel,
    ReplayChatModel,
    ScriptedChatModel,
    UnrecordedRequestError,
    fold_chunks,
)
from graph_agent.tools import tool

from .openai_fake_server import API_KEY, FakeOpenAIServer, completion, reply_json


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def conversation() -> list[UserMessage | AssistantMessage | ToolResponseMessage]:
    """The same conversation with fresh message ids each time it is built."""
    return [
        UserMessage("1 + 2?"),
        AssistantMessage(tool_calls=[ToolCall("c1", "add", {"a": 1, "b": 2})]),
        ToolResponseMessage(tool_call_id="c1", name="add", content="3"),
    ]


def test_a_recorded_answer_is_replayed_offline(tmp_path: Path) -> None:
    path = tmp_path / "answers.json"
    live = RecordingChatModel(ScriptedChatModel(["It is 3."]), path)
    recorded = live.generate(conversation(), tools=[add])
    replayed = ReplayChatModel(path).generate(conversation(), tools=[add])
    assert replayed.model_dump(exclude={"id"}) == recorded.model_dump(exclude={"id"})
    assert replayed.id != recorded.id


def test_replay_matches_requests_whatever_their_message_and_call_ids(tmp_path: Path) -> None:
    path = tmp_path / "answers.json"
    RecordingChatModel(ScriptedChatModel(["It is 3."]), path).generate(conversation())
    renamed = conversation()
    renamed[1] = AssistantMessage(tool_calls=[ToolCall("other-id", "add", {"a": 1, "b": 2})])
    renamed[2] = ToolResponseMessage(tool_call_id="other-id", name="add", content="3")
    assert RecordingChatModel.replay(path).generate(renamed).text == "It is 3."


def test_an_unrecorded_request_raises_naming_where_it_differs(tmp_path: Path) -> None:
    path = tmp_path / "answers.json"
    RecordingChatModel(ScriptedChatModel(["It is 3."]), path).generate(conversation())
    changed = conversation()
    changed[2] = ToolResponseMessage(tool_call_id="c1", name="add", content="4")
    with pytest.raises(UnrecordedRequestError) as caught:
        ReplayChatModel(path).generate(changed)
    text = str(caught.value)
    assert str(path) in text
    assert "differs at message 3" in text
    assert "RecordingChatModel" in text


def test_other_tools_or_options_are_a_different_request(tmp_path: Path) -> None:
    path = tmp_path / "answers.json"
    RecordingChatModel(ScriptedChatModel(["a"]), path).generate(conversation(), tools=[add])
    replay = ReplayChatModel(path)
    with pytest.raises(UnrecordedRequestError, match="other tools or options"):
        replay.generate(conversation(), tools=[add], options={"temperature": 0})


def test_a_request_recorded_twice_replays_its_answers_in_order_then_the_last(
    tmp_path: Path,
) -> None:
    path = tmp_path / "answers.json"
    live = RecordingChatModel(ScriptedChatModel(["one", "two"]), path)
    live.generate([UserMessage("again")])
    live.generate([UserMessage("again")])
    replay = ReplayChatModel(path)
    answers = [replay.generate([UserMessage("again")]).text for _ in range(3)]
    assert answers == ["one", "two", "two"]


def test_a_recorded_stream_is_passed_through_and_saved_once_complete(tmp_path: Path) -> None:
    path = tmp_path / "answers.json"
    live = RecordingChatModel(ScriptedChatModel(["streamed words here"]), path)
    stream = live.stream([UserMessage("talk")])
    first = next(iter(stream))
    assert first.text == "streamed "
    assert not path.exists()
    rest = list(stream)
    assert fold_chunks([first, *rest]).text == "streamed words here"
    assert fold_chunks(ReplayChatModel(path).stream([UserMessage("talk")])).text == (
        "streamed words here"
    )


def test_recording_again_extends_the_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "answers.json"
    RecordingChatModel(ScriptedChatModel(["a"]), path).generate([UserMessage("first")])
    RecordingChatModel(ScriptedChatModel(["b"]), path).generate([UserMessage("second")])
    replay = ReplayChatModel(path)
    assert replay.generate([UserMessage("first")]).text == "a"
    assert replay.generate([UserMessage("second")]).text == "b"


async def test_async_calls_are_recorded_and_replayed(tmp_path: Path) -> None:
    path = tmp_path / "answers.json"
    live = RecordingChatModel(ScriptedChatModel(["whole", "in pieces"]), path)
    await live.agenerate([UserMessage("a")])
    _ = [c async for c in live.astream([UserMessage("b")])]
    replay = ReplayChatModel(path)
    assert (await replay.agenerate([UserMessage("a")])).text == "whole"
    assert fold_chunks([c async for c in replay.astream([UserMessage("b")])]).text == "in pieces"


def test_replaying_a_missing_file_says_how_to_record_one(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="RecordingChatModel"):
        ReplayChatModel(tmp_path / "none.json")


def test_a_file_that_is_not_a_recording_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"some": "thing"}))
    with pytest.raises(ValueError, match="not a graph_agent recording"):
        ReplayChatModel(path)


def test_requests_are_recorded_on_both_sides(tmp_path: Path) -> None:
    path = tmp_path / "answers.json"
    live = RecordingChatModel(ScriptedChatModel(["a"]), path)
    live.generate([UserMessage("x")])
    replay = ReplayChatModel(path)
    replay.generate([UserMessage("x")])
    assert [len(m.requests) for m in (live, replay)] == [1, 1]
    assert isinstance(live, ChatModel)
    assert isinstance(replay, ChatModel)


def test_a_recording_of_a_real_client_holds_no_api_key(
    tmp_path: Path, server: FakeOpenAIServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    path = tmp_path / "answers.json"
    server.enqueue(reply_json(completion("from the server")))
    live = RecordingChatModel(make_model(), path)
    assert live.generate([UserMessage("hi")], tools=[add]).text == "from the server"
    assert API_KEY not in path.read_text()
    assert API_KEY not in repr(live)
    assert (
        ReplayChatModel(path).generate([UserMessage("hi")], tools=[add]).text == "from the server"
    )
