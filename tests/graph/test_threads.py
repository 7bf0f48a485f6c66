"""One owner for every thread graph_agent starts (graph/_threads.py), and tool calls on the
bounded pool and the package's loops instead of a thread or an event loop per call."""

from __future__ import annotations

import asyncio
import queue
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import graph_agent
from graph_agent import ReactAgent
from graph_agent.graph import _pool
from graph_agent.graph.concurrency import (
    TimedOut,
    WorkerPool,
    call_with_timeout,
    is_package_thread,
    package_threads,
    shared_pool,
    start_thread,
)
from graph_agent.messages import AssistantMessage, ToolCall
from graph_agent.models.scripted import ScriptedChatModel
from graph_agent.serve import create_app
from graph_agent.tools import tool

WAIT = 10  # seconds: a generous bound, only reached when something is broken
CALLS = 40


def _from_package() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith("graph_agent"):
            return True
        frame = frame.f_back
    return False


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[threading.Thread]]:
    """The threads started while the test runs with graph_agent code on the stack (whatever
    started them: ``threading.Thread``, an executor, asyncio's default executor)."""
    seen: list[threading.Thread] = []
    original = threading.Thread.start

    def start(self: threading.Thread) -> None:
        if _from_package():
            seen.append(self)
        original(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    yield seen


@tool(timeout=WAIT)
def add_one(x: int) -> int:
    """Add one."""
    return x + 1


@tool(timeout=WAIT)
async def double(x: int) -> int:
    """Double."""
    await asyncio.sleep(0)
    return 2 * x


def _tool_calls() -> None:
    for n in range(CALLS):
        assert add_one.invoke({"x": n}, timeout=WAIT) == str(n + 1)
        assert double.invoke({"x": n}, timeout=WAIT) == str(2 * n)
        assert double.invoke({"x": n}) == str(2 * n)

    async def on_a_loop() -> None:
        for n in range(CALLS):
            assert await add_one.ainvoke({"x": n}) == str(n + 1)
            assert await add_one.ainvoke({"x": n}, timeout=WAIT) == str(n + 1)
            assert await add_one.arun({"x": n}, timeout=WAIT) == n + 1
            assert await double.arun({"x": n}, timeout=WAIT) == 2 * n

    asyncio.run(on_a_loop())


def _served_run() -> None:
    calls = [ToolCall(f"a{n}", "add_one", {"x": n}) for n in range(3)]
    calls += [ToolCall(f"d{n}", "double", {"x": n}) for n in range(3)]
    model = ScriptedChatModel([AssistantMessage(tool_calls=calls), "done"])
    agent = ReactAgent("assistant", model=model, tools=[add_one, double])

    async def serve() -> dict[str, Any]:
        app = create_app([agent])
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://localhost"
            ) as client:
                body = {"assistant_id": "assistant", "input": {"messages": "go"}}
                answer = await client.post("/runs/wait", json=body)
                assert answer.status_code == 200, answer.text
                return dict(answer.json())

    values = asyncio.run(serve())
    assert values["messages"][-1]["content"] == "done"
    assert [m["content"] for m in values["messages"] if m["type"] == "tool"] == [
        "1",
        "2",
        "3",
        "0",
        "2",
        "4",
    ]


def test_tool_calls_and_a_served_run_start_a_bounded_number_of_known_threads(
    started: list[threading.Thread],
) -> None:
    _tool_calls()
    _served_run()
    # before: one thread per sync tool call with a timeout (and per ainvoke of a sync tool),
    # one per async tool call with a timeout: 4 x CALLS; now the pool's and the loops'
    assert len(started) <= 8, sorted(thread.name for thread in started)
    unknown = [thread.name for thread in started if not is_package_thread(thread)]
    assert unknown == []
    alive = {thread for thread in started if thread.is_alive()}
    assert alive <= set(package_threads())
    assert all(thread.daemon for thread in started)


def test_a_second_round_of_calls_reuses_the_threads_of_the_first(
    started: list[threading.Thread],
) -> None:
    _tool_calls()
    first = len(started)
    _tool_calls()
    assert len(started) - first <= 2  # (a call may find no idle thread yet, now and then)


def test_start_thread_names_and_registers_a_daemon_thread() -> None:
    release = threading.Event()
    thread = start_thread(release.wait, name="graph-agent-test", args=(WAIT,))
    try:
        assert thread.name == "graph-agent-test" and thread.daemon
        assert is_package_thread(thread) and thread in package_threads()
    finally:
        release.set()
        thread.join(WAIT)
    assert thread not in package_threads()
    assert not is_package_thread(threading.current_thread())


