"""Vectors of another length never score silently: ``index["dims"]`` is checked at every put
and query, and without it a query unlike the stored vectors is refused, on every store."""

from __future__ import annotations

import pytest

from graph_agent.store import StoreInputError
from graph_agent.store.embeddings import index_config


class Resizable:
    """An embedder whose vectors' length a test changes (as a new embedding model would)."""

    def __init__(self, dims: int) -> None:
        self.dims = dims

    def __call__(self, texts: list[str]) -> list[list[float]]:
        return [[float(len(text) + n) for n in range(self.dims)] for text in texts]


def test_dims_refuses_an_embedder_of_another_length_at_put_naming_the_field(make_store):
    store = make_store(index={"embed": Resizable(32), "fields": ["text"], "dims": 64})
    with pytest.raises(StoreInputError) as raised:
        store.put(("n",), "tea", {"text": "green tea"})
    message = str(raised.value)
    assert "dims=64" in message and "returned 32 numbers" in message
    assert "field 'text' of item 'tea'" in message
    assert "index['dims']=32" in message  # how to fix it
    assert store.get(("n",), "tea") is None  # nothing was written


def test_dims_refuses_a_query_vector_of_another_length_naming_the_query(make_store):
    embedder = Resizable(8)
    store = make_store(index={"embed": embedder, "fields": ["text"], "dims": 8})
    store.put(("n",), "tea", {"text": "green tea"})
    assert [item.key for item in store.search(("n",), query="tea")] == ["tea"]
    embedder.dims = 4
    with pytest.raises(StoreInputError, match=r"returned 4 numbers for the query 'tea'"):
        store.search(("n",), query="tea")


def test_without_dims_a_query_unlike_the_stored_vectors_is_refused(make_store):
    embedder = Resizable(32)
    store = make_store(index={"embed": embedder, "fields": ["text"]})
    store.put(("n",), "tea", {"text": "green tea"})
    embedder.dims = 16
    with pytest.raises(StoreInputError, match="16 dimensions and a stored one 32"):
        store.search(("n",), query="tea")


def test_a_stored_vector_of_another_length_outside_the_page_is_still_refused(make_store):
    embedder = Resizable(16)
    store = make_store(index={"embed": embedder, "fields": ["text"]})
    store.put(("n",), "a long text that ranks first", {"text": "a long text that ranks first"})
    embedder.dims = 32
    store.put(("n",), "b", {"text": "b"})
    embedder.dims = 16
    with pytest.raises(StoreInputError, match="16 dimensions and a stored one 32"):
        store.search(("n",), query="a long text that ranks first", limit=1)


def test_a_query_of_another_length_is_refused_even_past_the_last_page(make_store):
    embedder = Resizable(3)
    store = make_store(index={"embed": embedder, "fields": ["text"]})
    store.put(("n",), "tea", {"text": "green tea"})
    store.put(("n",), "coffee", {"text": "black coffee"})
    embedder.dims = 4
    with pytest.raises(StoreInputError, match="4 dimensions and a stored one 3"):
        store.search(("n",), query="tea", offset=5)
    with pytest.raises(StoreInputError, match="4 dimensions and a stored one 3"):
        store.search(("n",), query="tea", limit=1, offset=2)


def test_an_expired_unswept_vector_of_another_length_is_ignored(make_store, clock):
    embedder = Resizable(4)
    store = make_store(index={"embed": embedder, "fields": ["text"]})
    store.put(("n",), "old", {"text": "an old note"}, ttl=1)
    clock(120)  # expired, and no sweep has deleted it
    embedder.dims = 3
    store.put(("n",), "tea", {"text": "green tea"})
    assert [item.key for item in store.search(("n",), query="tea")] == ["tea"]
    assert store.search(("n",), query="tea", offset=5) == []


@pytest.mark.parametrize("dims", [0, -3, "64", 2.5, True])
def test_dims_must_be_a_positive_int(dims):
    with pytest.raises(StoreInputError, match=r"index\['dims'\]"):
        index_config({"embed": Resizable(4), "dims": dims})
