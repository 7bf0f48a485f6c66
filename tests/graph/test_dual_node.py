"""A DualNode: invoke calls it, ainvoke/astream await its async face on the caller's loop."""

from __future__ import annotations

import asyncio
import threading

from graph_agent import END, START, StateGraph
from graph_agent.graph._engine import DualNode


class Both(DualNode):
    def __init__(self) -> None:
        self.faces: list[tuple[str, int]] = []

    def __call__(self, state, config):
        self.faces.append(("sync", threading.get_ident()))
        return {"ran": "sync"}

    async def acall(self, state, config):
        self.faces.append(("async", threading.get_ident()))
        await asyncio.sleep(0)
        return {"ran": "async"}


def _graph(node: Both, parallel: bool = False):
    graph = StateGraph("dual").add_node("both", node).add_edge(START, "both")
    if parallel:
        graph.add_node("other", lambda state: {"other": 1}).add_edge(START, "other")
        graph.add_edge("other", END)
    return graph.add_edge("both", END).compile()


def test_invoke_calls_the_sync_face() -> None:
    node = Both()
    assert _graph(node).invoke({})["ran"] == "sync"
    assert node.faces == [("sync", threading.get_ident())]


def test_ainvoke_awaits_the_async_face_on_the_callers_thread() -> None:
    node = Both()

    async def main() -> tuple[str, int]:
        return (await _graph(node).ainvoke({}))["ran"], threading.get_ident()

    ran, loop_thread = asyncio.run(main())
    assert ran == "async" and node.faces == [("async", loop_thread)]


def test_astream_and_a_parallel_step_await_the_async_face_too() -> None:
    node = Both()

    async def main() -> int:
        async for _ in _graph(node, parallel=True).astream({}):
            pass
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert node.faces == [("async", loop_thread)]
