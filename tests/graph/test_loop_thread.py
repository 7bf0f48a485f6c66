"""LoopThread (graph/_concurrency.py): an event loop on a thread of its own, as the MCP toolset
keeps its sessions on."""

from __future__ import annotations

import asyncio
import concurrent.futures

import pytest

from graph_agent.graph._concurrency import LoopThread


def test_closing_a_loop_thread_cancels_what_still_runs_on_it():
    own = LoopThread("test-loop")
    waiting = own.submit(asyncio.sleep(3600))  # a call that would never end by itself
    own.close()
    with pytest.raises(concurrent.futures.CancelledError):
        waiting.result(timeout=5)  # its caller hears of it instead of waiting forever
    assert not own.running
