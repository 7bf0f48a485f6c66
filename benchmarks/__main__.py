"""``python -m benchmarks [--quick] [--output PATH]``: issue 7's workloads, side by side.

Runs every workload for graph_agent, LangGraph (when installed: ``pip install -e '.[bench]'``)
and a plain Python loop in one process, prints a table of medians, min–max and ratios, and
writes the same as JSON (default ``benchmarks/results/results.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchmarks import (
    chain,
    fanout,
    footprint,
    iterations,
    long_thread,
    observability,
    postgres,
    report,
    send,
    storage,
    streaming,
)
from benchmarks.harness import Row, Settings, langgraph_available

WORKLOADS = (
    chain,
    iterations,
    observability,
    fanout,
    send,
    streaming,
    storage,
    long_thread,
    footprint,
    postgres,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny repeat counts (for CI)")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/results.json"))
    parser.add_argument(
        "--without-langgraph", action="store_true", help="leave LangGraph out even if installed"
    )
    args = parser.parse_args(argv)
    settings = Settings(
        quick=args.quick, with_langgraph=langgraph_available() and not args.without_langgraph
    )
    started = time.perf_counter()
    rows: list[Row] = []
    for workload in WORKLOADS:
        rows.extend(workload.run(settings))
    print(report.as_text(rows, settings))
    print(f"\n({time.perf_counter() - started:.0f} s)")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report.as_json(rows, settings), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
