"""Import time and resident memory added by importing the package, each in a fresh interpreter.

graph_agent imports ``graph_agent``; LangGraph imports ``langgraph.graph``; the plain loop needs
no import, so it has no column here. The probe also reports whether networkx is loaded after the
import (it must not be) and after compiling a graph (it may be: validation uses it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

from benchmarks.harness import GRAPH_AGENT, LANGGRAPH, Row, Settings

_PROBE = textwrap.dedent(
    """
    import json, re, sys, time

    def rss_kb():
        with open("/proc/self/status") as status:
            return int(re.search(r"VmRSS:\\s+(\\d+)", status.read()).group(1))

    before = rss_kb()
    started = time.perf_counter()
    {statement}
    elapsed = time.perf_counter() - started
    after = rss_kb()
    networkx_after_import = "networkx" in sys.modules
    {compile_statement}
    print(json.dumps({{
        "import_ms": elapsed * 1e3,
        "rss_mb": (after - before) / 1024,
        "networkx_after_import": networkx_after_import,
        "networkx_after_compile": "networkx" in sys.modules,
    }}))
    """
)
_STATEMENTS = {
    GRAPH_AGENT: (
        "import graph_agent",
        "g = graph_agent.StateGraph('probe'); g.add_node('a', lambda s: None); "
        "g.add_edge(graph_agent.START, 'a'); g.add_edge('a', graph_agent.END); g.compile()",
    ),
    LANGGRAPH: ("import langgraph.graph", "pass"),
    "messages": ("import graph_agent; graph_agent.AssistantMessage", "pass"),
}
"""``messages``: graph_agent with its messages loaded (pydantic, which ``import graph_agent``
leaves out until a message, tool or agent is used: its first model costs about 19 MB)."""


def probe(implementation: str) -> dict[str, Any]:
    """Import in a fresh interpreter and report what it cost."""
    statement, compile_statement = _STATEMENTS[implementation]
    code = _PROBE.format(statement=statement, compile_statement=compile_statement)
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    result: dict[str, Any] = json.loads(output)
    return result


def run(settings: Settings) -> list[Row]:
    if not sys.platform.startswith("linux"):
        return []  # RSS is read from /proc
    repeat = 1 if settings.quick else 5
    implementations = [GRAPH_AGENT, LANGGRAPH] if settings.with_langgraph else [GRAPH_AGENT]
    probes = {name: [probe(name) for _ in range(repeat)] for name in implementations}
    with_messages = min(probe("messages")["rss_mb"] for _ in range(repeat))
    networkx = {
        key: probes[GRAPH_AGENT][0][key]
        for key in ("networkx_after_import", "networkx_after_compile")
    }
    return [
        Row(
            key="Import time",
            unit="ms",
            samples={name: [p["import_ms"] for p in runs] for name, runs in probes.items()},
        ),
        Row(
            key="Import RSS",
            unit="MB over a bare interpreter",
            samples={name: [p["rss_mb"] for p in runs] for name, runs in probes.items()},
            target="≤ +20 MB; networkx only imported when compiling",
            extra={
                "graph_agent networkx": networkx,
                "graph_agent with its messages (pydantic), MB": with_messages,
            },
        ),
    ]
