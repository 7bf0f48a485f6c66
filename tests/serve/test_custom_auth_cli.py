"""``graph-agent serve --auth/--app/--config``: custom auth and routes from the command line
and from a config file in LangGraph's ``langgraph.json`` shape."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client

from graph_agent.cli.errors import CliError
from graph_agent.cli.main import build_parser, main
from graph_agent.cli.serve import serve_targets
from graph_agent.cli.serve_config import read_config
from tests.serve.conftest import free_port, wait_until_up
from tests.serve.custom_auth_targets import ANN

ROOT = Path(__file__).resolve().parents[2]
AUTH = "tests.serve.custom_auth_targets:auth"


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["serve", *argv])


def test_langgraph_json_auth_and_http_app_are_read_beside_the_file(tmp_path: Path) -> None:
    config = tmp_path / "langgraph.json"
    config.write_text(
        json.dumps(
            {
                "graphs": {"chain": "./graphs.py:chain"},
                "auth": {"path": "./auth.py:my_auth", "disable_studio_auth": True},
                "http": {"app": "./webapp.py:app", "enable_custom_route_auth": True},
            }
        )
    )
    read = read_config(str(config))
    assert read.options == {
        "auth": f"{tmp_path.resolve() / 'auth.py'}:my_auth",
        "app": f"{tmp_path.resolve() / 'webapp.py'}:app",
        "app_auth": True,
    }
    assert read.ignored == ["auth.disable_studio_auth"]
    sys.path.remove(str(tmp_path.resolve()))


def test_auth_may_be_a_dotted_module_and_a_malformed_one_says_so(tmp_path: Path) -> None:
    config = tmp_path / "graph_agent.json"
    config.write_text(json.dumps({"targets": ["graphs.py:chain"], "auth": "my.auth:rules"}))
    assert read_config(str(config)).options == {"auth": "my.auth:rules"}
    config.write_text(json.dumps({"targets": ["graphs.py:chain"], "auth": {"path": "auth.py"}}))
    with pytest.raises(CliError, match=r"auth\.path must be MODULE:OBJECT"):
        read_config(str(config))
    config.write_text(
        json.dumps({"targets": ["g.py:c"], "http": {"enable_custom_route_auth": "yes"}})
    )
    with pytest.raises(CliError, match="enable_custom_route_auth must be true or false"):
        read_config(str(config))
    sys.path.remove(str(tmp_path.resolve()))


def test_the_config_option_and_a_config_target_read_the_same(tmp_path: Path) -> None:
    config = tmp_path / "graph_agent.json"
    config.write_text(json.dumps({"targets": ["graphs.py:chain"], "port": 9001}))
    by_option = _args("--config", str(config))
    by_target = _args(str(config))
    assert serve_targets(by_option) == serve_targets(by_target)
    assert by_option.port == by_target.port == 9001
    assert by_option.auth is None and by_option.app_auth is False
    given = _args("--config", str(config), "--auth", AUTH, "--app-auth")
    serve_targets(given)
    assert (given.auth, given.app_auth) == (AUTH, True)
    sys.path.remove(str(tmp_path.resolve()))


def test_serve_without_targets_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve"]) == 2
    assert "nothing to serve" in capsys.readouterr().err


def test_auth_beside_api_keys_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["serve", "tests/serve/graphs.py:chain", "--auth", AUTH, "--api-key", "k-1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--auth and API keys both given" in err
    assert "k-1" not in err


def test_an_auth_object_that_is_not_there_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["serve", "tests/serve/graphs.py:chain", "--auth", "tests.serve.graphs:nope"]
    assert main(argv) == 2
    assert "tests.serve.graphs has no nope" in capsys.readouterr().err


def test_serve_config_file_with_auth_and_custom_routes(tmp_path: Path) -> None:
    shutil.copy(ROOT / "tests" / "serve" / "graphs.py", tmp_path / "graphs.py")
    shutil.copy(ROOT / "tests" / "serve" / "custom_auth_targets.py", tmp_path / "auth.py")
    port = free_port()
    config = {
        "graphs": {"counter": "./graphs.py:chain"},
        "auth": {"path": "./auth.py:auth"},
        "http": {"app": "./auth.py:app"},
        "port": port,
        "db": "state/serve.db",
    }
    (tmp_path / "graph_agent.json").write_text(json.dumps(config))
    server = subprocess.Popen(
        [sys.executable, "-m", "graph_agent", "serve", "--config", "graph_agent.json"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert server.stdout is not None
        announced = server.stdout.readline()
        assert f"counter at http://127.0.0.1:{port}" in announced
        assert "auth.py:auth" in announced and "auth.py:app" in announced
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url)
        ann = get_sync_client(url=url, headers=ANN)
        thread_id = ann.threads.create()["thread_id"]
        assert ann.runs.wait(thread_id, "counter", input={"x": 1}) == {"x": 12}
        assert ann.threads.get(thread_id)["metadata"]["owner"] == "ann"
        assert httpx.get(f"{url}/threads/{thread_id}").status_code == 401
        assert httpx.get(f"{url}/hello").json() == {"hello": "world"}
    finally:
        server.terminate()
        server.communicate(timeout=15)
