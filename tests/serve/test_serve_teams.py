"""Teams of agents served like agents (``graph-agent serve module:team``), and served objects
left as they were: the server runs a copy on its own saver, and says when the saver an agent
brought is not the one its threads are served from."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from langgraph_sdk import get_sync_client

from graph_agent.agent.flows import SequentialAgent
from graph_agent.agent.react import ReactAgent
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.checkpoint.sqlite import SqliteSaver
from graph_agent.messages import AssistantMessage
from graph_agent.models.base import ModelRequest
from graph_agent.models.scripted import ScriptedChatModel
from graph_agent.serve import create_app
from tests.serve.conftest import Server, free_port, wait_until_up
from tests.serve.graphs import team

ROOT = Path(__file__).resolve().parents[2]
QUESTION = {"messages": [{"role": "user", "content": "Write about graphs."}]}


def test_a_team_answers_through_the_sdk_and_keeps_its_thread(tmp_path: Path) -> None:
    with Server(tmp_path / "serve.db", targets=[team()]) as server:
        client = get_sync_client(url=server.url)
        assistant = client.assistants.get("pipeline")
        thread = client.threads.create()
        result = client.runs.wait(thread["thread_id"], "pipeline", input=QUESTION)
        state = client.threads.get_state(thread["thread_id"])
        schemas = client.assistants.get_schemas("pipeline")

    assert assistant["metadata"]["kind"] == "agent"
    assert [m["content"] for m in result["messages"]] == [
        "Write about graphs.",
        "Draft 0.",
        "Edited 0.",
    ]
    assert state["values"]["messages"][-1]["content"] == "Edited 0."
    assert "messages" in schemas["input_schema"]["properties"]


def slow_team() -> SequentialAgent:
    """A team whose writer takes a second over each draft: a run of it can be caught running."""

    def slow_draft(request: ModelRequest) -> AssistantMessage:
        time.sleep(1.0)
        return AssistantMessage(content=f"Draft {len(request.messages)}.")

    writer = ReactAgent("writer", ScriptedChatModel([slow_draft, slow_draft]))
    editor = ReactAgent("editor", ScriptedChatModel(["Edited 0.", "Edited 1."]))
    return SequentialAgent("pipeline", [writer, editor])


def test_a_team_run_rolled_back_while_it_runs_leaves_the_thread_as_before(
    tmp_path: Path,
) -> None:
    with Server(tmp_path / "serve.db", targets=[slow_team()]) as server:
        client = get_sync_client(url=server.url)
        thread_id = client.threads.create()["thread_id"]
        client.runs.wait(thread_id, "pipeline", input=QUESTION)
        run = client.runs.create(thread_id, "pipeline", input=QUESTION)
        client.runs.cancel(thread_id, run["run_id"], wait=True, action="rollback")
        state = client.threads.get_state(thread_id)

    assert [m["content"] for m in state["values"]["messages"]] == [
        "Write about graphs.",
        "Draft 1.",
        "Edited 0.",
    ]


def test_serving_an_agent_leaves_its_own_saver_and_says_its_threads_are_not_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    own = SqliteSaver(str(tmp_path / "agent.db"))
    agent = ReactAgent("helper", ScriptedChatModel(["hi"]), saver=own)
    served = SqliteSaver(str(tmp_path / "serve.db"))
    try:
        with caplog.at_level(logging.WARNING, logger="graph_agent.serve"):
            create_app([agent], saver=served)
    finally:
        served.close()
        own.close()

    assert agent.saver is own
    warning = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert "'helper'" in warning and "agent.db" in warning and "serve.db" in warning


def test_an_agent_on_the_default_memory_saver_is_served_without_a_word(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = ReactAgent("helper", ScriptedChatModel(["hi"]))
    before = agent.saver
    with caplog.at_level(logging.WARNING, logger="graph_agent.serve"):
        create_app([agent], saver=MemorySaver())
    assert agent.saver is before
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_graph_agent_serve_serves_a_team_module(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-m", "graph_agent", "serve", "tests/serve/graphs.py:team"]
    server = subprocess.Popen(
        [*command, "--port", str(port), "--db", str(tmp_path / "serve.db")],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}")
        client = get_sync_client(url=f"http://127.0.0.1:{port}")
        result = client.runs.wait(None, "pipeline", input=QUESTION)
    finally:
        server.terminate()
        _, errors = server.communicate(timeout=15)
    assert result["messages"][-1]["content"] == "Edited 0.", errors
