"""Threads, event loops, greenlets and timeouts (graph_agent/graph/_concurrency.py)."""

from __future__ import annotations

import asyncio
import contextvars
import os
import queue
import threading
import time

import pytest

from graph_agent import END, START, AppendStrategy, StateGraph
from graph_agent.graph import _concurrency as concurrency
from graph_agent.graph import _pool
from graph_agent.graph._concurrency import (
    FINISHED,
    InlineStream,
    TimedOut,
    WorkerPool,
    at_most,
    call_on_pool,
    call_with_timeout,
    run_coroutine,
    run_on_loop,
    shared_pool,
    to_thread,
)

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
    assert concurrency.shared_pool() is parent_pool


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


request: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="none")


def test_to_thread_runs_on_the_shared_pool_in_a_copy_of_the_context() -> None:
    def where() -> tuple[str, str]:
        request.set("changed on the thread")
        return threading.current_thread().name, request.get()

    async def main() -> tuple[str, str]:
        request.set("caller's")
        name, seen = await to_thread(where)
        return name, f"{seen} / {request.get()}"

    name, seen = asyncio.run(main())
    assert name.startswith("graph-agent-") and seen == "changed on the thread / caller's"


def test_to_thread_raises_what_the_call_raised_in_the_awaiting_coroutine() -> None:
    def fail() -> None:
        raise LookupError("from the pool")

    async def main() -> None:
        await to_thread(fail)

    with pytest.raises(LookupError, match="from the pool"):
        asyncio.run(main())


def test_to_thread_cancelled_before_a_thread_took_it_never_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool = WorkerPool(max_threads=1, name="one")
    monkeypatch.setattr(_pool, "_shared", pool)
    release = threading.Event()
    pool.start(release.wait, WAIT)  # its only thread is busy
    ran: list[str] = []

    async def main() -> None:
        waiting = asyncio.ensure_future(to_thread(ran.append, "ran"))
        await asyncio.sleep(0.05)  # queued behind the busy thread
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    try:
        asyncio.run(main())
    finally:
        release.set()
    assert pool.submit(lambda: "after").result(timeout=WAIT) == "after" and ran == []


def test_a_coroutine_run_from_sync_code_runs_on_a_private_loop_thread() -> None:
    async def where() -> str:
        return threading.current_thread().name

    assert run_on_loop(where()) == "graph-agent-loop-0"


def test_a_coroutine_run_from_a_private_loop_runs_on_the_next_loop() -> None:
    async def where() -> str:
        return threading.current_thread().name

    async def nested() -> str:
        # this loop's thread waits here: the nested coroutine must run on another loop
        return run_on_loop(where())

    assert run_on_loop(nested()) == "graph-agent-loop-1"


@pytest.mark.parametrize("error", [KeyboardInterrupt, SystemExit])
def test_a_coroutine_stopping_the_process_is_raised_in_the_caller_and_spares_the_loop(
    error: type[BaseException],
) -> None:
    async def stops() -> None:
        raise error()

    async def answers() -> int:
        return 42

    with pytest.raises(error):
        run_on_loop(stops())
    assert run_on_loop(answers()) == 42


def test_a_call_within_its_timeout_returns_on_a_named_thread_in_a_copy_of_the_context() -> None:
    request.set("caller's")

    def where() -> tuple[str, str]:
        seen = request.get()
        request.set("changed on the thread")
        return threading.current_thread().name, seen

    assert call_with_timeout(where, WAIT, thread_name="tool:where") == ("tool:where", "caller's")
    assert request.get() == "caller's"


def test_a_call_past_its_timeout_is_abandoned_and_told_to_stop() -> None:
    cancelled, finished = threading.Event(), threading.Event()

    def slow() -> None:
        cancelled.wait(WAIT)
        finished.set()

    started = time.monotonic()
    with pytest.raises(TimedOut) as caught:
        call_with_timeout(slow, 0.05, thread_name="slow", cancelled=cancelled)
    assert time.monotonic() - started < WAIT / 2
    assert caught.value.timeout == 0.05 and not caught.value.loop_blocked
    assert cancelled.is_set() and finished.wait(WAIT)  # it saw the event and stopped


