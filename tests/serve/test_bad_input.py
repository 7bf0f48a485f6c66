"""Bad requests: too big (413), unknown or private input keys (422), unknown paths and methods;
each a JSON body with a detail that says what to fix and a code, never a 500."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from langgraph_sdk import get_sync_client

from tests.serve.conftest import Server
from tests.serve.graphs import agent, chain

LIMIT = 2048
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("strict") / "serve.db"
    with Server(
        db, [chain(), agent()], max_body_bytes=LIMIT, input_keys={"chain": ["x"]}
    ) as running:
        yield running


def test_a_body_over_the_limit_is_a_413_json(strict: Server) -> None:
    body = {"assistant_id": "chain", "input": {"x": 1}, "metadata": {"pad": "a" * LIMIT}}
    response = httpx.post(f"{strict.url}/runs/wait", json=body)
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    assert str(LIMIT) in response.json()["detail"]


def test_a_chunked_body_over_the_limit_is_a_413_too(strict: Server) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"metadata": {"pad": "'
        for _ in range(10):
            yield b"a" * 512
        yield b'"}}'

    response = httpx.post(f"{strict.url}/threads", content=chunks())
    assert response.status_code == 413


def test_a_body_under_the_limit_passes(strict: Server) -> None:
    body = {"assistant_id": "chain", "input": {"x": 1}, "metadata": {"pad": "a" * 100}}
    assert httpx.post(f"{strict.url}/runs/wait", json=body).json() == {"x": 12}


def test_an_unknown_input_key_is_a_422_naming_it_and_the_valid_ones(strict: Server) -> None:
    client = get_sync_client(url=strict.url)
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.wait(None, "chain", input={"x": 1, "typo": 2})
    response = refused.value.response
    assert response.status_code == 422
    assert response.json()["code"] == "unknown_input_key"
    assert "'typo'" in response.json()["detail"] and "x" in response.json()["detail"]


def test_update_state_checks_the_keys_too(strict: Server) -> None:
    client = get_sync_client(url=strict.url)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "chain", input={"x": 1})
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.threads.update_state(thread_id, {"y": 1})
    assert refused.value.response.status_code == 422
    assert "'y'" in refused.value.response.json()["detail"]


def test_an_agents_bookkeeping_keys_are_not_input(strict: Server) -> None:
    body = {"assistant_id": "assistant", "input": {"messages": "hi", "_agent_run": {}}}
    response = httpx.post(f"{strict.url}/runs/wait", json=body)
    assert response.status_code == 422
    assert "_agent_run" in response.json()["detail"]


def test_a_graph_without_declared_keys_takes_any_key(strict: Server) -> None:
    client = get_sync_client(url=strict.url)
    answer = client.runs.wait(None, "assistant", input={"messages": "hi", "topic": "t"})
    assert answer["topic"] == "t"


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/no/such/path", 404, "not_found"),
        ("DELETE", "/ok", 405, "method_not_allowed"),
        ("GET", "/threads/missing", 404, "not_found"),
        ("POST", "/threads", 400, "bad_request"),
    ],
)
def test_every_error_is_json_with_a_code(
    strict: Server, method: str, path: str, status: int, code: str
) -> None:
    response = httpx.request(method, f"{strict.url}{path}", content=b"{not json", headers=JSON)
    assert response.status_code == status
    assert response.json()["code"] == code
    assert isinstance(response.json()["detail"], str)


@pytest.mark.parametrize("limit", [True, False, 0, -1, 2.0, "10"])
def test_a_recursion_limit_that_is_no_positive_integer_is_a_422(
    strict: Server, limit: object
) -> None:
    body = {"assistant_id": "chain", "input": {"x": 1}, "config": {"recursion_limit": limit}}
    response = httpx.post(f"{strict.url}/runs/wait", json=body)
    assert response.status_code == 422
    assert "config.recursion_limit must be a positive integer" in response.json()["detail"]


def test_an_unknown_if_exists_is_a_422_naming_the_choices(strict: Server) -> None:
    body = {"thread_id": "if-exists-nope", "if_exists": "nope"}
    response = httpx.post(f"{strict.url}/threads", json=body)
    assert response.status_code == 422
    assert "if_exists must be raise or do_nothing, not 'nope'" in response.json()["detail"]
    assert httpx.get(f"{strict.url}/threads/if-exists-nope").status_code == 404  # not made
