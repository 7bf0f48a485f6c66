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
    def batch_seconds(self) -> float:
        """How long a timed batch of calls lasts (see :func:`timed_together`)."""
        return 0.0 if self.quick else 0.002

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


def timed_together(
    runs: dict[str, Callable[[], Any]], repeat: int, *, batch_seconds: float = 0.0
) -> dict[str, list[float]]:
    """Seconds per call of each of ``runs``, taking turns (one batch of each per round), so that
    a noisy neighbour or a drifting clock slows every implementation alike and ratios hold.

    A sample is the mean call time of a batch of calls lasting about ``batch_seconds`` (one call
    when a call takes longer). A lone short call right after another implementation's long one
    mostly measures refilling the CPU caches that one evicted: one graph_agent W2 run (0.2 ms)
    after one LangGraph run (4 ms) took 1.6 times as long as in a batch, while LangGraph's
    own run, twenty times longer, hides that refill. Batches put every implementation on the
    same footing, as timeit and pyperf do by timing loops.
    """
    for run in runs.values():
        run()
    numbers = {name: _batch_size(run, batch_seconds) for name, run in runs.items()}
    samples: dict[str, list[float]] = {name: [] for name in runs}
    with no_collection():
        for _ in range(repeat):
            for name, run in runs.items():
                number = numbers[name]
                started = time.perf_counter()
                for _ in range(number):
                    run()
                samples[name].append((time.perf_counter() - started) / number)
    return samples


def _batch_size(run: Callable[[], Any], batch_seconds: float) -> int:
    """How many calls of ``run`` last about ``batch_seconds`` (at least one)."""
    if batch_seconds <= 0:
        return 1
    started = time.perf_counter()
    run()
    return max(1, round(batch_seconds / (time.perf_counter() - started)))


def micros(seconds: list[float], per: float = 1) -> list[float]:
    """Seconds per run as µs per unit of work (``per`` units in a run)."""
    return [s * 1e6 / per for s in seconds]


_thread_numbers = itertools.count()


def fresh_thread() -> str:
    """A thread id never used before in this process: each run with a saver starts clean."""
    return f"bench-{next(_thread_numbers)}"
