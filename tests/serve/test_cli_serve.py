"""graph-agent serve on the command line: it listens where it says, and says what is missing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client

from graph_agent.cli.main import main
from graph_agent.cli.serve import records_path
from tests.serve.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_serve_listens_where_it_says_and_keeps_threads_in_its_db(tmp_path: Path) -> None:
    port, db = free_port(), tmp_path / "served.db"
    command = [sys.executable, "-m", "graph_agent", "serve", "tests/serve/graphs.py:chain"]
    command += ["tests/serve/graphs.py:agent", "--port", str(port), "--db", str(db)]
    server = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert f"chain, assistant at http://127.0.0.1:{port}" in line
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/ok").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        client = get_sync_client(url=f"http://127.0.0.1:{port}")
        assert client.runs.wait(None, "chain", input={"x": 1}) == {"x": 12}
    finally:
        server.terminate()
        server.wait(15)
    assert db.exists() and Path(records_path(str(db))).exists()


def test_records_live_next_to_the_checkpoint_file() -> None:
    assert records_path(os.path.join("data", "serve.db")) == os.path.join(
        "data", "serve.records.db"
    )


def test_serve_without_the_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    assert main(["serve", "tests/serve/graphs.py:chain"]) == 2
    assert "pip install 'graph-agent[serve]'" in capsys.readouterr().err


def test_workers_without_postgres_says_what_to_add(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "tests/serve/graphs.py:chain", "--workers", "2"]) != 0
    assert "--workers needs --postgres" in capsys.readouterr().err
