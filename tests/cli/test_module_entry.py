"""``python -m graph_agent`` is the ``graph-agent`` command, and importing the package does not
load the command line."""

from __future__ import annotations

import subprocess
import sys


def test_python_m_graph_agent_runs_the_command():
    completed = subprocess.run(
        [sys.executable, "-m", "graph_agent", "threads", "list", "--db", "none.db"],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert completed.returncode == 1
    assert completed.stderr.splitlines()[0] == "error: no database at none.db"


def test_importing_graph_agent_does_not_load_the_command_line():
    check = "import sys, graph_agent; print(sorted(m for m in sys.modules if '.cli' in m))"

    completed = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)

    assert completed.stdout.strip() == "[]", completed.stderr


def test_version_prints_the_installed_version(program):
    from importlib.metadata import version

    result = program("--version")

    assert result.code == 0, result.err
    assert result.out == f"graph-agent {version('graph-agent')}\n"
