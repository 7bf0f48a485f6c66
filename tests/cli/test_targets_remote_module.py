"""A module may define a RemoteGraph (it is a Runnable): the CLI takes it as the served
assistant it is, as with ``--url``. An unreachable server is a CliError, not a traceback;
``--db`` with it is a usage error that leaves no database open; ``serve`` refuses it."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

import pytest

from graph_agent.cli.errors import EXIT_USAGE, CliError
from graph_agent.cli.targets import load_target


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def remote_file(tmp_path: Path) -> str:
    path = tmp_path / "remote_mod.py"
    path.write_text(
        "from graph_agent.client import RemoteGraph\n"
        f"remote = RemoteGraph('http://127.0.0.1:{_closed_port()}', 'agent', timeout=5)\n"
    )
    return str(path)


def test_an_unreachable_remote_graph_in_a_module_is_a_cli_error(cli, remote_file):
    result = cli("run", f"{remote_file}:remote", '{"x": 1}')

    assert result.code != 0
    assert "Traceback" not in result.err
    assert "cannot reach" in result.err


def test_db_with_a_remote_graph_in_a_module_is_a_usage_error_opening_nothing(
    remote_file, tmp_path, monkeypatch
):
    opened: list[str] = []
    import graph_agent.cli.targets as targets

    real = targets.open_saver
    monkeypatch.setattr(targets, "open_saver", lambda path: opened.append(path) or real(path))

    with pytest.raises(CliError) as caught:
        load_target(f"{remote_file}:remote", db=str(tmp_path / "x.db"))

    assert caught.value.exit_code == EXIT_USAGE
    assert "--db" in str(caught.value)
    assert opened == []


def test_serve_refuses_a_remote_graph_in_a_module_with_a_cli_error(cli, remote_file):
    result = cli("serve", f"{remote_file}:remote", "--port", "0")

    assert result.code != 0
    assert result.err.startswith("error: ")


def test_a_served_target_has_no_local_object_to_serve():
    from graph_agent.cli.targets import Target
    from graph_agent.client import RemoteGraph

    remote = RemoteGraph("http://127.0.0.1:9", "agent")
    target = Target(spec="mod.py:remote", runnable=remote, remote=remote)

    with pytest.raises(CliError) as caught:
        _ = target.local

    assert caught.value.exit_code == EXIT_USAGE


def test_a_with_saver_that_fails_leaves_no_database_open(tmp_path, monkeypatch):
    (tmp_path / "odd_mod.py").write_text(
        "from graph_agent import StateGraph, START, END\n"
        "g = StateGraph('g')\n"
        "g.add_node('n', lambda s: {})\n"
        "g.add_edge(START, 'n').add_edge('n', END)\n"
        "base = g.compile()\n"
        "class Odd:\n"
        "    def __init__(self):\n"
        "        self.graph = base\n"
        "        self.name = 'odd'\n"
        "    def __getattr__(self, attribute):\n"
        "        return getattr(base, attribute)\n"
        "    def with_saver(self, saver):\n"
        "        raise ValueError('no saver for me')\n"
        "odd = Odd()\n"
    )
    import graph_agent.cli.targets as targets

    savers: list = []
    real = targets.open_saver

    def tracked(path: str):
        saver = real(path)
        savers.append(saver)
        return saver

    monkeypatch.setattr(targets, "open_saver", tracked)

    with pytest.raises(CliError):
        load_target(f"{tmp_path / 'odd_mod.py'}:odd", db=str(tmp_path / "x.db"))

    assert len(savers) == 1
    with pytest.raises(sqlite3.ProgrammingError):  # closed: its connection refuses work
        savers[0].schema_version()


def test_a_module_remote_graph_is_found_again_without_url(remote_file):
    from graph_agent.cli.targets import Target
    from graph_agent.client import RemoteGraph

    remote = RemoteGraph("http://127.0.0.1:9", "agent")
    from_module = Target(spec=f"{remote_file}:remote", runnable=remote, remote=remote)
    from_url = Target(spec="agent", runnable=remote, remote=remote, by_url=True)

    assert from_module.where(None) == ""
    assert from_url.where(None) == " --url http://127.0.0.1:9"
