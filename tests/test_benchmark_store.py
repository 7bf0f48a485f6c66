"""The store benchmark runs in quick mode on graph_agent's stores alone (no LangGraph)."""

from __future__ import annotations

from benchmarks import store
from benchmarks.harness import GRAPH_AGENT, LANGGRAPH, Settings


def test_the_store_benchmark_measures_our_stores_in_quick_mode() -> None:
    rows = store.run(Settings(quick=True, with_langgraph=False))
    operations = ["put", "get", "search", "filtered search", "ranked search"]
    expected = [f"Store, SQLite, {operation}" for operation in operations]
    expected += [f"Store, PostgreSQL, {operation}" for operation in operations]
    expected += [
        f"Store, PostgreSQL, {operation}, durability='full'" for operation in operations[:4]
    ]
    assert [row.key for row in rows] == expected
    for row in rows:
        assert [per_second > 0 for per_second in row.samples[GRAPH_AGENT]] == [True], row.key
        assert LANGGRAPH not in row.samples
