"""``graph-agent draw``: a graph's diagram as Mermaid, PlantUML, DOT or ASCII text, or as an SVG
or PNG image rendered by Graphviz ``dot``."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from graph_agent.cli.errors import EXIT_USAGE, CliError, cannot_write
from graph_agent.cli.targets import load_target
from graph_agent.runnable import Runnable

__all__ = ["FORMATS", "TEXT_FORMATS", "draw_command", "render_diagram"]

TEXT_FORMATS = ("mermaid", "plantuml", "dot", "ascii")
IMAGE_FORMATS = ("svg", "png")
FORMATS = TEXT_FORMATS + IMAGE_FORMATS
SUFFIXES = {
    ".mmd": "mermaid",
    ".mermaid": "mermaid",
    ".puml": "plantuml",
    ".plantuml": "plantuml",
    ".dot": "dot",
    ".gv": "dot",
    ".txt": "ascii",
    ".svg": "svg",
    ".png": "png",
}


def render_diagram(runnable: Runnable, fmt: str, *, xray: bool = False) -> bytes:
    """The diagram in ``fmt``: text formats from the graph, images through ``dot``. With
    ``xray``, agents and subgraphs that run as nodes are drawn open, as clusters."""
    if fmt in TEXT_FORMATS:
        return runnable.get_graph(fmt, xray=xray).encode()
    return dot_image(runnable.get_graph("dot", xray=xray), fmt)


def dot_image(dot_text: str, fmt: str) -> bytes:
    """Render DOT text to ``svg`` or ``png`` with Graphviz."""
    executable = shutil.which("dot")
    if executable is None:
        raise CliError(
            f"--format {fmt} needs Graphviz's `dot` program, which is not installed",
            "install graphviz (apt install graphviz, brew install graphviz, winget install "
            "graphviz), or use --format mermaid|plantuml|dot|ascii",
        )
    result = subprocess.run(
        [executable, f"-T{fmt}"], input=dot_text.encode(), capture_output=True, timeout=60
    )
    if result.returncode != 0:
        first = (result.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[0]
        raise CliError(f"dot failed to render the diagram: {first}", "try --format dot")
    return result.stdout


def draw_command(args: argparse.Namespace) -> int:
    """Print the diagram, or write it to ``-o FILE`` (format from the suffix when not given)."""
    fmt = args.format
    if fmt is None and args.output is not None:
        fmt = SUFFIXES.get(Path(args.output).suffix.lower())
    fmt = fmt or "mermaid"
    if fmt == "png" and args.output is None and sys.stdout.isatty():
        raise CliError(
            "a PNG is binary and stdout is a terminal",
            "write it to a file: -o graph.png",
            EXIT_USAGE,
        )
    with load_target(args.target, default_saver=False) as target:
        data = render_diagram(target.local, fmt, xray=args.xray)
    if args.output is None:
        if fmt in TEXT_FORMATS:
            sys.stdout.write(data.decode())
        else:
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
        return 0
    path = Path(args.output)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError as exc:
        raise cannot_write("-o", args.output, exc) from exc
    print(f"wrote {path} ({fmt}, {len(data):,} bytes)")
    return 0
