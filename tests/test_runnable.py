"""``graph_agent.Runnable``: a compiled graph and a remote graph are runnables, and
``with_saver`` makes a copy, leaving the original as it was."""

from __future__ import annotations

import asyncio

import pytest

from graph_agent import (
    END,
    START,
    CompileConfig,
    MemorySaver,
    Runnable,
    RunnableConfig,
    StateGraph,
)
from graph_agent.client import RemoteGraph
from graph_agent.graph.compiled import CompiledGraph

CONFIG = RunnableConfig(thread_id="t1")


def counter(saver: MemorySaver | None = None) -> CompiledGraph:
    graph = StateGraph("counter")
    graph.add_node("inc", lambda state: {"x": state.get("x", 0) + 1})
    graph.add_edge(START, "inc").add_edge("inc", END)
    return graph.compile(CompileConfig(saver=saver))


def test_a_compiled_graph_is_a_runnable() -> None:
    app = counter()
    assert isinstance(app, Runnable)
    assert app.name == "counter"


def test_a_remote_graph_is_a_runnable_without_asking_its_server() -> None:
    remote = RemoteGraph("http://127.0.0.1:9", "counter")  # nothing listens: nothing is asked
    assert isinstance(remote, Runnable)
    assert remote.name == "counter"


def test_something_lacking_a_method_is_no_runnable() -> None:
    class RunsOnly:
        name = "runs-only"

        def invoke(self, input: object, config: object = None) -> object:
            return input

    assert not isinstance(RunsOnly(), Runnable)


def test_with_saver_returns_a_new_graph_and_leaves_the_original_untouched() -> None:
    first, second = MemorySaver(), MemorySaver()
    app = counter(first)
    moved = app.with_saver(second)
    assert moved is not app and isinstance(moved, Runnable)
    assert app.saver is first and moved.saver is second
    moved.invoke({"x": 1}, CONFIG)
    assert moved.get_state(CONFIG).values == {"x": 2}
    assert app.get_state(CONFIG).values == {}  # nothing went to the original's saver
    assert first.get("t1") is None and second.get("t1") is not None
    app.invoke({"x": 10}, CONFIG)
    assert (app.get_state(CONFIG).values, moved.get_state(CONFIG).values) == ({"x": 11}, {"x": 2})


def test_with_saver_none_runs_without_a_thread_and_the_original_keeps_its_saver() -> None:
    saver = MemorySaver()
    app = counter(saver)
    bare = app.with_saver(None)
    assert bare.saver is None and app.saver is saver
    assert bare.invoke({"x": 1})["x"] == 2  # no thread needed without a saver
    with pytest.raises(ValueError, match="needs a thread"):
        app.invoke({"x": 1})
    with pytest.raises(ValueError, match="has no saver"):
        asyncio.run(bare.aget_state(CONFIG))


def test_a_remote_stream_refuses_the_options_it_cannot_carry() -> None:
    remote = RemoteGraph("http://127.0.0.1:9", "counter")
    with pytest.raises(ValueError, match=r"stream_mode is not carried over HTTP"):
        remote.stream({"x": 1}, stream_mode="values")
    with pytest.raises(ValueError, match=r"subgraphs, task_events are not carried"):
        remote.astream({"x": 1}, subgraphs=True, task_events=True)
