"""What the server sends, read with LangChain's own classes (langchain-core): every message
type, streamed chunks, what nodes write to an append key, and a failed run's error."""

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

from graph_agent import END, START, RunnableConfig, Send, StateGraph
from graph_agent.graph.errors import (
    GraphRecursionError,
    InvalidResumeError,
    NodeError,
    NodeTimeoutError,
)
from graph_agent.messages import (
    AssistantMessage,
    AssistantMessageChunk,
    ImagePart,
    RemoveMessage,
    ReplaceAll,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from graph_agent.serve.wire import (
    WireError,
    error_json,
    input_from_json,
    messages_from_json,
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


def test_a_replace_all_of_messages_goes_out_as_langgraphs_remove_all() -> None:
    kept = [SystemMessage("Be brief.", id="s1"), UserMessage("Summary: ...", id="u9")]
    sent = to_json({"messages": ReplaceAll(kept)})["messages"]
    assert isinstance(sent, list) and sent[0]["type"] == "remove"
    assert sent[0]["id"] == "__remove_all__" and sent[1:] == [to_json(m) for m in kept]
    remove_all, *rest = convert_to_messages(sent)
    assert remove_all == langchain.RemoveMessage(id="__remove_all__")
    assert [m.id for m in rest] == ["s1", "u9"]


def test_a_remove_message_goes_out_as_langchains_remove_message() -> None:
    sent = to_json([RemoveMessage("m7")])
    assert convert_to_messages(sent) == [langchain.RemoveMessage(id="m7")]
    assert langchain.RemoveMessage(**sent[0]).model_dump() == sent[0]


def test_a_replace_all_of_other_items_goes_out_as_langgraphs_overwrite() -> None:
    assert to_json({"log": ReplaceAll(["a", "b"])}) == {"log": {"__overwrite__": ["a", "b"]}}


def test_a_send_goes_out_as_its_node_and_arg() -> None:
    assert to_json(Send("square", {"n": 2})) == {"node": "square", "arg": {"n": 2}}


def test_no_internal_value_leaks_as_its_fields_or_its_repr() -> None:
    sent = str(to_json([ReplaceAll([UserMessage("x")]), RemoveMessage("y"), Send("n", {})]))
    assert "items" not in sent and "Send(" not in sent and "RemoveMessage(" not in sent


def test_langgraphs_removals_are_read_back_as_ours() -> None:
    kept = [SystemMessage("Be brief.", id="s1"), UserMessage("Summary", id="u9")]
    assert messages_from_json(to_json(ReplaceAll(kept))) == ReplaceAll(kept)
    assert messages_from_json({"__overwrite__": to_json(kept)}) == ReplaceAll(kept)
    assert messages_from_json(to_json([RemoveMessage("m7"), kept[1]])) == [
        RemoveMessage("m7"),
        kept[1],
    ]


def test_a_client_removing_messages_in_its_input_removes_them() -> None:
    body = {"messages": [langchain.RemoveMessage(id="m7").model_dump()]}
    assert input_from_json(body) == {"messages": [RemoveMessage("m7")]}


def test_a_remove_message_without_an_id_is_refused_naming_it() -> None:
    with pytest.raises(WireError, match="id of the message to remove"):
        input_from_json({"messages": [{"type": "remove", "content": ""}]})


def _raised(graph: StateGraph, config: RunnableConfig | None = None) -> BaseException:
    with pytest.raises(Exception) as failure:
        graph.compile().invoke({"amount": 42}, config)
    return failure.value


def _failing(name: str = "checks") -> StateGraph:
    def check(state: Any) -> dict[str, Any]:
        raise ValueError("boom")

    graph = StateGraph(name)
    graph.add_node("check", check)
    graph.add_edge(START, "check").add_edge("check", END)
    return graph


def test_a_node_error_is_sent_as_the_exception_the_node_raised_with_its_node_and_step() -> None:
    failure = _raised(_failing())
    assert isinstance(failure, NodeError)
    assert error_json(failure) == {
        "error": "ValueError",
        "message": "boom",
        "node": "check",
        "step": 0,
    }


def test_a_subgraphs_node_error_is_sent_as_the_innermost_exception() -> None:
    outer = StateGraph("outer")
    outer.add_node("sub", _failing("inner").compile())
    outer.add_edge(START, "sub").add_edge("sub", END)
    assert error_json(_raised(outer)) == {
        "error": "ValueError",
        "message": "boom",
        "node": "sub",
        "step": 0,
    }


def test_a_recursion_limit_keeps_langgraphs_class_name() -> None:
    graph = StateGraph("loop")
    graph.add_node("again", lambda state: {"n": state.get("n", 0) + 1})
    graph.add_edge(START, "again")
    graph.add_conditional_edges("again", lambda state: "again" if state["n"] < 100 else END)
    failure = _raised(graph, RunnableConfig(max_steps=3))
    assert isinstance(failure, GraphRecursionError)
    sent = error_json(failure)
    assert sent["error"] == "GraphRecursionError" and sent["message"] == str(failure)


@pytest.mark.parametrize(
    "failure",
    [
        InvalidResumeError("nothing is pending on thread t: nothing to resume"),
        NodeTimeoutError("node 'slow' ran past its 1 s timeout", node="slow", step=2, timeout=1),
    ],
    ids=lambda exc: type(exc).__name__,
)
def test_errors_no_node_raised_keep_their_own_class(failure: Exception) -> None:
    sent = error_json(failure)
    assert sent["error"] == type(failure).__name__ and sent["message"] == str(failure)
