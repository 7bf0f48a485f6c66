"""The worker pool that runs parallel sync nodes (graph_agent/graph/pool.py)."""

from __future__ import annotations

import asyncio
import os
import queue
import threading

import pytest

from graph_agent import END, START, AppendStrategy, StateGraph
from graph_agent.graph import pool as pool_module
from graph_agent.graph.pool import WorkerPool, shared_pool

WAIT = 10  # seconds: a generous bound, only reached when something is broken


def test_a_started_job_runs_on_a_pool_thread() -> None:
    done: queue.SimpleQueue[str] = queue.SimpleQueue()
    pool = WorkerPool(max_threads=4, name="test-pool")
    pool.start(lambda: done.put(threading.current_thread().name))
    assert done.get(timeout=WAIT) == "test-pool-1"


def test_jobs_one_after_another_reuse_one_idle_thread() -> None:
    done: queue.SimpleQueue[str] = queue.SimpleQueue()
    pool = WorkerPool(max_threads=8, name="reuse")
    names = set()
    for _ in range(20):
        pool.start(lambda: done.put(threading.current_thread().name))
        names.add(done.get(timeout=WAIT))
    assert names == {"reuse-1"}


def test_jobs_that_block_get_threads_of_their_own_up_to_the_cap_and_the_rest_wait() -> None:
    release = threading.Event()
    started: queue.SimpleQueue[int] = queue.SimpleQueue()
    finished: queue.SimpleQueue[int] = queue.SimpleQueue()
    pool = WorkerPool(max_threads=2, name="capped")

    def job(n: int) -> None:
        started.put(n)
        release.wait(WAIT)
        finished.put(n)

    for n in range(5):
        pool.start(job, n)
    first_two = {started.get(timeout=WAIT), started.get(timeout=WAIT)}
    assert first_two == {0, 1}
    with pytest.raises(queue.Empty):
        started.get(timeout=0.2)  # the cap: no third thread while both are busy
    release.set()
    assert sorted(finished.get(timeout=WAIT) for _ in range(5)) == [0, 1, 2, 3, 4]
    assert sum(t.name.startswith("capped-") for t in threading.enumerate()) == 2


def test_after_a_backlog_drains_a_new_job_still_finds_an_idle_thread() -> None:
    release = threading.Event()
    done: queue.SimpleQueue[str] = queue.SimpleQueue()
    pool = WorkerPool(max_threads=1, name="backlog")
    pool.start(release.wait, WAIT)
    pool.start(lambda: done.put("queued"))  # waits: the one thread is busy
    release.set()
    assert done.get(timeout=WAIT) == "queued"
    pool.start(lambda: done.put("later"))
    assert done.get(timeout=WAIT) == "later"


def test_a_cancelled_job_that_has_not_started_never_runs() -> None:
    release = threading.Event()
    ran: list[str] = []
    done: queue.SimpleQueue[str] = queue.SimpleQueue()
    pool = WorkerPool(max_threads=1, name="cancel")
    pool.start(release.wait, WAIT)
    pool.start(ran.append, "cancelled").cancel()
    pool.start(done.put, "after")
    release.set()
    assert done.get(timeout=WAIT) == "after"
    assert ran == []


def test_a_job_that_raises_does_not_take_its_thread_down() -> None:
    done: queue.SimpleQueue[str] = queue.SimpleQueue()
    pool = WorkerPool(max_threads=1, name="raises")

    def fail() -> None:
        raise RuntimeError("the job reports its own errors")

    pool.start(fail)
    pool.start(lambda: done.put(threading.current_thread().name))
    assert done.get(timeout=WAIT) == "raises-1"


def test_submit_gives_a_future_of_the_result_or_the_error() -> None:
    pool = WorkerPool(max_threads=2, name="futures")
    assert pool.submit(sum, [1, 2, 3]).result(timeout=WAIT) == 6
    with pytest.raises(ZeroDivisionError):
        pool.submit(lambda: 1 / 0).result(timeout=WAIT)


def test_the_pool_serves_run_in_executor() -> None:
    pool = WorkerPool(max_threads=2, name="executor")

    async def main() -> str:
        return await asyncio.get_running_loop().run_in_executor(
            pool, lambda: threading.current_thread().name
        )

    assert asyncio.run(main()) == "executor-1"


def test_a_shut_down_pool_refuses_new_jobs_and_its_threads_end() -> None:
    pool = WorkerPool(max_threads=2, name="shutdown")
    pool.submit(int).result(timeout=WAIT)
    pool.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        pool.start(int)
    for thread in [t for t in threading.enumerate() if t.name.startswith("shutdown-")]:
        thread.join(WAIT)
        assert not thread.is_alive()


def test_a_pool_needs_a_thread() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        WorkerPool(max_threads=0, name="none")


def test_parallel_nodes_run_on_the_shared_pool() -> None:
    seen: list[str] = []

    def branch(state: dict[str, object]) -> dict[str, object]:
        seen.append(threading.current_thread().name)
        return {"items": [1]}

    g = StateGraph("parallel", key_strategies={"items": AppendStrategy()})
    g.add_node("a", branch)
    g.add_node("b", branch)
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge("a", END)
    g.add_edge("b", END)
    assert g.compile().invoke({"items": []})["items"] == [1, 1]
    assert len(seen) == 2 and all(name.startswith("graph-agent-") for name in seen)


def test_a_forked_child_starts_its_own_pool() -> None:
    parent_pool = shared_pool()
    parent_pool.submit(int).result(timeout=WAIT)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a fresh pool that works, though the parent's threads are gone
        os.close(read)
        try:
            child_pool = shared_pool()
            answer = child_pool.submit(lambda: 41 + 1).result(timeout=WAIT)
            os.write(write, f"{child_pool is not parent_pool} {answer}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        reply = pipe.read()
    os.waitpid(pid, 0)
    assert reply == "True 42"
    assert pool_module.shared_pool() is parent_pool


def test_a_thread_that_cannot_be_started_fails_the_job_and_the_pool_recovers(monkeypatch):
    pool = WorkerPool(max_threads=2, name="no-threads")
    ran: list[str] = []
    real_start = threading.Thread.start

    def refuse(thread: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        pool.start(ran.append, "refused")
    monkeypatch.setattr(threading.Thread, "start", real_start)
    # both threads can still be had: two jobs that wait for each other both run
    first, second = threading.Event(), threading.Event()
    met: queue.SimpleQueue[bool] = queue.SimpleQueue()

    def meet(mine: threading.Event, theirs: threading.Event) -> None:
        mine.set()
        met.put(theirs.wait(5))  # False if the other job never started alongside

    pool.start(meet, first, second)
    pool.start(meet, second, first)
    assert [met.get(timeout=WAIT), met.get(timeout=WAIT)] == [True, True]
    assert ran == []  # the refused job was never queued
