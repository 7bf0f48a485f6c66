"""The node cache each saver keeps beside its checkpoints (memory, SQLite, PostgreSQL): a hit
from a saver opened anew (as another process would), expiry by TTL, values kept as stored."""

from __future__ import annotations

import asyncio

import pytest

from graph_agent import (
    END,
    START,
    AssistantMessage,
    CachePolicy,
    CompileConfig,
    RunnableConfig,
    StateGraph,
)
from graph_agent.graph import cache as cache_module


@pytest.fixture
def clock(monkeypatch):
    class Clock:
        now = 2_000_000.0

    monkeypatch.setattr(cache_module, "now", lambda: Clock.now)
    return Clock


def answering(calls):
    def answer(state):
        calls.append(state["question"])
        return {"answer": AssistantMessage(content=f"about {state['question']}")}

    return answer


def compiled(saver, calls, **policy):
    g = StateGraph("cached")
    g.add_node("answer", answering(calls), cache=CachePolicy(**policy))
    g.add_edge(START, "answer").add_edge("answer", END)
    return g.compile(CompileConfig(saver=saver))


def test_a_result_is_reused_by_a_saver_opened_anew(saver, reopen, driver):
    calls = []
    first = driver.invoke(compiled(saver, calls), {"question": "q"}, RunnableConfig(thread_id="a"))
    again = compiled(reopen(), calls)
    second = driver.invoke(again, {"question": "q"}, RunnableConfig(thread_id="b"))
    assert calls == ["q"]
    assert second["answer"].content == first["answer"].content == "about q"


def test_an_entry_expires_after_its_ttl(saver, clock):
    calls = []
    app = compiled(saver, calls, ttl=10)
    app.invoke({"question": "q"}, RunnableConfig(thread_id="a"))
    clock.now += 9
    app.invoke({"question": "q"}, RunnableConfig(thread_id="b"))
    clock.now += 2
    app.invoke({"question": "q"}, RunnableConfig(thread_id="c"))
    assert calls == ["q", "q"]


def test_entries_are_cleared_by_namespace_or_all_at_once(saver):
    saver.cache_put("g:a", "k", {"x": 1}, None)
    saver.cache_put("g:b", "k", None, None)
    assert saver.cache_get("g:b", "k", 0.0).value is None  # a cached None is a hit
    saver.cache_clear("g:a")
    assert saver.cache_get("g:a", "k", 0.0) is None
    assert saver.cache_get("g:b", "k", 0.0) is not None
    saver.cache_clear()
    assert saver.cache_get("g:b", "k", 0.0) is None


def test_the_async_twins_store_and_read(saver):
    async def main():
        await saver.acache_put("g:n", "k", {"x": [1, 2]}, 5.0)
        hit = await saver.acache_get("g:n", "k", 4.0)
        expired = await saver.acache_get("g:n", "k", 5.0)
        return hit, expired

    hit, expired = asyncio.run(main())
    assert list(hit.value["x"]) == [1, 2] and expired is None
