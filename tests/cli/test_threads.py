"""``graph-agent threads``: what ``run`` stored, listed, shown, traced and deleted."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.checkpoint.test_sqlite import langgraph_database
from tests.cli.conftest import ROOT, example


@pytest.fixture
def stored(cli):
    """Two demo threads in runs.db: a (one question) and b (two)."""
    for thread, question in (
        ("a", "What is 2 + 2?"),
        ("b", "What is 3 * 3?"),
        ("b", "And 5 kg in lb?"),
    ):
        result = cli(
            "run", "graph_agent.demo:agent", question, "--db", "runs.db", "--thread", thread
        )
        assert result.code == 0, result.err
    return "runs.db"


def test_list_shows_every_thread_with_its_checkpoints_and_size(cli, stored):
    result = cli("threads", "list", "--db", stored)

    assert result.code == 0, result.err
    header, *rows = result.out.splitlines()
    assert header.split() == ["thread", "checkpoints", "step", "next", "updated", "bytes"]
    cells = {row.split()[0]: row.split() for row in rows}
    assert set(cells) == {"a", "b"}
    assert cells["a"][1:4] == ["5", "3", "finished"]
    assert cells["b"][1] == "10"  # two runs of 5 checkpoints
    assert int(cells["b"][-1].replace(",", "")) > int(cells["a"][-1].replace(",", ""))


def test_show_prints_the_state_as_json_without_bookkeeping_keys(cli, stored):
    result = cli("threads", "show", "a", "--db", stored)

    shown = json.loads(result.out)
    assert shown["thread"] == "a" and shown["next"] == [] and shown["interrupts"] == []
    messages = shown["values"]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert messages[3] | {"id": None} == {
        "id": None,
        "role": "tool",
        "name": "calculator",
        "content": "4",
        "tool_call_id": messages[2]["tool_calls"][0]["id"],
        "is_error": False,
    }
    assert not any(key.startswith("_") for key in shown["values"])
    everything = json.loads(cli("threads", "show", "a", "--db", stored, "--all").out)
    assert everything["values"]["_agent_run"]["iterations"] == 1


def test_history_lists_checkpoints_newest_first_with_the_nodes_that_wrote(cli, stored):
    result = cli("threads", "history", "a", "--db", stored)

    header, *rows = result.out.splitlines()
    assert header.split() == ["step", "checkpoint", "written", "by", "next", "time", "bytes"]
    steps = [row.split()[0] for row in rows]
    assert steps == ["3", "2", "1", "0", "-1"]
    assert rows[0].split()[2:4] == ["__model__", "finished"]
    assert rows[1].split()[2:4] == ["__tool__", "__model__"]
    assert "__start__ (input)" in rows[-1]
    assert all(int(row.split()[-1].replace(",", "")) > 0 for row in rows)


def test_show_reads_an_older_checkpoint_from_the_history(cli, stored):
    rows = cli("threads", "history", "a", "--db", stored).out.splitlines()[1:]
    after_tools = rows[1].split()[1]

    shown = json.loads(cli("threads", "show", "a", "--db", stored, "--checkpoint", after_tools).out)

    assert shown["step"] == 2 and shown["next"] == ["__model__"]
    assert shown["values"]["messages"][-1]["role"] == "tool"


def test_history_limit_keeps_the_newest(cli, stored):
    result = cli("threads", "history", "b", "--db", stored, "--limit", "2")

    assert [row.split()[0] for row in result.out.splitlines()[1:]] == ["8", "7"]


def test_delete_forgets_a_thread(cli, stored):
    result = cli("threads", "delete", "a", "--db", stored)

    assert result.code == 0
    assert result.out.startswith("deleted thread a (5 checkpoints, ")
    remaining = cli("threads", "list", "--db", stored).out.splitlines()[1:]
    assert [row.split()[0] for row in remaining] == ["b"]


def test_a_paused_thread_shows_its_interrupt(cli):
    cli(
        "run",
        f"{example('checkpoints.py')}:publisher",
        '{"topic": "t"}',
        "--db",
        "p.db",
        "--thread",
        "p",
    )

    listed = cli("threads", "list", "--db", "p.db").out
    shown = json.loads(cli("threads", "show", "p", "--db", "p.db").out)
    assert listed.splitlines()[1].split()[3] == "paused"
    assert shown["interrupts"][0]["value"]["question"] == "Publish this draft?"
    assert shown["interrupts"][0]["node"] == "approve"


def test_reading_another_programs_database_refuses_it_and_writes_nothing(cli):
    path = langgraph_database(Path("langgraph.sqlite"))
    before = path.read_bytes()

    listed = cli("threads", "list", "--db", str(path))
    shown = cli("threads", "show", "t1", "--db", str(path))

    assert listed.code == shown.code == 1
    assert "is not a graph_agent checkpoint database" in listed.error_lines[0]
    assert "Traceback" not in listed.err + shown.err
    assert path.read_bytes() == before
    tables = sqlite3.connect(path).execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("checkpoints",), ("sqlite_autoindex_checkpoints_1",)]
    assert sorted(p.name for p in Path().iterdir()) == ["langgraph.sqlite"]


def test_a_one_byte_file_is_refused_and_kept_as_it_was(cli):
    Path("x.db").write_bytes(b"x")

    result = cli("threads", "list", "--db", "x.db")

    assert result.code == 1
    assert result.error_lines[0] == (
        "error: x.db is not a usable graph_agent database (file is not a database)"
    )
    assert Path("x.db").read_bytes() == b"x"


@pytest.mark.parametrize("limit", ["-1", "0"])
def test_history_refuses_a_limit_below_one(cli, stored, limit):
    result = cli("threads", "history", "b", "--db", stored, "--limit", limit)

    assert result.code == 2
    assert result.error_lines[-1].endswith(
        f"error: argument --limit: must be 1 or more, got {limit} (leave it out to see every "
        "checkpoint)"
    )
    assert result.out == ""


def test_an_unknown_checkpoint_suggests_the_history_on_the_same_db(cli, stored):
    result = cli("threads", "show", "a", "--db", stored, "--checkpoint", "nope")

    assert result.code == 1
    assert result.error_lines == [
        "error: thread 'a' has no checkpoint 'nope'",
        "hint: list them with: graph-agent threads history a --db runs.db",
    ]


RUNNING_AGENT = """
import threading

