"""InMemoryStore on its own: namespaces whose items are all gone leave no trace in memory."""

from __future__ import annotations

from graph_agent.store import InMemoryStore


def _kept_namespaces(store: InMemoryStore) -> list[str]:
    """The namespaces the store keeps an entry for (its index of namespaces, encoded)."""
    return list(store._namespaces_sorted)


def test_deleting_the_last_item_of_a_namespace_forgets_the_namespace():
    store = InMemoryStore()
    for user in range(200):
        store.put(("users", f"u{user}"), "a", {"v": 1})
        store.put(("users", f"u{user}"), "b", {"v": 2})
    store.put(("users", "u0"), "a", {"v": 3})  # replacing an item adds no second row
    for user in range(200):
        store.delete(("users", f"u{user}"), "a")
    assert len(_kept_namespaces(store)) == 200  # each still holds "b"
    for user in range(200):
        store.delete(("users", f"u{user}"), "b")
        store.delete(("users", f"u{user}"), "b")  # deleting nothing changes nothing
    assert _kept_namespaces(store) == []
    assert store.list_namespaces() == []
    store.put(("users", "u7"), "a", {"v": 1})
    assert store.list_namespaces() == [("users", "u7")]
    assert _kept_namespaces(store) == ["users/u7/"]


def test_sweeping_the_last_items_of_a_namespace_forgets_it(clock):
    store = InMemoryStore()
    store.put(("short",), "a", {"v": 1}, ttl=1)
    store.put(("short",), "b", {"v": 1}, ttl=1)
    store.put(("mixed",), "a", {"v": 1}, ttl=1)
    store.put(("mixed",), "b", {"v": 1})
    clock(61)
    assert store.list_namespaces() == [("mixed",)]  # expired items are never listed
    assert store.sweep() == 3
    assert _kept_namespaces(store) == ["mixed/"]
    store.delete(("mixed",), "b")
    assert _kept_namespaces(store) == []
