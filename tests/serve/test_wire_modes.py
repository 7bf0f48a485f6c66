"""A run's stream on the server's wire is the library's stream modes, as JSON: one translation
(``graph_agent.graph.stream_modes.ModeItems``), which the server only encodes and adds its own
events to (``messages/partial``, ``messages/metadata``, ``usage``)."""

from __future__ import annotations

from typing import Any

from graph_agent import (
    END,
    START,
    CompileConfig,
    MemorySaver,
    RunnableConfig,
    StateGraph,
    emit_chunk,
    interrupt,
)
from graph_agent.graph.stream_modes import ModeItems
from graph_agent.messages import AssistantMessageChunk
from graph_agent.serve.wire import chunk_json, to_json
from graph_agent.serve.wire_modes import RunEvents, library_modes, task_payload_json


def asking() -> Any:
    """``draft`` emits a word and writes a draft; ``ask`` pauses on it."""
    g = StateGraph("asking")

    def draft(state: Any) -> dict[str, Any]:
        emit_chunk("drafting")
        return {"draft": f"reply to {state['question']}"}

    g.add_node("draft", draft)
    g.add_node("ask", lambda state: {"answer": interrupt({"approve": state["draft"]})})
    g.add_edge(START, "draft").add_edge("draft", "ask").add_edge("ask", END)
    return g.compile(CompileConfig(saver=MemorySaver()))


def sent(modes: list[str], outputs: list[Any]) -> list[tuple[str, Any]]:
    events: list[tuple[str, Any]] = []
    translate = RunEvents(modes, lambda event, data: events.append((event, data)))
    for output in outputs:
        translate(output)
    return events


def test_the_server_sends_the_librarys_mode_items_as_json_at_a_pause_too() -> None:
    modes = ["values", "updates", "custom", "tasks", "checkpoints"]
    config = RunnableConfig(thread_id="t")
    outputs = list(asking().stream({"question": "q"}, config, task_events=True))
    library = ModeItems(library_modes(modes), tuples=True)
    expected = [
        (
            mode,
            to_json(payload)
            if mode in ("values", "updates", "custom")
            else task_payload_json(payload),
        )
        for output in outputs
        for mode, payload in library(output)
    ]
    events = sent(modes, outputs)
    assert events == expected
    *_, (last_update, update), (last_values, values) = events
    assert last_update == "updates" and list(update) == ["__interrupt__"]
    assert last_values == "values"  # as LangGraph Server sends it: the state, and what waits
    assert values == {
        "question": "q",
        "draft": "reply to q",
        "__interrupt__": update["__interrupt__"],
    }
    assert update["__interrupt__"][0]["value"] == {"approve": "reply to q"}


def test_the_server_asks_the_engine_only_for_the_task_events_its_modes_need() -> None:
    def asked(modes: list[str]) -> set[str]:
        return set(RunEvents(modes, lambda event, data: None).task_events)

    assert asked(["values", "updates", "messages", "messages-tuple", "custom"]) == set()
    assert asked(["tasks"]) == {"task", "task_result"}  # no checkpoint payloads to make
    assert asked(["checkpoints", "values"]) == {"checkpoint"}
    assert asked(["debug"]) == {"task", "task_result", "checkpoint"}


def test_message_events_are_made_of_the_librarys_messages_items() -> None:
    tokens = [AssistantMessageChunk(id="m1", content=text) for text in ("Hel", "lo")]

    def talks(state: Any) -> dict[str, Any]:
        for token in tokens:
            emit_chunk(token)
        return {"said": True}

    g = StateGraph("talks")
    g.add_node("talk", talks)
    g.add_edge(START, "talk").add_edge("talk", END)
    outputs = list(g.compile().stream({}))
    metadata = {"langgraph_node": "talk", "langgraph_step": 0}
    assert [e for e in sent(["messages-tuple"], outputs) if e[0] == "messages"] == [
        ("messages", [chunk_json(token), metadata]) for token in tokens
    ]
    partial = sent(["messages"], outputs)
    assert partial[0] == ("messages/metadata", {"m1": {"metadata": metadata}})
    assert [data[0]["content"] for event, data in partial[1:]] == ["Hel", "Hello"]
    assert all(data[0]["type"] == "ai" for _, data in partial[1:])
