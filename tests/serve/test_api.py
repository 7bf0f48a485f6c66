"""graph-agent serve driven by LangGraph's own client (langgraph-sdk), sync and async, over real
HTTP against a real uvicorn."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client

from tests.serve.conftest import Server

JSON = {"content-type": "application/json"}


def test_ok_answers_when_the_server_is_ready(server: Server) -> None:
    assert httpx.get(f"{server.url}/ok").json() == {"ok": True}


def test_assistants_are_the_served_graphs_and_agents_by_name(server: Server) -> None:
    client = get_sync_client(url=server.url)
    ids = {a["assistant_id"] for a in client.assistants.search()}
    assert ids == {"chain", "approval", "slow", "assistant"}
    assert client.assistants.get("chain")["graph_id"] == "chain"
    graph = client.assistants.get_graph("chain")
    assert {"source": "first", "target": "second", "conditional": False} in graph["edges"]


def test_an_unknown_assistant_is_a_404_with_a_json_detail(server: Server) -> None:
    response = httpx.get(f"{server.url}/assistants/nope")
    assert response.status_code == 404
    assert "chain" in response.json()["detail"]


def test_threads_are_created_got_searched_copied_and_deleted(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread = client.threads.create(metadata={"user": "ann"})
    assert thread["status"] == "idle" and thread["values"] == {}
    named = client.threads.create(thread_id="named-thread", metadata={"user": "bob"})
    assert client.threads.get("named-thread")["metadata"] == {"user": "bob"}
    found = client.threads.search(metadata={"user": "ann"})
    assert [t["thread_id"] for t in found] == [thread["thread_id"]]
    client.runs.wait(named["thread_id"], "chain", input={"x": 1})
    copy = client.threads.copy(named["thread_id"])
    assert copy["thread_id"] != named["thread_id"]
    assert client.threads.get_state(copy["thread_id"])["values"] == {"x": 12}
    client.threads.delete(named["thread_id"])
    with pytest.raises(httpx.HTTPStatusError) as missing:
        client.threads.get(named["thread_id"])
    assert missing.value.response.status_code == 404


def test_a_thread_that_never_ran_is_copied_as_a_new_empty_thread(server: Server) -> None:
    client = get_sync_client(url=server.url)
    source = client.threads.create(metadata={"user": "cy"})
    copy = client.threads.copy(source["thread_id"])
    assert copy["thread_id"] != source["thread_id"]
    assert copy["metadata"]["user"] == "cy" and copy["values"] == {}
    assert client.threads.get(copy["thread_id"])["status"] == "idle"


def test_a_thread_id_in_use_is_a_409(server: Server) -> None:
    client = get_sync_client(url=server.url)
    client.threads.create(thread_id="taken")
    with pytest.raises(httpx.HTTPStatusError) as taken:
        client.threads.create(thread_id="taken")
    assert taken.value.response.status_code == 409


def test_runs_wait_returns_the_final_values(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread = client.threads.create()
    assert client.runs.wait(thread["thread_id"], "chain", input={"x": 1}) == {"x": 12}
    record = client.threads.get(thread["thread_id"])
    assert record["status"] == "idle" and record["values"] == {"x": 12}
    assert record["metadata"]["graph_id"] == "chain"


def test_a_stateless_run_needs_no_thread(server: Server) -> None:
    client = get_sync_client(url=server.url)
    assert client.runs.wait(None, "chain", input={"x": 0}) == {"x": 11}
    parts = list(client.runs.stream(None, "chain", input={"x": 0}, stream_mode="updates"))
    assert parts[-1].data == {"second": {"x": 11}}


def _stream(server: Server, modes: list[str]) -> list[tuple[str, object]]:
    client = get_sync_client(url=server.url)
    thread = client.threads.create()
    parts = client.runs.stream(thread["thread_id"], "chain", input={"x": 1}, stream_mode=modes)
    return [(part.event, part.data) for part in parts]


def test_a_stream_starts_with_the_run_metadata(server: Server) -> None:
    event, data = _stream(server, ["values"])[0]
    assert event == "metadata" and isinstance(data, dict) and "run_id" in data


def test_values_mode_streams_the_state_after_the_input_and_each_step(server: Server) -> None:
    events = _stream(server, ["values"])[1:]
    assert events == [("values", {"x": 1}), ("values", {"x": 2}), ("values", {"x": 12})]


def test_updates_mode_streams_each_nodes_update(server: Server) -> None:
    events = _stream(server, ["updates"])[1:]
    assert events == [("updates", {"first": {"x": 2}}), ("updates", {"second": {"x": 12}})]


def test_custom_mode_streams_what_nodes_emit(server: Server) -> None:
    events = _stream(server, ["custom"])[1:]
    assert events == [("custom", "tick"), ("custom", {"progress": 1})]


def test_messages_tuple_mode_streams_token_chunks_with_their_node(server: Server) -> None:
    events = _stream(server, ["messages-tuple"])[1:]
    assert [e for e, _ in events] == ["messages", "messages"]
    chunk, metadata = events[0][1]  # type: ignore[misc]
    assert chunk["content"] == "Hel" and chunk["type"] == "AIMessageChunk"
    assert metadata["langgraph_node"] == "first"


def test_messages_mode_streams_the_message_so_far(server: Server) -> None:
    events = _stream(server, ["messages"])[1:]
    assert events[0][0] == "messages/metadata"
    partial = [data[0]["content"] for event, data in events if event == "messages/partial"]  # type: ignore[index]
    assert partial == ["Hel", "Hello"]


def test_several_modes_stream_at_once(server: Server) -> None:
    kinds = {event for event, _ in _stream(server, ["values", "updates", "custom"])}
    assert kinds == {"metadata", "values", "updates", "custom"}


def test_an_unknown_stream_mode_is_a_422(server: Server) -> None:
    thread = get_sync_client(url=server.url).threads.create()
    response = httpx.post(
        f"{server.url}/threads/{thread['thread_id']}/runs/wait",
        json={"assistant_id": "chain", "input": {"x": 1}, "stream_mode": "telepathy"},
    )
    assert response.status_code == 422 and "telepathy" in response.json()["detail"]


def test_an_agent_answers_langchain_style_messages(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread = client.threads.create()
    result = client.runs.wait(
        thread["thread_id"], "assistant", input={"messages": [{"type": "human", "content": "hi"}]}
    )
    assert [m["type"] for m in result["messages"]] == ["human", "ai"]
    assert result["messages"][-1]["content"] == "Hello there."


def test_an_interrupt_is_resumed_through_the_api(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    paused = client.runs.wait(thread_id, "approval", input={"question": "why?"})
    assert paused["__interrupt__"][0]["value"] == {"approve": "reply to why?"}
    record = client.threads.get(thread_id)
    assert record["status"] == "interrupted"
    [(_task_id, [pending])] = record["interrupts"].items()
    assert pending["id"] == paused["__interrupt__"][0]["id"]
    state = client.threads.get_state(thread_id)
    assert state["next"] == ["ask"] and state["interrupts"][0]["value"]["approve"]
    resumed = client.runs.wait(thread_id, "approval", command={"resume": "yes"})
    assert resumed["answer"] == "yes"
    assert client.threads.get(thread_id)["status"] == "idle"


def test_an_interrupt_shows_in_the_stream_as_langgraph_sends_it(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    parts = list(
        client.runs.stream(thread_id, "approval", input={"question": "q"}, stream_mode="updates")
    )
    assert parts[-1].event == "updates" and "__interrupt__" in parts[-1].data


def test_values_at_a_pause_are_the_state_with_its_interrupts_as_langgraph_sends_them(
    server: Server,
) -> None:
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    parts = client.runs.stream(
        thread_id, "approval", input={"question": "q"}, stream_mode=["updates", "values"]
    )
    *_, (paused, update), (last, values) = [(p.event, p.data) for p in parts]
    assert (paused, last) == ("updates", "values")  # in LangGraph's order
    [pending] = client.threads.get_state(thread_id)["interrupts"]
    assert update == {"__interrupt__": [pending]}
    assert values == {"question": "q", "draft": "reply to q", "__interrupt__": [pending]}


def test_state_is_updated_and_its_history_listed(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "chain", input={"x": 1})
    update = client.threads.update_state(thread_id, {"x": 100})
    assert update["checkpoint"]["thread_id"] == thread_id
    assert client.threads.get_state(thread_id)["values"] == {"x": 100}
    history = client.threads.get_history(thread_id)
    assert [h["values"]["x"] for h in history] == [100, 12, 2, 1]
    older = client.threads.get_history(thread_id, before=history[1]["checkpoint"], limit=1)
    assert [h["values"]["x"] for h in older] == [2]
    at = client.threads.get_state(
        thread_id, checkpoint_id=history[2]["checkpoint"]["checkpoint_id"]
    )
    assert at["values"] == {"x": 2}


def test_a_run_from_an_earlier_checkpoint_travels_back_in_time(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "chain", input={"x": 1})
    after_first = client.threads.get_history(thread_id)[1]  # x=2, before "second"
    assert after_first["next"] == ["second"]
    result = client.runs.wait(
        thread_id, "chain", input=None, checkpoint_id=after_first["checkpoint"]["checkpoint_id"]
    )
    assert result == {"x": 12}
    assert len(client.threads.get_history(thread_id)) == 5  # a fork: one more checkpoint


def test_a_background_run_is_joined_and_listed(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "chain", input={"x": 5})
    assert run["status"] in ("pending", "running")
    assert client.runs.join(thread_id, run["run_id"]) == {"x": 16}
    assert client.runs.get(thread_id, run["run_id"])["status"] == "success"
    assert [r["run_id"] for r in client.runs.list(thread_id)] == [run["run_id"]]


def test_a_busy_thread_rejects_a_second_run_with_409(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "slow", input={"n": 0})
    with pytest.raises(httpx.HTTPStatusError) as busy:
        client.runs.create(thread_id, "slow", input={"n": 0})
    assert busy.value.response.status_code == 409
    assert "busy" in busy.value.response.json()["detail"]
    assert client.threads.get(thread_id)["status"] == "busy"
    client.runs.join(thread_id, run["run_id"])


def test_an_enqueued_run_waits_for_the_one_before(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.create(thread_id, "slow", input={"n": 5})
    second = client.runs.create(thread_id, "slow", input={"n": 8}, multitask_strategy="enqueue")
    assert client.runs.join(thread_id, second["run_id"]) == {"n": 10}
    assert client.runs.get(thread_id, first["run_id"])["status"] == "success"


def test_a_cancelled_run_stops_between_steps(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "slow", input={"n": 0})
    time.sleep(0.25)
    client.runs.cancel(thread_id, run["run_id"], wait=True)
    assert client.runs.get(thread_id, run["run_id"])["status"] == "interrupted"
    n = client.threads.get_state(thread_id)["values"]["n"]
    assert 1 <= n < 10
    assert client.threads.get(thread_id)["status"] == "idle"


def test_a_run_on_a_missing_thread_is_a_404(server: Server) -> None:
    response = httpx.post(
        f"{server.url}/threads/ghost/runs/wait", json={"assistant_id": "chain", "input": {}}
    )
    assert response.status_code == 404 and "ghost" in response.json()["detail"]


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/threads", b"{not json", 400),
        ("/threads", b"[1, 2]", 422),
        ("/threads/search", b'{"limit": "ten"}', 422),
        ("/runs/wait", b'{"input": {}}', 422),
        ("/runs/wait", b'{"assistant_id": "chain", "input": [1]}', 422),
        ("/runs/wait", b'{"assistant_id": "chain", "multitask_strategy": "x"}', 422),
        ("/runs/wait", b'{"assistant_id": "chain", "command": "go"}', 422),
    ],
)
def test_bad_input_is_a_4xx_with_a_json_detail(
    server: Server, path: str, body: bytes, status: int
) -> None:
    response = httpx.post(f"{server.url}{path}", content=body, headers=JSON)
    assert response.status_code == status
    assert isinstance(response.json()["detail"], str)


def test_a_failing_run_reports_its_error_without_a_500(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    with pytest.raises(Exception, match="KeyError"):
        client.runs.wait(thread_id, "chain", input={"y": 1})  # "first" reads state["x"]
    assert client.threads.get(thread_id)["status"] == "error"


def test_the_async_client_drives_the_same_api(server: Server) -> None:
    async def scenario() -> None:
        client = get_client(url=server.url)
        assert {a["assistant_id"] for a in await client.assistants.search()} >= {"chain"}
        thread_id = (await client.threads.create())["thread_id"]
        events = [
            part.event
            async for part in client.runs.stream(
                thread_id, "approval", input={"question": "q"}, stream_mode=["values", "updates"]
            )
        ]
        assert events[0] == "metadata" and "values" in events
        resumed = await client.runs.wait(thread_id, "approval", command={"resume": "ok"})
        assert resumed["answer"] == "ok"
        await client.threads.delete(thread_id)
        thread_id = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread_id, "slow", input={"n": 7})
        assert await client.runs.join(thread_id, run["run_id"]) == {"n": 10}
        history = await client.threads.get_history(thread_id, limit=2)
        assert len(history) == 2
        await client.threads.update_state(thread_id, {"n": 0}, as_node="step")
        assert (await client.threads.get_state(thread_id))["next"] == ["step"]
        slow_run = await client.runs.create(thread_id, "slow", input={"n": 0})
        await asyncio.sleep(0.15)
        await client.runs.cancel(thread_id, slow_run["run_id"], wait=True)
        assert (await client.runs.get(thread_id, slow_run["run_id"]))["status"] == "interrupted"
        await client.threads.delete(thread_id)
        assert await client.threads.search(ids=[thread_id]) == []

    asyncio.run(scenario())


def test_threads_and_finished_runs_survive_a_restart(tmp_path) -> None:
    with Server(tmp_path / "serve.db") as first:
        client = get_sync_client(url=first.url)
        thread_id = client.threads.create(metadata={"keep": True})["thread_id"]
        run_id = client.runs.create(thread_id, "chain", input={"x": 1})["run_id"]
        client.runs.join(thread_id, run_id)
    with Server(tmp_path / "serve.db") as second:
        client = get_sync_client(url=second.url)
        assert client.threads.get(thread_id)["values"] == {"x": 12}
        assert client.runs.get(thread_id, run_id)["status"] == "success"
        assert client.runs.join(thread_id, run_id) == {"x": 12}