from graph_agent import ReactAgent
from graph_agent.messages import AssistantMessage
from graph_agent.models.base import LocalChatModel

started, finish = threading.Event(), threading.Event()


class Model(LocalChatModel):
    def _reply(self, request):
        started.set()
        finish.wait(30)
        return AssistantMessage("done")


agent = ReactAgent("slow", Model())
"""


def test_delete_refuses_a_thread_that_is_running_and_the_run_finishes(cli, tmp_path):
    import sys
    import threading

    from graph_agent.checkpoint.sqlite import SqliteSaver
    from graph_agent.cli.targets import load_target
    from graph_agent.graph.types import RunnableConfig

    (tmp_path / "slow.py").write_text(RUNNING_AGENT)
    cli("run", "graph_agent.demo:agent", "What is 1 + 1?", "--db", "r.db", "--thread", "busy")
    target = load_target(f"{tmp_path / 'slow.py'}:agent", db="r.db")
    module = sys.modules[type(target.runnable.model).__module__]  # its events
    answers = []
    run = threading.Thread(
        target=lambda: answers.append(target.runnable.call("Hi", RunnableConfig(thread_id="busy")))
    )
    run.start()
    try:
        assert module.started.wait(10)
        refused = cli("threads", "delete", "busy", "--db", "r.db")
    finally:
        module.finish.set()
        run.join(10)
        target.close()

    assert refused.code == 1
    assert refused.error_lines == [
        "error: thread 'busy' is running, so it was not deleted",
        "hint: wait for its run to finish (or stop it), then delete it",
    ]
    assert answers[0].text == "done"
    saver = SqliteSaver("r.db")
    assert [m.text for m in saver.get("busy").values["messages"]][-1] == "done"
    saver.close()


def test_the_help_names_exactly_the_threads_actions_there_are(cli):
    listed = cli("--help").out
    (line,) = [line for line in listed.splitlines() if line.split()[:1] == ["threads"]]
    actions = cli("threads", "--help").out.split("positional arguments:")[1]

    named = set(line.replace(",", " ").split()) - {"threads", "or", "stored"}
    existing = {row.split()[0] for row in actions.splitlines()[2:] if row.startswith("    ")}
    assert named == existing == {"list", "show", "history", "delete"}


@pytest.fixture
def server(tmp_path):
    """graph-agent serve on served.db (in tmp_path), its URL; stopped afterwards."""
    from tests.serve.conftest import free_port, wait_until_up

    port = free_port()
    command = [sys.executable, "-m", "graph_agent", "serve", "tests/serve/graphs.py:chain"]
    command += ["--port", str(port), "--db", str(tmp_path / "served.db")]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(15)


def test_delete_of_a_served_thread_takes_it_off_the_running_servers_list(cli, server, tmp_path):
    ran = httpx.post(f"{server}/threads", json={}).json()["thread_id"]
    httpx.post(
        f"{server}/threads/{ran}/runs/wait", json={"assistant_id": "chain", "input": {"x": 1}}
    )
    created = httpx.post(f"{server}/threads", json={}).json()["thread_id"]  # no run: no checkpoint

    deleted = [cli("threads", "delete", thread, "--db", "served.db") for thread in (ran, created)]

    assert [result.code for result in deleted] == [0, 0], deleted
    assert deleted[0].out.startswith(f"deleted thread {ran} (")
    assert deleted[0].out.rstrip().endswith("and the server's record of it")
    for thread in (ran, created):
        assert httpx.get(f"{server}/threads/{thread}").status_code == 404
    assert httpx.post(f"{server}/threads/search", json={}).json() == []


def test_delete_refuses_a_thread_its_server_has_a_run_running_or_waiting_on(cli):
    from graph_agent.cli.serve import records_path
    from graph_agent.serve.records import Records, ThreadRecord, now

    cli("run", "graph_agent.demo:agent", "What is 1 + 1?", "--db", "served.db", "--thread", "t1")
    records = Records(records_path("served.db"))
    records.put_thread(ThreadRecord(thread_id="t1", created_at=now(), updated_at=now()))
    records.set_thread_status("t1", "busy", "demo")  # as the server marks it for a run
    records.close()

    refused = cli("threads", "delete", "t1", "--db", "served.db")

    assert refused.code == 1
    assert refused.error_lines[0] == (
        "error: thread 't1' has a run of graph-agent serve running or waiting, so it was not "
        "deleted"
    )
    kept = Records(records_path("served.db"), serving=False)
    assert kept.thread("t1") is not None
    kept.close()
    assert cli("threads", "show", "t1", "--db", "served.db").code == 0
