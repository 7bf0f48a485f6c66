"""Regenerate the diagrams in this folder from the example agents and graphs.

Run from the repository root: python diagrams/regenerate.py
(``--check`` only reports stale files and exits 1 if there are any.)

Each target is drawn with ``graph-agent draw`` as Mermaid (.mmd), PlantUML (.puml) and DOT
(.dot), and rendered to SVG with Graphviz when ``dot`` is installed; the targets in ``XRAY``
are drawn with ``--xray`` (every agent and subgraph open, as a cluster).
tests/cli/test_draw.py fails when a committed .mmd/.puml/.dot differs from what the code draws
now.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "diagrams"

TARGETS = {
    "demo_agent": "graph_agent.demo:agent",
    "quickstart_agent": "examples/quickstart.py:agent",
    "human_in_the_loop_agent": "examples/human_in_the_loop.py:agent",
    "hooks_and_interceptors_agent": "examples/hooks_and_interceptors.py:agent",
    "workflow": "examples/workflow.py:build",
    "map_reduce": "examples/map_reduce.py:build",
    "checkpoints_publisher": "examples/checkpoints.py:publisher",
    "team_xray": "examples/team.py:team.graph",
}
"""File stem → the ``MODULE:OBJECT`` drawn (paths relative to the repository root)."""

XRAY = frozenset({"team_xray"})
"""Stems drawn with ``--xray``."""

TEXT_SUFFIXES = {"mermaid": ".mmd", "plantuml": ".puml", "dot": ".dot"}


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from graph_agent.cli.draw import dot_image, render_diagram
    from graph_agent.cli.targets import load_target

    check = "--check" in argv
    stale = []
    for stem, spec in TARGETS.items():
        module, _, name = spec.partition(":")
        if module.endswith(".py"):
            spec = f"{ROOT / module}:{name}"
        runnable = load_target(spec, default_saver=False).runnable
        xray = stem in XRAY
        for fmt, suffix in TEXT_SUFFIXES.items():
            path = HERE / f"{stem}{suffix}"
            text = render_diagram(runnable, fmt, xray=xray)
            if path.exists() and path.read_bytes() == text:
                continue
            stale.append(path.name)
            if not check:
                path.write_bytes(text)
        if not check and shutil.which("dot"):
            dot_text = runnable.get_graph("dot", xray=xray)
            (HERE / f"{stem}.svg").write_bytes(dot_image(dot_text, "svg"))
    if check:
        print("stale: " + ", ".join(stale) if stale else "all diagrams are up to date")
        return 1 if stale else 0
    print(f"wrote {len(TARGETS)} diagrams in {len(TEXT_SUFFIXES) + 1} formats to {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
