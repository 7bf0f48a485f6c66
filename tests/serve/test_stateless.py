"""Stateless runs (no thread id): with ``on_completion="delete"`` (the default) their thread
lives in memory while they run, found by the API like any other, and leaves nothing in the
checkpoint or records files; with ``"keep"`` it is an ordinary thread."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn
from langgraph_sdk import get_sync_client

from graph_agent import END, START, CompileConfig, RunnableConfig, StateGraph
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.checkpoint.postgres import AsyncPostgresSaver
from graph_agent.serve import create_app
from graph_agent.serve.pg_records import PostgresRecords
from graph_agent.serve.records import Records, RunRecord, ThreadRecord, now
from graph_agent.serve.runs import Runner, RunRequest, on_saver
from graph_agent.serve.tasks import cancel_and_await
from tests.checkpoint.postgres_db import fresh_schema
from tests.serve.conftest import Server, free_port, wait_until_up
from tests.serve.graphs import agent, chain


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


def test_temporary_records_are_found_by_id_and_never_reach_the_file(tmp_path) -> None:
    path = str(tmp_path / "records.db")
    records = Records(path)
    thread = ThreadRecord(thread_id="t", created_at=now(), updated_at=now(), metadata={"a": 1})
    records.put_thread(thread, temporary=True)
    run = RunRecord(
        run_id="r", thread_id="t", assistant_id="chain", created_at=now(), updated_at=now()
    )
    records.put_run(run)
    records.set_thread_status("t", "busy", "chain")
    records.set_run_status("r", "running")
    found = records.thread("t")
    assert found is not None and found.status == "busy" and found.assistant_id == "chain"
    found.metadata["a"] = 2  # a copy: the record stays as stored
    assert records.thread("t").metadata == {"a": 1}  # type: ignore[union-attr]
    assert [r.status for r in records.runs("t", limit=10, offset=0)] == ["running"]
    assert records.threads() == [] and Records(path).thread("t") is None
    records.delete_thread("t")
    assert records.thread("t") is None and records.run("t", "r") is None


async def test_a_runner_keeps_only_its_newest_finished_runs_in_memory() -> None:
    graph = StateGraph("inc")
    graph.add_node("inc", lambda state: {"x": state["x"] + 1})
    graph.add_edge(START, "inc").add_edge("inc", END)
    runner = Runner({"inc": graph.compile(CompileConfig(saver=MemorySaver()))}, Records())
    runner.finished_kept = 2
    runs = []
    for n in range(4):
        thread = ThreadRecord(thread_id=f"t{n}", created_at=now(), updated_at=now())
        runner.records.put_thread(thread)
        runs.append(runner.start(thread.thread_id, RunRequest(assistant_id="inc", input={"x": n})))
        assert await runs[-1].wait() == {"x": n + 1}
    assert [runner.find(run.record.run_id) is run for run in runs] == [False, False, True, True]
    first = runs[0].record
    assert runner.records.run(first.thread_id, first.run_id) is not None  # still recorded
    temporary = ThreadRecord(thread_id="temp", created_at=now(), updated_at=now())
    stateless = runner.start_temporary(temporary, RunRequest(assistant_id="inc", input={"x": 0}))
    assert await stateless.wait() == {"x": 1}
    assert runner.find(stateless.record.run_id) is None  # gone with its thread, not kept
    assert runner.find(runs[3].record.run_id) is runs[3]


def test_a_stateless_run_in_memory_is_cancelled_before_a_postgres_server_stops() -> None:
    """In PostgreSQL mode a stateless run that deletes its thread runs in the receiving
    process, in memory: the server's shutdown cancels it and waits for it, while the records
    and savers it uses are open, instead of leaving it to the closing event loop."""
    order: list[str] = []
    started = threading.Event()
    graph = StateGraph("hanging")

    async def wait(state: dict[str, Any]) -> dict[str, Any]:
        started.set()
        try:
            await asyncio.Event().wait()  # a model call that never answers
        except asyncio.CancelledError:
            order.append("run cancelled")
            raise
        return {}

    graph.add_node("wait", wait)
    graph.add_edge(START, "wait").add_edge("wait", END)
    with fresh_schema() as dsn:
        saver = AsyncPostgresSaver(dsn)
        records = PostgresRecords(dsn)
        app = create_app([graph], saver=saver, records=records)
        lifespan = app.router.lifespan_context

        @contextlib.asynccontextmanager
        async def observed(app: Any) -> AsyncIterator[None]:
            async with lifespan(app):
                yield
            order.append("lifespan ended")

        app.router.lifespan_context = observed
        port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        try:
            wait_until_up(f"http://127.0.0.1:{port}")
            body = {"assistant_id": "hanging", "input": {}}
            with httpx.stream("POST", f"http://127.0.0.1:{port}/runs/stream", json=body) as sse:
                assert next(sse.iter_lines()) == "event: metadata"
                assert started.wait(10)  # it runs; the client leaves, the run goes on
        finally:
            server.should_exit = True
            thread.join(20)
            records.close()
            saver.close()
    assert not thread.is_alive()
    assert order == ["run cancelled", "lifespan ended"]


def test_an_api_only_postgres_server_stops_waiting_to_delete_stateless_threads_at_shutdown() -> (
    None
):
    """An API-only process queues a stateless run for the workers and waits, in a task, for
    its end to delete its thread; the server's shutdown cancels that wait and awaits it, while
    the records it reads are open, instead of leaving it to the closing event loop."""

    def forgetting() -> list[asyncio.Task[Any]]:
        return [
            task
            for task in asyncio.all_tasks()
            if not task.done() and task.get_coro().__qualname__ == "_Api._forget"  # type: ignore[union-attr]
        ]

    async def scenario(dsn: str) -> tuple[int, int]:
        records = PostgresRecords(dsn)
        app = create_app({"chain": chain()}, records=records, work=False)
        try:
            async with app.router.lifespan_context(app):
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(
                    transport=transport, base_url="http://localhost"
                ) as client:
                    body = {"assistant_id": "chain", "input": {"x": 1}}
                    waiting = asyncio.create_task(client.post("/runs/wait", json=body))
                    async with asyncio.timeout(10):  # queued: no worker claims it
                        while not forgetting():
                            await asyncio.sleep(0.02)
                    before = len(forgetting())
                    waiting.cancel()  # the client leaves; the run stays queued
                    with contextlib.suppress(asyncio.CancelledError):
                        await waiting
            return before, len(forgetting())
        finally:
            records.close()

    with fresh_schema() as dsn:
        before, after = asyncio.run(scenario(dsn))
    assert before == 1  # it waited for the run's end
    assert after == 0  # the shutdown ended that wait


async def test_a_closed_runner_stops_its_runs_as_interrupted_and_deletes_temporary_threads() -> (
    None
):
    started = asyncio.Event()
    graph = StateGraph("hanging")

    async def wait(state: dict[str, Any]) -> dict[str, Any]:
        started.set()
        await asyncio.Event().wait()
        return {}

    graph.add_node("wait", wait)
    graph.add_edge(START, "wait").add_edge("wait", END)
    runner = Runner({"hanging": graph.compile(CompileConfig(saver=MemorySaver()))}, Records())
    thread = ThreadRecord(thread_id="t", created_at=now(), updated_at=now())
    runner.records.put_thread(thread)
    kept = runner.start("t", RunRequest(assistant_id="hanging", input={}))
    temporary = ThreadRecord(thread_id="temp", created_at=now(), updated_at=now())
    gone = runner.start_temporary(temporary, RunRequest(assistant_id="hanging", input={}))
    async with asyncio.timeout(10):
        await started.wait()
    await runner.close()
    assert kept.finished and gone.finished
    assert runner.records.run("t", kept.record.run_id).status == "interrupted"  # type: ignore[union-attr]
    assert runner.records.thread("temp") is None and not runner.holds("temp")


async def test_a_closed_runner_ends_a_run_queued_behind_another_as_interrupted() -> None:
    started = asyncio.Event()
    graph = StateGraph("hanging")

    async def wait(state: dict[str, Any]) -> dict[str, Any]:
        started.set()
        await asyncio.Event().wait()
        return {}

    graph.add_node("wait", wait)
    graph.add_edge(START, "wait").add_edge("wait", END)
    runner = Runner({"hanging": graph.compile(CompileConfig(saver=MemorySaver()))}, Records())
    runner.records.put_thread(ThreadRecord(thread_id="t", created_at=now(), updated_at=now()))
    request = RunRequest(assistant_id="hanging", input={}, multitask_strategy="enqueue")
    first = runner.start("t", request)
    queued = runner.start("t", request)  # waits for the first in the queue
    async with asyncio.timeout(10):
        await started.wait()
    await runner.close()
    async with asyncio.timeout(10):  # its waiters return
        await queued.wait()
    for run in (first, queued):
        assert runner.records.run("t", run.record.run_id).status == "interrupted"  # type: ignore[union-attr]
    assert runner.records.thread("t").status == "idle"  # type: ignore[union-attr]


async def test_a_closed_runner_cancels_again_a_run_that_lost_its_cancel() -> None:
    started = asyncio.Event()

    async def stream(run: Any, runnable: Any) -> None:  # the run's streaming, stubborn
        started.set()
        with contextlib.suppress(asyncio.CancelledError):  # a cancel lost (see cancel_and_await)
            await asyncio.Event().wait()
        await asyncio.Event().wait()

    runner = Runner({"chain": chain().compile(CompileConfig(saver=MemorySaver()))}, Records())
    runner._stream = stream  # type: ignore[method-assign,assignment]
    runner.records.put_thread(ThreadRecord(thread_id="t", created_at=now(), updated_at=now()))
    run = runner.start("t", RunRequest(assistant_id="chain", input={"x": 0}))
    async with asyncio.timeout(10):
        await started.wait()
    closing = asyncio.ensure_future(runner.close())  # a task of its own: a hang is seen
    done, _ = await asyncio.wait([closing], timeout=10)
    if not done:
        closing.cancel()
        pytest.fail("Runner.close() waited on a run whose first cancel was lost")
    assert runner.records.run("t", run.record.run_id).status == "interrupted"  # type: ignore[union-attr]


async def test_stopping_tasks_logs_the_error_of_one_that_had_failed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fail() -> None:
        raise ConnectionError("the listener's connection died")

    failed = asyncio.create_task(fail(), name="listener")
    hanging = asyncio.create_task(asyncio.Event().wait(), name="worker")  # type: ignore[arg-type]
    await asyncio.sleep(0)
    with caplog.at_level(logging.ERROR, logger="graph_agent.serve.tasks"):
        await cancel_and_await([failed, hanging])
    assert hanging.cancelled()
    [record] = caplog.records
    assert "listener" in record.getMessage() and record.exc_info is not None
    assert isinstance(record.exc_info[1], ConnectionError)
