"""The ``tasks``, ``checkpoints`` and ``debug`` stream modes of graph-agent serve, through
LangGraph's own client (langgraph-sdk) against a real uvicorn server, on SQLite and on
PostgreSQL records (where a run on a thread is a queued job); shapes checked field by field
against langgraph-sdk's payload types."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from langgraph_sdk import get_sync_client
from langgraph_sdk.schema import (
    CheckpointPayload,
    CheckpointTaskPayload,
    TaskPayload,
    TaskResultPayload,
)

from graph_agent import END, START, AppendStrategy, StateGraph
from graph_agent.serve import create_app
from graph_agent.serve.openapi import openapi_document
from tests.serve.conftest import Server, free_port, wait_until_up
from tests.serve.graphs import approval

GATES: dict[str, threading.Event] = {}
"""Per test: set by the test once its client received a task's start over HTTP."""


def fork() -> StateGraph:
    """``a``, then ``b`` and ``c`` in parallel (each waits for its gate when given one)."""
    g = StateGraph("fork", key_strategies={"log": AppendStrategy()})

    def branch(name: str) -> Any:
        def node(state: Any) -> dict[str, Any]:
            gate = GATES.get(f"{state['gate']}:{name}") if state.get("gate") else None
            told = gate.wait(timeout=5) if gate is not None else None
            return {"log": [name], **({f"{name}_told": told} if gate is not None else {})}

        return node

    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b", branch("b")).add_node("c", branch("c"))
    g.add_edge(START, "a").add_edge("a", "b").add_edge("a", "c")
    g.add_edge("b", END).add_edge("c", END)
    return g


def failing() -> StateGraph:
    g = StateGraph("failing")

    def check(state: Any) -> dict[str, Any]:
        raise ValueError("boom")

    g.add_node("check", check)
    g.add_edge(START, "check").add_edge("check", END)
    return g


FAILING: set[str] = set()
"""The tokens for which ``siblings``' node ``b`` raises (its state's ``fail``)."""


def siblings() -> StateGraph:
    """``a`` and ``b`` in parallel; ``b`` raises while its state's ``fail`` is in FAILING."""
    g = StateGraph("siblings", key_strategies={"log": AppendStrategy()})

    def b(state: Any) -> dict[str, Any]:
        if state.get("fail") in FAILING:
            raise ValueError("boom")
        return {"log": ["b"]}

    g.add_node("a", lambda s: {"log": ["a"]}).add_node("b", b)
    g.add_edge(START, "a").add_edge(START, "b").add_edge("a", END).add_edge("b", END)
    return g


