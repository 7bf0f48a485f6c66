"""Crash a run on SqliteSaver, resume it elsewhere: same final state, no committed node re-run.

A child process runs the graph in ``crash_graph``; it is SIGKILLed at seeded random moments, or
exits right after each commit boundary (children are forked by a server process that
imported graph_agent once, so each costs milliseconds, not an interpreter start). The test process then resumes the thread and checks
that the final state equals an uninterrupted run's and that no task whose writes were
committed before the crash ran again (a ledger of task ids run after the crash).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from graph_agent import RunnableConfig
from graph_agent.checkpoint.sqlite import SqliteSaver
from graph_agent.graph.saver import WRITE
from graph_agent.graph.task import task_id_for
from tests.checkpoint.crash_graph import EXPECTED_LOG, build
from tests.forkserver import ForkServer

THREAD = "crash-thread"


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    fork_server = ForkServer("tests.checkpoint.crash_graph")
    yield fork_server
    fork_server.close()


def start(server: ForkServer, db: Path, crash_after: int = 0) -> int:
    return server.start(db, THREAD, crash_after)


def committed_tasks(saver: SqliteSaver) -> set[str]:
    """Task ids whose writes are committed: in a checkpoint, or as a pending write."""
    tasks = set()
    for checkpoint in saver.list(THREAD):
        if checkpoint.metadata.get("source") == "loop":
            for writer in checkpoint.metadata["writers"]:
                tasks.add(task_id_for(THREAD, checkpoint.parent_id, writer))
    head = saver.get(THREAD)
    if head is not None:
        tasks |= {w.task_id for w in head.pending_writes if w.channel == WRITE}
    return tasks


def resume_and_check(db: Path) -> None:
    saver = SqliteSaver(db)
    before = committed_tasks(saver)
    ledger: list[str] = []
    app = build(saver, ledger)
    config = RunnableConfig(thread_id=THREAD)
    head = saver.get(THREAD)
    if head is None:
        final = app.invoke({"log": []}, config)
    elif head.next:
        final = app.invoke(None, config)
    else:
        final = app.get_state(config).values
    assert list(final["log"]) == EXPECTED_LOG
    rerun = before & set(ledger)
    assert not rerun, f"tasks committed before the crash ran again: {rerun}"
    assert len(ledger) == len(set(ledger))
    saver.close()


def full_run_profile(server: ForkServer, tmp_path: Path) -> tuple[float, int]:
    """Duration of an uninterrupted run (ready to exit) and how many commits it makes."""
    db = tmp_path / "full.db"
    start(server, db)
    started = time.monotonic()
    assert server.wait() == 0
    duration = time.monotonic() - started
    saver = SqliteSaver(db)
    checkpoints = list(saver.list(THREAD))
    pending = 3  # the parallel step commits each finished node before its checkpoint
    saver.close()
    return duration, len(checkpoints) + pending


def test_a_run_killed_at_random_moments_resumes_to_the_same_end(server, tmp_path):
    duration, _ = full_run_profile(server, tmp_path)
    rng = random.Random(20261129)
    for attempt in range(20):
        db = tmp_path / f"kill-{attempt}.db"
        pid = start(server, db)
        time.sleep(rng.uniform(0, duration))
        server.kill(pid)
        server.wait()
        resume_and_check(db)


def test_a_crash_right_after_each_commit_resumes_without_rerunning_committed_nodes(
    server, tmp_path
):
    _, commits = full_run_profile(server, tmp_path)
    assert commits >= 10
    for k in range(1, commits + 1):
        db = tmp_path / f"commit-{k}.db"
        start(server, db, crash_after=k)
        code = server.wait()
        assert code in (137, 0), f"child exited with {code}"
        resume_and_check(db)


def test_a_second_process_on_a_running_thread_gets_thread_busy(server, tmp_path):
    from graph_agent import ThreadBusyError

    db = tmp_path / "busy.db"
    start(server, db)
    saver = SqliteSaver(db)
    app = build(saver)
    deadline = time.monotonic() + 10
    while saver.get(THREAD) is None and time.monotonic() < deadline:
        time.sleep(0.005)
    try:
        with pytest.raises(ThreadBusyError, match="process"):
            app.invoke({"log": []}, RunnableConfig(thread_id=THREAD))
    finally:
        assert server.wait() == 0
    assert app.get_state(RunnableConfig(thread_id=THREAD)).values["log"] == EXPECTED_LOG
