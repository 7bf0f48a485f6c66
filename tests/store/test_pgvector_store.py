"""PostgresStore on a server with pgvector: vectors in ``vector`` columns, ranked in SQL in the
same order, with the same scores, as the ``float8[]`` path and the in-memory store."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

import psycopg
import pytest

from graph_agent.store import BaseStore, InMemoryStore
from graph_agent.store.postgres import PostgresStore
from tests.store.pgvector_server import fresh_schema_on


def seeded(texts: list[str]) -> list[list[float]]:
    """A vector per text drawn from a generator seeded by the text (same text, same vector);
    an empty text gets the zero vector."""
    return [_draw(random.Random(text)) if text else [0.0] * 16 for text in texts]


def _draw(numbers: random.Random) -> list[float]:
    return [numbers.gauss(0, 1) for _ in range(16)]


INDEX = {"embed": seeded, "fields": ["title", "body"]}


@pytest.fixture
def stores(pgvector_dsn: str) -> Iterator[dict[str, BaseStore]]:
    """The same index over pgvector, over ``float8[]`` (on the same server) and in memory."""
    with (
        fresh_schema_on(pgvector_dsn) as vector_dsn,
        fresh_schema_on(pgvector_dsn) as array_dsn,
        PostgresStore(vector_dsn, index=INDEX, vectors="pgvector", pool_size=2) as pgvector,
        PostgresStore(array_dsn, index=INDEX, vectors="array", pool_size=2) as array,
        InMemoryStore(index=INDEX) as memory,
    ):
        yield {"pgvector": pgvector, "array": array, "memory": memory}


def test_vectors_are_pgvector_columns_when_asked(pgvector_dsn):
    with (
        fresh_schema_on(pgvector_dsn) as dsn,
        PostgresStore(dsn, index=INDEX, vectors="pgvector") as store,
    ):
        store.put(("n",), "k", {"title": "tea"})
        with psycopg.connect(dsn) as conn:
            column = conn.execute(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
                "'graph_agent_store_vectors'::regclass AND attname = 'embedding'"
            ).fetchone()[0]
            stored = conn.execute(
                "SELECT pg_typeof(embedding)::text, vector_dims(embedding) "
                "FROM graph_agent_store_vectors"
            ).fetchall()
    assert store.vector_kind == "pgvector"
    assert column == "vector"
    assert stored == [("vector", 16)]


def test_auto_picks_pgvector_on_a_server_that_has_it(pgvector_dsn):
    with fresh_schema_on(pgvector_dsn) as dsn, PostgresStore(dsn, index=INDEX) as store:
        assert store.vector_kind == "pgvector"


def test_pgvector_ranks_like_float8_arrays_and_memory(stores):
    for store in stores.values():
        for number in range(30):
            value = {"title": f"title {number}", "n": number % 3}
            if number % 2:
                value["body"] = f"body {number}"  # two fields: an item scores its best
            if number == 28:
                value["title"] = ""  # the zero vector scores 0, never NaN
            store.put(("docs", f"d{number % 2}"), f"k{number:02}", value)
    for query in ("title 1", "body 17", "title 27", "not a title"):
        for page in ({}, {"limit": 7, "offset": 5}, {"filter": {"n": 1}, "limit": 4}):
            found = {
                name: [(i.key, i.score) for i in store.search(("docs",), query=query, **page)]
                for name, store in stores.items()
            }
            expected = found["memory"]
            assert expected, "the search found nothing to compare"
            scores = [score for _, score in expected]
            # distinct scores: float4 (pgvector) rounding cannot swap two items
            assert all(a - b > 1e-5 for a, b in itertools.pairwise(scores))
            for name in ("pgvector", "array"):
                assert [key for key, _ in found[name]] == [key for key, _ in expected], name
                assert [score for _, score in found[name]] == pytest.approx(scores, abs=1e-6)
    for store in stores.values():  # all of the page, the zero vector too
        every = store.search(("docs",), query="title 1", limit=30)
        assert [item.score for item in every if item.key == "k28"] == [0.0]
