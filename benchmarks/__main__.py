"""``python -m benchmarks [--quick]``: print medians and ranges, write benchmarks/results.json."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from benchmarks import engine


def describe(samples: list[float]) -> dict[str, float]:
    micros = [s * 1e6 for s in samples]
    return {"median_us": statistics.median(micros), "min_us": min(micros), "max_us": max(micros)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny repeat counts (for CI)")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/results.json"))
    args = parser.parse_args(argv)
    repeat = 3 if args.quick else 30
    results = {
        "W1 chain, per node step": engine.w1_chain(repeat),
        "state size, per step": engine.state_size(repeat),
    }
    table = {
        workload: {runner: describe(samples) for runner, samples in runners.items()}
        for workload, runners in results.items()
    }
    for workload, runners in table.items():
        print(workload)
        for runner, stats in runners.items():
            print(
                f"  {runner:<28} {stats['median_us']:>9.2f} µs"
                f"  ({stats['min_us']:.2f}–{stats['max_us']:.2f})"
            )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(table, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
