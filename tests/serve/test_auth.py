"""API keys: a request needs one, and each key sees only the threads it created (langgraph-sdk
clients with different keys, over real HTTP)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client

from graph_agent.cli.main import main
from graph_agent.serve.auth import binding_problem
from tests.serve.conftest import Server, wait_until_up
from tests.serve.graphs import approval, chain

ANN, BOB = "ann-secret-key-1", "bob-secret-key-2"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("auth") / "serve.db"
    with Server(db, [chain(), approval()], api_keys=[ANN, BOB]) as running:
        yield running


def _status(call: object) -> int:
    with pytest.raises(httpx.HTTPStatusError) as refused:
        call()  # type: ignore[operator]
    return refused.value.response.status_code


def test_a_request_without_a_key_is_a_401_json(keyed: Server) -> None:
    response = httpx.post(f"{keyed.url}/threads", json={})
    assert response.status_code == 401
    assert response.json()["code"] == "unauthorized"
    assert "x-api-key" in response.json()["detail"]


def test_a_wrong_key_is_a_401_that_does_not_echo_it(keyed: Server) -> None:
    response = httpx.get(f"{keyed.url}/threads/x", headers={"x-api-key": "guessed-key"})
    assert response.status_code == 401
    assert "guessed-key" not in response.text


def test_ok_and_the_api_document_need_no_key(keyed: Server) -> None:
    for path in ("/ok", "/openapi.json", "/docs"):
        assert httpx.get(f"{keyed.url}{path}").status_code == 200


def test_a_bearer_token_is_accepted_as_the_key(keyed: Server) -> None:
    headers = {"Authorization": f"Bearer {ANN}"}
    assert httpx.post(f"{keyed.url}/threads", json={}, headers=headers).status_code == 200


def test_a_key_sees_only_its_own_threads_and_others_are_404(keyed: Server) -> None:
    ann = get_sync_client(url=keyed.url, api_key=ANN)
    bob = get_sync_client(url=keyed.url, api_key=BOB)
    thread_id = ann.threads.create(metadata={"topic": "private"})["thread_id"]
    ann.runs.wait(thread_id, "chain", input={"x": 1})
    run_id = ann.runs.list(thread_id)[0]["run_id"]

    assert _status(lambda: bob.threads.get(thread_id)) == 404
    assert _status(lambda: bob.threads.get_state(thread_id)) == 404
    assert _status(lambda: bob.threads.get_history(thread_id)) == 404
    assert _status(lambda: bob.threads.copy(thread_id)) == 404
    assert _status(lambda: bob.runs.list(thread_id)) == 404
    assert _status(lambda: bob.runs.get(thread_id, run_id)) == 404
    assert _status(lambda: bob.runs.join(thread_id, run_id)) == 404
    assert _status(lambda: bob.runs.wait(thread_id, "chain", input={"x": 5})) == 404
    assert bob.threads.search(metadata={"topic": "private"}) == []
    assert thread_id not in {t["thread_id"] for t in bob.threads.search(limit=100)}

    assert ann.threads.get_state(thread_id)["values"] == {"x": 12}
    assert [t["thread_id"] for t in ann.threads.search(metadata={"topic": "private"})] == [
        thread_id
    ]


def test_a_key_cannot_resume_update_or_delete_another_keys_thread(keyed: Server) -> None:
    ann = get_sync_client(url=keyed.url, api_key=ANN)
    bob = get_sync_client(url=keyed.url, api_key=BOB)
    thread_id = ann.threads.create()["thread_id"]
    ann.runs.wait(thread_id, "approval", input={"question": "q"})
    assert ann.threads.get(thread_id)["status"] == "interrupted"

    resume = lambda: bob.runs.wait(thread_id, "approval", command={"resume": "yes"})  # noqa: E731
    assert _status(resume) == 404
    assert _status(lambda: bob.threads.update_state(thread_id, {"answer": "forged"})) == 404
    assert _status(lambda: bob.threads.delete(thread_id)) == 404
    assert _status(lambda: bob.runs.create(thread_id, "approval", if_not_exists="create")) == 404

    assert ann.threads.get(thread_id)["status"] == "interrupted"
    assert ann.runs.wait(thread_id, "approval", command={"resume": "ok"})["answer"] == "ok"
    ann.threads.delete(thread_id)


def test_a_thread_id_another_key_took_is_not_handed_over(keyed: Server) -> None:
    ann = get_sync_client(url=keyed.url, api_key=ANN)
    bob = get_sync_client(url=keyed.url, api_key=BOB)
    ann.threads.create(thread_id="ann-only")
    taken = lambda: bob.threads.create(thread_id="ann-only", if_exists="do_nothing")  # noqa: E731
    assert _status(taken) == 409


def test_metadata_cannot_claim_another_owner(keyed: Server) -> None:
    ann = get_sync_client(url=keyed.url, api_key=ANN)
    bob = get_sync_client(url=keyed.url, api_key=BOB)
    owner = ann.threads.create()["metadata"]["owner"]
    assert ANN not in owner
    forged = bob.threads.create(metadata={"owner": owner})
    assert forged["metadata"]["owner"] != owner
    assert _status(lambda: ann.threads.get(forged["thread_id"])) == 404


def test_the_async_client_carries_its_key_too(keyed: Server) -> None:
    import asyncio

    async def scenario() -> None:
        ann = get_client(url=keyed.url, api_key=ANN)
        bob = get_client(url=keyed.url, api_key=BOB)
        thread_id = (await ann.threads.create())["thread_id"]
        parts = [p async for p in ann.runs.stream(thread_id, "chain", input={"x": 0})]
        assert parts[-1].data == {"x": 11}
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await bob.threads.get_state(thread_id)
        assert refused.value.response.status_code == 404

    asyncio.run(scenario())


def test_binding_beyond_loopback_needs_a_key() -> None:
    assert binding_problem("127.0.0.1", has_keys=False) is None
    assert binding_problem("::1", has_keys=False) is None
    assert binding_problem("localhost", has_keys=False) is None
    assert binding_problem("0.0.0.0", has_keys=True) is None
    assert "0.0.0.0" in (binding_problem("0.0.0.0", has_keys=False) or "")
    assert binding_problem("192.168.1.5", has_keys=False) is not None


def test_serve_refuses_to_listen_on_all_interfaces_without_a_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GRAPH_AGENT_API_KEYS", raising=False)
    assert main(["serve", "tests/serve/graphs.py:chain", "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "refusing to listen on 0.0.0.0 without an API key" in err
    assert "--api-key" in err


def test_serve_takes_its_keys_from_the_environment(tmp_path) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.serve.conftest import free_port

    root = Path(__file__).resolve().parents[2]
    port = free_port()
    command = [sys.executable, "-m", "graph_agent", "serve", "tests/serve/graphs.py:chain"]
    command += ["--port", str(port), "--db", str(tmp_path / "keyed.db")]
    env = {**os.environ, "PYTHONPATH": str(root), "GRAPH_AGENT_API_KEYS": f"{ANN}, {BOB}"}
    server = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert "2 API keys" in line and ANN not in line
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url)
        assert httpx.post(f"{url}/threads", json={}).status_code == 401
        assert get_sync_client(url=url, api_key=BOB).runs.wait(None, "chain", input={"x": 1}) == {
            "x": 12
        }
    finally:
        server.terminate()
        server.wait(15)


def test_remote_graph_and_run_url_carry_the_key(
    keyed: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    from graph_agent import RunnableConfig
    from graph_agent.client import RemoteGraph, RemoteGraphError

    config = RunnableConfig(thread_id="remote-keyed")
    assert RemoteGraph(keyed.url, "chain", api_key=ANN).invoke({"x": 1}, config)["x"] == 12
    with pytest.raises(RemoteGraphError) as other:  # Bob cannot see Ann's thread
        RemoteGraph(keyed.url, "chain", api_key=BOB).get_state(config)
    assert other.value.status == 404
    with pytest.raises(RemoteGraphError) as missing:
        RemoteGraph(keyed.url, "chain").invoke({"x": 1})
    assert missing.value.status == 401 and ANN not in str(missing.value)
    args = ["run", "--url", keyed.url, "chain", '{"x": 2}', "--api-key", ANN, "--plain"]
    assert main(args) == 0
    assert '"x": 13' in capsys.readouterr().out
