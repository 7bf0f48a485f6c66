"""graph-agent serve's retention options: ``--thread-ttl``, ``--ttl-strategy``,
``--checkpoint-keep``, ``--sweep-interval``, and LangGraph's ``checkpointer.ttl`` in a config
file; a value that makes no sense is a usage error naming the option."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import NotFoundError

from graph_agent.cli.errors import CliError
from graph_agent.cli.main import build_parser, main
from graph_agent.cli.serve import serve_targets
from graph_agent.cli.serve_retention import retention_of
from graph_agent.serve.retention import ServerRetention
from tests.serve.conftest import free_port, wait_until_up

ROOT = Path(__file__).resolve().parents[2]


def _retention(*argv: str) -> ServerRetention:
    args: argparse.Namespace = build_parser().parse_args(["serve", *argv])
    serve_targets(args)
    retention: ServerRetention = retention_of(args)
    return retention


def test_the_command_line_sets_the_server_s_retention() -> None:
    assert _retention("tests.serve.graphs:chain") == ServerRetention()
    options = ("--thread-ttl", "60", "--ttl-strategy", "keep_latest", "--checkpoint-keep", "3")
    assert _retention("tests.serve.graphs:chain", *options, "--sweep-interval", "1") == (
        ServerRetention(thread_ttl=60, strategy="keep_latest", checkpoint_keep=3, sweep_minutes=1)
    )


def test_langgraph_s_checkpointer_ttl_maps_to_the_options(tmp_path: Path) -> None:
    ttl = {"strategy": "keep_latest", "default_ttl": 43200, "sweep_interval_minutes": 60}
    config = {"graphs": {"c": "tests.serve.graphs:chain"}, "checkpointer": {"ttl": ttl}}
    (tmp_path / "langgraph.json").write_text(json.dumps({**config, "checkpoint_keep": 5}))
    assert _retention(str(tmp_path / "langgraph.json")) == ServerRetention(
        thread_ttl=43200, strategy="keep_latest", checkpoint_keep=5, sweep_minutes=60
    )
    # the command line wins over the file
    retention = _retention(str(tmp_path / "langgraph.json"), "--thread-ttl", "10")
    assert retention.thread_ttl == 10 and retention.strategy == "keep_latest"


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (("--thread-ttl", "0"), "--thread-ttl"),
        (("--checkpoint-keep", "0"), "--checkpoint-keep"),
        (("--sweep-interval", "-1"), "--sweep-interval"),
    ],
)
def test_an_option_that_makes_no_sense_is_a_usage_error(
    argv: tuple[str, ...], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "tests.serve.graphs:chain", *argv]) == 2
    assert named in capsys.readouterr().err


@pytest.mark.parametrize(
    "checkpointer",
    [{"ttl": {"strategy": "archive"}}, {"ttl": {"default": 5}}, {"shallow": True}, "delete"],
)
def test_a_checkpointer_table_that_makes_no_sense_is_a_usage_error(
    tmp_path: Path, checkpointer: object
) -> None:
    config = tmp_path / "langgraph.json"
    graphs = {"c": "tests.serve.graphs:chain"}
    config.write_text(json.dumps({"graphs": graphs, "checkpointer": checkpointer}))
    with pytest.raises(CliError) as raised:
        _retention(str(config))
    assert "checkpointer" in raised.value.message or "--ttl-strategy" in raised.value.message


def test_a_served_thread_idle_past_thread_ttl_is_swept(tmp_path: Path) -> None:
    port = free_port()
    argv = ["serve", "tests.serve.graphs:chain", "--port", str(port), "--db"]
    argv += [str(tmp_path / "serve.db"), "--thread-ttl", "0.01", "--sweep-interval", "0.01"]
    server = subprocess.Popen(
        [sys.executable, "-m", "graph_agent", *argv],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}")
        client = get_sync_client(url=f"http://127.0.0.1:{port}")
        thread_id = client.threads.create()["thread_id"]
        client.runs.wait(thread_id, "chain", input={"x": 1})
        deadline = time.monotonic() + 30  # idle 0.6 s, swept every 0.6 s
        while time.monotonic() < deadline:
            try:
                client.threads.get(thread_id)
            except NotFoundError:
                break
            time.sleep(0.1)
        with pytest.raises(NotFoundError):
            client.threads.get(thread_id)
    finally:
        server.terminate()
        server.communicate(timeout=15)
