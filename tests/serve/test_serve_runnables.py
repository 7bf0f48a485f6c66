"""The server takes any runnable (``graph_agent.Runnable``), never asking its class: a team of
agents and a runnable of a class it has never heard of are served like a graph or an agent,
each as a copy on the server's saver (``with_saver``), the object given left as it was."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from graph_agent.agent.flows import SequentialAgent
from graph_agent.agent.react import ReactAgent
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.checkpoint.sqlite import SqliteSaver
from graph_agent.graph.compiled import CompiledGraph
from graph_agent.graph.types import RunnableConfig, StateSnapshot
from graph_agent.models.scripted import ScriptedChatModel
from graph_agent.serve import create_app
from tests.serve.conftest import Server
from tests.serve.graphs import chain

QUESTION = {"messages": [{"role": "user", "content": "Write about graphs."}]}


def two_agent_team(saver: Any = None) -> SequentialAgent:
    """A writer and an editor, both offline (scripted models)."""
    writer = ReactAgent("writer", ScriptedChatModel(["Draft 1.", "Draft 2."]))
    editor = ReactAgent("editor", ScriptedChatModel(["Edited 1.", "Edited 2."]))
    return SequentialAgent("pipeline", [writer, editor], saver=saver)


class Wrapped:
    """A runnable of a class no consumer knows: it runs the compiled graph it holds, under a
    name of its own, and has every method of ``graph_agent.Runnable``."""

    def __init__(self, graph: CompiledGraph, name: str = "wrapped") -> None:
        self.graph = graph
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    @property
    def saver(self) -> Any:
        return self.graph.saver

    def invoke(self, input: Any, config: RunnableConfig | None = None) -> Any:
        return self.graph.invoke(input, config)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None) -> Any:
        return await self.graph.ainvoke(input, config)

    def stream(self, input: Any, config: RunnableConfig | None = None, **options: Any) -> Any:
        return self.graph.stream(input, config, **options)

    def astream(
        self, input: Any, config: RunnableConfig | None = None, **options: Any
    ) -> AsyncIterator[Any]:
        return self.graph.astream(input, config, **options)

    def get_state(self, config: RunnableConfig, *, subgraphs: bool = False) -> StateSnapshot:
        return self.graph.get_state(config, subgraphs=subgraphs)

    async def aget_state(self, config: RunnableConfig, *, subgraphs: bool = False) -> Any:
        return await asyncio.to_thread(self.get_state, config, subgraphs=subgraphs)

    def get_state_history(
        self, config: RunnableConfig, limit: Any = None, before: Any = None
    ) -> Iterator[StateSnapshot]:
        return self.graph.get_state_history(config, limit=limit, before=before)

    async def aget_state_history(
        self, config: RunnableConfig, limit: Any = None, before: Any = None
    ) -> AsyncIterator[StateSnapshot]:
        for snapshot in self.get_state_history(config, limit, before):
            yield snapshot

    def update_state(self, config: RunnableConfig, values: Any, as_node: Any = None) -> Any:
        return self.graph.update_state(config, values, as_node)

    async def aupdate_state(self, config: RunnableConfig, values: Any, as_node: Any = None) -> Any:
        return await asyncio.to_thread(self.update_state, config, values, as_node)

    def get_graph(self, fmt: str = "mermaid", *, xray: bool = False) -> str:
        return self.graph.get_graph(fmt, xray=xray)

    def with_saver(self, saver: Any) -> Wrapped:
        return Wrapped(self.graph.with_saver(saver), self._name)


def run_and_wait(url: str, assistant_id: str, input: Any) -> tuple[str, dict[str, Any]]:
    """Create a thread, POST a run on it, wait for its end; the thread and its state."""
    with httpx.Client(base_url=url, timeout=30) as client:
        thread_id = client.post("/threads", json={}).json()["thread_id"]
        run = client.post(
            f"/threads/{thread_id}/runs", json={"assistant_id": assistant_id, "input": input}
        )
        assert run.status_code == 200, run.text
        joined = client.get(f"/threads/{thread_id}/runs/{run.json()['run_id']}/join")
        assert joined.status_code == 200, joined.text
        state = client.get(f"/threads/{thread_id}/state").json()
    return thread_id, state


def test_create_app_serves_a_team_whose_run_leaves_its_answers_in_the_thread(
    tmp_path: Path,
) -> None:
    team = two_agent_team()
    with Server(tmp_path / "serve.db", targets=[team]) as server:
        assistant = httpx.get(f"{server.url}/assistants/pipeline").json()
        thread_id, state = run_and_wait(server.url, "pipeline", QUESTION)
        kept = server.saver.get(thread_id)

    assert assistant["metadata"]["kind"] == "agent"
    assert [m["content"] for m in state["values"]["messages"]] == [
        "Write about graphs.",
        "Draft 1.",
        "Edited 1.",
    ]
    assert kept is not None  # the served copy keeps its threads in the server's saver
    assert team.saver.get(thread_id) is None  # not in the team's own


def test_serving_a_team_leaves_its_own_saver_and_graph_untouched(tmp_path: Path) -> None:
    own = SqliteSaver(str(tmp_path / "team.db"))
    team = two_agent_team(saver=own)
    graph_before = team.graph
    served = SqliteSaver(str(tmp_path / "serve.db"))
    try:
        create_app({"writers": team}, saver=served)
    finally:
        served.close()
        own.close()

    assert team.saver is own
    assert team.graph is graph_before
    assert team.graph.saver is own


def test_serving_an_agent_runs_a_copy_on_the_server_saver_and_its_own_stays(
    tmp_path: Path,
) -> None:
    own = MemorySaver()
    agent = ReactAgent("helper", ScriptedChatModel(["Hi there."]), saver=own)
    with Server(tmp_path / "serve.db", targets=[agent]) as server:
        thread_id, state = run_and_wait(server.url, "helper", QUESTION)

    assert agent.saver is own
    assert own.get(thread_id) is None
    assert state["values"]["messages"][-1]["content"] == "Hi there."


def test_a_runnable_of_a_class_the_server_does_not_know_is_served_as_a_graph(
    tmp_path: Path,
) -> None:
    wrapped = Wrapped(chain().compile())
    with Server(tmp_path / "serve.db", targets=[wrapped]) as server:
        assistant = httpx.get(f"{server.url}/assistants/wrapped").json()
        schemas = httpx.get(f"{server.url}/assistants/wrapped/schemas").json()
        drawn = httpx.get(f"{server.url}/assistants/wrapped/graph").json()
        _, state = run_and_wait(server.url, "wrapped", {"x": 1})

    assert assistant["metadata"]["kind"] == "graph"
    assert schemas["input_schema"] == {"type": "object"}  # chain declares no strategies
    assert [node["id"] for node in drawn["nodes"]] == ["__start__", "first", "second", "__end__"]
    assert state["values"] == {"x": 12}
    assert wrapped.saver is None  # the object given still runs on no saver


def test_an_object_that_is_not_runnable_is_refused_naming_its_type() -> None:
    with pytest.raises(TypeError, match="cannot serve a dict"):
        create_app({"oops": {"not": "runnable"}})  # type: ignore[dict-item]
