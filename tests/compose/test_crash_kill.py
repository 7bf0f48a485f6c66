"""A process killed inside a child graph: the parent thread resumes inside the child, and no
node whose writes were committed runs again."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from graph_agent import RunnableConfig
from graph_agent.checkpoint.sqlite import SqliteSaver
from tests.compose.crash_team import EXPECTED_LOG, THREAD, build

ROOT = Path(__file__).resolve().parents[2]
CASES = {"b": ["b", "c", "after"], "child-done": ["after"]}


@pytest.fixture(scope="module")
def killed_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One killed run per case, started together (each costs an interpreter start)."""
    folder = tmp_path_factory.mktemp("killed")
    databases = {where: folder / f"{where}.db" for where in CASES}
    processes = {
        where: subprocess.Popen(
            [sys.executable, "-m", "tests.compose.crash_team", str(db), where],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        for where, db in databases.items()
    }
    for where, process in processes.items():
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == -signal.SIGKILL, f"{where}: {stderr}"
    return databases


@pytest.mark.parametrize("where", sorted(CASES))
def test_a_run_killed_inside_a_child_resumes_inside_it(killed_runs, where):
    saver = SqliteSaver(str(killed_runs[where]))
    ledger: list[str] = []
    app = build(saver, ledger)
    config = RunnableConfig(thread_id=THREAD)
    assert app.get_state(config).next == ("work",)

    final = app.invoke(None, config)

    assert list(final["log"]) == EXPECTED_LOG
    assert ledger == CASES[where]
    saver.close()
