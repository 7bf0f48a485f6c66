"""The serve benchmark runs in quick mode against graph-agent serve alone (no langgraph-cli)."""

from __future__ import annotations

import os
import time

from benchmarks import serve
from benchmarks.harness import GRAPH_AGENT, LANGGRAPH, Settings


def test_the_serve_benchmark_measures_our_server_in_quick_mode() -> None:
    rows = serve.run(Settings(quick=True, with_langgraph=False), with_postgres=False, clients=(3,))
    assert [row.key for row in rows] == [
        "Serve runs/wait, one client (SQLite)",
        "Serve runs/wait, 3 clients (SQLite)",
    ]
    latency, throughput = rows
    size = serve.sizes(Settings(quick=True))
    assert len(latency.samples[GRAPH_AGENT]) == size.sequential * size.rounds
    assert all(ms > 0 for ms in latency.samples[GRAPH_AGENT])
    assert throughput.samples[GRAPH_AGENT][0] > 0
    # a quick run may cost the server less than one clock tick (10 ms): read, maybe 0
    assert throughput.extra["cpu_ms_per_run_median"] >= 0
    assert all(LANGGRAPH not in row.samples for row in rows)


def test_the_cpu_time_of_a_process_group_is_read_from_proc() -> None:
    """What ``cpu_ms_per_run_median`` is made of: the CPU time of the server's process group."""
    group = os.getpgid(0)
    before = serve._cpu_seconds(serve._Served(url="", pid=group))
    deadline = time.process_time() + 0.1
    while time.process_time() < deadline:  # burn 0.1 s of CPU in this process
        pass
    spent = serve._cpu_seconds(serve._Served(url="", pid=group)) - before
    assert spent >= 0.05
