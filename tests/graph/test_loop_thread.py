"""LoopThread (graph/_concurrency.py): an event loop on a thread of its own, as the MCP toolset
keeps its sessions on."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os

import pytest

from graph_agent.graph._concurrency import LoopThread, run_coroutine
from graph_agent.tools import tool


def test_closing_a_loop_thread_cancels_what_still_runs_on_it():
    own = LoopThread("test-loop")
    waiting = own.submit(asyncio.sleep(3600))  # a call that would never end by itself
    own.close()
    with pytest.raises(concurrent.futures.CancelledError):
        waiting.result(timeout=5)  # its caller hears of it instead of waiting forever
    assert not own.running


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_runs_coroutines_on_private_loops_of_its_own():
    """An async tool called from sync code without a timeout runs on the private loop of its
    nesting depth; in a forked child the parent's loop thread is gone (its loop still looks
    running), so the child must start loops of its own instead of failing."""

    @tool
    async def echo(text: str) -> str:
        """Echo."""
        await asyncio.sleep(0)
        return text

    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert run_coroutine(answer) == 42 and echo.invoke({"text": "parent"}) == "parent"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        try:
            reply = f"{run_coroutine(answer)} {echo.invoke({'text': 'child'})}"
        except BaseException as exc:
            reply = f"{type(exc).__name__}: {exc}"
        finally:
            os.write(write, reply.encode())
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        reply = pipe.read()
    os.waitpid(pid, 0)
    assert reply == "42 child"
