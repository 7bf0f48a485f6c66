"""Input keys of an assistant with no declaration: any key but the graph's private ones, for a
graph compiled before it is served as for one the server compiles; ``input_keys`` (and
``graph-agent serve --input-keys``, or a config file's ``input_keys``) closes the input to a
list. Real HTTP, langgraph-sdk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client

from graph_agent import END, START, StateGraph
from graph_agent.cli.main import main
from graph_agent.serve import create_app
from tests.serve.conftest import Server, free_port, wait_until_up
from tests.serve.graphs import chain

ROOT = Path(__file__).resolve().parents[2]


def counted() -> StateGraph:
    """Adds ``x`` to ``total``; counts its runs in the private key ``_runs``."""
    graph = StateGraph("counted", private_keys=["_runs"])
    graph.add_node(
        "add",
        lambda state: {
            "total": state.get("total", 0) + state["x"],
            "_runs": state.value("_runs", 0) + 1,
        },
    )
    graph.add_edge(START, "add").add_edge("add", END)
    return graph


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("input-keys") / "serve.db"
    compiled = counted().compile()
    declared = chain().compile()
    with Server(db, [compiled, declared], input_keys={"chain": ["x"]}) as running:
        yield running


def _refusal(call: object) -> dict[str, str]:
    with pytest.raises(httpx.HTTPStatusError) as refused:
        call()  # type: ignore[operator]
    assert refused.value.response.status_code == 422
    body: dict[str, str] = refused.value.response.json()
    return body


def test_a_compiled_graph_takes_any_key_but_its_private_ones(served: Server) -> None:
    client = get_sync_client(url=served.url)
    assert client.runs.wait(None, "counted", input={"x": 2, "note": "free"}) == {
        "x": 2,
        "note": "free",
        "total": 2,
    }
    body = _refusal(lambda: client.runs.wait(None, "counted", input={"x": 1, "_runs": 99}))
    assert body["code"] == "unknown_input_key"
    assert "'_runs'" in body["detail"] and "bookkeeping" in body["detail"]


def test_its_private_keys_cannot_be_written_through_update_state_either(served: Server) -> None:
    client = get_sync_client(url=served.url)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "counted", input={"x": 1})
    assert (
        "_runs" in _refusal(lambda: client.threads.update_state(thread_id, {"_runs": 0}))["detail"]
    )
    resume = lambda: client.runs.wait(  # noqa: E731
        thread_id, "counted", command={"update": {"_runs": 0}, "goto": "add"}
    )
    assert "command.update" in _refusal(resume)["detail"]


def test_declared_keys_close_a_compiled_graphs_input(served: Server) -> None:
    client = get_sync_client(url=served.url)
    body = _refusal(lambda: client.runs.wait(None, "chain", input={"x": 1, "y": 2}))
    assert "'y'" in body["detail"] and "input keys are: x" in body["detail"]
    assert client.runs.wait(None, "chain", input={"x": 1}) == {"x": 12}
    schema = client.assistants.get_schemas("chain")["input_schema"]
    assert schema == {"type": "object", "properties": {"x": {}}, "additionalProperties": False}


def test_the_schemas_leave_private_keys_out(served: Server) -> None:
    state = get_sync_client(url=served.url).assistants.get_schemas("counted")["state_schema"]
    assert "_runs" not in state.get("properties", {})


def test_declaring_a_private_or_unserved_key_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="_runs of counted are its private bookkeeping"):
        create_app([counted()], input_keys={"counted": ["x", "_runs"]})
    with pytest.raises(ValueError, match="'nobody', which is not served"):
        create_app([counted()], input_keys={"nobody": ["x"]})


def _serve(argv: list[str], port: int) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "graph_agent", "serve", *argv, "--port", str(port)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)


def test_serve_input_keys_closes_the_one_targets_input(tmp_path: Path) -> None:
    port = free_port()
    argv = ["tests/serve/graphs.py:chain", "--db", str(tmp_path / "s.db"), "--input-keys", "x"]
    server = _serve(argv, port)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url)
        client = get_sync_client(url=url)
        assert client.runs.wait(None, "chain", input={"x": 1}) == {"x": 12}
        assert "'y'" in _refusal(lambda: client.runs.wait(None, "chain", input={"y": 1}))["detail"]
    finally:
        server.terminate()
        server.wait(15)


def test_a_config_files_input_keys_apply_by_assistant_id(tmp_path: Path) -> None:
    port = free_port()
    config = {
        "graphs": {
            "counter": {"path": str(ROOT / "tests/serve/graphs.py") + ":chain", "input_keys": ["x"]}
        },
        "input_keys": {"approval": ["question"]},
        "targets": [str(ROOT / "tests/serve/graphs.py") + ":approval"],
        "db": "serve.db",
    }
    (tmp_path / "serve.json").write_text(json.dumps(config))
    server = _serve([str(tmp_path / "serve.json")], port)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url)
        client = get_sync_client(url=url)
        assert (
            "'y'" in _refusal(lambda: client.runs.wait(None, "counter", input={"y": 1}))["detail"]
        )
        wrong = lambda: client.runs.wait(None, "approval", input={"question": "q", "draft": "d"})  # noqa: E731
        assert "'draft'" in _refusal(wrong)["detail"]
    finally:
        server.terminate()
        server.wait(15)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["tests/serve/graphs.py:chain", "tests/serve/graphs.py:slow", "--input-keys", "x"],
            "several assistants are served",
        ),
        (["tests/serve/graphs.py:chain", "--input-keys", "nobody=x"], "'nobody', which is not"),
    ],
)
def test_serve_refuses_input_keys_it_cannot_place(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", *argv, "--db", str(tmp_path / "s.db")]) == 2
    assert message in capsys.readouterr().err
