"""graph-agent serve on the command line: it listens where it says, and says what is missing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client

from graph_agent.cli.main import main
from graph_agent.cli.serve import records_path
from tests.serve.conftest import free_port, wait_until_up

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
        wait_until_up(f"http://127.0.0.1:{port}")
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


def test_the_readme_serves_the_demo_agent_and_calls_it_as_printed(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Serving agents") :]
    shell = section[section.index("```bash") : section.index("```", section.index("```bash") + 3)]
    body = json.loads(shell[shell.index("'{") + 1 : shell.rindex("}'") + 1])
    python = section[section.index("```python\n") + 10 :]
    python = python[: python.index("```")]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "graph_agent", "serve", "graph_agent.demo:agent"]
    server = subprocess.Popen(
        [*command, "--port", str(port), "--db", str(tmp_path / "serve.db")],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_up(url)
        reply = httpx.post(f"{url}/runs/wait", json=body, timeout=30).json()
        assert reply["messages"][-1]["content"] == "- 17 * 23 = 391"
        printed = subprocess.run(
            [sys.executable, "-c", python.replace("http://127.0.0.1:8123", url)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert printed.returncode == 0, printed.stderr
        assert printed.stdout.strip() == "- 2 + 2 = 4"
    finally:
        server.terminate()
        server.wait(15)


def test_workers_without_postgres_says_what_to_add(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "tests/serve/graphs.py:chain", "--workers", "2"]) != 0
    assert "--workers needs --postgres" in capsys.readouterr().err


@pytest.mark.parametrize("store", [["--db", "serve.db"], ["--postgres", "dbname=nowhere"]])
def test_negative_workers_is_a_usage_error_before_any_store_opens(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    store: list[str],
) -> None:
    opened: list[object] = []
    monkeypatch.setattr("graph_agent.cli.serve._open_stores", opened.append)
    monkeypatch.chdir(tmp_path)
    command = ["serve", f"{ROOT}/tests/serve/graphs.py:chain", *store, "--workers", "-1"]
    assert main(command) == 2
    assert "--workers -1: give 0 or more" in capsys.readouterr().err
    assert opened == [] and list(tmp_path.iterdir()) == []


def test_sigterm_stops_the_server_cleanly(tmp_path: Path) -> None:
    """uvicorn raises SIGTERM again after its shutdown: serve still runs its own cleanup (stops
    its worker processes, closes its stores) and exits 0."""
    port = free_port()
    command = [sys.executable, "-m", "graph_agent", "serve", "tests/serve/graphs.py:chain"]
    server = subprocess.Popen(
        [*command, "--port", str(port), "--db", str(tmp_path / "serve.db")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}")
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=15)
    finally:
        server.kill()
    assert server.returncode == 0, err
    assert "graph-agent serve: stopped" in err


def test_serve_answers_its_bound_host_and_allowed_ones_and_lists_cors_origins(
    tmp_path: Path,
) -> None:
    """--host reaches the Host check (127.0.0.2 is no loopback *name*), --allow-host adds a
    name, --cors-origin gets its preflight answered; anything else is a 403."""
    port = free_port()
    url = f"http://127.0.0.2:{port}"
    command = [sys.executable, "-m", "graph_agent", "serve", "tests/serve/graphs.py:chain"]
    command += ["--host", "127.0.0.2", "--port", str(port), "--db", str(tmp_path / "serve.db")]
    command += ["--allow-host", "agents.example", "--cors-origin", "http://localhost:3000"]
    server = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        wait_until_up(url)  # Host: 127.0.0.2:PORT, the bound address
        named = httpx.get(f"{url}/assistants/chain", headers={"host": "agents.example"})
        assert named.status_code == 200
        other = httpx.get(f"{url}/assistants/chain", headers={"host": "evil.example"})
        assert other.status_code == 403 and "--allow-host evil.example" in other.text
        preflight = {"access-control-request-method": "POST"}
        listed = httpx.options(
            f"{url}/runs/wait", headers={**preflight, "origin": "http://localhost:3000"}
        )
        assert listed.headers["access-control-allow-origin"] == "http://localhost:3000"
        refused = httpx.options(f"{url}/runs/wait", headers={**preflight, "origin": "http://x.y"})
        assert refused.status_code == 403
    finally:
        server.terminate()
        server.wait(15)


def test_a_cors_origin_that_is_not_one_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    command = ["serve", "tests/serve/graphs.py:chain", "--db", str(tmp_path / "serve.db")]
    assert main([*command, "--cors-origin", "localhost:3000/app"]) == 2
    assert "--cors-origin 'localhost:3000/app' is not an origin" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "config"),
    [
        (["--cors-origin", "*"], None),
        (["--allow-host", "*"], None),
        ([], {"http": {"cors": {"allow_origins": ["*"]}}}),
        ([], {"allow_hosts": ["*"]}),
    ],
)
def test_star_without_keys_is_a_usage_error_unless_insecure_no_auth(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    option: list[str],
    config: dict[str, object] | None,
) -> None:
    """Such a server never listens: the command stops before (here, listening fails)."""

    def no_port(*args: object, **kwargs: object) -> object:
        raise OSError("no port in this test")

    monkeypatch.setattr("graph_agent.cli.serve._listen", no_port)
    targets = ["tests/serve/graphs.py:chain"]
    if config is not None:
        file = tmp_path / "langgraph.json"
        graphs = {"chain": f"{ROOT}/tests/serve/graphs.py:chain"}
        file.write_text(json.dumps({"graphs": graphs, **config}))
        targets = [str(file)]
    command = ["serve", *targets, *option, "--db", str(tmp_path / "serve.db")]
    assert main(command) == 2
    err = capsys.readouterr().err
    assert "on a server without API keys" in err and "--insecure-no-auth" in err
    assert main([*command, "--insecure-no-auth"]) == 1  # past the app: only the port is missing
    assert "cannot listen" in capsys.readouterr().err
