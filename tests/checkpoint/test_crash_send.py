"""A map-reduce run with Send, killed mid-superstep on SqliteSaver, resumes elsewhere: the
Send tasks whose writes were committed do not run again, the others run once, and the final
state is an uninterrupted run's.

Children are forked by a fork server (``tests/forkserver.py``) running ``crash_send_graph``;
each is SIGKILLed at a seeded random moment, or exits right after its k-th commit.
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
from tests.checkpoint.crash_send_graph import EXPECTED, ITEMS, build
from tests.forkserver import ForkServer

THREAD = "send-crash"


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    fork_server = ForkServer("tests.checkpoint.crash_send_graph")
    yield fork_server
    fork_server.close()


def resume_and_check(db: Path) -> int:
    """Resume the thread in ``db`` and check it; how many Send tasks had finished before."""
    saver = SqliteSaver(db)
    head = saver.get(THREAD)
    finished = {w.task_id for w in head.pending_writes if w.channel == WRITE} if head else set()
    in_send_step = head is not None and head.next == ("work",) * len(ITEMS)
    ledger: list[tuple[str, int]] = []
    app = build(saver, ledger)
    config = RunnableConfig(thread_id=THREAD)
    if head is None:
        final = app.invoke({"items": ITEMS, "results": []}, config)
    elif head.next:
        final = app.invoke(None, config)
    else:
        final = app.get_state(config).values
    assert list(final["results"]) == EXPECTED
    ran = [task_id for task_id, _ in ledger]
    assert not finished & set(ran), "a Send task whose write was committed ran again"
    assert len(ran) == len(set(ran))
    if in_send_step:  # exactly the unfinished ones ran, each once
        assert len(ran) == len(ITEMS) - len(finished)
        assert sorted(n for _, n in ledger) == sorted(
            set(ITEMS) - {n for n, task_id in _task_of(app, config).items() if task_id in finished}
        )
    saver.close()
    return len(finished) if in_send_step else -1


def _task_of(app, config) -> dict[int, str]:
    """Item -> the id its Send task has (read from the thread's history: the Send step)."""
    for snapshot in app.get_state_history(config):
        if snapshot.next and snapshot.next[0] == "work":
            return dict(zip(ITEMS, (task.id for task in snapshot.tasks), strict=True))
    raise AssertionError("no checkpoint before the Send step")


def test_a_crash_after_each_commit_reruns_only_the_send_tasks_not_committed(server, tmp_path):
    mid_step = []
    for k in range(1, len(ITEMS) + 5):
        db = tmp_path / f"commit-{k}.db"
        server.start(db, THREAD, k)
        assert server.wait() in (137, 0)
        mid_step.append(resume_and_check(db))
    # commits 1-2 are the input and plan checkpoints; then one per finished Send task
    assert mid_step[2 : 2 + len(ITEMS) - 1] == list(range(1, len(ITEMS)))


def test_a_run_killed_at_random_moments_resumes_to_the_same_end(server, tmp_path):
    db = tmp_path / "full.db"
    server.start(db, THREAD, 0)
    started = time.monotonic()
    assert server.wait() == 0
    duration = time.monotonic() - started
    rng = random.Random(20260422)
    for attempt in range(12):
        db = tmp_path / f"kill-{attempt}.db"
        pid = server.start(db, THREAD, 0)
        time.sleep(rng.uniform(0, duration))
        server.kill(pid)
        server.wait()
        resume_and_check(db)
