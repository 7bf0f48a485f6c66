"""A client that follows a run from another process before any worker claimed it gets the
run's events live from its first: the worker that claims it remembered the client's ask.

Two QueueRunners on a fresh schema, told of each other's news only through the notifier
(PostgreSQL LISTEN/NOTIFY, or Redis pub/sub): an API one (``work=False``), where the client
follows, and a worker. Event batches and the follower's re-checks are set to an hour, so an
event the follower gets while the run still runs was written live, never by a batch's timer
or after a re-ask.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from graph_agent import END, START, CompileConfig, StateGraph
from graph_agent.checkpoint.postgres import AsyncPostgresSaver
from graph_agent.serve import queue, queue_events
from graph_agent.serve.notify import Notifier, RedisNotifier
from graph_agent.serve.pg_records import PostgresRecords
from graph_agent.serve.queue import QueueRunner, RemoteRun
from graph_agent.serve.records import ThreadRecord, now
from graph_agent.serve.runs import RunRequest
from tests.checkpoint.postgres_db import fresh_schema
from tests.serve.redis_db import URL

REDIS = URL


@pytest.fixture
def dsn() -> Iterator[str]:
    with fresh_schema() as schema_dsn:
        yield schema_dsn


def gated(gates: dict[str, asyncio.Event]) -> StateGraph:
    """One node that waits until the test opens the gate its input names."""
    graph = StateGraph("gated")

    async def wait(state: dict[str, Any]) -> dict[str, Any]:
        await gates[state["gate"]].wait()
        return {"done": True}

    graph.add_node("wait", wait)
    graph.add_edge(START, "wait").add_edge("wait", END)
    return graph


def notifier(kind: str) -> Notifier | None:
    return RedisNotifier(REDIS) if kind == "redis" else None  # None: LISTEN/NOTIFY


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_a_follower_that_came_before_the_claim_gets_the_events_live(
    dsn: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_events, "EVENT_BATCH_SECONDS", 3600.0)
    monkeypatch.setattr(queue, "POLL_SECONDS", 3600.0)

    async def scenario() -> tuple[str, list[tuple[int, str, str]], list[tuple[int, str, str]]]:
        gates = {"a": asyncio.Event(), "b": asyncio.Event()}
        saver = AsyncPostgresSaver(dsn)
        runnable = gated(gates).compile(CompileConfig(saver=saver))
        api_records = PostgresRecords(dsn, notifier=notifier(kind))
        worker_records = PostgresRecords(dsn, notifier=notifier(kind))
        api = QueueRunner({"gated": runnable}, api_records, work=False)
        worker = QueueRunner({"gated": runnable}, worker_records)
        await api.open()
        await worker.open()
        try:
            stamp = now()
            thread = ThreadRecord(thread_id="t1", created_at=stamp, updated_at=stamp)
            await api.astart(
                "t1", RunRequest(assistant_id="gated", input={"gate": "a"}), thread, new_thread=True
            )
            later = RunRequest(
                assistant_id="gated", input={"gate": "b"}, multitask_strategy="enqueue"
            )
            second = await api.astart("t1", later)  # pending behind the first, which runs
            assert isinstance(second, RemoteRun) and second.status == "pending"
            run_id = second.record.run_id
            seen: list[tuple[int, str, str]] = []
            news = asyncio.Event()

            async def follow() -> None:
                async for item in second.follow():
                    seen.append(item)
                    news.set()

            follower = asyncio.create_task(follow())
            async with asyncio.timeout(10):  # its ask reached the worker, which remembers it
                while run_id not in worker._follow_asks:
                    await asyncio.sleep(0.01)
            gates["a"].set()  # the first ends; the worker claims the second
            async with asyncio.timeout(10):  # the second waits at its gate: yet its events came
                while not any(event == "values" for _, event, _ in seen):
                    news.clear()
                    await news.wait()
            while_running = list(seen)
            gates["b"].set()
            async with asyncio.timeout(10):
                await follower
            return run_id, while_running, seen
        finally:
            await api.close()
            await worker.close()
            api_records.close()
            worker_records.close()
            await saver.aclose()

    run_id, while_running, everything = asyncio.run(scenario())
    assert while_running[0][1] == "metadata" and run_id in while_running[0][2]
    assert [seq for seq, _, _ in everything] == list(range(len(everything)))
    assert everything[: len(while_running)] == while_running
    assert '"done":true' in everything[-1][2]
