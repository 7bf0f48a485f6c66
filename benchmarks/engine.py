"""Engine overhead: per node step on a chain, and per step as the state grows.

The state-size workload appends one item per step to a list that already holds 10 or 10,000
items: with no per-step copy of the state, both cost the same per step.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

from graph_agent import END, START, AppendStrategy, RunnableConfig, StateGraph


def timed(fn: Callable[[], Any], repeat: int) -> list[float]:
    """Seconds per call of ``fn``, ``repeat`` times (after one warm-up call)."""
    fn()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return samples


def chain_graph(length: int) -> Any:
    g = StateGraph("chain")
    names = [f"n{i}" for i in range(length)]
    for name in names:
        g.add_node(name, lambda s: {"x": s["x"] + 1})
    g.add_edge(START, names[0])
    for first, second in itertools.pairwise(names):
        g.add_edge(first, second)
    g.add_edge(names[-1], END)
    return g.compile()


def plain_chain(length: int) -> int:
    nodes = [lambda s: {"x": s["x"] + 1} for _ in range(length)]
    state = {"x": 0}
    for node in nodes:
        state = {**state, **node(state)}
    return state["x"]


def w1_chain(repeat: int, length: int = 100) -> dict[str, list[float]]:
    """W1: µs per node step on a 100-node chain."""
    app = chain_graph(length)
    return {
        "graph_agent": [s / length for s in timed(lambda: app.invoke({"x": 0}), repeat)],
        "plain loop": [s / length for s in timed(lambda: plain_chain(length), repeat)],
    }


def append_graph(steps: int) -> Any:
    g = StateGraph("grow", key_strategies={"items": AppendStrategy()})
    g.add_node("add", lambda s: {"items": len(s["items"]), "n": s["n"] + 1})
    g.add_edge(START, "add")
    g.add_conditional_edges("add", lambda s: "add" if s["n"] < steps else END)
    return g.compile()


def state_size(repeat: int, steps: int = 50) -> dict[str, list[float]]:
    """µs per step appending to a list of 10 vs 10,000 items (should be flat).

    Measured as the difference between runs of ``2 * steps`` and ``steps`` steps, so the
    one-off cost of taking in the starting list is left out.
    """
    short, long = append_graph(steps), append_graph(2 * steps)
    config = RunnableConfig(max_steps=2 * steps + 5)
    results = {}
    for size in (10, 10_000):
        start = list(range(size))

        def run(app: Any, start: list[int] = start) -> Any:
            return app.invoke({"items": start, "n": 0}, config)

        short_runs = timed(lambda: run(short), repeat)
        long_runs = timed(lambda: run(long), repeat)
        results[f"append, list of {size:,}"] = [
            (b - a) / steps for a, b in zip(short_runs, long_runs, strict=True)
        ]
    return results
