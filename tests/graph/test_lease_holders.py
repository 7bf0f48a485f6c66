"""The async lease-holder registry (graph/_drive.py): a run refused a thread's lease by a
stream stopped at a yield waits for that stream to let go (an event, not a poll), at most
RELEASE_WAIT seconds."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from graph_agent import END, START, AppendStrategy, StateGraph
from graph_agent.checkpoint import MemorySaver
from graph_agent.graph import _drive
from graph_agent.graph.errors import ThreadBusyError
from graph_agent.graph.types import CompileConfig, RunnableConfig

CFG = RunnableConfig(thread_id="held")


def _app() -> Any:
    g = StateGraph("two", key_strategies={"log": AppendStrategy()})
    g.add_node("a", lambda s: {"log": "a"}).add_node("b", lambda s: {"log": "b"})
    g.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    return g.compile(CompileConfig(saver=MemorySaver()))


@pytest.fixture
def attempts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each attempt to take a lease, by thread id."""
    seen: list[str] = []
    original = _drive._aacquire_once

    async def counting(saver: Any, thread_id: str, checkpoint_ns: str) -> Any:
        seen.append(thread_id)
        return await original(saver, thread_id, checkpoint_ns)

    monkeypatch.setattr(_drive, "_aacquire_once", counting)
    return seen


async def test_a_run_waits_for_a_stream_stopped_at_a_yield_to_let_go(attempts: list[str]) -> None:
    app = _app()
    stream = app.astream({}, CFG, stream_mode="updates")
    await stream.__anext__()  # the stream holds the lease, stopped at a yield

    async def let_go() -> None:
        await asyncio.sleep(0.01)
        await stream.aclose()

    closing = asyncio.create_task(let_go())
    state = await app.ainvoke({}, CFG)
    await closing
    assert state["log"][-2:] == ["a", "b"]
    assert attempts == ["held", "held", "held"]  # the stream's, refused once, then taken
    assert _drive._async_holders == {}


async def test_a_stream_that_does_not_let_go_in_time_gets_the_run_refused(
    attempts: list[str],
) -> None:
    app = _app()
    stream = app.astream({}, CFG, stream_mode="updates")
    await stream.__anext__()
    started = time.monotonic()
    with pytest.raises(ThreadBusyError):
        await app.ainvoke({}, CFG)
    waited = time.monotonic() - started
    assert _drive.RELEASE_WAIT <= waited < 5
    assert attempts == ["held", "held", "held"]  # one wait, one more try: no polling
    await stream.aclose()
    assert (await app.ainvoke({}, CFG))["log"][-2:] == ["a", "b"]


async def test_a_holder_released_before_the_wait_begins_is_not_waited_for() -> None:
    holder = _drive._Holder()
    holder.released()
    started = time.monotonic()
    await holder.wait_released(5)
    assert time.monotonic() - started < 1


async def test_waiters_on_other_loops_are_woken_on_their_own_loop() -> None:
    holder = _drive._Holder()
    woken: list[float] = []

    def other_loop() -> None:
        async def wait() -> None:
            started = time.monotonic()
            await holder.wait_released(5)
            woken.append(time.monotonic() - started)

        asyncio.run(wait())

    waiting = asyncio.get_running_loop().run_in_executor(None, other_loop)
    while holder._waiters is None:
        await asyncio.sleep(0.001)
    holder.released()
    await waiting
    assert len(woken) == 1 and woken[0] < 1
