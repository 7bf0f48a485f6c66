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
        """The least a timed batch of calls lasts (see :func:`timed_together`)."""
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


def clock() -> float:
    """The timer of every sample (``time.perf_counter``): a seam, so tests can pin time."""
    return time.perf_counter()


def timed_together(
    runs: dict[str, Callable[[], Any]], repeat: int, *, batch_seconds: float = 0.0
) -> dict[str, list[float]]:
    """Seconds per call of each of ``runs``, taking turns (one batch of each per round), so that
    a noisy neighbour or a drifting clock slows every implementation alike and ratios hold.

    A sample is the mean call time of a batch of calls, and every implementation's batch lasts
    about as long: ``batch_seconds``, or one call of the slowest implementation when that is
    longer (one call when ``batch_seconds`` is 0). Each turn starts by refilling the CPU caches
    the other implementations evicted; batches of equal length make every implementation pay
    that once per equal stretch of time, as timeit and pyperf do by timing loops. A lone short
    call right after another implementation's long one mostly measures that refill: one
    graph_agent W2 run (0.2 ms) after one LangGraph run (4 ms) took 1.6 times as long as in a
    batch; and with 2 ms batches against single 8 ms LangGraph calls, the in-memory W2
    iteration of graph_agent measured 42–46 µs, against 38–40 µs with batches as long as those
    calls (the same code, on the same day). The slowest implementation's batch is one cold call;
    batches three of its calls long gave the same ratios (W2 in memory 1/21.1–1/21.8 against
    1/21.1, W5 1/16.3 against 1/16.2–1/16.9), so its own refill does not tilt them.
    """
    for run in runs.values():
        run()
    if batch_seconds > 0:
        single = {name: _call_seconds(run) for name, run in runs.items()}
        length = max(batch_seconds, *single.values())
        numbers = {name: max(1, round(length / max(s, 1e-9))) for name, s in single.items()}
    else:
        numbers = dict.fromkeys(runs, 1)
    samples: dict[str, list[float]] = {name: [] for name in runs}
    with no_collection():
        for _ in range(repeat):
            for name, run in runs.items():
                number = numbers[name]
                started = clock()
                for _ in range(number):
                    run()
                samples[name].append((clock() - started) / number)
    return samples


def _call_seconds(run: Callable[[], Any]) -> float:
    """How long one call of ``run`` takes: the fastest of three (the others may have been slowed
    by what ran before)."""
    fastest = float("inf")
    for _ in range(3):
        started = clock()
        run()
        fastest = min(fastest, clock() - started)
    return fastest


def micros(seconds: list[float], per: float = 1) -> list[float]:
    """Seconds per run as µs per unit of work (``per`` units in a run)."""
    return [s * 1e6 / per for s in seconds]


_thread_numbers = itertools.count()


def fresh_thread() -> str:
    """A thread id never used before in this process: each run with a saver starts clean."""
    return f"bench-{next(_thread_numbers)}"
