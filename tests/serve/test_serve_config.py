"""graph-agent serve CONFIG: several targets and options from a JSON or TOML file, LangGraph's
``langgraph.json`` shape included."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from langgraph_sdk import get_sync_client

from graph_agent.cli.errors import CliError
from graph_agent.cli.main import build_parser, main
from graph_agent.cli.serve import serve_targets
from graph_agent.cli.serve_config import is_config, read_config
from tests.serve.conftest import free_port, wait_until_up

ROOT = Path(__file__).resolve().parents[2]


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["serve", *argv])


def test_langgraph_json_maps_each_id_to_a_file_beside_it(tmp_path: Path) -> None:
    tmp_path = tmp_path.resolve()
    config = tmp_path / "langgraph.json"
    graphs = {"counter": "./graphs.py:chain", "ask": {"path": "agents/x.py:approval"}}
    config.write_text(json.dumps({"graphs": graphs, "dependencies": ["."], "env": ".env"}))
    read = read_config(str(config))
    assert read.targets == [
        ("counter", f"{tmp_path}/graphs.py:chain"),
        ("ask", f"{tmp_path}/agents/x.py:approval"),
    ]
    assert read.ignored == ["dependencies", "env"] and read.options == {}


def test_a_toml_file_lists_targets_by_name_and_sets_options(tmp_path: Path) -> None:
    tmp_path = tmp_path.resolve()
    config = tmp_path / "serve.toml"
    config.write_text(
        'targets = ["pkg.agents:support", "graphs.py:chain"]\n'
        'db = "data/serve.db"\nport = 9001\nhost = "127.0.0.1"\n'
    )
    read = read_config(str(config))
    assert read.targets == [(None, "pkg.agents:support"), (None, f"{tmp_path}/graphs.py:chain")]
    assert read.options == {"db": f"{tmp_path}/data/serve.db", "port": 9001, "host": "127.0.0.1"}
    assert str(tmp_path) in sys.path  # its dotted modules import from its folder
    sys.path.remove(str(tmp_path))


def test_the_command_line_wins_over_the_file_and_defaults_fill_the_rest(tmp_path: Path) -> None:
    tmp_path = tmp_path.resolve()
    config = tmp_path / "serve.json"
    config.write_text(json.dumps({"targets": {"c": "graphs.py:chain"}, "port": 9001, "db": "a.db"}))
    args = _args(str(config), "tests/serve/graphs.py:slow", "--port", "9100")
    targets = serve_targets(args)
    assert targets == [("c", f"{tmp_path}/graphs.py:chain"), (None, "tests/serve/graphs.py:slow")]
    assert (args.port, args.db, args.host, args.workers) == (
        9100,
        f"{tmp_path}/a.db",
        "127.0.0.1",
        1,
    )
    sys.path.remove(str(tmp_path))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "is not valid JSON"),
        ("[]", "must hold an object"),
        ('{"port": 1}', "lists no targets"),
        ('{"graphs": {"a": "no-colon"}}', "graphs.a must be MODULE:OBJECT"),
        ('{"targets": "x:y"}', "targets must be a list"),
        ('{"targets": ["x:y"], "port": "80"}', "port must be an integer"),
    ],
)
def test_a_malformed_file_says_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "bad.json"
    config.write_text(text)
    with pytest.raises(CliError, match=message):
        read_config(str(config))


def test_config_files_are_told_from_module_object_targets() -> None:
    assert is_config("langgraph.json") and is_config("deploy/serve.TOML")
    assert not is_config("examples/quickstart.py:agent") and not is_config("pkg.json:graph")


def test_a_missing_file_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "no/such/langgraph.json"]) == 2
    assert "cannot read no/such/langgraph.json" in capsys.readouterr().err


def test_serve_langgraph_json_serves_each_graph_under_its_key(tmp_path: Path) -> None:
    shutil.copy(ROOT / "tests" / "serve" / "graphs.py", tmp_path / "graphs.py")
    port = free_port()
    config = {
        "graphs": {"counter": "./graphs.py:chain", "approval": "./graphs.py:approval"},
        "dependencies": ["."],
        "port": port,
        "db": "state/serve.db",
    }
    (tmp_path / "langgraph.json").write_text(json.dumps(config))
    server = subprocess.Popen(
        [sys.executable, "-m", "graph_agent", "serve", str(tmp_path / "langgraph.json")],
        cwd=ROOT,  # not the config's folder: its paths are read relative to itself
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert server.stdout is not None
        assert f"counter, approval at http://127.0.0.1:{port}" in server.stdout.readline()
        wait_until_up(f"http://127.0.0.1:{port}")
        client = get_sync_client(url=f"http://127.0.0.1:{port}")
        assert {a["assistant_id"] for a in client.assistants.search()} == {"counter", "approval"}
        assert client.runs.wait(None, "counter", input={"x": 1}) == {"x": 12}
    finally:
        server.terminate()
        _, err = server.communicate(timeout=15)
    assert "ignoring dependencies" in err
    assert (tmp_path / "state" / "serve.db").exists()


def test_a_config_file_may_name_the_redis_that_carries_notifications(tmp_path: Path) -> None:
    config = tmp_path / "serve.json"
    options = {"postgres": "dbname=agents", "redis": "redis://127.0.0.1:6379/0", "workers": 2}
    config.write_text(json.dumps({"targets": ["graphs.py:chain"], **options}))
    assert read_config(str(config)).options == options
    sys.path.remove(str(tmp_path))


def test_langgraph_json_cors_origins_and_our_host_lists_are_read(tmp_path: Path) -> None:
    config = tmp_path / "langgraph.json"
    http = {"cors": {"allow_origins": ["http://localhost:3000"], "max_age": 60}, "app": "x:app"}
    config.write_text(
        json.dumps(
            {
                "graphs": {"c": "./graphs.py:chain"},
                "http": http,
                "cors_origins": ["https://app.example", "http://localhost:3000"],
                "allow_hosts": ["agents.example"],
            }
        )
    )
    read = read_config(str(config))
    assert read.options == {
        "cors_origins": ["http://localhost:3000", "https://app.example"],
        "allow_hosts": ["agents.example"],
        "app": "x:app",
    }
    assert read.ignored == ["http.cors.max_age"]
    sys.path.remove(str(tmp_path.resolve()))


def test_the_command_lines_hosts_and_origins_add_to_the_files(tmp_path: Path) -> None:
    config = tmp_path / "serve.json"
    lists = {"allow_hosts": ["a.example"], "cors_origins": ["https://a.example"]}
    config.write_text(json.dumps({"targets": ["graphs.py:chain"], **lists}))
    args = _args(str(config), "--allow-host", "b.example", "--cors-origin", "https://b.example")
    serve_targets(args)
    assert args.allow_host == ["a.example", "b.example"]
    assert args.cors_origin == ["https://a.example", "https://b.example"]
    sys.path.remove(str(tmp_path.resolve()))


def test_a_host_list_that_is_not_one_says_so(tmp_path: Path) -> None:
    config = tmp_path / "serve.json"
    config.write_text(json.dumps({"targets": ["graphs.py:chain"], "allow_hosts": "a.example"}))
    with pytest.raises(CliError, match="allow_hosts must be a list of strings"):
        read_config(str(config))
