"""An assistant's graph (JSON, Mermaid, DOT; subgraphs opened with ``xray``), its schemas and
its subgraphs' schemas, and a paused thread's pending interrupts, through langgraph-sdk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client

from graph_agent import END, START, AppendStrategy, StateGraph
from tests.serve.conftest import Server
from tests.serve.graphs import agent, approval, chain


def nested() -> StateGraph:
    """``outer`` runs ``chain`` as its node ``inner``; ``log`` is appended to."""
    graph = StateGraph("outer", key_strategies={"log": AppendStrategy()})
    graph.add_node("inner", chain().compile())
    graph.add_node("note", lambda state: {"log": "done"})
    graph.add_edge(START, "inner").add_edge("inner", "note").add_edge("note", END)
    return graph


def deep() -> StateGraph:
    """``deep`` runs ``outer`` (which runs ``chain``) as ``middle``, and an agent as ``helper``."""
    graph = StateGraph("deep")
    graph.add_node("middle", nested().compile())
    graph.add_node("helper", agent())
    graph.add_edge(START, "middle").add_edge("middle", "helper").add_edge("helper", END)
    return graph


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db: Path = tmp_path_factory.mktemp("assistants") / "serve.db"
    targets = [chain(), approval(), agent(), nested(), deep()]
    with Server(db, targets, input_keys={"approval": ["question"]}) as running:
        yield running


def test_the_graph_is_langgraph_json_and_xray_opens_subgraphs(served: Server) -> None:
    client = get_sync_client(url=served.url)
    flat = client.assistants.get_graph("outer")
    assert [n["id"] for n in flat["nodes"]] == ["__start__", "inner", "note", "__end__"]
    assert {(e["source"], e["target"]) for e in flat["edges"]} == {
        ("__start__", "inner"),
        ("inner", "note"),
        ("note", "__end__"),
    }
    opened = client.assistants.get_graph("outer", xray=True)
    assert [n["id"] for n in opened["nodes"]] == [
        "__start__",
        "inner:first",
        "inner:second",
        "note",
        "__end__",
    ]  # LangGraph's names; the subgraph's own start and end are left out
    assert {(e["source"], e["target"]) for e in opened["edges"]} == {
        ("__start__", "inner:first"),
        ("inner:first", "inner:second"),
        ("inner:second", "note"),
        ("note", "__end__"),
    }
    assert client.assistants.get_graph("outer", xray=1)["nodes"] == opened["nodes"]
    assert client.assistants.get_graph("outer", xray=0)["nodes"] == flat["nodes"]


def test_graph_nodes_carry_langgraphs_data(served: Server) -> None:
    nodes = {
        n["id"]: n for n in get_sync_client(url=served.url).assistants.get_graph("deep")["nodes"]
    }
    assert nodes["__start__"] == {"id": "__start__", "type": "schema", "data": "__start__"}
    assert nodes["__end__"] == {"id": "__end__", "type": "schema", "data": "__end__"}
    middle = nodes["middle"]
    assert middle["type"] == "runnable" and middle["data"]["name"] == "middle"
    assert middle["data"]["id"][-1] == "CompiledGraph"
    note = get_sync_client(url=served.url).assistants.get_graph("outer")["nodes"][2]
    assert note["data"] == {"id": ["graph_agent", "graph", "Node"], "name": "note"}


def test_xray_opens_as_many_levels_as_asked(served: Server) -> None:
    client = get_sync_client(url=served.url)
    one = [n["id"] for n in client.assistants.get_graph("deep", xray=1)["nodes"]]
    assert "middle:inner" in one and "middle:note" in one and "helper" not in one
    every = [n["id"] for n in client.assistants.get_graph("deep", xray=True)["nodes"]]
    assert {"middle:inner:first", "middle:inner:second", "middle:note"} <= set(every)
    assert "middle:inner" not in every
    edges = {
        (e["source"], e["target"]) for e in client.assistants.get_graph("deep", xray=2)["edges"]
    }
    assert ("__start__", "middle:inner:first") in edges
    assert ("middle:inner:second", "middle:note") in edges


def test_subgraphs_are_listed_by_namespace(served: Server) -> None:
    client = get_sync_client(url=served.url)
    assert sorted(client.assistants.get_subgraphs("deep")) == ["helper", "middle"]
    everything = client.assistants.get_subgraphs("deep", recurse=True)
    assert "middle|inner" in everything and "middle" in everything
    assert client.assistants.get_subgraphs("chain") == {}
    middle = everything["middle"]
    assert "graph_id" not in middle
    assert middle["state_schema"]["properties"] == {
        "log": {"type": "array", "description": "appended to on each write"}
    }
    assert set(middle) == {
        "input_schema",
        "output_schema",
        "state_schema",
        "config_schema",
        "context_schema",
    }


async def test_one_subgraph_by_namespace_and_what_is_inside_it(served: Server) -> None:
    client = get_client(url=served.url)
    assert list(await client.assistants.get_subgraphs("deep", namespace="middle")) == ["middle"]
    inside = await client.assistants.get_subgraphs("deep", namespace="middle", recurse=True)
    assert sorted(inside) == ["middle", "middle|inner"]
    nested_one = await client.assistants.get_subgraphs("deep", namespace="middle|inner")
    assert list(nested_one) == ["middle|inner"]
    with pytest.raises(httpx.HTTPStatusError) as missing:
        await client.assistants.get_subgraphs("deep", namespace="middle|nowhere")
    assert missing.value.response.status_code == 404
    assert "nowhere" in missing.value.response.json()["detail"]
    assert "inner" in missing.value.response.json()["detail"]  # what there is instead


def test_subgraphs_refuse_a_recurse_that_is_no_boolean(served: Server) -> None:
    bad = httpx.get(f"{served.url}/assistants/deep/subgraphs", params={"recurse": "deep"})
    assert bad.status_code == 422 and bad.json()["code"]
    assert httpx.get(f"{served.url}/assistants/nobody/subgraphs").status_code == 404


def test_the_graph_is_also_mermaid_or_dot_text(served: Server) -> None:
    mermaid = httpx.get(f"{served.url}/assistants/chain/graph", params={"format": "mermaid"})
    assert mermaid.status_code == 200 and mermaid.headers["content-type"].startswith("text/plain")
    assert "first" in mermaid.text and "second" in mermaid.text
    dot = httpx.get(f"{served.url}/assistants/outer/graph?format=dot&xray=true")
    assert dot.text.lstrip().startswith("digraph") and "cluster" in dot.text
    bad = httpx.get(f"{served.url}/assistants/chain/graph", params={"format": "png"})
    assert bad.status_code == 422 and "mermaid" in bad.json()["detail"]
    assert httpx.get(f"{served.url}/assistants/chain/graph?xray=deep").status_code == 422
    assert httpx.get(f"{served.url}/assistants/nobody/graph").status_code == 404


def test_an_agent_takes_and_returns_messages(served: Server) -> None:
    schemas = get_sync_client(url=served.url).assistants.get_schemas("assistant")
    assert schemas["graph_id"] == "assistant"
    for which in ("input_schema", "output_schema", "state_schema"):
        messages = schemas[which]["properties"]["messages"]
        assert messages["type"] == "array" and "content" in messages["items"]["properties"]
    assert "_agent_run" not in schemas["state_schema"]["properties"]


async def test_a_state_graph_names_its_keys_and_stays_open(served: Server) -> None:
    client = get_client(url=served.url)
    outer = await client.assistants.get_schemas("outer")
    assert outer["state_schema"] == {
        "type": "object",
        "properties": {"log": {"type": "array", "description": "appended to on each write"}},
    }
    assert outer["input_schema"].get("additionalProperties") is not False
    unknown = await client.assistants.get_schemas("chain")
    assert unknown["input_schema"] == {"type": "object"}
    closed = await client.assistants.get_schemas("approval")
    assert closed["input_schema"]["properties"] == {"question": {}}
    assert closed["input_schema"]["additionalProperties"] is False


def test_a_compiled_graph_names_its_keys_as_its_builder_would(tmp_path: Path) -> None:
    with Server(tmp_path / "serve.db", [chain().compile(), nested().compile()]) as running:
        client = get_sync_client(url=running.url)
        schemas = client.assistants.get_schemas("chain")
        assert schemas["state_schema"] == schemas["input_schema"] == {"type": "object"}
        assert client.assistants.get_graph("chain")["nodes"]
        outer = client.assistants.get_schemas("outer")
        assert outer["state_schema"]["properties"] == {
            "log": {"type": "array", "description": "appended to on each write"}
        }


def test_a_paused_thread_lists_its_pending_interrupts_by_task(served: Server) -> None:
    client = get_sync_client(url=served.url)
    thread_id = client.threads.create()["thread_id"]
    paused = client.runs.wait(thread_id, "approval", input={"question": "refund?"})
    [raised] = paused["__interrupt__"]
    thread = client.threads.get(thread_id)
    [task] = client.threads.get_state(thread_id)["tasks"]
    assert thread["interrupts"] == {task["id"]: [raised]}
    assert raised["value"] == {"approve": "reply to refund?"} and raised["id"]
    [found] = client.threads.search(ids=[thread_id])
    assert found["interrupts"] == thread["interrupts"]
    client.runs.wait(thread_id, "approval", command={"resume": {raised["id"]: "yes"}})
    assert client.threads.get(thread_id)["interrupts"] == {}
