"""``graph-agent crons list|add|delete`` against a real server on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from graph_agent.cli import main
from graph_agent.cli.errors import EXIT_USAGE
from tests.serve.conftest import Server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with Server(tmp_path_factory.mktemp("crons-cli") / "serve.db", api_keys=["k"]) as running:
        yield running


def _crons(served: Server, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["crons", *args, "--url", served.url, "--api-key", "k"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_add_list_and_delete_a_cron(served: Server, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _crons(
        served,
        capsys,
        "add",
        "chain",
        "0 9 * * 1-5",
        "--input",
        '{"x": 1}',
        "--timezone",
        "Europe/Paris",
        "--keep-threads",
    )
    assert code == 0
    made = json.loads(out)
    assert made["schedule"] == "0 9 * * 1-5" and made["timezone"] == "Europe/Paris"
    assert made["payload"]["input"] == {"x": 1} and made["on_run_completed"] == "keep"
    code, out = _crons(served, capsys, "list")
    assert code == 0
    (line,) = [line for line in out.splitlines() if made["cron_id"] in line]
    assert "0 9 * * 1-5 (Europe/Paris)" in line and "chain" in line and "new thread" in line
    assert _crons(served, capsys, "delete", made["cron_id"]) == (
        0,
        f"deleted cron {made['cron_id']}\n",
    )
    assert made["cron_id"] not in _crons(served, capsys, "list")[1]


def test_a_cron_on_a_thread_is_listed_with_it(
    served: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    thread_id = httpx.post(f"{served.url}/threads", json={}, headers={"x-api-key": "k"}).json()[
        "thread_id"
    ]
    code, out = _crons(served, capsys, "add", "chain", "*/10 * * * *", "--thread", thread_id)
    assert code == 0 and json.loads(out)["thread_id"] == thread_id
    code, out = _crons(served, capsys, "list", "--thread", thread_id)
    assert code == 0 and f"thread {thread_id}" in out and len(out.splitlines()) == 1
    assert _crons(served, capsys, "delete", out.split()[0])[0] == 0


def test_what_the_server_refuses_is_said_with_its_reason(
    served: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _crons(served, capsys, "add", "chain", "61 * * * *")
    assert code == 1 and "422" in out and "Bad minute" in out
    code, out = _crons(served, capsys, "delete", "no-such-cron")
    assert code == 1 and "404" in out and "cron no-such-cron not found" in out
    code, out = _crons(served, capsys, "add", "chain", "* * * * *", "--input", "{x")
    assert code == EXIT_USAGE and "--input is no JSON" in out
    assert main(["crons", "list", "--url", served.url]) == 1  # no key
    assert "--api-key" in capsys.readouterr().err


def test_an_unreachable_server_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crons", "list", "--url", "http://127.0.0.1:1"]) == 1
    assert "cannot reach the server at http://127.0.0.1:1" in capsys.readouterr().err
