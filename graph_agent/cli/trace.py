"""``graph-agent run|demo --trace``: the tree of the run's spans, printed when it is done.

A :class:`~graph_agent.observability.TraceRecorder` listens to every run in the process while
the command runs (the agent's, and the subgraphs and agents it runs), so no OpenTelemetry
package is needed; ``graph_agent.observability.instrument()`` sends the same spans to a
tracing backend instead.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator


def add_trace_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trace",
        action="store_true",
        help="when done, print the tree of the run's spans: runs, nodes, model and tool calls",
    )


@contextlib.contextmanager
def traced(enabled: bool) -> Iterator[None]:
    """Record the runs made inside, and print their tree (to stderr) when done, also after a
    failure or Ctrl-C."""
    if not enabled:
        yield
        return
    from rich.console import Console

    from graph_agent.graph.listeners import add_listener, remove_listener
    from graph_agent.observability.tree import TraceRecorder

    recorder = TraceRecorder()
    add_listener(recorder)
    try:
        yield
    finally:
        remove_listener(recorder)
        console = Console(stderr=True)
        if recorder.roots:
            console.print(recorder.tree())
        else:
            console.print(
                "[dim]--trace: no run was made in this process (with --url the run is the "
                "server's: trace it there with graph_agent.observability.instrument())[/dim]"
            )