def test_a_timed_call_runs_on_the_shared_pool_under_its_own_name() -> None:
    seen: list[threading.Thread] = []

    def where() -> str:
        seen.append(threading.current_thread())
        return threading.current_thread().name

    assert call_with_timeout(where, WAIT, thread_name="tool:where") == "tool:where"
    assert seen[0].name.startswith("graph-agent-")  # its name back once the call ended
    assert is_package_thread(seen[0])
    assert shared_pool().name == "graph-agent"


def test_an_abandoned_call_leaves_the_pool_and_a_new_thread_takes_its_place() -> None:
    pool = WorkerPool(max_threads=1, name="abandon")
    release, done = threading.Event(), queue.SimpleQueue[str]()
    hung = pool.start(lambda: (release.wait(WAIT), done.put("hung")))
    waiting = pool.start(done.put, "queued")  # no thread free: it waits for one
    time.sleep(0.05)
    assert done.empty()
    pool.abandon(hung)  # its thread runs on, outside the pool; a new one takes the queued job
    assert done.get(timeout=WAIT) == "queued"
    names = {thread.name for thread in package_threads() if thread.name.startswith("abandon-")}
    assert names == {"abandon-1", "abandon-2"}
    assert pool.threads == 1
    release.set()
    assert done.get(timeout=WAIT) == "hung"
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline and _pool_threads_alive("abandon-") > 1:
        time.sleep(0.01)
    assert _pool_threads_alive("abandon-") == 1  # the abandoned one ended after its job
    assert waiting.phase == _pool._OVER


def _pool_threads_alive(prefix: str) -> int:
    return sum(thread.name.startswith(prefix) for thread in package_threads())


def test_an_abandoned_job_no_thread_took_never_runs() -> None:
    pool = WorkerPool(max_threads=1, name="never")
    release, ran = threading.Event(), threading.Event()
    pool.start(release.wait, WAIT)
    queued = pool.start(ran.set)
    pool.abandon(queued)
    release.set()
    assert pool.submit(int, "7").result(timeout=WAIT) == 7  # jobs after it still run
    assert not ran.is_set()


def test_hung_sync_tools_do_not_use_up_the_pool() -> None:
    release = threading.Event()

    @tool(timeout=0.05)
    def hangs() -> str:
        """Wait for the test."""
        release.wait(WAIT)
        return "late"

    pool = WorkerPool(max_threads=2, name="hung")
    original = _pool._shared
    _pool._shared = pool
    try:
        for _ in range(4):  # more hung calls than the pool has threads
            with pytest.raises(TimeoutError, match=r"did not finish within 0\.05 s"):
                hangs.invoke({}, timeout=0.05)
        assert pool.submit(lambda: "free").result(timeout=WAIT) == "free"
        assert pool.threads <= 2
    finally:
        _pool._shared = original
        release.set()


def test_a_timed_out_wait_is_a_timed_out_error_and_its_thread_comes_back_named() -> None:
    release = threading.Event()
    names: list[str] = []

    def slow() -> None:
        release.wait(WAIT)
        names.append(threading.current_thread().name)

    with pytest.raises(TimedOut):
        call_with_timeout(slow, 0.05, thread_name="tool:slow")
    release.set()
    deadline = time.monotonic() + WAIT
    while not names and time.monotonic() < deadline:
        time.sleep(0.01)
    assert names == ["tool:slow"]


PACKAGE = Path(graph_agent.__file__).parent

STARTS_THREADS = re.compile(
    r"threading\.Thread\(|ThreadPoolExecutor\(|asyncio\.to_thread\(|new_event_loop\(|"
    r"run_in_executor\(None"
)
OWNERS = {"graph/_threads.py", "graph/_loops.py", "graph/_off_loop.py"}
NOT_YET: set[str] = set()
"""Modules not yet routed through the owner: none."""


def _sources() -> dict[str, str]:
    return {
        path.relative_to(PACKAGE).as_posix(): path.read_text(encoding="utf-8")
        for path in PACKAGE.rglob("*.py")
    }


def test_only_the_owner_starts_threads_and_event_loops() -> None:
    starting = {
        name
        for name, text in _sources().items()
        if any(STARTS_THREADS.search(line) and ">>>" not in line for line in text.splitlines())
    }
    assert starting - NOT_YET == OWNERS


def test_nothing_outside_the_engine_imports_its_private_concurrency_modules() -> None:
    private = re.compile(
        r"graph_agent\.graph\._(concurrency|off_loop|pool|loops|inline|timeouts|threads)\b"
    )
    outside = sorted(
        name
        for name, text in _sources().items()
        if not name.startswith("graph/") and private.search(text)
    )
    assert outside == []
