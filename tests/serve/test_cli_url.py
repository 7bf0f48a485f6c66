"""graph-agent run|chat --url: the same commands against a served graph or agent."""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterator

import pytest

from graph_agent.cli.main import main
from tests.serve.conftest import Server
from tests.serve.graphs import ANSWERS


def test_run_asks_a_served_agent_and_prints_its_answer(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--url", server.url, "assistant", "Hi", "--plain"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() in ANSWERS  # the served agent's answer, as its model gave it
    assert "thread:" in err  # and how to go on with the thread


def test_run_sends_a_graph_its_json_input_and_prints_the_state(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--url", server.url, "chain", '{"x": 1}', "--plain"]) == 0
    assert json.loads(capsys.readouterr().out) == {"x": 12}


def test_a_pause_is_resumed_on_the_server_with_the_printed_command(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "--url", server.url, "approval", '{"question": "refund?"}', "--plain"]
    assert main([*args, "--thread", "cli-approval"]) == 0
    shown = capsys.readouterr()
    assert f"--url {server.url}" in shown.out + shown.err  # the resume command names the server
    resume = ["run", "--url", server.url, "approval", "--thread", "cli-approval", "--plain"]
    assert main([*resume, "--resume", '"yes"']) == 0
    assert json.loads(capsys.readouterr().out)["answer"] == "yes"


def test_chat_talks_to_a_served_agent_on_one_thread(
    server: Server, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lines: Iterator[str] = iter(["Hello", "/exit"])
    monkeypatch.setattr(builtins, "input", lambda prompt="": next(lines))
    assert main(["chat", "--url", server.url, "assistant", "--thread", "cli-chat", "--plain"]) == 0
    out = capsys.readouterr().out
    assert "new thread cli-chat" in out
    assert any(f"assistant: {answer}" in out for answer in ANSWERS)


def test_bad_url_use_says_what_to_fix(server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--url", server.url, "no-such", "Hi"]) == 2
    assert "this server has" in capsys.readouterr().err
    assert main(["run", "--url", server.url, "assistant", "Hi", "--db", "x.db"]) == 2
    assert "--db and --url" in capsys.readouterr().err
    assert main(["run", "--url", "http://127.0.0.1:9", "assistant", "Hi"]) == 1
    assert "cannot reach" in capsys.readouterr().err


def test_run_runs_a_remote_graph_a_module_defines_as_a_served_one(
    server: Server, tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = tmp_path / "remote_chain.py"
    module.write_text(
        f"from graph_agent.client import RemoteGraph\nchain = RemoteGraph({server.url!r}, 'chain')\n"
    )
    assert main(["run", f"{module}:chain", '{"x": 1}', "--plain", "--thread", "mod-1"]) == 0
    shown = capsys.readouterr()
    assert json.loads(shown.out) == {"x": 12}
    assert "--url" not in shown.err  # the module names the server itself
