"""Crons on PostgreSQL with several ``graph-agent serve`` processes, each scheduling: each due
run starts exactly once, and a process killed while it starts a cron's run loses nothing
and starts nothing twice.

Every process reads the scheduler's clock from a file the test writes (the launcher below
sets ``crons_schedule.now``), so the test moves time by minutes without waiting for them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client

from tests.checkpoint.postgres_db import admin, fresh_schema
from tests.serve.conftest import free_port, wait_until_up

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ["tests/serve/graphs.py:chain", "tests/serve/graphs.py:slow"]
START = datetime(2030, 1, 7, 12, 0, 30, tzinfo=UTC)
LAUNCHER = """
import os, signal, sys
from datetime import datetime
from pathlib import Path

from graph_agent.cli import main
from graph_agent.serve import crons, crons_schedule

clock = Path(os.environ["CRON_TEST_CLOCK"])
crons_schedule.now = lambda: datetime.fromisoformat(clock.read_text())
crons_schedule.CHECK_SECONDS = 0.05
fault = os.environ.get("CRON_TEST_FAULT")
if fault:
    started = crons.Crons._start_now

    async def start_now(self, run):
        if fault == "before_start":
            os.kill(os.getpid(), signal.SIGKILL)
        await started(self, run)
        if fault == "after_start":
            os.kill(os.getpid(), signal.SIGKILL)

    crons.Crons._start_now = start_now
sys.exit(main(sys.argv[1:]))
"""


@dataclass
class Node:
    process: subprocess.Popen[bytes]
    url: str


class Cluster:
    """Processes serving (and working) on one fresh schema, all on the clock file."""

    def __init__(self, dsn: str, folder: Path) -> None:
        self.dsn = dsn
        self.schema = dsn.split("search_path=")[1].split("'")[0].split()[0]
        self.clock = folder / "clock"
        self.moment = START
        self.clock.write_text(START.isoformat())
        self.nodes: list[Node] = []

    def start(self, fault: str | None = None) -> Node:
        port = free_port()
        command = [sys.executable, "-c", LAUNCHER, "serve", *TARGETS, "--port", str(port)]
        command += ["--postgres", self.dsn, "--workers", "1"]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "CRON_TEST_CLOCK": str(self.clock)}
        if fault is not None:
            env["CRON_TEST_FAULT"] = fault
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
        node = Node(process, f"http://127.0.0.1:{port}")
        self.nodes.append(node)
        return node

    def advance(self, **delta: float) -> None:
        self.moment += timedelta(**delta)
        self.clock.write_text(self.moment.isoformat())

    def rows(self, sql: str, *args: object) -> list[tuple[Any, ...]]:
        sql = sql.replace("graph_agent_serve_", f"{self.schema}.graph_agent_serve_")
        return admin().execute(sql, args).fetchall()

    def runs_of(self, cron_id: str) -> list[tuple[Any, ...]]:
        """``(run_id, thread_id, status)`` of each run the cron started."""
        return self.rows(
            "SELECT run_id, thread_id, status FROM graph_agent_serve_runs "
            "WHERE metadata::json->>'cron_id' = %s",
            cron_id,
        )

    def stop(self) -> None:
        for node in self.nodes:
            if node.process.poll() is None:
                node.process.terminate()
        for node in self.nodes:
            node.process.wait(20)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with fresh_schema() as dsn:
        made = Cluster(dsn, tmp_path)
        try:
            yield made
        finally:
            made.stop()


def wait_for(check: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"not so after {timeout} s")


def test_three_processes_start_each_due_run_exactly_once(cluster: Cluster) -> None:
    nodes = [cluster.start() for _ in range(3)]
    for node in nodes:
        wait_until_up(node.url)
    client = get_sync_client(url=nodes[0].url)
    made = []
    for n in range(4):
        thread_id = client.threads.create()["thread_id"]
        made.append(
            client.crons.create_for_thread(
                thread_id,
                "chain",
                schedule="* * * * *",
                input={"x": n},
                multitask_strategy="enqueue",
            )["cron_id"]
        )
        made.append(
            client.crons.create(
                "chain", schedule="* * * * *", input={"x": n}, on_run_completed="keep"
            )["cron_id"]
        )
    for minute in range(1, 4):
        cluster.advance(minutes=1)
        wait_for(lambda m=minute: all(len(cluster.runs_of(c)) == m for c in made))
        time.sleep(0.5)  # rounds that come later start nothing more
    wait_for(lambda: all(status == "success" for c in made for _, _, status in cluster.runs_of(c)))
    for cron_id in made:
        assert len(cluster.runs_of(cron_id)) == 3
    run_ids = [run_id for cron_id in made for run_id, _, _ in cluster.runs_of(cron_id)]
    starts = cluster.rows(
        "SELECT count(*) FROM graph_agent_serve_events WHERE event = 'metadata' "
        "AND run_id = ANY(%s)",
        run_ids,
    )
    assert starts == [(len(made) * 3,)]  # and each ran once
    assert cluster.rows("SELECT count(*) FROM graph_agent_serve_cron_runs") == [(0,)]
    values = [
        get_sync_client(url=nodes[1].url).threads.get_state(t)["values"]
        for t in {thread_id for c in made[1::2] for _, thread_id, _ in cluster.runs_of(c)}
    ]
    assert sorted(v["x"] for v in values) == sorted(n + 11 for n in range(4) for _ in range(3))


@pytest.mark.parametrize("fault", ["before_start", "after_start"])
def test_a_process_killed_while_starting_a_crons_run_loses_nothing_and_starts_nothing_twice(
    cluster: Cluster, fault: str
) -> None:
    doomed = cluster.start(fault)
    wait_until_up(doomed.url)
    client = get_sync_client(url=doomed.url)
    thread_id = client.threads.create()["thread_id"]
    cron_id = client.crons.create_for_thread(
        thread_id, "slow", schedule="* * * * *", input={"n": 0}
    )["cron_id"]
    cluster.advance(minutes=1)
    assert doomed.process.wait(60) != 0  # killed as it started the due run
    recorded = cluster.rows("SELECT run_id, started FROM graph_agent_serve_cron_runs")
    assert [started for _, started in recorded] == [0]
    assert len(cluster.runs_of(cron_id)) == (1 if fault == "after_start" else 0)
    survivor = cluster.start()
    wait_until_up(survivor.url)
    wait_for(lambda: [s for _, _, s in cluster.runs_of(cron_id)] == ["success"])
    time.sleep(1.0)  # the survivor's later rounds start nothing more
    (run,) = cluster.runs_of(cron_id)
    assert run[0] == recorded[0][0] and run[1] == thread_id
    assert cluster.rows("SELECT count(*) FROM graph_agent_serve_cron_runs") == [(0,)]
    state = get_sync_client(url=survivor.url).threads.get_state(thread_id)
    assert state["values"] == {"n": 10}
