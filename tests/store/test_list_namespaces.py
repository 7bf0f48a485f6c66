"""``list_namespaces`` on every store lists what LangGraph's own store lists: the prefix and
suffix (``"*"``: any label) matched on the whole namespace, then cut to ``max_depth``, each
namespace once, sorted, paged."""

from __future__ import annotations

import itertools

import pytest
from langgraph.store.memory import InMemoryStore as LangGraphStore

from graph_agent.store import BaseStore, StoreInputError

NAMESPACES = [
    ("t", "a", "x"),
    ("t", "a", "y"),
    ("t", "b", "x"),
    ("t", "b", "x", "x"),
    ("t", "c"),
    ("t", "*"),  # a label that is a star: stored as any other
    ("u", "x"),
    ("x",),
    ("t%", "a"),  # a label a LIKE pattern would take for "t" followed by anything
]
PREFIXES = [(), ("t",), ("t", "*"), ("*", "x"), ("t", "b", "x"), ("*",), ("t", "*", "x", "*")]
SUFFIXES = [(), ("x",), ("*", "x"), ("a", "*"), ("x", "x"), ("*",)]
DEPTHS = [None, 1, 2, 3]


def test_every_combination_lists_what_langgraph_lists(store: BaseStore) -> None:
    theirs = LangGraphStore()
    for namespace in NAMESPACES:
        store.put(namespace, "k", {"v": 1})
        theirs.put(namespace, "k", {"v": 1})
    for prefix, suffix, depth in itertools.product(PREFIXES, SUFFIXES, DEPTHS):
        expected = theirs.list_namespaces(
            prefix=prefix or None, suffix=suffix or None, max_depth=depth, limit=1000
        )
        found = store.list_namespaces(prefix, depth, suffix=suffix, limit=1000)
        assert found == expected, (prefix, suffix, depth)
    paged = store.list_namespaces(("t",), suffix=("x",), max_depth=2, limit=1, offset=1)
    assert paged == theirs.list_namespaces(
        prefix=("t",), suffix=("x",), max_depth=2, limit=1, offset=1
    )


async def test_the_async_twin_takes_a_suffix(store: BaseStore) -> None:
    await store.aput(("a", "b", "c"), "k", {})
    await store.aput(("a", "c"), "k", {})
    assert await store.alist_namespaces(suffix=("c",)) == [("a", "b", "c"), ("a", "c")]
    assert await store.alist_namespaces(None, 2, suffix=("c",)) == [("a", "b"), ("a", "c")]


def test_expired_namespaces_are_not_matched(store: BaseStore, clock) -> None:
    store.put(("a", "x"), "k", {}, ttl=1)
    store.put(("b", "x"), "k", {})
    clock(61)
    assert store.list_namespaces(suffix=("x",)) == [("b", "x")]


@pytest.mark.parametrize("suffix", [("",), "x", ("x", 1), ["x"]])
def test_a_bad_suffix_is_refused_naming_it(store: BaseStore, suffix: object) -> None:
    with pytest.raises(StoreInputError, match="suffix="):
        store.list_namespaces(suffix=suffix)  # type: ignore[arg-type]
