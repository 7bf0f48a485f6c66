"""``CompiledGraph.runs_sync``: whether a graph's ``stream`` runs it all in threads (the server
then reads it from one worker thread instead of ``astream`` on its loop)."""

from __future__ import annotations

from graph_agent import END, START, CompileConfig, RetryPolicy, StateGraph
from graph_agent.graph._engine import DualNode


def _one_node(fn, **options):
    graph = StateGraph("one").add_node("work", fn, **options)
    return graph.add_edge(START, "work").add_edge("work", END)


def test_a_graph_of_plain_functions_runs_sync() -> None:
    assert _one_node(lambda state: {"x": 1}).compile().runs_sync


def test_a_coroutine_node_does_not_run_sync() -> None:
    async def work(state):
        return {"x": 1}

    assert not _one_node(work).compile().runs_sync


def test_a_node_with_an_async_face_does_not_run_sync() -> None:
    class Both(DualNode):
        def __call__(self, state, config):
            return {"x": 1}

        async def acall(self, state, config):
            return {"x": 1}

    assert not _one_node(Both()).compile().runs_sync


def test_a_subgraph_node_does_not_run_sync() -> None:
    child = _one_node(lambda state: {"x": 1}).compile()
    assert not _one_node(child).compile().runs_sync


def test_a_node_with_a_policy_or_a_graph_with_listeners_does_not_run_sync() -> None:
    assert not _one_node(lambda state: {"x": 1}, retry=RetryPolicy()).compile().runs_sync
    graph = _one_node(lambda state: {"x": 1})
    assert not graph.compile(CompileConfig(listeners=[object()])).runs_sync