TARGETS = [fork, failing, approval, siblings]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The URL of a server of the test graphs, its records in SQLite or in PostgreSQL."""
    targets = [make() for make in TARGETS]
    if request.param == "sqlite":
        with Server(tmp_path_factory.mktemp("tasks") / "serve.db", targets) as server:
            yield server.url
        return
    from graph_agent.checkpoint.postgres import AsyncPostgresSaver
    from graph_agent.serve.pg_records import PostgresRecords
    from tests.checkpoint.postgres_db import fresh_schema

    with fresh_schema() as dsn:
        saver, records = AsyncPostgresSaver(dsn), PostgresRecords(dsn)
        port = free_port()
        app = create_app(targets, saver=saver, records=records)
        server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        try:
            wait_until_up(f"http://127.0.0.1:{port}")
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            thread.join(20)
            records.close()
            saver.close()


def stream(url: str, graph: str, input: Any, modes: Any) -> list[tuple[str, Any]]:
    client = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    parts = client.runs.stream(thread_id, graph, input=input, stream_mode=modes)
    return [(part.event, part.data) for part in parts if part.event != "metadata"]


def fields(payload_type: Any) -> set[str]:
    return set(payload_type.__annotations__)


def test_tasks_mode_streams_each_start_and_result_in_langgraphs_shape(served: str) -> None:
    events = stream(served, "fork", {"log": []}, "tasks")
    assert {event for event, _ in events} == {"tasks"}
    payloads = [data for _, data in events]
    starts = [p for p in payloads if "input" in p]
    results = [p for p in payloads if "result" in p]
    assert all(set(p) == fields(TaskPayload) for p in starts)
    assert all(set(p) == fields(TaskResultPayload) for p in results)
    a_start, a_result = payloads[:2]
    assert a_start == {
        "id": a_start["id"],
        "name": "a",
        "input": {"log": []},
        "triggers": ["branch:to:a"],
    }
    assert a_result == {
        "id": a_start["id"],
        "name": "a",
        "error": None,
        "result": {"log": ["a"]},
        "interrupts": [],
    }
    assert [p["name"] for p in payloads[2:4]] == ["b", "c"]  # the parallel step starts together
    assert all("input" in p for p in payloads[2:4])
    assert sorted(p["name"] for p in payloads[4:]) == ["b", "c"]


def test_a_task_start_reaches_the_client_while_its_node_still_runs(served: str) -> None:
    gate = uuid.uuid4().hex
    GATES.update({f"{gate}:b": threading.Event(), f"{gate}:c": threading.Event()})
    client = get_sync_client(url=served)
    thread_id = client.threads.create()["thread_id"]
    told: dict[str, Any] = {}
    parts = client.runs.stream(
        thread_id, "fork", input={"log": [], "gate": gate}, stream_mode="tasks"
    )
    for part in parts:
        data = part.data
        if part.event == "tasks" and "input" in data and data["name"] in ("b", "c"):
            GATES[f"{gate}:{data['name']}"].set()  # the node waits for this
        elif part.event == "tasks" and "result" in data:
            told.update(data["result"])
    assert told["b_told"] is True and told["c_told"] is True


def test_checkpoints_mode_streams_each_checkpoint_as_the_threads_history_has_it(
    served: str,
) -> None:
    client = get_sync_client(url=served)
    thread_id = client.threads.create()["thread_id"]
    parts = client.runs.stream(thread_id, "fork", input={"log": []}, stream_mode="checkpoints")
    payloads = [part.data for part in parts if part.event == "checkpoints"]
    history = client.threads.get_history(thread_id, limit=10)[::-1]
    assert len(payloads) == len(history) == 3
    for payload, state in zip(payloads, history, strict=True):
        assert set(payload) == fields(CheckpointPayload)
        checkpoint, parent = state["checkpoint"], state["parent_checkpoint"]
        assert payload["config"] == {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": "",
                "checkpoint_id": checkpoint["checkpoint_id"],
            }
        }
        parent_id = parent["checkpoint_id"] if parent else None
        assert (payload["parent_config"] or {}).get("configurable", {}).get(
            "checkpoint_id"
        ) == parent_id
        assert payload["values"] == state["values"]
        assert payload["metadata"] == state["metadata"]
        assert payload["next"] == state["next"]
        assert [(task["id"], task["name"]) for task in payload["tasks"]] == [
            (task["id"], task["name"]) for task in state["tasks"]
        ]
        for task in payload["tasks"]:
            assert set(task) == {"id", "name", "interrupts", "state"}
            assert set(task) <= fields(CheckpointTaskPayload)
            assert task["interrupts"] == [] and task["state"] is None
    assert payloads[0]["parent_config"] is None


def test_a_resumed_runs_first_checkpoint_tells_its_tasks_in_langgraphs_shapes(
    served: str,
) -> None:
    token = uuid.uuid4().hex
    FAILING.add(token)
    client = get_sync_client(url=served)
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.stream(thread_id, "siblings", input={"log": [], "fail": token})
    assert [part.event for part in first][-1] == "error"
    FAILING.discard(token)
    parts = client.runs.stream(thread_id, "siblings", input=None, stream_mode="checkpoints")
    resumed, *_ = [part.data for part in parts if part.event == "checkpoints"]
    a, b = resumed["tasks"]
    assert a == {
        "id": a["id"],
        "name": "a",
        "result": {"log": ["a"]},
        "interrupts": [],
        "state": None,
    }
    assert b == {"id": b["id"], "name": "b", "error": "ValueError: boom", "state": None}
    assert set(a) | set(b) <= fields(CheckpointTaskPayload)
    assert client.threads.get_state(thread_id)["values"]["log"] == ["a", "b"]


def test_debug_mode_streams_each_event_typed_with_its_step_and_time(served: str) -> None:
    events = stream(served, "fork", {"log": []}, ["debug", "tasks"])
    debug = [data for event, data in events if event == "debug"]
    tasks = [data for event, data in events if event == "tasks"]
    assert [item["payload"] for item in debug if item["type"] != "checkpoint"] == tasks
    assert [(item["type"], item["step"]) for item in debug][:4] == [
        ("checkpoint", -1),
        ("task", 0),
        ("task_result", 0),
        ("checkpoint", 0),
    ]
    for item in debug:
        assert set(item) == {"type", "timestamp", "step", "payload"}
        assert item["timestamp"].endswith("+00:00")
        if item["type"] == "task_result":
            assert set(item["payload"]) == fields(TaskResultPayload)
    checkpoint = debug[3]["payload"]
    configurable = checkpoint["config"]["configurable"]
    assert checkpoint["checkpoint"] == {**configurable, "checkpoint_map": None}
    assert (
        checkpoint["parent_checkpoint"]["checkpoint_id"]
        == (debug[0]["payload"]["config"]["configurable"]["checkpoint_id"])
    )


def test_a_failing_node_is_a_task_result_with_its_exceptions_type_and_message(
    served: str,
) -> None:
    events = stream(served, "failing", {}, ["tasks"])
    start, result = (data for event, data in events if event == "tasks")
    assert start["name"] == result["name"] == "check"
    assert result["error"]["error"] == "ValueError" and result["error"]["message"] == "boom"
    assert result["result"] == {} and result["interrupts"] == []
    assert events[-1][0] == "error"


def test_an_interrupted_node_is_a_task_result_with_its_interrupts(served: str) -> None:
    client = get_sync_client(url=served)
    thread_id = client.threads.create()["thread_id"]
    parts = client.runs.stream(thread_id, "approval", input={"question": "q"}, stream_mode="tasks")
    result = [part.data for part in parts if part.event == "tasks"][-1]
    [pending] = client.threads.get_state(thread_id)["interrupts"]
    assert result["name"] == "ask" and result["error"] is None and result["result"] == {}
    assert [(i["id"], i["value"]) for i in result["interrupts"]] == [
        (pending["id"], {"approve": "reply to q"})
    ]


def test_waiting_stateless_and_joined_runs_take_the_new_modes(served: str) -> None:
    client = get_sync_client(url=served)
    thread_id = client.threads.create()["thread_id"]
    waited = httpx.post(
        f"{served}/threads/{thread_id}/runs/wait",
        json={"assistant_id": "fork", "input": {"log": []}, "stream_mode": ["debug"]},
    )
    assert waited.status_code == 200 and waited.json() == {"log": ["a", "b", "c"]}
    stateless = list(client.runs.stream(None, "fork", input={"log": []}, stream_mode="tasks"))
    assert [p.event for p in stateless].count("tasks") == 6
    run = client.runs.create(thread_id, "fork", input={"log": []}, stream_mode="checkpoints")
    joined = list(client.runs.join_stream(thread_id, run["run_id"]))
    assert [p.event for p in joined].count("checkpoints") == 3


def test_the_openapi_document_lists_the_new_modes() -> None:
    schema = openapi_document(["fork"])["components"]["schemas"]["RunCreate"]
    modes = schema["properties"]["stream_mode"]["anyOf"][0]["enum"]
    assert {"tasks", "checkpoints", "debug"} <= set(modes)
