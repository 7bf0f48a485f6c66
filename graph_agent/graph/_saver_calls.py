"""The two runners of a plan that only reads and writes checkpoints: ``get_state`` with its
subgraphs' states, and ``update_state`` (``_flow.update_flow``).

A plan is a generator that yields :class:`~graph_agent.graph._effects.SaverCall` effects and
returns its result; it decides everything. :func:`run_saver_calls` carries the calls out by
calling the saver, :func:`arun_saver_calls` by awaiting its async twins on the caller's loop,
so the sync and async state API share every decision. A saver call's error propagates to the
caller (the plan is closed).
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import Any, TypeVar

from graph_agent.graph._effects import SaverCall
from graph_agent.graph.saver import Saver

_T = TypeVar("_T")


def run_saver_calls(plan: Generator[Any, Any, _T], saver: Saver | None) -> _T:
    """Run ``plan``, calling ``saver`` for each call it yields; returns what it returns."""
    reply: Any = None
    with contextlib.closing(plan):
        while True:
            try:
                call = plan.send(reply)
            except StopIteration as stop:
                result: _T = stop.value
                return result
            assert isinstance(call, SaverCall) and saver is not None
            reply = call.run(saver)


async def arun_saver_calls(plan: Generator[Any, Any, _T], saver: Saver | None) -> _T:
    """:func:`run_saver_calls` through the saver's async API, on the caller's loop."""
    reply: Any = None
    with contextlib.closing(plan):
        while True:
            try:
                call = plan.send(reply)
            except StopIteration as stop:
                result: _T = stop.value
                return result
            assert isinstance(call, SaverCall) and saver is not None
            reply = await call.arun(saver)
