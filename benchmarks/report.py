"""The table printed by ``python -m benchmarks`` and the JSON it writes.

Each row shows every implementation's median and min–max, and graph_agent's ratio to LangGraph
and to the plain loop: ``1/15.2`` means graph_agent takes a fifteenth of the other's time (or
bytes), ``×3.10`` three times as much.
"""

from __future__ import annotations

import os
import platform
import statistics
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from benchmarks.harness import (
    GRAPH_AGENT,
    IMPLEMENTATIONS,
    LANGGRAPH,
    PLAIN,
    Row,
    Settings,
    langgraph_available,
)


def summary(values: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def ratio(row: Row, other: str) -> float | None:
    """graph_agent's median over ``other``'s, when both exist and the ratio means something."""
    if GRAPH_AGENT not in row.samples or other not in row.samples or not row.ratios:
        return None
    mine, theirs = (statistics.median(row.samples[name]) for name in (GRAPH_AGENT, other))
    if theirs <= 0 or mine < 0:
        return None
    return mine / theirs


def environment(settings: Settings) -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}, {_cpu()}, {os.cpu_count()} CPUs",
        "graph_agent": _version("graph-agent"),
        "langgraph": _version("langgraph") if settings.with_langgraph else None,
        "quick": settings.quick,
    }


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def as_json(rows: list[Row], settings: Settings) -> dict[str, Any]:
    results = {}
    for row in rows:
        entry: dict[str, Any] = {"unit": row.unit, "target": row.target}
        for name in IMPLEMENTATIONS:
            if name in row.samples:
                entry[name] = summary(row.samples[name])
        entry["ratio_to_langgraph"] = ratio(row, LANGGRAPH)
        entry["ratio_to_plain"] = ratio(row, PLAIN)
        if row.note:
            entry["note"] = row.note
        if row.extra:
            entry["extra"] = row.extra
        results[row.key] = entry
    return {
        "environment": environment(settings),
        "results": results,
        "targets": [target.as_json() for target in engine_targets(rows)],
    }


def as_text(rows: list[Row], settings: Settings) -> str:
    env = environment(settings)
    lines = [
        f"graph_agent {env['graph_agent']} benchmarks — Python {env['python']}, {env['machine']}"
        + (" (quick mode: tiny repeat counts, numbers are rough)" if settings.quick else ""),
        "median (min–max); ratio = graph_agent / other: 1/15 is fifteen times less",
    ]
    if not langgraph_available():
        lines.append(
            "LangGraph is not installed (pip install -e '.[bench]'): its column and ratios "
            "are left out"
        )
    elif env["langgraph"] is None:
        lines.append("LangGraph is left out (--without-langgraph)")
    else:
        lines.append(f"LangGraph {env['langgraph']}")
    for row in rows:
        lines.append("")
        lines.append(
            f"{row.key} — {row.unit}" + (f"   [target: {row.target}]" if row.target else "")
        )
        for name in IMPLEMENTATIONS:
            if name not in row.samples:
                continue
            stats = summary(row.samples[name])
            text = f"  {name:<12} {_number(stats['median']):>12}"
            if stats["n"] > 1:
                text += f"  ({_number(stats['min'])}–{_number(stats['max'])})"
            compared = ratio(row, name) if name != GRAPH_AGENT else None
            if compared is not None:
                text = f"{text:<52} graph_agent: {_ratio_text(compared)}"
            lines.append(text)
        if row.note:
            lines.append(f"  note: {row.note}")
        for label, value in row.extra.items():
            lines.append(f"  {label}: {_extra_text(value)}")
    targets = engine_targets(rows)
    if targets:
        lines += ["", "Engine targets (issue 34), measured in this run:"]
        lines += [f"  {target.as_text()}" for target in targets]
    return "\n".join(lines)


@dataclass(frozen=True)
class Target:
    """One of the engine's targets: what it compares, the figure measured and the bound."""

    name: str
    measured: float
    bound: float
    text: str

    @property
    def met(self) -> bool:
        return self.measured <= self.bound

    def as_text(self) -> str:
        return f"{self.name:<44} {self.text:>10}  {'met' if self.met else 'NOT met'}"

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "measured": self.measured, "bound": self.bound, "met": self.met}


ENGINE_TARGETS = (
    ("W2 react, no saver", PLAIN, "W2 iteration, no saver / plain loop (≤ ×10)", 10.0),
    ("W5 stream", LANGGRAPH, "W5 streamed event / LangGraph (≤ 1/15)", 1 / 15),
)


def engine_targets(rows: list[Row]) -> list[Target]:
    """The engine's three targets, side by side, from the rows of one run: a ReAct iteration
    against the plain loop, a streamed event against LangGraph, and the import's memory."""
    by_key = {row.key: row for row in rows}
    targets = []
    for key, other, name, bound in ENGINE_TARGETS:
        row = by_key.get(key)
        value = ratio(row, other) if row is not None else None
        if value is not None:
            targets.append(Target(name, value, bound, _ratio_text(value)))
    imported = by_key.get("Import RSS")
    if imported is not None and GRAPH_AGENT in imported.samples:
        megabytes = statistics.median(imported.samples[GRAPH_AGENT])
        name = "import graph_agent, RSS over the interpreter (≤ +20 MB)"
        targets.append(Target(name, megabytes, 20.0, f"+{megabytes:.1f} MB"))
    return targets


def _number(value: float) -> str:
    magnitude = abs(value)
    if magnitude >= 10_000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _ratio_text(value: float) -> str:
    if value == 0:
        return "0"
    return f"1/{1 / value:.1f}" if value < 1 else f"×{value:.2f}"


def _extra_text(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {_extra_text(v)}" for k, v in value.items())
    if isinstance(value, float):
        return _number(value)
    return str(value)
