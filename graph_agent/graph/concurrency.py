"""What code outside the engine borrows of its concurrency (``_concurrency.py`` and the modules
it gathers): the agent's nodes, tools, the MCP toolset, the server and the store run their
threads, loops and timed calls through these, so that one owner (:func:`start_thread`,
:func:`package_threads`) knows every thread graph_agent starts.

- :func:`shared_pool`, :func:`to_thread`: the worker threads (bounded).
- :func:`wait_delivering`: ``concurrent.futures.wait`` that streams what the threads emit.
- :func:`call_with_timeout`, :func:`call_on_pool`, :func:`run_coroutine`, :func:`at_most`,
  :func:`run_off_loop`, :class:`TimedOut`: calls cut at a timeout (tools).
- :func:`bound_to_another_loop`, :func:`run_on_caller_loop`: async tools and the caller's loop.
- :class:`LoopThread`: an event loop of one's own (an MCP session).
- :func:`start_thread`, :func:`package_threads`: any other thread, named and registered.

Example:
    >>> from graph_agent.graph.concurrency import package_threads, shared_pool
    >>> shared_pool().submit(sum, [1, 2]).result(timeout=5)
    3
    >>> all(thread.daemon for thread in package_threads())
    True
"""

from __future__ import annotations

from graph_agent.graph._concurrency import (
    LoopThread,
    TimedOut,
    WorkerPool,
    at_most,
    call_on_pool,
    call_with_timeout,
    run_coroutine,
    shared_pool,
    to_thread,
    wait_delivering,
)
from graph_agent.graph._off_loop import (
    bound_to_another_loop,
    call_off_loop,
    run_off_loop,
    run_on_caller_loop,
)
from graph_agent.graph._threads import is_package_thread, package_threads, start_thread

__all__ = [
    "LoopThread",
    "TimedOut",
    "WorkerPool",
    "at_most",
    "bound_to_another_loop",
    "call_off_loop",
    "call_on_pool",
    "call_with_timeout",
    "is_package_thread",
    "package_threads",
    "run_coroutine",
    "run_off_loop",
    "run_on_caller_loop",
    "shared_pool",
    "start_thread",
    "to_thread",
    "wait_delivering",
]
