"""``stream_subgraphs=True`` through ``langgraph_sdk``, on SQLite and PostgreSQL: the events of a
subgraph node and of the agents of a team come named ``<mode>|<namespace>`` (the namespace's
first part ``<node>:<task id>``, as LangGraph's), beside the run's own events, which stay as
they are; without it, nothing nested is sent. ``stream_mode="events"`` is a 422 naming the modes
there are."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import UnprocessableEntityError

from graph_agent import END, START, StateGraph
from tests.serve.graphs import team
from tests.serve.servers import KINDS, Served, serving


def outer() -> StateGraph:
    """``prepare`` then ``inner``, a subgraph that adds one twice (``one``, ``two``)."""
    child = StateGraph("inner")
    child.add_node("one", lambda state: {"x": state["x"] + 1})
    child.add_node("two", lambda state: {"x": state["x"] + 1})
    child.add_edge(START, "one").add_edge("one", "two").add_edge("two", END)
    graph = StateGraph("outer")
    graph.add_node("prepare", lambda state: {"x": state["x"] * 10})
    graph.add_node("inner", child.compile())
    graph.add_edge(START, "prepare").add_edge("prepare", "inner").add_edge("inner", END)
    return graph


@pytest.fixture(scope="module", params=KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("subgraphs")
    with serving(request.param, folder, targets=[outer(), team()]) as running:
        yield running


def _parts(served: Served, assistant: str, payload: Any, **options: Any) -> list[Any]:
    client = get_sync_client(url=served.url, api_key=None)
    thread = client.threads.create()
    return list(client.runs.stream(thread["thread_id"], assistant, input=payload, **options))


def test_a_subgraphs_events_carry_its_namespace(served: Served) -> None:
    parts = _parts(served, "outer", {"x": 1}, stream_mode="updates", stream_subgraphs=True)
    top = [p.data for p in parts if p.event == "updates"]
    assert top == [{"prepare": {"x": 10}}, {"inner": {"x": 12}}]
    nested = [p for p in parts if p.event.startswith("updates|")]
    assert [p.data for p in nested] == [{"one": {"x": 11}}, {"two": {"x": 12}}]
    (namespace,) = {p.event.split("|", 1)[1] for p in nested}
    node, _, task_id = namespace.partition(":")
    assert node == "inner" and task_id  # as LangGraph's: <node>:<task id>

    # the SDK's v2 parts read it as LangGraph's namespace
    async def v2() -> list[Any]:
        client = get_client(url=served.url, api_key=None)
        thread = await client.threads.create()
        stream = client.runs.stream(
            thread["thread_id"],
            "outer",
            input={"x": 1},
            stream_mode="values",
            stream_subgraphs=True,
            version="v2",
        )
        return [part async for part in stream]

    values = [p for p in asyncio.run(v2()) if p["type"] == "values"]
    assert [p["data"] for p in values if p["ns"] == []][-1] == {"x": 12}
    inner = [p for p in values if p["ns"]]
    assert inner and all(p["ns"][0].startswith("inner:") for p in inner)
    assert inner[-1]["data"] == {"x": 12}


def test_without_stream_subgraphs_nothing_nested_is_sent(served: Served) -> None:
    parts = _parts(served, "outer", {"x": 1}, stream_mode=["updates", "values"])
    assert not [p for p in parts if "|" in p.event]
    assert [p.data for p in parts if p.event == "values"][-1] == {"x": 12}


def test_the_agents_of_a_team_stream_under_their_names(served: Served) -> None:
    message = {"messages": [{"type": "human", "content": "Write."}]}
    parts = _parts(served, "pipeline", message, stream_mode="updates", stream_subgraphs=True)
    namespaces = {p.event.split("|", 1)[1] for p in parts if p.event.startswith("updates|")}
    assert {namespace.split(":")[0] for namespace in namespaces} == {"writer", "editor"}
    top = [next(iter(p.data)) for p in parts if p.event == "updates"]
    assert top[-2:] == ["writer", "editor"]


def test_stream_mode_events_is_refused_naming_the_modes_there_are(served: Served) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    with pytest.raises(UnprocessableEntityError) as caught:
        list(client.runs.stream(None, "outer", input={"x": 1}, stream_mode="events"))
    detail = caught.value.response.json()["detail"]
    assert "'events'" in detail and "values" in detail and "messages-tuple" in detail
