"""Coroutines run off the caller's loop and cut at a timeout (``graph._off_loop``)."""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
import time
from collections.abc import AsyncIterator

import pytest

from graph_agent.graph import _off_loop
from graph_agent.graph._concurrency import TimedOut
from graph_agent.graph._off_loop import bound_to_another_loop, run_off_loop
from graph_agent.graph._pool import _settler

WHO = contextvars.ContextVar("who", default="nobody")


def test_a_coroutine_runs_on_another_thread_and_sees_the_callers_context_variables():
    async def where() -> tuple[int, str]:
        await asyncio.sleep(0)
        return threading.get_ident(), WHO.get()

    async def main() -> tuple[tuple[int, str], int]:
        WHO.set("caller")
        return await run_off_loop(where, 5), threading.get_ident()

    (thread, who), caller = asyncio.run(main())
    assert thread != caller and who == "caller"


def test_a_coroutine_that_awaits_past_its_timeout_is_cancelled_and_the_event_set():
    stopped, cancelled = threading.Event(), threading.Event()

    async def slow() -> None:
        try:
            await asyncio.sleep(5)
        finally:
            stopped.set()

    with pytest.raises(TimedOut) as caught:
        asyncio.run(run_off_loop(slow, 0.05, cancelled=cancelled))
    assert not caught.value.loop_blocked
    assert stopped.wait(2) and cancelled.is_set()


def test_a_coroutine_blocking_its_loop_is_abandoned_and_leaves_the_callers_loop_free():
    release = threading.Event()

    async def blocking() -> str:
        release.wait(10)  # no await: its loop cannot cancel it
        return "late"

    async def main() -> tuple[float, int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticking = asyncio.ensure_future(tick())
        started = time.monotonic()
        try:
            with pytest.raises(TimedOut) as caught:
                await run_off_loop(blocking, 0.1)
        finally:
            ticking.cancel()
        assert caught.value.loop_blocked
        return time.monotonic() - started, ticks

    try:
        elapsed, ticks = asyncio.run(main())
    finally:
        release.set()
    assert elapsed < 2 and ticks > 10  # the caller's loop ran on meanwhile


def test_a_call_made_while_another_blocks_the_shared_loop_goes_to_a_new_one():
    release = threading.Event()

    async def blocking() -> None:
        release.wait(10)

    async def quick() -> str:
        await asyncio.sleep(0)
        return "quick"

    async def main() -> tuple[str, float]:
        stuck = asyncio.ensure_future(run_off_loop(blocking, 10))
        await asyncio.sleep(0.5)  # the shared loop misses its beats meanwhile
        started = time.monotonic()
        answer = await run_off_loop(quick, 10)
        elapsed = time.monotonic() - started
        stuck.cancel()
        return answer, elapsed

    try:
        answer, elapsed = asyncio.run(main())
    finally:
        release.set()
    assert answer == "quick" and elapsed < 1


def test_cancelling_the_wait_cancels_the_coroutine():
    started, stopped = threading.Event(), threading.Event()

    async def waits() -> None:
        started.set()
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            stopped.set()
            raise

    async def main() -> None:
        waiting = asyncio.ensure_future(run_off_loop(waits, 10))
        while not started.is_set():
            await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(main())
    assert stopped.wait(2)


def test_what_the_coroutine_raises_is_raised_to_the_caller_and_its_own_timeout_stays_its_own():
    async def fails() -> None:
        raise TimeoutError("socket timed out")

    with pytest.raises(TimeoutError, match="socket timed out") as caught:
        asyncio.run(run_off_loop(fails, 5))
    assert not isinstance(caught.value, TimedOut)


def test_an_object_of_the_callers_loop_used_off_it_is_recognised_through_chains_and_groups():
    async def main() -> BaseException:
        event = asyncio.Event()
        waiter = asyncio.create_task(event.wait())
        await asyncio.sleep(0)  # the waiter waits: the event is bound to this loop

        async def waits() -> None:
            await event.wait()

        try:
            await run_off_loop(waits, 5)
        except RuntimeError as exc:
            event.set()
            await waiter
            return exc
        raise AssertionError("the event worked on another loop")

    error = asyncio.run(main())
    assert bound_to_another_loop(error)
    try:
        raise ValueError("wrapped") from error
    except ValueError as wrapped:
        assert bound_to_another_loop(wrapped)
        assert bound_to_another_loop(ExceptionGroup("group", [wrapped]))
    assert not bound_to_another_loop(RuntimeError("Event loop is closed"))
    assert not bound_to_another_loop(ValueError("bound to a different event loop"))


def test_a_coroutine_that_ends_cancelled_on_its_own_fails_its_caller_at_once_on_a_loop_kept():
    ran_on: list[asyncio.AbstractEventLoop] = []

    async def awaits_a_cancelled_task() -> None:
        ran_on.append(asyncio.get_running_loop())
        inner = asyncio.ensure_future(asyncio.sleep(30))
        ran_on[0].call_soon(inner.cancel)
        await inner  # its CancelledError escapes: the coroutine ends cancelled

    async def main() -> float:
        started = time.monotonic()
        with pytest.raises(RuntimeError, match="ended cancelled, though neither its caller"):
            await run_off_loop(awaits_a_cancelled_task, 30)
        return time.monotonic() - started

    assert asyncio.run(main()) < 10  # not after its timeout, taken for a blocked loop
    home = _off_loop._shared_loops.pick()
    assert home.loop is ran_on[0] and not home.retired  # a healthy loop is kept


def test_a_retired_loop_closes_the_async_generators_its_calls_left_open():
    closed = threading.Event()
    kept: list[object] = []  # referenced: only the loop's shutdown closes it

    async def numbers() -> AsyncIterator[int]:
        try:
            yield 1
            yield 2
        finally:
            closed.set()

    async def starts_one() -> None:
        opened = numbers()
        kept.append(opened)
        await opened.__anext__()

    asyncio.run(run_off_loop(starts_one, 5))
    home = _off_loop._shared_loops.pick()
    home.retire()  # as a blocked loop is, once its calls ended

    assert closed.wait(10)
    home._thread.join(10)
    assert home.loop.is_closed()


def test_a_call_handed_to_a_loop_as_it_stops_runs_on_the_next_one():
    home = _off_loop._shared_loops.pick()

    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    async def main() -> int:
        caller = asyncio.get_running_loop()
        outcome: asyncio.Future[int] = caller.create_future()
        call = _off_loop._Call(
            answer, 5, None, contextvars.copy_context(), _settler(caller, outcome)
        )

        def stop_then_hand_over() -> None:  # on its loop: retired, idle, stopping, then a call
            home.retired = True
            home._stop_if_idle()
            home.start(call)

        home.loop.call_soon_threadsafe(stop_then_hand_over)
        return await asyncio.wait_for(outcome, 10)

    assert asyncio.run(main()) == 42
    home._thread.join(10)
    assert home.loop.is_closed() and _off_loop._shared_loops.pick() is not home


def test_a_forked_child_runs_coroutines_on_a_shared_loop_of_its_own():
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert asyncio.run(run_off_loop(answer, 5)) == 42  # the parent's loop thread is running
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's loop thread is gone, calls must not wait on it
        os.close(read)
        try:
            started = time.monotonic()
            result = asyncio.run(run_off_loop(answer, 5))
            os.write(write, f"{result} {time.monotonic() - started < 2}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        reply = pipe.read()
    os.waitpid(pid, 0)
    assert reply == "42 True"
