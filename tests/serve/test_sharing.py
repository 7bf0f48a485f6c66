"""Sharing threads across API keys: ``shared_threads`` (every key sees every thread) and key
groups (a team's keys own their threads together), over real HTTP with langgraph-sdk; the
default (each key its own) is in test_auth.py."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client

from graph_agent.cli.main import main
from graph_agent.serve.auth import callers, fingerprint, key_group, key_groups_from_env
from tests.serve.conftest import Server, free_port, wait_until_up
from tests.serve.graphs import approval, chain

ANN, BOB, CAROL = "ann-secret-key-1", "bob-secret-key-2", "carol-secret-key-3"
ROOT = Path(__file__).resolve().parents[2]


def _status(call: object) -> int:
    with pytest.raises(httpx.HTTPStatusError) as refused:
        call()  # type: ignore[operator]
    return refused.value.response.status_code


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("shared") / "serve.db"
    with Server(db, [chain(), approval()], api_keys=[ANN, BOB], shared_threads=True) as running:
        yield running


@pytest.fixture(scope="module")
def grouped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("grouped") / "serve.db"
    with Server(
        db, [chain(), approval()], api_keys=[CAROL], key_groups={"support": [ANN, BOB]}
    ) as running:
        yield running


def test_shared_threads_let_another_key_read_resume_and_delete(shared: Server) -> None:
    ann = get_sync_client(url=shared.url, api_key=ANN)
    bob = get_sync_client(url=shared.url, api_key=BOB)
    thread_id = ann.threads.create(metadata={"topic": "refund"})["thread_id"]
    ann.runs.wait(thread_id, "approval", input={"question": "refund?"})

    assert bob.threads.get(thread_id)["status"] == "interrupted"
    assert bob.threads.get_state(thread_id)["values"]["draft"] == "reply to refund?"
    assert bob.threads.get_history(thread_id)
    assert thread_id in {t["thread_id"] for t in bob.threads.search(metadata={"topic": "refund"})}
    assert bob.runs.wait(thread_id, "approval", command={"resume": "yes"})["answer"] == "yes"
    assert bob.runs.list(thread_id)
    assert ann.threads.get(thread_id)["metadata"]["owner"] == fingerprint(ANN)  # still its creator
    bob.threads.delete(thread_id)
    assert _status(lambda: ann.threads.get(thread_id)) == 404


def test_shared_threads_still_need_a_valid_key(shared: Server) -> None:
    assert httpx.post(f"{shared.url}/threads/search", json={}).status_code == 401
    stranger = get_sync_client(url=shared.url, api_key="not-a-key")
    assert _status(lambda: stranger.threads.search()) == 401


def test_a_groups_keys_see_each_others_threads_and_no_one_elses(grouped: Server) -> None:
    ann = get_sync_client(url=grouped.url, api_key=ANN)
    bob = get_sync_client(url=grouped.url, api_key=BOB)
    carol = get_sync_client(url=grouped.url, api_key=CAROL)
    team = ann.threads.create()
    assert team["metadata"]["owner"] == "group:support"
    ann.runs.wait(team["thread_id"], "approval", input={"question": "q"})
    assert bob.runs.wait(team["thread_id"], "approval", command={"resume": "ok"})["answer"] == "ok"

    assert _status(lambda: carol.threads.get(team["thread_id"])) == 404
    assert _status(lambda: carol.threads.delete(team["thread_id"])) == 404
    own = carol.threads.create()["thread_id"]
    assert _status(lambda: ann.threads.get(own)) == 404
    assert own not in {t["thread_id"] for t in bob.threads.search(limit=100)}


def test_the_async_client_shares_through_a_group_too(grouped: Server) -> None:
    import asyncio

    async def scenario() -> None:
        ann = get_client(url=grouped.url, api_key=ANN)
        bob = get_client(url=grouped.url, api_key=BOB)
        thread_id = (await ann.threads.create())["thread_id"]
        await ann.runs.wait(thread_id, "chain", input={"x": 1})
        assert (await bob.threads.get_state(thread_id))["values"] == {"x": 12}

    asyncio.run(scenario())


def test_sharing_is_a_setting_of_the_server_not_of_the_threads(tmp_path: Path) -> None:
    db = tmp_path / "serve.db"
    with Server(db, [chain()], api_keys=[ANN, BOB]) as alone:
        ann_own = get_sync_client(url=alone.url, api_key=ANN).threads.create()["thread_id"]
    with Server(db, [chain()], api_keys=[ANN, BOB], shared_threads=True) as everyone:
        bob = get_sync_client(url=everyone.url, api_key=BOB)
        assert bob.threads.get(ann_own)["thread_id"] == ann_own
        bob_shared = bob.threads.create()["thread_id"]
    with Server(db, [chain()], api_keys=[CAROL], key_groups={"team": [ANN, BOB]}) as grouped:
        ann = get_sync_client(url=grouped.url, api_key=ANN)
        assert ann.threads.get(ann_own)["thread_id"] == ann_own  # her own, from before the group
        assert _status(lambda: ann.threads.get(bob_shared)) == 404  # Bob's alone, not the team's
    with Server(db, [chain()], api_keys=[ANN, BOB]) as alone_again:
        bob = get_sync_client(url=alone_again.url, api_key=BOB)
        assert _status(lambda: bob.threads.get(ann_own)) == 404
        assert bob.threads.get(bob_shared)["thread_id"] == bob_shared


def test_key_groups_are_parsed_without_repeating_a_key() -> None:
    assert key_group("support=k1, k2") == ("support", ["k1", "k2"])
    assert key_groups_from_env("a=k1,k2; b=k3") == {"a": ["k1", "k2"], "b": ["k3"]}
    assert key_group("team=abc==")[1] == ["abc=="]  # base64 keys end in '='
    for bad in ("only-a-secret-key", "=secret", "team="):
        with pytest.raises(ValueError) as refused:
            key_group(bad)
        assert "secret" not in str(refused.value)
    with pytest.raises(ValueError, match="both key groups") as twice:
        callers([], {"a": ["secret-k"], "b": ["secret-k"]})
    assert "secret-k" not in str(twice.value)


def test_a_keys_access_names_whose_threads_it_sees() -> None:
    table = callers([CAROL], {"team": [ANN]})
    assert table[ANN].owner == "group:team"
    assert table[ANN].sees == {"group:team", fingerprint(ANN)}
    assert table[CAROL].sees == {fingerprint(CAROL)}
    assert callers([CAROL], shared=True)[CAROL].sees is None


def _serve(argv: list[str], port: int, env: dict[str, str]) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "graph_agent", "serve", *argv, "--port", str(port)]
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.Popen(command, cwd=ROOT, env=full_env, stdout=subprocess.PIPE, text=True)


def test_serve_shared_threads_from_the_command_line(tmp_path: Path) -> None:
    port = free_port()
    argv = ["tests/serve/graphs.py:chain", "--db", str(tmp_path / "s.db"), "--shared-threads"]
    argv += ["--api-key", ANN, "--api-key", BOB]
    server = _serve(argv, port, {})
    try:
        assert server.stdout is not None
        assert "2 API keys sharing every thread" in server.stdout.readline()
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url)
        thread_id = get_sync_client(url=url, api_key=ANN).threads.create()["thread_id"]
        assert get_sync_client(url=url, api_key=BOB).threads.get(thread_id)
    finally:
        server.terminate()
        server.wait(15)


def test_serve_reads_key_groups_from_the_environment_and_sharing_from_a_file(
    tmp_path: Path,
) -> None:
    port = free_port()
    config = tmp_path / "serve.toml"
    config.write_text(f'targets = ["{ROOT}/tests/serve/graphs.py:chain"]\nshared_threads = false\n')
    env = {"GRAPH_AGENT_KEY_GROUPS": f"support={ANN},{BOB}", "GRAPH_AGENT_API_KEYS": CAROL}
    server = _serve([str(config), "--db", str(tmp_path / "s.db")], port, env)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert "3 API keys" in line and ANN not in line and "sharing" not in line
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url)
        thread_id = get_sync_client(url=url, api_key=ANN).threads.create()["thread_id"]
        assert get_sync_client(url=url, api_key=BOB).threads.get(thread_id)
        assert (
            _status(lambda: get_sync_client(url=url, api_key=CAROL).threads.get(thread_id)) == 404
        )
    finally:
        server.terminate()
        server.wait(15)


def test_a_malformed_key_group_is_a_usage_error_that_keeps_the_key_secret(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["serve", "tests/serve/graphs.py:chain", "--key-group", "s3cr3t-key"]) == 2
    err = capsys.readouterr().err
    assert "NAME=KEY" in err and "s3cr3t" not in err
