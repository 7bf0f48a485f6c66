"""``graph-agent serve --cpus LIST``: each serving process, all its threads, on one CPU of the
list (see ``graph_agent/cli/serve_cpus.py`` for why); a list that cannot be used here is a
usage error naming what is wrong."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graph_agent.cli.errors import EXIT_USAGE, CliError
from graph_agent.cli.serve_cpus import cpus_of
from tests.serve.conftest import free_port, wait_until_up

ALLOWED = sorted(os.sched_getaffinity(0))

GRAPH = """
from graph_agent import END, START, StateGraph


def chain():
    graph = StateGraph("chain")
    graph.add_node("one", lambda state: {"x": state["x"] + 1})
    graph.add_edge(START, "one").add_edge("one", END)
    return graph
"""


def _cpus_of_threads(pid: int) -> set[str]:
    """Each thread's ``Cpus_allowed_list`` (the kernel's own words for its mask)."""
    found = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                found.add(line.split(":", 1)[1].strip())
    return found


def _pinned(pid: int) -> list[set[str]]:
    """The CPUs of the threads of ``pid``, then of each of its child processes'."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [_cpus_of_threads(pid), *(_cpus_of_threads(int(child)) for child in children)]


def test_a_list_names_its_cpus_in_order_once_each():
    first, last = ALLOWED[0], ALLOWED[-1]  # the same on a machine of one CPU
    assert cpus_of(None) == []
    assert cpus_of(f"{last},{first}-{first},{first}") == list(dict.fromkeys([last, first]))


@pytest.mark.parametrize(
    ("given", "named"),
    [("x", "'x' is not a CPU number"), ("3-1", "'3-1' is not a CPU"), ("-1", "'-1' is not")],
)
def test_a_list_that_is_not_cpu_numbers_is_a_usage_error_naming_the_part(given, named):
    with pytest.raises(CliError) as caught:
        cpus_of(given)
    assert named in str(caught.value) and caught.value.exit_code == EXIT_USAGE
    assert "e.g. --cpus 0" in caught.value.hint


def test_a_cpu_this_process_may_not_run_on_is_refused_naming_those_it_may():
    beyond = max(ALLOWED) + 1
    with pytest.raises(CliError) as caught:
        cpus_of(f"{ALLOWED[0]},{beyond}")
    assert f"CPU {beyond} is not one this process may run on" in str(caught.value)
    assert caught.value.hint == "pick among " + ",".join(map(str, ALLOWED))


def test_the_server_and_every_thread_it_starts_stay_on_the_cpu_given(tmp_path):
    (tmp_path / "graph.py").write_text(GRAPH)
    cpu, port = ALLOWED[-1], free_port()
    command = [sys.executable, "-m", "graph_agent", "serve", "graph.py:chain"]
    command += ["--port", str(port), "--cpus", str(cpu)]
    server = subprocess.Popen(command, cwd=tmp_path, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url)
        import httpx  # a run: the threads that read the runs' graphs are started by now

        answer = httpx.post(f"{url}/runs/wait", json={"assistant_id": "chain", "input": {"x": 1}})
        assert answer.json() == {"x": 2}
        threads = _cpus_of_threads(server.pid)
    finally:
        server.terminate()
        server.communicate(timeout=30)
    assert threads == {str(cpu)}


@pytest.mark.postgres
@pytest.mark.timeout(180)  # two server processes start: slow when the machine is loaded
def test_with_workers_each_process_is_on_the_next_cpu_of_the_list(tmp_path):
    from tests.checkpoint.postgres_db import fresh_schema

    (tmp_path / "graph.py").write_text(GRAPH)
    cpus, port = [ALLOWED[-1], ALLOWED[0]], free_port()
    command = [sys.executable, "-m", "graph_agent", "serve", "graph.py:chain", "--port", str(port)]
    with fresh_schema() as dsn:
        command += ["--postgres", dsn, "--workers", "2", "--cpus", f"{cpus[0]},{cpus[1]}"]
        server = subprocess.Popen(command, cwd=tmp_path, stderr=subprocess.PIPE)
        try:
            wait_until_up(f"http://127.0.0.1:{port}")
            expected = [{str(cpus[0])}, {str(cpus[1])}]
            deadline = time.monotonic() + 60  # the other process pins itself as it starts up
            while (pinned := _pinned(server.pid)) != expected and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            server.terminate()
            server.communicate(timeout=30)
    assert pinned == expected
