"""W2 and W4: µs per ReAct iteration, and what a long history adds to it.

W2 runs the ReAct workload (``react.py``) from a one-message conversation without a saver, with
an in-memory saver and with SQLite, on a fresh thread per run.

W4 starts from a 5,000-message history. Taking in the input costs once per run (graph_agent
copies and, with a saver, stores the 5,000 messages in its first checkpoint), so the per-iteration
cost is measured as a difference, ``(run(20 iterations) - run(10 iterations)) / 10``, once from
an empty history and once from 5,000 messages; the row shows the second minus the first, what
carrying the history costs per iteration (0 when flat). See ``_extra_per_iteration`` for how
noise is kept out of the difference.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import react
from benchmarks.harness import (
    GRAPH_AGENT,
    LANGGRAPH,
    PLAIN,
    Row,
    Settings,
    micros,
    timed_pairs,
    timed_together,
)
from benchmarks.react import SaverKind

LONG_HISTORY = 5_000
W2_TARGETS: dict[SaverKind, str] = {
    "none": "≤ 1/15 of LangGraph",
    "memory": "≤ 1/20 of LangGraph",
    "sqlite": "≤ 1/2 of LangGraph (each with its default durability)",
    "sqlite-full": "≤ 1/2 of LangGraph (both fsync every commit)",
}
W2_TITLES: dict[SaverKind, str] = {
    "none": "W2 react, no saver",
    "memory": "W2 react, in-memory saver",
    "sqlite": "W2 react, SQLite saver",
    "sqlite-full": "W2 react, SQLite saver, durability=full",
}


def run(settings: Settings) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="graph-agent-bench-") as folder:
        rows = [w2(kind, settings, Path(folder)) for kind in W2_TITLES]
        rows += [w4(kind, settings) for kind in ("none", "memory")]
    return rows


def w2(kind: SaverKind, settings: Settings, folder: Path) -> Row:
    iterations = react.ITERATIONS
    repeat = settings.repeat if kind in ("none", "memory") else settings.repeat_slow
    app = react.graph_agent_react(iterations, react.graph_agent_saver(kind, folder))
    invoke = react.graph_agent_invoke(app, iterations)
    messages = react.history(0)
    runs: dict[str, Callable[[], Any]] = {GRAPH_AGENT: lambda: invoke(messages)}
    if settings.with_langgraph:
        # LangGraph's own default is synchronous=FULL: "sqlite-full" is compared with it too
        lg_kind: SaverKind = "sqlite" if kind == "sqlite-full" else kind
        lg_app = react.langgraph_react(iterations, react.langgraph_saver(lg_kind, folder))
        lg_invoke = react.langgraph_invoke(lg_app, iterations)
        dict_messages = react.dict_history(0)
        runs[LANGGRAPH] = lambda: lg_invoke(dict_messages)
    runs[PLAIN] = lambda: react.plain_react(messages, iterations)
    seconds = timed_together(runs, repeat)
    return Row(
        key=W2_TITLES[kind],
        unit="µs per iteration",
        samples={name: micros(values, iterations) for name, values in seconds.items()},
        target=W2_TARGETS[kind],
        note="plain loop: no saver" if kind != "none" else "",
    )


def w4(kind: SaverKind, settings: Settings) -> Row:
    folder = Path(".")  # only "none" and "memory": nothing is written
    repeat = settings.repeat_slow
    short, long = react.ITERATIONS, 2 * react.ITERATIONS

    def ga_runner(iterations: int) -> Callable[[list[Any]], Any]:
        app = react.graph_agent_react(iterations, react.graph_agent_saver(kind, folder))
        return react.graph_agent_invoke(app, iterations)

    samples: dict[str, list[float]] = {}
    extra: dict[str, Any] = {}
    samples[GRAPH_AGENT], extra[GRAPH_AGENT] = _extra_per_iteration(
        ga_runner(short), ga_runner(long), react.history, repeat
    )
    if settings.with_langgraph:

        def lg_runner(iterations: int) -> Callable[[list[Any]], Any]:
            app = react.langgraph_react(iterations, react.langgraph_saver(kind, folder))
            return react.langgraph_invoke(app, iterations)

        samples[LANGGRAPH], extra[LANGGRAPH] = _extra_per_iteration(
            lg_runner(short), lg_runner(long), react.dict_history, repeat
        )
    samples[PLAIN], extra[PLAIN] = _extra_per_iteration(
        lambda m: react.plain_react(m, short),
        lambda m: react.plain_react(m, long),
        react.history,
        settings.repeat,
    )
    saver = "no saver" if kind == "none" else "in-memory saver"
    return Row(
        key=f"W4 long history, {saver}",
        unit=f"extra µs per iteration at {LONG_HISTORY:,} messages",
        samples=samples,
        target="≤ 10 µs (flat in history length)" if kind == "memory" else "flat (≈ 0)",
        ratios=False,
        extra={"µs per iteration at 0 and at 5,000 messages": extra},
    )


def _extra_per_iteration(
    short: Callable[[list[Any]], Any],
    long: Callable[[list[Any]], Any],
    make_history: Callable[[int], list[Any]],
    repeat: int,
) -> tuple[list[float], dict[str, float]]:
    """Per-iteration cost at 5,000 messages minus at 0, each as a 20-vs-10 difference.

    The rounds are split into blocks; a block's estimate uses the fastest short and the fastest
    long run of the block (noise only ever adds time, and a difference of two noisy run times
    is noisier than either), and each block gives one sample.
    """
    blocks = max(2, min(5, repeat // 2))
    rounds = max(1, repeat // blocks)
    histories = {length: make_history(length) for length in (0, LONG_HISTORY)}
    marginal: dict[int, list[float]] = {length: [] for length in histories}
    for _ in range(blocks):
        for length, messages in histories.items():
            shorts, longs = timed_pairs(
                lambda m=messages: short(m), lambda m=messages: long(m), rounds
            )
            marginal[length].append((min(longs) - min(shorts)) * 1e6 / react.ITERATIONS)
    differences = [
        at_long - at_zero
        for at_zero, at_long in zip(marginal[0], marginal[LONG_HISTORY], strict=True)
    ]
    medians = {f"at {length:,}": statistics.median(v) for length, v in marginal.items()}
    return differences, medians
