"""W2 and W4: µs per ReAct iteration, and what a long history adds to it.

W2 runs the ReAct workload (``react.py``) from a one-message conversation without a saver, with
an in-memory saver and with SQLite, on a fresh thread per run.

W4 starts from a 5,000-message history. Taking in the input costs once per run (graph_agent
copies and, with a saver, stores the 5,000 messages in its first checkpoint), so W4 does not
time whole runs: the model node notes the time each time it starts, and one iteration is the
time from one model call to the next (the model step's end, routing, the tools step, and the
checkpoints between; LangGraph writes its checkpoints with ``durability="sync"`` here, so
that they fall inside the iteration, as graph_agent's do). A sample is the fastest iteration of
a run from 5,000 messages minus that of a run from one message (noise only ever adds time),
runs in turns; the row shows the median sample: what carrying the history costs per iteration
(0 when flat).
"""

from __future__ import annotations

import itertools
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
    no_collection,
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
    seconds = timed_together(runs, repeat, batch_seconds=settings.batch_seconds)
    return Row(
        key=W2_TITLES[kind],
        unit="µs per iteration",
        samples={name: micros(values, iterations) for name, values in seconds.items()},
        target=W2_TARGETS[kind],
        note="plain loop: no saver" if kind != "none" else "",
    )


def w4(kind: SaverKind, settings: Settings) -> Row:
    folder = Path(".")  # only "none" and "memory": nothing is written
    iterations, histories = react.ITERATIONS, (0, LONG_HISTORY)
    runs: dict[str, Callable[[list[float]], Callable[[int], Any]]] = {}

    def graph_agent_run(clock: list[float]) -> Callable[[int], Any]:
        saver = react.graph_agent_saver(kind, folder)
        app = react.graph_agent_react(iterations, saver, clock)
        invoke = react.graph_agent_invoke(app, iterations, forget=True)  # after the timed part
        inputs = {length: react.history(length) for length in histories}
        return lambda length: invoke(inputs[length])

    runs[GRAPH_AGENT] = graph_agent_run
    if settings.with_langgraph:

        def langgraph_run(clock: list[float]) -> Callable[[int], Any]:
            saver = react.langgraph_saver(kind, folder)
            app = react.langgraph_react(iterations, saver, clock)
            # checkpoints written before the next step starts, as graph_agent writes them: in
            # the background they would overlap the next iteration and escape its time
            durability = "sync" if saver is not None else None
            invoke = react.langgraph_invoke(app, iterations, durability, forget=True)
            inputs = {length: react.dict_history(length) for length in histories}
            return lambda length: invoke(inputs[length])

        runs[LANGGRAPH] = langgraph_run

    def plain_run(clock: list[float]) -> Callable[[int], Any]:
        inputs = {length: react.history(length) for length in histories}
        return lambda length: react.plain_react(inputs[length], iterations, clock)

    runs[PLAIN] = plain_run
    samples: dict[str, list[float]] = {}
    extra: dict[str, dict[str, float]] = {}
    for name, make in runs.items():
        clock: list[float] = []
        samples[name], extra[name] = _extra_per_iteration(make(clock), clock, settings.repeat)
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
    run: Callable[[int], Any], clock: list[float], repeat: int
) -> tuple[list[float], dict[str, float]]:
    """µs of the fastest iteration of a run from 5,000 messages minus that of a run from one,
    ``repeat`` pairs in turns; and the median of those per length."""
    per_iteration: dict[int, list[float]] = {0: [], LONG_HISTORY: []}
    run(0)  # warm up
    with no_collection():
        for _ in range(repeat):
            for length, found in per_iteration.items():
                clock.clear()
                run(length)
                found.append(min(b - a for a, b in itertools.pairwise(clock)) * 1e6)
    differences = [
        at_long - at_zero
        for at_zero, at_long in zip(per_iteration[0], per_iteration[LONG_HISTORY], strict=True)
    ]
    medians = {f"at {length:,}": statistics.median(v) for length, v in per_iteration.items()}
    return differences, medians
