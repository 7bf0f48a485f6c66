"""RemoteGraph's async state API (``aget_state``, ``aget_state_history``, ``aupdate_state``)
against a real server: the sync twins' results; and RemoteGraph as a :class:`Runnable`."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    MemorySaver,
    Runnable,
    RunnableConfig,
    StateGraph,
    StateSnapshot,
    interrupt,
)
from graph_agent.client import RemoteGraph, RemoteGraphError
from tests.serve.conftest import Server
from tests.serve.graphs import approval, chain


def nested() -> StateGraph:
    """prepare -> child (draft -> review, which asks a human) -> finish."""
    inner = StateGraph("inner", key_strategies={"log": AppendStrategy()})
    inner.add_node("draft", lambda s: {"log": "draft"})
    inner.add_node("review", lambda s: {"log": f"review:{interrupt('approve?')}"})
    inner.add_edge(START, "draft").add_edge("draft", "review").add_edge("review", END)
    graph = StateGraph("nested", key_strategies={"log": AppendStrategy()})
    graph.add_node("prepare", lambda s: {"log": "prepare"})
    graph.add_node("child", inner.compile())
    graph.add_node("finish", lambda s: {"log": "finish"})
    graph.add_edge(START, "prepare").add_edge("prepare", "child")
    graph.add_edge("child", "finish").add_edge("finish", END)
    return graph


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("serve") / "serve.db"
    with Server(db, [chain(), approval(), nested()]) as running:
        yield running


def thread() -> RunnableConfig:
    return RunnableConfig(thread_id=str(uuid.uuid4()))


async def collect(items: AsyncIterator[StateSnapshot]) -> list[StateSnapshot]:
    return [item async for item in items]


def test_aget_state_and_aget_state_history_are_their_sync_twins(server: Server) -> None:
    remote = RemoteGraph(server.url, "chain")
    config = thread()
    remote.invoke({"x": 1}, config)
    history = list(remote.get_state_history(config))
    assert [s.values.get("x") for s in history][:2] == [12, 2]

    async def main() -> list[Any]:
        return [
            await remote.aget_state(config),
            await remote.aget_state(history[1].config),
            await collect(remote.aget_state_history(config)),
            await collect(remote.aget_state_history(config, limit=2)),
            await collect(remote.aget_state_history(config, before=history[0].config)),
            await collect(
                remote.aget_state_history(config, before=history[0].config.checkpoint_id)
            ),
        ]

    now, older, everything, two, before_config, before_id = asyncio.run(main())
    assert now == remote.get_state(config) and now.values["x"] == 12
    assert older == remote.get_state(history[1].config) and older.values["x"] == 2
    assert everything == history
    assert two == history[:2]
    assert before_config == before_id == history[1:]


def test_aupdate_state_is_update_state(server: Server) -> None:
    remote = RemoteGraph(server.url, "chain")
    sync_config, async_config = thread(), thread()
    remote.invoke({"x": 1}, sync_config)
    remote.invoke({"x": 1}, async_config)
    made_sync = remote.update_state(sync_config, {"x": 100}, as_node="second")
    made_async = asyncio.run(remote.aupdate_state(async_config, {"x": 100}, as_node="second"))
    assert made_async.thread_id == async_config.thread_id and made_async.checkpoint_id
    async_now, sync_now = remote.get_state(async_config), remote.get_state(sync_config)
    assert async_now.config.checkpoint_id == made_async.checkpoint_id
    assert sync_now.config.checkpoint_id == made_sync.checkpoint_id
    assert (
        (async_now.values, async_now.next) == (sync_now.values, sync_now.next) == ({"x": 100}, ())
    )
    assert async_now.metadata.get("source") == sync_now.metadata.get("source") == "update"
    with pytest.raises(RemoteGraphError) as refused:
        asyncio.run(remote.aupdate_state(async_config, {"x": 1}, as_node="no-such-node"))
    assert refused.value.status == 422


def test_aget_state_with_subgraphs_shows_the_paused_childs_state(server: Server) -> None:
    remote = RemoteGraph(server.url, "nested")
    config = thread()
    paused = remote.invoke({}, config)
    assert [i.value for i in paused.interrupts] == ["approve?"]
    plain = asyncio.run(remote.aget_state(config))
    nested_state = asyncio.run(remote.aget_state(config, subgraphs=True))
    assert nested_state == remote.get_state(config, subgraphs=True)
    assert plain == remote.get_state(config)
    (task,) = nested_state.tasks
    assert task.name == "child" and [i.value for i in task.interrupts] == ["approve?"]
    assert task.state is not None and task.state.next == ("review",)
    assert task.state.values == {"log": ["prepare", "draft"]}
    assert task.state.config.checkpoint_ns.startswith("child:")
    assert plain.tasks[0].name == "child" and plain.tasks[0].state is None


def test_a_remote_graph_is_a_runnable(server: Server) -> None:
    remote = RemoteGraph(server.url, "chain", api_key="k", timeout=5.0)
    assert isinstance(remote, Runnable)
    assert remote.name == "chain"
    copy = remote.with_saver(None)
    assert copy is not remote and isinstance(copy, RemoteGraph)
    assert (copy.url, copy.assistant, copy.name) == (remote.url, remote.assistant, "chain")
    config = thread()
    assert copy.invoke({"x": 1}, config)["x"] == 12
    assert remote.get_state(config).values["x"] == 12  # the same server, the same threads


def test_with_saver_refuses_a_local_saver_and_says_why(server: Server) -> None:
    remote = RemoteGraph(server.url, "chain")
    with pytest.raises(ValueError, match="keeps its threads on the server") as refused:
        remote.with_saver(MemorySaver())
    assert "MemorySaver" in str(refused.value) and server.url in str(refused.value)
    assert remote.invoke({"x": 0})["x"] == 11  # left as it was


def test_get_graph_draws_the_served_graph(server: Server) -> None:
    remote = RemoteGraph(server.url, "nested")
    drawn = remote.get_graph()
    assert drawn.startswith(("graph", "flowchart", "%%")) and "prepare" in drawn
    assert "review" not in drawn  # the child is one node unless opened
    assert "review" in remote.get_graph(xray=True)
    assert "digraph" in remote.get_graph("dot")
    with pytest.raises(RemoteGraphError) as refused:
        remote.get_graph("gif")
    assert refused.value.status == 422
