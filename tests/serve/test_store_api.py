"""The store over HTTP (``/store/...``) through ``langgraph-sdk``'s ``client.store``, sync and
async, on every store the server may serve: in memory, SQLite and PostgreSQL (an index with
the local HashEmbeddings, so a query ranks by meaning)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client

from graph_agent.store import BaseStore, HashEmbeddings, InMemoryStore, SqliteStore
from graph_agent.store.postgres import PostgresStore
from tests.checkpoint.postgres_db import fresh_schema
from tests.serve.conftest import Server, free_port, wait_until_up
from tests.serve.graphs import chain

ROOT = Path(__file__).resolve().parents[2]
INDEX = {"embed": HashEmbeddings(64), "fields": ["text"]}


def _open(kind: str, folder: Path, stack: ExitStack) -> BaseStore:
    if kind == "memory":
        return InMemoryStore(index=INDEX)
    if kind == "sqlite":
        return SqliteStore(folder / "store.db", index=INDEX)
    return PostgresStore(stack.enter_context(fresh_schema()), pool_size=2, index=INDEX)


@pytest.fixture(scope="module", params=["memory", "sqlite", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("store")
    with ExitStack() as stack:
        store = _open(request.param, folder, stack)
        stack.callback(store.close)
        yield stack.enter_context(Server(folder / "serve.db", [chain()], store=store))


@pytest.fixture
def ns() -> str:
    """A namespace root of the test's own (the server is shared by the module's tests)."""
    return f"t{uuid.uuid4().hex[:8]}"


def test_put_get_and_delete_an_item(served: Server, ns: str) -> None:
    client = get_sync_client(url=served.url)
    client.store.put_item([ns, "u1"], key="profile", value={"name": "Ada"})
    item = client.store.get_item([ns, "u1"], key="profile")
    assert (item["namespace"], item["key"], item["value"]) == (
        [ns, "u1"],
        "profile",
        {"name": "Ada"},
    )
    assert item["created_at"] == item["updated_at"] and "T" in item["created_at"]
    client.store.put_item([ns, "u1"], key="profile", value={"name": "Ada L."}, ttl=60)
    again = client.store.get_item([ns, "u1"], key="profile", refresh_ttl=False)
    assert again["value"] == {"name": "Ada L."} and again["created_at"] == item["created_at"]
    client.store.delete_item([ns, "u1"], key="profile")
    assert client.store.get_item([ns, "u1"], key="profile") is None  # as LangGraph: null
    client.store.delete_item([ns, "u1"], key="profile")  # deleting nothing is fine


def test_search_filters_and_pages_newest_first(served: Server, ns: str) -> None:
    client = get_sync_client(url=served.url)
    for n in range(5):
        kind = "fact" if n % 2 == 0 else "chat"
        client.store.put_item([ns, "notes"], key=f"k{n}", value={"n": n, "kind": kind})
    client.store.put_item([ns, "other"], key="x", value={"n": 9, "kind": "fact"})
    found = client.store.search_items([ns, "notes"], limit=10)["items"]
    assert {item["key"] for item in found} == {f"k{n}" for n in range(5)}
    assert all(item["score"] is None for item in found)
    facts = client.store.search_items([ns], filter={"kind": "fact"}, limit=10)["items"]
    assert sorted(item["value"]["n"] for item in facts) == [0, 2, 4, 9]
    big = client.store.search_items([ns, "notes"], filter={"n": {"$gte": 2}}, limit=10)
    assert sorted(item["value"]["n"] for item in big["items"]) == [2, 3, 4]
    pages = [
        client.store.search_items([ns, "notes"], limit=2, offset=o)["items"] for o in (0, 2, 4)
    ]
    assert [len(page) for page in pages] == [2, 2, 1]
    assert {item["key"] for page in pages for item in page} == {f"k{n}" for n in range(5)}


def test_a_query_ranks_by_the_index(served: Server, ns: str) -> None:
    client = get_sync_client(url=served.url)
    client.store.put_item([ns], key="tea", value={"text": "she likes green tea"})
    client.store.put_item([ns], key="code", value={"text": "he writes rust code"})
    client.store.put_item([ns], key="hidden", value={"text": "green tea too"}, index=False)
    found = client.store.search_items([ns], query="green tea", limit=2)["items"]
    assert found[0]["key"] == "tea" and found[0]["score"] > 0.5
    assert "hidden" not in [item["key"] for item in found]


def test_namespaces_by_prefix_suffix_and_depth(served: Server, ns: str) -> None:
    client = get_sync_client(url=served.url)
    for where in ([ns, "a", "x"], [ns, "a", "y"], [ns, "b", "x"], [ns, "c"]):
        client.store.put_item(where, key="k", value={})
    listed = client.store.list_namespaces(prefix=[ns])["namespaces"]
    assert listed == [[ns, "a", "x"], [ns, "a", "y"], [ns, "b", "x"], [ns, "c"]]
    assert client.store.list_namespaces(prefix=[ns], max_depth=2)["namespaces"] == [
        [ns, "a"],
        [ns, "b"],
        [ns, "c"],
    ]
    assert client.store.list_namespaces(prefix=[ns], suffix=["x"])["namespaces"] == [
        [ns, "a", "x"],
        [ns, "b", "x"],
    ]
    cut = client.store.list_namespaces(prefix=[ns], suffix=["x"], max_depth=2, limit=1, offset=1)
    assert cut["namespaces"] == [[ns, "b"]]
    paged = client.store.list_namespaces(prefix=[ns], limit=2, offset=1)["namespaces"]
    assert paged == [[ns, "a", "y"], [ns, "b", "x"]]
    starred = client.store.list_namespaces(prefix=[ns, "*", "x"], max_depth=2)["namespaces"]
    assert starred == [[ns, "a"], [ns, "b"]]  # "*": any label, as in LangGraph
    assert client.store.list_namespaces(suffix=["*", "x"], prefix=[ns])["namespaces"] == [
        [ns, "a", "x"],
        [ns, "b", "x"],
    ]


def test_the_async_client_drives_the_same_store(served: Server, ns: str) -> None:
    async def scenario() -> None:
        client = get_client(url=served.url)
        await client.store.put_item([ns, "u2"], key="k", value={"text": "async tea"})
        item = await client.store.get_item([ns, "u2"], key="k")
        assert item["value"] == {"text": "async tea"}
        found = await client.store.search_items([ns], filter={"text": "async tea"})
        assert [i["key"] for i in found["items"]] == ["k"]
        assert (await client.store.list_namespaces(prefix=[ns]))["namespaces"] == [[ns, "u2"]]
        await client.store.delete_item([ns, "u2"], key="k")
        assert await client.store.get_item([ns, "u2"], key="k") is None

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("method", "path", "body", "detail"),
    [
        ("PUT", "/store/items", {"namespace": ["a.b"], "key": "k", "value": {}}, "namespace must"),
        ("PUT", "/store/items", {"namespace": [""], "key": "k", "value": {}}, "namespace must"),
        ("PUT", "/store/items", {"namespace": "a", "key": "k", "value": {}}, "namespace must"),
        ("PUT", "/store/items", {"namespace": ["a"], "key": "", "value": {}}, "key must be"),
        ("PUT", "/store/items", {"namespace": ["a"], "key": "k", "value": [1]}, "value must be"),
        ("PUT", "/store/items", {"namespace": ["a"], "key": "k", "value": {}, "ttl": -1}, "ttl"),
        ("PUT", "/store/items", {"namespace": [], "key": "k", "value": {}}, "needs a namespace"),
        ("DELETE", "/store/items", {"namespace": ["a"], "key": 3}, "key must be"),
        ("POST", "/store/items/search", {"namespace_prefix": ["a."]}, "namespace_prefix must"),
        ("POST", "/store/items/search", {"filter": {"n": {"$near": 1}}}, "$near"),
        ("POST", "/store/items/search", {"limit": -1}, "must not be negative"),
        ("POST", "/store/namespaces", {"suffix": ["x."]}, "suffix must"),
        ("POST", "/store/namespaces", {"max_depth": 0}, "max_depth must be a positive"),
    ],
)
def test_bad_input_is_a_422_naming_the_field(
    served: Server, method: str, path: str, body: dict[str, Any], detail: str
) -> None:
    response = httpx.request(method, f"{served.url}{path}", json=body)
    assert response.status_code == 422, response.text
    assert detail in response.json()["detail"]


@pytest.mark.parametrize(
    ("params", "detail"),
    [
        ({"namespace": "a..b", "key": "k"}, "namespace must be labels joined by periods"),
        ({"key": "k"}, "namespace must be"),
        ({"namespace": "a"}, "key must be a non-empty string"),
        ({"namespace": "a", "key": "k", "refresh_ttl": "maybe"}, "refresh_ttl must be"),
    ],
)
def test_a_bad_get_is_a_422(served: Server, params: dict[str, str], detail: str) -> None:
    response = httpx.get(f"{served.url}/store/items", params=params)
    assert response.status_code == 422, response.text
    assert detail in response.json()["detail"]


def test_the_sdk_sees_a_422_and_a_query_without_an_index_is_one(tmp_path: Path) -> None:
    with Server(tmp_path / "serve.db", [chain()]) as plain:  # the default: an InMemoryStore
        client = get_sync_client(url=plain.url)
        client.store.put_item(["n"], key="k", value={"text": "tea"})
        assert client.store.get_item(["n"], key="k")["value"] == {"text": "tea"}
        with pytest.raises(httpx.HTTPStatusError) as raised:
            client.store.search_items(["n"], query="tea")
        assert raised.value.response.status_code == 422
        assert "no index" in raised.value.response.json()["detail"]


def _serve(where: list[str]) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    command = [sys.executable, "-m", "graph_agent", "serve", "tests/serve/graphs.py:chain"]
    server = subprocess.Popen(
        [*command, "--port", str(port), *where],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url)
    except RuntimeError:
        server.kill()
        raise
    return server, url


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_graph_agent_serve_keeps_the_store_across_restarts(kind: str, tmp_path: Path) -> None:
    """``serve`` keeps its store next to the threads: a SQLite file beside ``--db``
    (``serve.store.db``), or the ``--postgres`` database."""
    with ExitStack() as stack:
        if kind == "sqlite":
            where = ["--db", str(tmp_path / "serve.db")]
        else:
            where = ["--postgres", stack.enter_context(fresh_schema())]
        for attempt in range(2):
            server, url = _serve(where)
            try:
                client = get_sync_client(url=url)
                if attempt == 0:
                    client.store.put_item(["users", "u1"], key="k", value={"text": "kept"})
                else:
                    assert client.store.get_item(["users", "u1"], key="k")["value"] == {
                        "text": "kept"
                    }
            finally:
                server.terminate()
                server.wait(15)
        if kind == "sqlite":
            assert (tmp_path / "serve.store.db").exists()


def test_with_api_keys_any_valid_key_uses_the_store_and_no_key_none(tmp_path: Path) -> None:
    with Server(tmp_path / "serve.db", [chain()], api_keys=["key-a", "key-b"]) as keyed:
        get_sync_client(url=keyed.url, api_key="key-a").store.put_item(
            ["team"], key="k", value={"by": "a"}
        )
        other = get_sync_client(url=keyed.url, api_key="key-b")
        assert other.store.get_item(["team"], key="k")["value"] == {"by": "a"}
        anonymous = httpx.get(f"{keyed.url}/store/items", params={"namespace": "team", "key": "k"})
        assert anonymous.status_code == 401
        searched = httpx.post(f"{keyed.url}/store/items/search", json={})
        assert searched.status_code == 401
