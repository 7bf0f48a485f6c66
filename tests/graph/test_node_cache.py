"""``add_node(..., cache=CachePolicy(...))``: a node with the same input is not run again, in
memory, across runs, and (SQLite) across processes; entries expire by their TTL."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from graph_agent import (
    END,
    START,
    CachePolicy,
    Command,
    CompileConfig,
    GraphSetupError,
    MemorySaver,
    RunnableConfig,
    SqliteSaver,
    StateGraph,
)
from graph_agent.graph import cache as cache_module
from graph_agent.graph.cache import InMemoryCache


@pytest.fixture
def clock(monkeypatch):
    """The cache's clock, pinned: tests move it on by hand."""

    class Clock:
        now = 1_000_000.0

    monkeypatch.setattr(cache_module, "now", lambda: Clock.now)
    return Clock


def counted(calls, is_async=False):
    def square(state):
        calls.append(state["n"])
        return {"square": state["n"] ** 2}

    if not is_async:
        return square

    async def async_square(state):
        return square(state)

    return async_square


def cached_graph(calls, *, saver=None, is_async=False, **policy):
    g = StateGraph("cached")
    g.add_node("square", counted(calls, is_async), cache=CachePolicy(**policy))
    g.add_edge(START, "square").add_edge("square", END)
    return g.compile(CompileConfig(saver=saver))


@pytest.mark.parametrize("is_async", [False, True])
def test_a_node_with_the_same_input_runs_once_without_a_saver(driver, is_async):
    calls = []
    app = cached_graph(calls, is_async=is_async)
    assert driver.invoke(app, {"n": 3})["square"] == 9
    assert driver.invoke(app, {"n": 3})["square"] == 9
    assert driver.invoke(app, {"n": 4})["square"] == 16
    assert calls == [3, 4]


def test_the_cache_spans_threads_of_a_saver(driver):
    calls = []
    app = cached_graph(calls, saver=MemorySaver())
    for thread in ("a", "b"):
        assert driver.invoke(app, {"n": 5}, RunnableConfig(thread_id=thread))["square"] == 25
    assert calls == [5]


def test_a_key_function_decides_what_counts_as_the_same_input(driver):
    calls = []
    app = cached_graph(calls, key=lambda state: str(state["n"] % 2))
    driver.invoke(app, {"n": 1})
    assert driver.invoke(app, {"n": 3})["square"] == 1  # same key: the first result
    assert calls == [1]


def test_an_entry_expires_after_its_ttl(driver, clock):
    calls = []
    app = cached_graph(calls, ttl=60)
    driver.invoke(app, {"n": 2})
    clock.now += 59
    driver.invoke(app, {"n": 2})
    assert calls == [2]
    clock.now += 2
    driver.invoke(app, {"n": 2})
    assert calls == [2, 2]


def test_a_command_is_not_cached(driver):
    calls = []
    g = StateGraph("commands")
    g.add_node("go", lambda s: calls.append(1) or Command(update={"x": 1}), cache=CachePolicy())
    g.add_edge(START, "go").add_edge("go", END)
    app = g.compile()
    driver.invoke(app, {"x": 0})
    driver.invoke(app, {"x": 0})
    assert len(calls) == 2


def test_the_sqlite_cache_is_hit_across_runs_and_expires(tmp_path, driver, clock):
    calls = []
    path = tmp_path / "cache.db"
    app = cached_graph(calls, saver=SqliteSaver(path), ttl=30)
    driver.invoke(app, {"n": 7}, RunnableConfig(thread_id="t1"))
    again = cached_graph(calls, saver=SqliteSaver(path), ttl=30)  # the file opened anew
    driver.invoke(again, {"n": 7}, RunnableConfig(thread_id="t2"))
    assert calls == [7]
    clock.now += 31
    driver.invoke(again, {"n": 7}, RunnableConfig(thread_id="t3"))
    assert calls == [7, 7]


def test_the_sqlite_cache_is_hit_from_another_process(tmp_path):
    path = tmp_path / "cache.db"
    script = textwrap.dedent(
        f"""
        from graph_agent import END, START, CachePolicy, CompileConfig, RunnableConfig
        from graph_agent import SqliteSaver, StateGraph
        def square(state):
            print("computed", flush=True)
            return {{"square": state["n"] ** 2}}
        g = StateGraph("cached")
        g.add_node("square", square, cache=CachePolicy())
        g.add_edge(START, "square").add_edge("square", END)
        app = g.compile(CompileConfig(saver=SqliteSaver({str(path)!r})))
        import sys
        print(app.invoke({{"n": 6}}, RunnableConfig(thread_id=sys.argv[1]))["square"])
        """
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", script, thread], capture_output=True, text=True, check=True
        ).stdout.split()
        for thread in ("first", "second")
    ]
    assert runs == [["computed", "36"], ["36"]]


def test_an_explicit_cache_and_clearing_it(driver):
    calls = []
    store = InMemoryCache()
    g = StateGraph("cached")
    g.add_node("square", counted(calls), cache=CachePolicy())
    g.add_edge(START, "square").add_edge("square", END)
    app = g.compile(CompileConfig(cache=store))
    driver.invoke(app, {"n": 2})
    store.cache_clear("cached:square")
    driver.invoke(app, {"n": 2})
    assert calls == [2, 2]


def test_bad_cache_settings_are_refused_naming_the_fix():
    with pytest.raises(GraphSetupError, match="ttl"):
        CachePolicy(ttl=0)
    with pytest.raises(GraphSetupError, match="key"):
        CachePolicy(key="n")
    g = StateGraph("bad").add_node("n", lambda s: None, cache=CachePolicy())
    g.add_edge(START, "n").add_edge("n", END)
    with pytest.raises(GraphSetupError, match="InMemoryCache"):
        g.compile(CompileConfig(cache=object()))
