"""ScriptedChatModel: canned answers in order, each a fresh copy, every request recorded."""

from __future__ import annotations

import pytest

from graph_agent.graph.errors import ModelError
from graph_agent.messages import AssistantMessage, SystemMessage, ToolCall, UserMessage
from graph_agent.models import ChatModel, ModelRequest, ScriptedChatModel, fold_chunks
from graph_agent.tools import Tool, tool


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_a_scripted_model_answers_in_order() -> None:
    model = ScriptedChatModel(["first", "second"])
    assert model.generate([UserMessage("1")]).text == "first"
    assert model.generate([UserMessage("2")]).text == "second"
    assert model.remaining == 0


def test_each_reply_is_a_copy_with_a_fresh_id() -> None:
    scripted = AssistantMessage("same", tool_calls=[ToolCall("c1", "add", {"a": 1, "b": 2})])
    model = ScriptedChatModel([scripted, scripted])
    first = model.generate([UserMessage("x")])
    second = model.generate([UserMessage("x")])
    assert len({scripted.id, first.id, second.id}) == 3
    assert first.model_dump(exclude={"id"}) == scripted.model_dump(exclude={"id"})


def test_a_string_becomes_an_assistant_message_with_that_text() -> None:
    reply = ScriptedChatModel(["hello"]).generate([UserMessage("hi")])
    assert isinstance(reply, AssistantMessage)
    assert (reply.text, reply.tool_calls) == ("hello", [])


def test_a_callable_answers_from_the_request() -> None:
    model = ScriptedChatModel([lambda request: f"you said {request.messages[-1].content}"])
    assert model.generate([UserMessage("ping")]).text == "you said ping"


def test_a_callable_may_return_a_whole_message() -> None:
    model = ScriptedChatModel([lambda request: AssistantMessage("x", finish_reason="length")])
    assert model.generate([UserMessage("ping")]).finish_reason == "length"


def test_a_scripted_exception_is_raised_by_its_call_only() -> None:
    model = ScriptedChatModel([ModelError("server down", status_code=503), "recovered"])
    with pytest.raises(ModelError, match="server down"):
        model.generate([UserMessage("x")])
    assert model.generate([UserMessage("x")]).text == "recovered"


def test_running_out_of_answers_raises_a_model_error_naming_the_call() -> None:
    model = ScriptedChatModel(["only"])
    model.generate([UserMessage("x")])
    with pytest.raises(ModelError, match="no answer for call 2: it was scripted with 1"):
        model.generate([UserMessage("x")])


def test_every_request_is_recorded_with_messages_tools_and_options() -> None:
    model = ScriptedChatModel(["a"])
    messages = [SystemMessage("Be brief."), UserMessage("1 + 2?")]
    model.generate(messages, tools=[add], options={"temperature": 0})
    (request,) = model.requests
    assert isinstance(request, ModelRequest)
    assert request.messages == messages
    assert request.tools == [add]
    assert request.options == {"temperature": 0}


def test_recorded_requests_are_copies_of_the_arguments() -> None:
    model = ScriptedChatModel(["a"])
    messages: list[UserMessage] = [UserMessage("x")]
    model.generate(messages)
    messages.append(UserMessage("later"))
    assert len(model.requests[0].messages) == 1


def test_plain_functions_given_as_tools_are_recorded_as_tools() -> None:
    def subtract(a: int, b: int) -> int:
        """Subtract b from a."""
        return a - b

    model = ScriptedChatModel(["a"])
    model.generate([UserMessage("x")], tools=[subtract])
    (recorded,) = model.requests[0].tools
    assert isinstance(recorded, Tool)
    assert recorded.name == "subtract"


def test_a_streamed_reply_folds_into_the_scripted_message() -> None:
    scripted = AssistantMessage(
        "Adding now.",
        tool_calls=[ToolCall("c1", "add", {"a": 1, "b": 2})],
        finish_reason="tool_calls",
    )
    chunks = list(ScriptedChatModel([scripted]).stream([UserMessage("x")]))
    assert [c.text for c in chunks[:2]] == ["Adding ", "now."]
    assert fold_chunks(chunks).model_dump(exclude={"id"}) == scripted.model_dump(exclude={"id"})


def test_a_stream_takes_its_answer_when_iteration_starts() -> None:
    model = ScriptedChatModel(["a"])
    stream = model.stream([UserMessage("x")])
    assert model.requests == []
    assert fold_chunks(stream).text == "a"
    assert len(model.requests) == 1


async def test_the_async_calls_answer_like_the_sync_ones() -> None:
    model = ScriptedChatModel(["whole", "streamed answer"])
    assert (await model.agenerate([UserMessage("x")])).text == "whole"
    chunks = [c async for c in model.astream([UserMessage("y")])]
    assert fold_chunks(chunks).text == "streamed answer"
    assert [r.messages[0].content for r in model.requests] == ["x", "y"]


def test_a_scripted_model_is_a_chat_model() -> None:
    assert isinstance(ScriptedChatModel([]), ChatModel)
