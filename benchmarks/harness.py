"""What every workload shares: the three implementations, run settings, timing, result rows.

Each workload module measures one family of workloads for ``graph_agent``, for LangGraph (when
the ``bench`` extra is installed) and for a plain Python loop, and returns :class:`Row` values:
samples per implementation in the row's unit. ``report.py`` turns rows into the table and JSON.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

GRAPH_AGENT = "graph_agent"
LANGGRAPH = "langgraph"
PLAIN = "plain loop"
IMPLEMENTATIONS = (GRAPH_AGENT, LANGGRAPH, PLAIN)


def langgraph_available() -> bool:
    """True when LangGraph and its SQLite checkpointer are installed (the ``bench`` extra)."""
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("langgraph", "langgraph.checkpoint.sqlite")
    )


@dataclass(frozen=True, kw_only=True)
class Settings:
    """How hard to measure: ``quick`` is for CI (the numbers only prove the code still runs)."""

    quick: bool = False
    with_langgraph: bool = True

    @property
    def repeat(self) -> int:
        """Samples per measurement of a cheap run."""
        return 3 if self.quick else 60

    @property
    def repeat_slow(self) -> int:
        """Samples per measurement of a run that takes tens of milliseconds."""
        return 2 if self.quick else 20


@dataclass(kw_only=True)
class Row:
    """One line of the table: a workload, its unit, and samples per implementation.

    ``target`` says what graph_agent should reach (text from issue 7); ``extra`` holds figures
    that are not samples (e.g. the absolute costs behind a difference); ``ratios`` is False
    where a ratio means nothing (a difference near zero).
    """

    key: str
    unit: str
    samples: dict[str, list[float]]
    target: str = ""
    note: str = ""
    ratios: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


@contextlib.contextmanager
def no_collection() -> Iterator[None]:
    """The garbage collector off while timing (as ``timeit`` does): a full collection costs
    what the whole process holds, not what the measured run does, and makes differences noisy."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def timed(fn: Callable[[], Any], repeat: int, *, warmup: int = 1) -> list[float]:
    """Seconds per call of ``fn``, ``repeat`` times, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    samples = []
    with no_collection():
        for _ in range(repeat):
            started = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - started)
    return samples


def timed_together(runs: dict[str, Callable[[], Any]], repeat: int) -> dict[str, list[float]]:
    """Seconds per call of each of ``runs``, taking turns (one call of each per round), so that
    a noisy neighbour or a drifting clock slows every implementation alike and ratios hold."""
    for run in runs.values():
        run()
    samples: dict[str, list[float]] = {name: [] for name in runs}
    with no_collection():
        for _ in range(repeat):
            for name, run in runs.items():
                started = time.perf_counter()
                run()
                samples[name].append(time.perf_counter() - started)
    return samples


def micros(seconds: list[float], per: float = 1) -> list[float]:
    """Seconds per run as µs per unit of work (``per`` units in a run)."""
    return [s * 1e6 / per for s in seconds]


_thread_numbers = itertools.count()


def fresh_thread() -> str:
    """A thread id never used before in this process: each run with a saver starts clean."""
    return f"bench-{next(_thread_numbers)}"