def test_a_timeout_error_the_call_raises_itself_is_not_a_timed_out_wait() -> None:
    def fails() -> None:
        raise TimeoutError("socket")

    with pytest.raises(TimeoutError, match="socket"):
        call_with_timeout(fails, WAIT, thread_name="fails")


def test_a_coroutine_past_its_timeout_is_cancelled() -> None:
    cancelled = threading.Event()
    seen: list[str] = []

    async def sleepy() -> None:
        try:
            await asyncio.sleep(WAIT)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    with pytest.raises(TimedOut) as caught:
        run_coroutine(sleepy, 0.05, cancelled=cancelled)
    assert not caught.value.loop_blocked and cancelled.is_set() and seen == ["cancelled"]


def test_a_coroutine_blocking_its_loop_is_abandoned_a_grace_period_after_its_timeout() -> None:
    cancelled = threading.Event()

    async def blocking() -> None:
        cancelled.wait(WAIT)  # a blocking call inside async code: the loop cannot cancel it

    started = time.monotonic()
    with pytest.raises(TimedOut) as caught:
        run_coroutine(blocking, 0.05, cancelled=cancelled)
    waited = time.monotonic() - started
    assert caught.value.loop_blocked and cancelled.is_set()
    assert concurrency.BLOCKED_GRACE <= waited < WAIT / 2


def test_a_coroutine_runs_to_completion_also_from_a_thread_running_a_loop() -> None:
    async def double(n: int) -> int:
        await asyncio.sleep(0)
        return 2 * n

    async def main() -> list[int]:
        return [run_coroutine(lambda: double(1)), run_coroutine(lambda: double(2), WAIT)]

    assert run_coroutine(lambda: double(0)) == 0
    assert asyncio.run(main()) == [2, 4]


def test_at_most_returns_what_finishes_in_time() -> None:
    async def main() -> int:
        return await at_most(asyncio.sleep(0, result=2), WAIT)

    assert asyncio.run(main()) == 2


def test_an_awaited_call_on_the_pool_is_abandoned_when_the_await_is_cancelled() -> None:
    release, done = threading.Event(), threading.Event()

    def blocks() -> None:
        release.wait(WAIT)
        done.set()

    async def main() -> str:
        with pytest.raises(TimedOut):
            await at_most(call_on_pool(blocks, thread_name="blocks"), 0.05)
        return await call_on_pool(lambda: threading.current_thread().name, thread_name="t")

    assert asyncio.run(main()) == "t"  # the loop closed while `blocks` still ran
    release.set()
    assert done.wait(WAIT)


def test_an_inline_stream_hands_over_each_item_the_moment_it_is_delivered() -> None:
    stream = InlineStream()
    log: list[str] = []

    def talk(word: str) -> None:
        for n in range(2):
            log.append(f"deliver {n}")
            stream.deliver(f"{word} {n}")
        log.append("done")

    thread = threading.get_ident()
    first = stream.start(thread, talk, "hi")
    log.append(f"got {first}")
    second = stream.carry_on()
    log.append(f"got {second}")
    assert stream.carry_on() == FINISHED
    assert log == ["deliver 0", "got hi 0", "deliver 1", "got hi 1", "done"]
    assert stream.start(thread, talk, "again") == "again 0"  # the same greenlet serves on
    stream.close()  # mid-call: ends it


def test_items_delivered_from_other_threads_wait_until_the_call_waits_or_ends() -> None:
    stream = InlineStream()

    def fan_out() -> None:
        worker = threading.Thread(target=stream.deliver, args=("from a thread",))
        worker.start()
        worker.join()

    assert stream.start(threading.get_ident(), fan_out) == FINISHED
    assert stream.take_buffered() == ["from a thread"] and stream.buffered == []
    stream.close()
