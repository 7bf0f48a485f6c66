"""Custom auth (an ``Auth`` object as LangGraph's): users see only what their handlers' filters
let them, new records carry what the handlers add, store namespaces are the user's, and a
failing handler is a clear answer, never a 500 (langgraph-sdk clients over real HTTP, on SQLite
and PostgreSQL)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client

from graph_agent.serve import Auth
from tests.serve.custom_auth_targets import ANN, BOB, auth, sdk_auth
from tests.serve.graphs import approval, chain
from tests.serve.servers import KINDS, Served, serving


@pytest.fixture(scope="module", params=KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("custom_auth")
    with serving(request.param, folder, targets=[chain(), approval()], auth=auth) as running:
        yield running


def _status(call: Callable[[], Any]) -> int:
    with pytest.raises(httpx.HTTPStatusError) as refused:
        call()
    return refused.value.response.status_code


def test_authenticate_refusing_is_a_401_with_its_detail(served: Served) -> None:
    for headers in ({}, {"Authorization": "Bearer guessed"}):
        response = httpx.post(f"{served.url}/threads", json={}, headers=headers)
        assert response.status_code == 401
        assert response.json() == {"detail": "unknown token", "code": "unauthorized"}
    assert _status(lambda: get_sync_client(url=served.url).threads.search()) == 401


def test_the_open_paths_need_no_user(served: Served) -> None:
    for path in ("/ok", "/info", "/openapi.json", "/docs"):
        assert httpx.get(f"{served.url}{path}").status_code == 200


def test_a_failing_authenticate_is_a_503_naming_it_and_the_server_goes_on(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="graph_agent.serve.auth_custom"):
        response = httpx.get(
            f"{served.url}/threads/x", headers={"Authorization": "Bearer boom-token"}
        )
    assert response.status_code == 503
    assert response.json()["code"] == "auth_handler_failed"
    assert "authenticate" in response.json()["detail"]
    assert "authenticate raised RuntimeError" in caplog.text
    assert "identity provider" not in response.text  # the exception stays in the log
    assert get_sync_client(url=served.url, headers=ANN).threads.search() is not None


def test_a_create_handler_stamps_the_thread_and_the_client_cannot_claim_another_owner(
    served: Served,
) -> None:
    ann = get_sync_client(url=served.url, headers=ANN)
    thread = ann.threads.create(metadata={"topic": "plans", "owner": "bob"})
    assert thread["metadata"] == {"topic": "plans", "owner": "ann", "participants": ["ann"]}
    assert ann.threads.get(thread["thread_id"])["metadata"]["owner"] == "ann"


def test_a_user_never_sees_another_users_threads_runs_or_state(served: Served) -> None:
    ann = get_sync_client(url=served.url, headers=ANN)
    bob = get_sync_client(url=served.url, headers=BOB)
    thread_id = ann.threads.create(metadata={"topic": "secret"})["thread_id"]
    assert ann.runs.wait(thread_id, "chain", input={"x": 1}) == {"x": 12}
    run_id = ann.runs.list(thread_id)[0]["run_id"]

    assert _status(lambda: bob.threads.get(thread_id)) == 404
    assert _status(lambda: bob.threads.get_state(thread_id)) == 404
    assert _status(lambda: bob.threads.get_history(thread_id)) == 404
    assert _status(lambda: bob.threads.copy(thread_id)) == 404
    assert _status(lambda: bob.runs.list(thread_id)) == 404
    assert _status(lambda: bob.runs.get(thread_id, run_id)) == 404
    assert _status(lambda: bob.runs.join(thread_id, run_id)) == 404
    assert _status(lambda: bob.runs.wait(thread_id, "chain", input={"x": 5})) == 404
    assert _status(lambda: bob.threads.update_state(thread_id, {"x": 0})) == 404
    assert _status(lambda: bob.threads.delete(thread_id)) == 404
    assert bob.threads.search(metadata={"topic": "secret"}) == []
    # guessing: an id that exists and one that does not answer alike
    missing = str(uuid.uuid4())
    assert httpx.get(f"{served.url}/threads/{missing}", headers=BOB).json()["detail"] == (
        f"thread {missing} not found"
    )

    assert ann.threads.get_state(thread_id)["values"] == {"x": 12}
    assert [t["thread_id"] for t in ann.threads.search(metadata={"topic": "secret"})] == [thread_id]


def test_a_contains_filter_lets_the_listed_participants_in(served: Served) -> None:
    ann = get_sync_client(url=served.url, headers=ANN)
    bob = get_sync_client(url=served.url, headers=BOB)
    shared = ann.threads.create(metadata={"participants": ["bob"], "kind": "shared"})
    assert shared["metadata"]["participants"] == ["ann", "bob"]
    thread_id = shared["thread_id"]
    assert bob.threads.get(thread_id)["thread_id"] == thread_id
    assert bob.runs.wait(thread_id, "chain", input={"x": 2}) == {"x": 13}
    assert [t["thread_id"] for t in bob.threads.search(metadata={"kind": "shared"})] == [thread_id]
    # the create handler's filter is $eq on the owner: bob cannot take the id over
    response = httpx.post(
        f"{served.url}/threads",
        json={"thread_id": thread_id, "if_exists": "do_nothing"},
        headers=BOB,
    )
    assert response.status_code == 409


def test_a_thread_a_run_creates_is_stamped_by_the_create_run_handler(served: Served) -> None:
    ann = get_sync_client(url=served.url, headers=ANN)
    bob = get_sync_client(url=served.url, headers=BOB)
    thread_id = str(uuid.uuid4())
    ann.runs.wait(thread_id, "chain", input={"x": 1}, if_not_exists="create")
    metadata = ann.threads.get(thread_id)["metadata"]
    assert metadata["owner"] == "ann" and metadata["participants"] == ["ann"]
    assert _status(lambda: bob.threads.get(thread_id)) == 404


def test_a_raising_handler_is_a_503_naming_it_and_the_server_goes_on(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="graph_agent.serve.auth_custom"):
        response = httpx.post(
            f"{served.url}/threads", json={"metadata": {"explode": True}}, headers=ANN
        )
    assert response.status_code == 503
    assert response.json() == {
        "detail": "the server's auth handler create_thread failed; its log says why",
        "code": "auth_handler_failed",
    }
    assert "handler create_thread raised RuntimeError" in caplog.text
    assert get_sync_client(url=served.url, headers=ANN).threads.create()["thread_id"]


def test_store_namespaces_are_each_users_own(served: Served) -> None:
    ann = get_sync_client(url=served.url, headers=ANN)
    bob = get_sync_client(url=served.url, headers=BOB)
    ann.store.put_item(["prefs"], "color", {"value": "green"})
    bob.store.put_item(["prefs"], "color", {"value": "red"})

    assert ann.store.get_item(["prefs"], "color")["value"] == {"value": "green"}
    assert bob.store.get_item(["prefs"], "color")["value"] == {"value": "red"}
    # bob cannot reach ann's item by naming her namespace either: it is under his
    assert bob.store.get_item(["ann", "prefs"], "color") is None
    found = ann.store.search_items(["prefs"])["items"]
    assert [(item["namespace"], item["value"]) for item in found] == [
        (["ann", "prefs"], {"value": "green"})
    ]
    assert ann.store.list_namespaces()["namespaces"] == [["ann", "prefs"]]
    bob.store.delete_item(["prefs"], "color")
    assert bob.store.get_item(["prefs"], "color") is None
    assert ann.store.get_item(["prefs"], "color")["value"] == {"value": "green"}


async def test_the_async_client_sees_the_same(served: Served) -> None:
    ann = get_client(url=served.url, headers=ANN)
    bob = get_client(url=served.url, headers=BOB)
    thread_id = (await ann.threads.create(metadata={"topic": "async"}))["thread_id"]
    assert await ann.runs.wait(thread_id, "chain", input={"x": 3}) == {"x": 14}
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await bob.threads.get(thread_id)
    assert refused.value.response.status_code == 404
    assert await bob.threads.search(metadata={"topic": "async"}) == []


def test_a_langgraph_sdk_auth_object_works_as_it_is(tmp_path: Any) -> None:
    with serving("sqlite", tmp_path, targets=[chain()], auth=sdk_auth) as running:
        ann = get_sync_client(url=running.url, headers=ANN)
        bob = get_sync_client(url=running.url, headers=BOB)
        thread_id = ann.threads.create()["thread_id"]
        assert ann.threads.get(thread_id)["metadata"] == {"owner": "ann"}
        assert ann.runs.wait(thread_id, "chain", input={"x": 1}) == {"x": 12}
        assert _status(lambda: bob.threads.get(thread_id)) == 404
        assert _status(lambda: get_sync_client(url=running.url).threads.search()) == 401


def test_an_assert_is_a_403_and_a_filter_the_server_cannot_apply_a_503(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    strict = Auth()
    strict.authenticate(lambda authorization: "ann")

    @strict.on.store
    async def no_store(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> None:
        assert ctx.user.identity == "admin", "only admins use the store"

    @strict.on.threads.search
    async def odd_filter(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> dict[str, Any]:
        return {"owner": {"$ne": "bob"}}

    @strict.on.threads.delete
    async def never(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> bool:
        return False

    with serving("sqlite", tmp_path, targets=[chain()], auth=strict) as running:
        client = get_sync_client(url=running.url)
        refused = httpx.put(
            f"{running.url}/store/items", json={"namespace": ["a"], "key": "k", "value": {}}
        )
        assert refused.status_code == 403
        assert refused.json()["detail"].startswith("only admins use the store")
        with caplog.at_level(logging.ERROR, logger="graph_agent.serve.auth_custom"):
            assert _status(lambda: client.threads.search()) == 503
        assert "odd_filter of threads.search returned a filter on 'owner'" in caplog.text
        thread_id = client.threads.create()["thread_id"]
        assert _status(lambda: client.threads.delete(thread_id)) == 403
        assert client.threads.get(thread_id)["thread_id"] == thread_id
