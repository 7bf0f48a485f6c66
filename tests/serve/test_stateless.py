"""Stateless runs (no thread id): with ``on_completion="delete"`` (the default) their thread
lives in memory while they run, found by the API like any other, and leaves nothing in the
checkpoint or records files; with ``"keep"`` it is an ordinary thread."""

from __future__ import annotations

import json
import urllib.parse

import httpx
from langgraph_sdk import get_sync_client

from graph_agent import RunnableConfig
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.serve.runs import on_saver
from tests.serve.conftest import Server
from tests.serve.graphs import agent


def _place(response: httpx.Response) -> tuple[str, str]:
    """The thread and run ids a run's ``Content-Location`` names."""
    parts = urllib.parse.unquote(response.headers["content-location"]).split("/")
    assert parts[1] == "threads" and parts[3] == "runs"
    return parts[2], parts[4]


def test_a_stateless_run_leaves_nothing_in_the_files(server: Server) -> None:
    response = httpx.post(
        f"{server.url}/runs/wait", json={"assistant_id": "chain", "input": {"x": 0}}
    )
    assert response.json() == {"x": 11}
    thread_id, run_id = _place(response)
    assert httpx.get(f"{server.url}/threads/{thread_id}").status_code == 404
    assert httpx.get(f"{server.url}/threads/{thread_id}/runs/{run_id}").status_code == 404
    assert thread_id not in server.saver.threads()
    assert server.records.thread(thread_id) is None


def test_a_running_stateless_run_is_found_by_the_api_and_gone_when_it_ends(
    server: Server,
) -> None:
    body = {"assistant_id": "slow", "input": {"n": 0}, "stream_mode": ["values"]}
    with httpx.stream("POST", f"{server.url}/runs/stream", json=body, timeout=30) as live:
        thread_id, run_id = _place(live)
        lines = live.iter_lines()
        assert next(lines) == "event: metadata"
        thread = httpx.get(f"{server.url}/threads/{thread_id}").json()
        assert thread["status"] == "busy" and thread["metadata"]["graph_id"] == "slow"
        run = httpx.get(f"{server.url}/threads/{thread_id}/runs/{run_id}").json()
        assert run["status"] in ("pending", "running")
        assert thread_id not in server.saver.threads()  # its checkpoints are in memory
        joined = f"{server.url}/threads/{thread_id}/runs/{run_id}/stream"
        with httpx.stream("GET", joined, headers={"Last-Event-ID": "0"}, timeout=30) as rest:
            data = [line[6:] for line in rest.iter_lines() if line.startswith("data: ")]
        assert [json.loads(text)["n"] for text in data] == list(range(11))
        remaining = list(lines)
    assert 'data: {"n":10}' in remaining
    assert httpx.get(f"{server.url}/threads/{thread_id}").status_code == 404
    assert thread_id not in server.saver.threads()
    assert server.records.thread(thread_id) is None


def test_a_stateless_run_that_pauses_answers_its_interrupt_and_is_deleted(
    server: Server,
) -> None:
    client = get_sync_client(url=server.url)
    result = client.runs.wait(None, "approval", input={"question": "refund?"})
    assert isinstance(result, dict)
    assert result["draft"] == "reply to refund?"
    assert [item["value"] for item in result["__interrupt__"]] == [{"approve": "reply to refund?"}]


def test_a_stateless_run_kept_on_completion_is_an_ordinary_thread(server: Server) -> None:
    body = {"assistant_id": "chain", "input": {"x": 0}, "on_completion": "keep"}
    response = httpx.post(f"{server.url}/runs/wait", json=body)
    assert response.json() == {"x": 11}
    thread_id, _ = _place(response)
    assert thread_id in server.saver.threads()
    state = httpx.get(f"{server.url}/threads/{thread_id}/state").json()
    assert state["values"] == {"x": 11}


def test_a_stateless_agent_run_leaves_the_served_agent_on_its_saver() -> None:
    served = agent()
    saver = served.saver
    twin = on_saver(served, MemorySaver())
    assert served.saver is saver and twin.saver is not saver
    config = RunnableConfig(thread_id="t")
    assert twin.invoke("hi", config)["messages"][-1].content == "Hello there."
    assert twin.get_state(config).values["messages"][-1].content == "Hello there."
    assert served.get_state(config).values == {}
