"""Assistants created over the served graphs, through langgraph-sdk (sync and async), on SQLite
and PostgreSQL: versions, ``if_exists``, search and count, the system assistants' refusal, the
404s, and runs of every kind running the assistant's graph with its config and context merged
under the run's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from graph_agent import END, START, StateGraph
from graph_agent.client import RemoteGraph
from graph_agent.graph.types import RunnableConfig
from tests.serve.graphs import agent, chain
from tests.serve.servers import KINDS, Served, serving


def settings() -> StateGraph:
    """Writes what its node sees of the run's settings into the state: ``seen`` (the
    ``config.context``) and ``limit`` (the step limit)."""
    graph = StateGraph("settings")
    graph.add_node(
        "read", lambda state, config: {"seen": dict(config.context), "limit": config.max_steps}
    )
    graph.add_edge(START, "read").add_edge("read", END)
    return graph


@pytest.fixture(scope="module", params=KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("assistant-versions")
    with serving(request.param, folder, targets=[settings(), chain(), agent()]) as running:
        yield running


def _create(served: Served, **fields: Any) -> dict[str, Any]:
    client = get_sync_client(url=served.url, api_key=None)
    return dict(client.assistants.create(fields.pop("graph_id", "settings"), **fields))


def test_a_created_assistant_is_version_one_of_its_graph(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    made = client.assistants.create(
        "settings",
        config={"configurable": {"model": "a"}, "recursion_limit": 7},
        metadata={"team": "red"},
        name="Red",
        description="the red one",
    )
    assert made["graph_id"] == "settings" and made["version"] == 1
    assert (made["name"], made["description"]) == ("Red", "the red one")
    assert made["metadata"] == {"team": "red"}
    # as LangGraph Server keeps them: a configurable sent alone fills the context too
    assert made["context"] == {"model": "a"}
    assert client.assistants.get(made["assistant_id"]) == made
    untitled = client.assistants.create("settings", context={"model": "b"})
    assert untitled["name"] == "Untitled"
    assert untitled["config"] == {"configurable": {"model": "b"}}


def test_a_run_of_an_assistant_merges_its_settings_under_the_runs(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    assistant = _create(
        served,
        config={"configurable": {"model": "a", "temperature": 1}, "recursion_limit": 7},
    )
    thread = client.threads.create()
    done = client.runs.wait(
        thread["thread_id"],
        assistant["assistant_id"],
        input={"x": 1},
        config={"configurable": {"extra": True, "thread_id": "not-a-setting"}},
        context={"model": "b"},
    )
    # the run's keys win, key by key; where a run is (thread_id) is no setting of the graph's
    assert done["seen"] == {"model": "b", "temperature": 1, "extra": True}
    assert done["limit"] == 7  # the assistant's recursion_limit, the run sending none
    run = client.runs.list(thread["thread_id"])[0]
    assert run["assistant_id"] == assistant["assistant_id"]
    state = client.threads.get_state(thread["thread_id"])
    assert state["values"]["seen"]["model"] == "b"
    metadata = client.threads.get(thread["thread_id"])["metadata"]
    assert metadata["assistant_id"] == assistant["assistant_id"]
    assert metadata["graph_id"] == "settings"
    again = client.runs.wait(
        thread["thread_id"], assistant["assistant_id"], input={}, config={"recursion_limit": 3}
    )
    assert again["limit"] == 3 and again["seen"] == {"model": "a", "temperature": 1}


def test_every_kind_of_run_resolves_the_assistant(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    assistant_id = _create(served, context={"model": "m"})["assistant_id"]
    expected = {"model": "m"}
    assert client.runs.wait(None, assistant_id, input={})["seen"] == expected
    values = [
        part.data
        for part in client.runs.stream(None, assistant_id, input={}, stream_mode="values")
        if part.event == "values"
    ]
    assert values[-1]["seen"] == expected
    thread_id = client.threads.create()["thread_id"]
    values = [
        part.data
        for part in client.runs.stream(thread_id, assistant_id, input={}, stream_mode="values")
        if part.event == "values"
    ]
    assert values[-1]["seen"] == expected
    background = client.runs.create(thread_id, assistant_id, input={})
    assert client.runs.join(thread_id, background["run_id"])["seen"] == expected
    batch = client.runs.create_batch(
        [{"assistant_id": assistant_id, "input": {}, "on_completion": "keep"}] * 2
    )
    assert [run["assistant_id"] for run in batch] == [assistant_id] * 2
    for run in batch:
        assert client.runs.join(run["thread_id"], run["run_id"])["seen"] == expected


def test_a_patch_makes_a_new_version_and_latest_picks_one(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    first = _create(
        served,
        config={"configurable": {"model": "a"}, "recursion_limit": 5},
        metadata={"team": "red"},
        name="Red",
    )
    assistant_id = first["assistant_id"]
    second = client.assistants.update(assistant_id, context={"model": "b"}, metadata={"k": 1})
    assert second["version"] == 2
    # what is not sent stays; metadata is merged; a context sent alone fills configurable
    assert second["name"] == "Red" and second["graph_id"] == "settings"
    assert second["metadata"] == {"team": "red", "k": 1}
    assert second["config"] == {"recursion_limit": 5, "configurable": {"model": "b"}}
    assert client.runs.wait(None, assistant_id, input={})["seen"] == {"model": "b"}
    third = client.assistants.update(assistant_id, graph_id="chain", name="Chain")
    assert (third["version"], third["graph_id"], third["name"]) == (3, "chain", "Chain")
    assert client.runs.wait(None, assistant_id, input={"x": 1})["x"] == 12
    versions = client.assistants.get_versions(assistant_id)
    assert [v["version"] for v in versions] == [3, 2, 1]
    assert versions[2]["config"] == first["config"] and versions[1]["context"] == {"model": "b"}
    assert [v["version"] for v in client.assistants.get_versions(assistant_id, limit=1)] == [3]
    assert [v["version"] for v in client.assistants.get_versions(assistant_id, {"k": 1})] == [3, 2]
    back = client.assistants.set_latest(assistant_id, 1)
    assert (back["version"], back["graph_id"], back["name"]) == (1, "settings", "Red")
    assert client.assistants.get(assistant_id)["version"] == 1
    assert client.runs.wait(None, assistant_id, input={})["seen"] == {"model": "a"}
    # a change after going back is numbered after the highest, not after the current one
    assert client.assistants.update(assistant_id, name="Four")["version"] == 4
    with pytest.raises(NotFoundError, match="has no version 9"):
        client.assistants.set_latest(assistant_id, 9)


def test_if_exists_raises_or_answers_the_one_there(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    made = _create(served, assistant_id="fixed-id-" + served.url[-5:], name="First")
    with pytest.raises(ConflictError, match="already exists"):
        client.assistants.create("chain", assistant_id=made["assistant_id"], name="Second")
    same = client.assistants.create(
        "chain", assistant_id=made["assistant_id"], name="Second", if_exists="do_nothing"
    )
    assert same == made  # unchanged
    # a served target's id is taken too: by its system assistant
    with pytest.raises(ConflictError):
        client.assistants.create("settings", assistant_id="chain")
    system = client.assistants.create("settings", assistant_id="chain", if_exists="do_nothing")
    assert system["metadata"]["created_by"] == "system" and system["graph_id"] == "chain"


def test_the_served_targets_are_system_assistants_that_refuse_changes(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    system = client.assistants.get("chain")
    assert system["metadata"] == {"created_by": "system", "kind": "graph"}
    for change in (
        lambda: client.assistants.update("chain", name="mine"),
        lambda: client.assistants.delete("chain"),
        lambda: client.assistants.set_latest("chain", 1),
    ):
        with pytest.raises(ConflictError, match="served graph itself"):
            change()
    assert client.assistants.get_versions("chain") == [
        {key: value for key, value in system.items() if key != "updated_at"}
    ]
    assert client.assistants.get("chain") == system


def test_unknown_assistants_and_graphs_are_404s_naming_the_served_ones(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    with pytest.raises(NotFoundError, match="not served; this server serves: assistant"):
        client.assistants.create("no-such-graph")
    for call in (
        lambda: client.assistants.get("missing"),
        lambda: client.assistants.update("missing", name="x"),
        lambda: client.assistants.delete("missing"),
        lambda: client.assistants.get_versions("missing"),
        lambda: client.assistants.set_latest("missing", 1),
        lambda: client.assistants.get_graph("missing"),
    ):
        with pytest.raises(NotFoundError, match="this server has: assistant, chain, settings"):
            call()
    for path in ("/runs/wait", "/runs/batch"):
        body: Any = {"assistant_id": "missing", "input": {}}
        answer = httpx.post(served.url + path, json=[body] if path.endswith("batch") else body)
        assert answer.status_code == 404, path
        assert "this server has: assistant, chain, settings" in answer.json()["detail"]
    made = _create(served)
    with pytest.raises(NotFoundError, match="graph_id 'nope' is not served"):
        client.assistants.update(made["assistant_id"], graph_id="nope")


def test_bad_bodies_are_422s_naming_the_field(served: Served) -> None:
    for body, detail in (
        ({"graph_id": 3}, "graph_id must be a string"),
        ({"graph_id": "settings", "config": {"recursion_limit": 0}}, "recursion_limit must be"),
        ({"graph_id": "settings", "config": {"configurable": [1]}}, "configurable must be"),
        ({"graph_id": "settings", "if_exists": "maybe"}, "if_exists must be raise or do_nothing"),
        ({"graph_id": "settings", "assistant_id": "a/b"}, "cannot name an assistant"),
    ):
        answer = httpx.post(f"{served.url}/assistants", json=body)
        assert answer.status_code == 422 and detail in answer.json()["detail"], body
    run = {"assistant_id": "settings", "input": {}, "config": {"configurable": "x"}}
    answer = httpx.post(f"{served.url}/runs/wait", json=run)
    assert answer.status_code == 422
    assert answer.json()["detail"] == "config.configurable must be a JSON object"
    client = get_sync_client(url=served.url, api_key=None)
    with pytest.raises(UnprocessableEntityError, match="sort_by must be one of"):
        client.assistants.search(sort_by="color")  # type: ignore[arg-type]


def test_search_and_count_filter_sort_and_page(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    tag = served.url[-5:]
    made = [
        _create(served, name=f"{tag} Banana", metadata={"tag": tag}),
        _create(served, name=f"{tag} apple", metadata={"tag": tag, "fruit": "yes"}),
        _create(served, graph_id="chain", name=f"{tag} Cherry", metadata={"tag": tag}),
    ]
    ids = [assistant["assistant_id"] for assistant in made]
    mine = {"tag": tag}
    newest_first = client.assistants.search(metadata=mine)
    assert [a["assistant_id"] for a in newest_first] == ids[::-1]
    by_name = client.assistants.search(metadata=mine, sort_by="name", sort_order="asc")
    assert [a["name"] for a in by_name] == [f"{tag} Banana", f"{tag} Cherry", f"{tag} apple"]
    assert [a["assistant_id"] for a in client.assistants.search(name=f"{tag} APP")] == [ids[1]]
    on_chain = client.assistants.search(graph_id="chain", metadata=mine)
    assert [a["assistant_id"] for a in on_chain] == [ids[2]]
    page = client.assistants.search(metadata=mine, limit=2, response_format="object")
    assert len(page["assistants"]) == 2 and page["next"] == "2"
    rest = client.assistants.search(metadata=mine, limit=2, offset=2, response_format="object")
    assert [a["assistant_id"] for a in rest["assistants"]] == [ids[0]] and rest["next"] is None
    assert client.assistants.count(metadata=mine) == 3
    assert client.assistants.count(metadata={"fruit": "yes", "tag": tag}) == 1
    assert client.assistants.count(graph_id="chain", metadata=mine) == 1
    system = client.assistants.search(metadata={"created_by": "system"})
    assert sorted(a["assistant_id"] for a in system) == ["assistant", "chain", "settings"]


def test_delete_forgets_the_assistant_and_with_delete_threads_its_threads(
    served: Served,
) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    kept, dropped = _create(served), _create(served)
    other = client.threads.create()["thread_id"]
    client.runs.wait(other, kept["assistant_id"], input={})
    ran = client.threads.create()["thread_id"]
    client.runs.wait(ran, dropped["assistant_id"], input={})
    client.assistants.delete(dropped["assistant_id"], delete_threads=True)
    with pytest.raises(NotFoundError):
        client.assistants.get(dropped["assistant_id"])
    with pytest.raises(NotFoundError):
        client.threads.get(ran)
    assert client.threads.get(other)["thread_id"] == other
    ids = [a["assistant_id"] for a in client.assistants.search(limit=100)]
    assert dropped["assistant_id"] not in ids and kept["assistant_id"] in ids
    client.assistants.delete(kept["assistant_id"])
    # its thread stays, and its state still reads (by the graph it ran on)
    assert client.threads.get_state(other)["values"]["seen"] == {}


def test_graph_schemas_and_subgraphs_of_a_created_assistant_are_its_graphs(
    served: Served,
) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    assistant_id = _create(served, graph_id="chain")["assistant_id"]
    assert client.assistants.get_graph(assistant_id) == client.assistants.get_graph("chain")
    assert client.assistants.get_schemas(assistant_id) == client.assistants.get_schemas("chain")
    assert client.assistants.get_subgraphs(assistant_id) == {}


def test_the_async_client_creates_patches_searches_and_runs(served: Served) -> None:
    async def scenario() -> None:
        client = get_client(url=served.url, api_key=None)
        made = await client.assistants.create("settings", context={"model": "async"})
        assistant_id = made["assistant_id"]
        patched = await client.assistants.update(assistant_id, context={"model": "again"})
        assert patched["version"] == 2
        found = await client.assistants.search(metadata={}, limit=100)
        assert assistant_id in [a["assistant_id"] for a in found]
        assert await client.assistants.count() >= 4
        versions = await client.assistants.get_versions(assistant_id)
        assert [v["version"] for v in versions] == [2, 1]
        done = await client.runs.wait(None, assistant_id, input={}, context={"extra": 1})
        assert done["seen"] == {"model": "again", "extra": 1}
        await client.assistants.delete(assistant_id)

    asyncio.run(scenario())


def test_remote_graph_runs_a_created_assistant_and_knows_its_kind(served: Served) -> None:
    on_graph = _create(served, context={"model": "remote"})["assistant_id"]
    remote = RemoteGraph(served.url, on_graph)
    assert not remote.is_agent
    state = remote.invoke({"x": 1}, RunnableConfig(thread_id=f"remote-{served.url[-5:]}"))
    assert state["seen"] == {"model": "remote"}
    on_agent = _create(served, graph_id="assistant")["assistant_id"]
    assert RemoteGraph(served.url, on_agent).is_agent


def test_patches_at_once_get_a_version_each(served: Served) -> None:
    assistant_id = _create(served)["assistant_id"]

    def patch(n: int) -> int:
        client = get_sync_client(url=served.url, api_key=None)
        return int(client.assistants.update(assistant_id, name=f"n{n}")["version"])

    with ThreadPoolExecutor(6) as pool:
        numbers = list(pool.map(patch, range(12)))
    assert sorted(numbers) == list(range(2, 14))
    client = get_sync_client(url=served.url, api_key=None)
    assert [v["version"] for v in client.assistants.get_versions(assistant_id, limit=20)] == list(
        range(13, 0, -1)
    )


@pytest.mark.parametrize("kind", KINDS)
def test_a_key_never_sees_another_keys_assistants(kind: str, tmp_path: Path) -> None:
    with serving(kind, tmp_path, targets=[settings()], api_keys=["key-a", "key-b"]) as running:
        alice = get_sync_client(url=running.url, api_key="key-a")
        bob = get_sync_client(url=running.url, api_key="key-b")
        made = alice.assistants.create("settings", assistant_id="alices", context={"who": "a"})
        assert "owner" in made["metadata"]
        with pytest.raises(NotFoundError):
            bob.assistants.get("alices")
        for change in (
            lambda: bob.assistants.update("alices", name="mine"),
            lambda: bob.assistants.delete("alices"),
            lambda: bob.assistants.get_versions("alices"),
        ):
            with pytest.raises(NotFoundError):
                change()
        # nor may it take the id, nor does do_nothing hand it another key's assistant
        with pytest.raises(ConflictError):
            bob.assistants.create("settings", assistant_id="alices", if_exists="do_nothing")
        assert [a["assistant_id"] for a in bob.assistants.search()] == ["settings"]
        assert bob.assistants.count() == 1 and alice.assistants.count() == 2
        answer = httpx.post(
            f"{running.url}/runs/wait",
            json={"assistant_id": "alices", "input": {}},
            headers={"x-api-key": "key-b"},
        )
        assert answer.status_code == 404
        assert alice.runs.wait(None, "alices", input={})["seen"] == {"who": "a"}
        # a patch cannot hand it to another owner
        patched = alice.assistants.update("alices", metadata={"owner": "someone-else"})
        assert patched["metadata"]["owner"] == made["metadata"]["owner"]
