"""Per-run ``interrupt_before`` / ``interrupt_after`` through ``langgraph_sdk``: a run pauses
before (after) the nodes it names (``"*"``: every node), as LangGraph Server's runs do; a run
with no input goes on past the pause; a name that is no node is a 422 naming it. On SQLite and
PostgreSQL records."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client

from tests.serve.servers import KINDS, Served, serving


@pytest.fixture(scope="module", params=KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with serving(request.param, tmp_path_factory.mktemp("breakpoints")) as running:
        yield running


def test_a_run_pauses_before_the_node_it_names_and_goes_on_when_resumed(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    thread = client.threads.create()["thread_id"]
    paused = client.runs.wait(thread, "chain", input={"x": 1}, interrupt_before=["second"])
    assert paused["x"] == 2  # first ran, second did not
    state = client.threads.get_state(thread)
    assert state["next"] == ["second"]
    assert client.threads.get(thread)["status"] == "interrupted"
    run = client.runs.list(thread)[0]
    assert run["kwargs"]["interrupt_before"] == ["second"]
    assert client.runs.wait(thread, "chain", input=None)["x"] == 12
    assert client.threads.get_state(thread)["next"] == []


def test_a_run_pauses_after_the_node_it_names(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    thread = client.threads.create()["thread_id"]
    assert client.runs.wait(thread, "chain", input={"x": 1}, interrupt_after=["first"])["x"] == 2
    assert client.threads.get_state(thread)["next"] == ["second"]
    assert client.runs.wait(thread, "chain", input=None)["x"] == 12


def test_star_pauses_before_every_node_and_the_next_run_without_it_runs_freely(
    served: Served,
) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    thread = client.threads.create()["thread_id"]
    first = client.runs.wait(thread, "chain", input={"x": 1}, interrupt_before="*")
    assert first["x"] == 1  # the input is written; no node ran
    assert [i["node"] for i in first["__interrupt__"]] == ["first"]
    assert client.threads.get_state(thread)["next"] == ["first"]
    again = client.runs.wait(thread, "chain", input=None, interrupt_before="*")
    assert again["x"] == 2  # past first's pause, paused before second
    assert client.threads.get_state(thread)["next"] == ["second"]
    assert client.runs.wait(thread, "chain", input=None)["x"] == 12


def test_a_background_run_with_a_breakpoint_ends_paused(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    thread = client.threads.create()["thread_id"]
    run = client.runs.create(thread, "chain", input={"x": 5}, interrupt_after=["first"])
    assert client.runs.join(thread, run["run_id"])["x"] == 6
    assert client.runs.get(thread, run["run_id"])["status"] == "success"
    assert client.threads.get(thread)["status"] == "interrupted"
    assert client.threads.get_state(thread)["next"] == ["second"]
    resumed = client.runs.create(thread, "chain", input=None)
    assert client.runs.join(thread, resumed["run_id"])["x"] == 16
    assert client.threads.get(thread)["status"] == "idle"


def test_without_breakpoints_the_graph_runs_to_its_end(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    assert client.runs.wait(None, "chain", input={"x": 1})["x"] == 12


def test_an_unknown_node_is_a_422_naming_it(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    thread = client.threads.create()["thread_id"]
    with pytest.raises(httpx.HTTPStatusError) as caught:
        client.runs.wait(thread, "chain", input={"x": 1}, interrupt_before=["second", "nope"])
    assert (
        "interrupt_before" in caught.value.response.text and "'nope'" in caught.value.response.text
    )
    with pytest.raises(httpx.HTTPStatusError) as caught:
        client.runs.wait(thread, "chain", input={"x": 1}, interrupt_after=["sceond"])
    assert "'sceond'" in caught.value.response.text and "second" in caught.value.response.text
    with pytest.raises(httpx.HTTPStatusError) as caught:
        client.runs.wait(thread, "assistant", input={"messages": []}, interrupt_before=["model"])
    assert "only a graph" in caught.value.response.text
    assert caught.value.response.status_code == 422
    assert client.threads.get_state(thread)["values"] == {}  # nothing ran


def test_the_async_client_pauses_and_resumes(served: Served) -> None:
    async def go() -> tuple[list[str], int]:
        client = get_client(url=served.url, api_key=None)
        thread = (await client.threads.create())["thread_id"]
        await client.runs.wait(thread, "chain", input={"x": 0}, interrupt_before=["first"])
        paused = (await client.threads.get_state(thread))["next"]
        done = await client.runs.wait(thread, "chain", input=None)
        return paused, done["x"]

    assert asyncio.run(go()) == (["first"], 11)


def test_a_command_resume_goes_on_past_the_pause(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "chain", input={"x": 1}, interrupt_before=["second"])
    assert client.threads.get_state(thread)["next"] == ["second"]
    assert client.runs.wait(thread, "chain", command={"resume": "go"})["x"] == 12
    assert client.threads.get(thread)["status"] == "idle"
