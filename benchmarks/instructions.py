"""``python -m benchmarks.instructions WORKLOAD RUNS``: run one workload RUNS times, for
instruction counts under valgrind (wall-clock time is noise on a shared machine; the number
of instructions a run executes is not).

Measure the work of the runs alone by subtracting a run of 0 from a run of N, each counted as

    PYTHONHASHSEED=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python -m benchmarks.instructions w1 200

(the total is printed as "Collected : <n>"). Workloads: ``w1`` (the 100-node chain), ``w2``
(the ReAct loop without a saver), ``w2-memory`` (with an in-memory saver), ``w2-listener``,
``w2-otel-noop``, ``w2-otel-sdk`` (W2 observed, see ``OBSERVED``), ``w3`` (50 branches and a
join), ``w3-send`` (50 items through Send).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

OBSERVED = {
    "w2-listener": "idle",
    "w2-otel-noop": "otel-noop",
    "w2-otel-sdk": "otel-sdk",
}
"""W2 with one listener: one that overrides nothing, OpenTelemetry's on a no-op tracer, on
an SDK tracer exporting nowhere (``observability.py``)."""


def workload(name: str) -> Callable[[], Any]:
    """One run of the workload ``name``, its graph compiled beforehand."""
    from benchmarks import chain, fanout, react

    if name == "w1":
        app = chain.graph_agent_chain()
        return lambda: app.invoke({"x": 0})
    if name in ("w2", "w2-memory"):
        saver = react.graph_agent_saver("memory" if name == "w2-memory" else "none", Path("."))
        app = react.graph_agent_react(react.ITERATIONS, saver)
        invoke = react.graph_agent_invoke(app, react.ITERATIONS)
        messages = react.history(0)
        return lambda: invoke(messages)
    if name in OBSERVED:
        from benchmarks import observability

        app = react.graph_agent_react(react.ITERATIONS)
        app = observability.with_listeners(app, [observability.listener(OBSERVED[name])])
        invoke = react.graph_agent_invoke(app, react.ITERATIONS)
        messages = react.history(0)
        return lambda: invoke(messages)
    if name == "w3":
        app = fanout.graph_agent_fanout()
        return lambda: app.invoke({"items": []})
    if name == "w3-send":
        from benchmarks import send

        app = send.graph_agent_send()
        return lambda: app.invoke({"items": send.ITEMS})
    raise SystemExit(
        f"unknown workload {name!r}: w1, w2, w2-memory, {', '.join(OBSERVED)}, w3 or w3-send"
    )


def main(argv: list[str]) -> int:
    name, runs = argv[0], int(argv[1])
    run = workload(name)
    for _ in range(runs):
        run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
