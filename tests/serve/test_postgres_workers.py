"""graph-agent serve --postgres: runs are jobs in PostgreSQL claimed by several processes.

Three real processes on one fresh schema: ``api`` serves HTTP only (``--workers 0``), so every
run it is asked for executes elsewhere; ``b`` and ``c`` serve HTTP and work.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client

from tests.checkpoint.postgres_db import admin, fresh_schema
from tests.serve.conftest import free_port, wait_until_up
from tests.serve.test_events import _sse

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ["tests/serve/graphs.py:slow", "tests/serve/graphs.py:chain"]


@dataclass
class Node:
    process: subprocess.Popen[bytes]
    url: str
    worker: int | None = None


@dataclass
class Cluster:
    schema: str
    api: Node
    b: Node
    c: Node

    def rows(self, sql: str, *args: object) -> list[tuple]:
        sql = sql.replace("graph_agent_serve_", f"{self.schema}.graph_agent_serve_")
        return admin().execute(sql, args).fetchall()


def _start(dsn: str, workers: int) -> Node:
    port = free_port()
    command = [sys.executable, "-m", "graph_agent", "serve", *TARGETS, "--port", str(port)]
    command += ["--postgres", dsn, "--workers", str(workers)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    return Node(process, f"http://127.0.0.1:{port}")


def _ready(node: Node) -> None:
    wait_until_up(node.url)  # (a start under load took over 20 s)
    node.worker = httpx.get(f"{node.url}/ok").json().get("worker")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with fresh_schema() as dsn:
        schema = dsn.split("search_path=")[1].split("'")[0].split()[0]
        nodes = [_start(dsn, 0), _start(dsn, 1), _start(dsn, 1)]
        try:
            for node in nodes:
                _ready(node)
            yield Cluster(schema, *nodes)
        finally:
            for node in nodes:
                if node.process.poll() is None:
                    node.process.terminate()
            for node in nodes:
                node.process.wait(20)


def test_fifty_background_runs_all_finish_exactly_once(cluster: Cluster) -> None:
    client = get_sync_client(url=cluster.api.url)

    def one(i: int) -> tuple[str, str]:
        thread_id = client.threads.create()["thread_id"]
        return thread_id, client.runs.create(thread_id, "slow", input={"n": 7 + i % 3})["run_id"]

    with ThreadPoolExecutor(10) as pool:
        runs = list(pool.map(one, range(50)))
    assert cluster.api.worker is None  # it serves HTTP only: others ran everything
    for thread_id, run_id in runs:
        assert client.runs.join(thread_id, run_id) == {"n": 10}
        assert client.runs.get(thread_id, run_id)["status"] == "success"
    ids = [run_id for _, run_id in runs]
    claims = cluster.rows(
        "SELECT attempt, worker FROM graph_agent_serve_runs WHERE run_id = ANY(%s)", ids
    )
    assert [attempt for attempt, _ in claims] == [1] * 50  # each claimed once
    assert {worker for _, worker in claims} == {cluster.b.worker, cluster.c.worker}
    starts = cluster.rows(
        "SELECT count(*) FROM graph_agent_serve_events WHERE event = 'metadata' "
        "AND run_id = ANY(%s)",
        ids,
    )
    assert starts == [(50,)]  # and run once


def test_a_client_of_one_process_streams_a_run_executing_on_another(cluster: Cluster) -> None:
    client = get_sync_client(url=cluster.api.url)
    thread_id = client.threads.create()["thread_id"]
    parts = list(
        client.runs.stream(thread_id, "chain", input={"x": 1}, stream_mode=["values", "custom"])
    )
    assert [p.event for p in parts] == [
        "metadata",
        "values",
        "custom",
        "custom",
        "values",
        "values",
    ]
    assert parts[-1].data == {"x": 12}
    worker = cluster.rows(
        "SELECT worker FROM graph_agent_serve_runs WHERE run_id = %s", parts[0].data["run_id"]
    )
    assert worker[0][0] in (cluster.b.worker, cluster.c.worker)
    other = get_sync_client(url=cluster.b.url)  # and any process joins it afterwards
    assert [p.data for p in other.runs.join_stream(thread_id, parts[0].data["run_id"])] == [
        p.data for p in parts
    ]


def test_sse_reconnect_with_last_event_id_loses_no_event(cluster: Cluster) -> None:
    client = get_sync_client(url=cluster.api.url)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "slow", input={"n": 0}, stream_mode="values")
    path = f"/threads/{thread_id}/runs/{run['run_id']}/stream"
    with httpx.stream("GET", cluster.api.url + path, timeout=10) as response:
        first = _sse(response, limit=3)
    with httpx.stream(  # reconnect to another process
        "GET", cluster.c.url + path, headers={"Last-Event-ID": str(first[-1][0])}, timeout=10
    ) as response:
        rest = _sse(response)
    seen = first + rest
    assert [number for number, _, _ in seen] == list(range(12))
    assert [data for _, _, data in seen[1:]] == [f'{{"n":{n}}}' for n in range(11)]


def test_cancel_and_multitask_strategies_reach_the_worker_running_the_run(
    cluster: Cluster,
) -> None:
    client = get_sync_client(url=cluster.api.url)
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.create(thread_id, "slow", input={"n": 0})
    time.sleep(0.4)
    second = client.runs.create(thread_id, "slow", input=None, multitask_strategy="interrupt")
    assert client.runs.join(thread_id, second["run_id"]) == {"n": 10}
    assert client.runs.get(thread_id, first["run_id"])["status"] == "interrupted"
    third = client.runs.create(thread_id, "slow", input={"n": 0})
    time.sleep(0.4)
    client.runs.cancel(thread_id, third["run_id"], wait=True, action="rollback")
    assert client.threads.get_state(thread_id)["values"] == {"n": 10}
    assert client.threads.get(thread_id)["status"] == "idle"
    with pytest.raises(httpx.HTTPStatusError):
        client.runs.get(thread_id, third["run_id"])


def test_a_worker_killed_mid_run_has_its_runs_finished_by_another(cluster: Cluster) -> None:
    # the runs are sent to b itself: a working process claims the runs it receives as it
    # writes them. (Sent to the API process, they went to whichever worker claimed first: a
    # b starved of CPU for a moment lost every race to c, which ran all six, so b had none.)
    receiver = get_sync_client(url=cluster.b.url)
    runs = []
    for _ in range(6):
        thread_id = receiver.threads.create()["thread_id"]
        run_id = receiver.runs.create(thread_id, "slow", input={"n": 0})["run_id"]
        runs.append((thread_id, run_id))
    claims = cluster.rows(
        "SELECT worker, status FROM graph_agent_serve_runs WHERE run_id = ANY(%s)",
        [run_id for _, run_id in runs],
    )
    assert claims == [(cluster.b.worker, "running")] * 6
    time.sleep(0.35)  # a few steps in
    cluster.b.process.send_signal(signal.SIGKILL)
    cluster.b.process.wait(10)
    client = get_sync_client(url=cluster.api.url)
    reference = client.threads.create()["thread_id"]  # the same run, without a crash
    client.runs.wait(reference, "slow", input={"n": 0})
    expected = [s["values"] for s in client.threads.get_history(reference, limit=100)]
    for thread_id, run_id in runs:
        assert client.runs.join(thread_id, run_id) == {"n": 10}
        assert client.runs.get(thread_id, run_id)["status"] == "success"
        history = [s["values"] for s in client.threads.get_history(thread_id, limit=100)]
        assert history == expected  # every step stored once: linear, nothing lost or doubled
    claims = cluster.rows(
        "SELECT attempt, worker FROM graph_agent_serve_runs WHERE run_id = ANY(%s)",
        [run_id for _, run_id in runs],
    )
    assert claims == [(2, cluster.c.worker)] * 6  # b's runs were claimed again, all by c


def test_a_run_received_by_a_working_process_runs_there_and_every_process_replays_it(
    cluster: Cluster,
) -> None:
    client = get_sync_client(url=cluster.c.url)  # (b was killed above)
    thread_id = client.threads.create()["thread_id"]
    parts = list(client.runs.stream(thread_id, "chain", input={"x": 1}, stream_mode="values"))
    run_id = parts[0].data["run_id"]
    claim = cluster.rows(
        "SELECT worker, attempt, status FROM graph_agent_serve_runs WHERE run_id = %s", run_id
    )
    assert claim == [(cluster.c.worker, 1, "success")]  # claimed as it was written
    other = get_sync_client(url=cluster.api.url)  # its events were written with its end
    assert [(p.event, p.data) for p in other.runs.join_stream(thread_id, run_id)] == [
        (p.event, p.data) for p in parts
    ]


def test_a_run_enqueued_behind_one_running_in_the_same_process_runs_after_it(
    cluster: Cluster,
) -> None:
    client = get_sync_client(url=cluster.c.url)
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.create(thread_id, "slow", input={"n": 0})
    second = client.runs.create(thread_id, "slow", input={"n": 9}, multitask_strategy="enqueue")
    assert client.runs.join(thread_id, second["run_id"]) == {"n": 10}
    assert client.runs.get(thread_id, first["run_id"])["status"] == "success"
    history = [s["metadata"]["run_id"] for s in client.threads.get_history(thread_id, limit=100)]
    ran = [run_id for i, run_id in enumerate(history) if i == 0 or history[i - 1] != run_id]
    assert ran == [second["run_id"], first["run_id"]]  # one after the other, not interleaved
    assert client.threads.get(thread_id)["status"] == "idle"


def test_a_stateless_run_waited_for_leaves_no_thread_behind(cluster: Cluster) -> None:
    def threads() -> int:
        return cluster.rows("SELECT count(*) FROM graph_agent_serve_threads")[0][0]

    before = threads()  # (a process that works runs such runs in memory: see below)
    answer = get_sync_client(url=cluster.api.url).runs.wait(None, "chain", input={"x": 1})
    assert answer == {"x": 12}
    deadline = time.monotonic() + 10
    while threads() != before:  # deleted once the answer is sent
        assert time.monotonic() < deadline, "the stateless run's thread was never deleted"
        time.sleep(0.05)


@pytest.mark.timeout(180)  # three server processes start, one after the others: slow when loaded
def test_workers_n_are_n_processes_serving_one_port_each_running_what_it_receives() -> None:
    with fresh_schema() as dsn:
        schema = dsn.split("search_path=")[1].split("'")[0].split()[0]
        node = _start(dsn, 2)
        try:
            _ready(node)
            keys = {node.worker}
            deadline = time.monotonic() + 20
            while len(keys) < 2:  # a new connection each time: the kernel picks a process
                assert time.monotonic() < deadline, "only one process answers on the port"
                keys.add(httpx.get(f"{node.url}/ok").json()["worker"])
            run_ids = []
            for _ in range(20):
                thread_id = httpx.post(f"{node.url}/threads", json={}).json()["thread_id"]
                body = {"assistant_id": "chain", "input": {"x": 1}}
                answer = httpx.post(f"{node.url}/threads/{thread_id}/runs/wait", json=body)
                assert answer.json() == {"x": 12}
                run_ids.append(answer.headers["content-location"].rsplit("/", 1)[1])
            workers = admin().execute(
                f"SELECT DISTINCT worker FROM {schema}.graph_agent_serve_runs "
                "WHERE run_id = ANY(%s)",
                (run_ids,),
            )
            assert {row[0] for row in workers.fetchall()} == keys  # each ran what it received
            again = ["--port", node.url.rsplit(":", 1)[1], "--postgres", dsn, "--workers", "2"]
            refused = subprocess.run(  # another server on the same port
                [sys.executable, "-m", "graph_agent", "serve", *TARGETS, *again],
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert refused.returncode != 0 and "cannot listen" in refused.stderr
            node.process.send_signal(signal.SIGKILL)  # the other process stops with it
            node.process.wait(10)
            deadline = time.monotonic() + 15
            while True:
                try:
                    httpx.get(f"{node.url}/ok", timeout=1)
                except httpx.TransportError:
                    break
                assert time.monotonic() < deadline, "a process of --workers outlived its server"
                time.sleep(0.2)
        finally:
            if node.process.poll() is None:
                node.process.terminate()
                node.process.wait(20)


def test_a_stateless_run_that_deletes_its_thread_runs_in_memory_where_received(
    cluster: Cluster,
) -> None:
    def rows() -> tuple[int, int]:
        found = cluster.rows(
            "SELECT (SELECT count(*) FROM graph_agent_serve_runs), "
            "(SELECT count(*) FROM graph_agent_serve_threads)"
        )
        return found[0][0], found[0][1]

    before = rows()
    client = get_sync_client(url=cluster.c.url)
    assert client.runs.wait(None, "chain", input={"x": 1}) == {"x": 12}
    parts = list(client.runs.stream(None, "chain", input={"x": 1}, stream_mode="values"))
    assert parts[-1].data == {"x": 12}
    assert rows() == before  # neither its thread nor its run was ever written
    kept = client.runs.wait(None, "chain", input={"x": 1}, on_completion="keep")
    assert kept == {"x": 12}  # one that keeps its thread is a durable job, as before
    assert rows()[1] == before[1] + 1
