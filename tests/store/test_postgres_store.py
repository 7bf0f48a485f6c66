"""PostgresStore on its own: how vectors are stored and ranked in SQL, setup by many processes
at once, durability, and errors."""

from __future__ import annotations

import threading

import psycopg
import pytest

from graph_agent.store import HashEmbeddings, StoreError, StoreInputError
from graph_agent.store.postgres import PostgresStore
from tests.checkpoint.postgres_db import DSN, fresh_schema

INDEX = {"embed": HashEmbeddings(32), "fields": ["text"]}


def _server_has_pgvector() -> bool:
    with psycopg.connect(DSN, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        return found.fetchone() is not None


def test_vectors_are_float8_arrays_ranked_in_sql_when_asked(tmp_path):
    with fresh_schema() as dsn, PostgresStore(dsn, index=INDEX, vectors="array") as store:
        assert store.vector_kind == "array"
        store.put(("n",), "tea", {"text": "green tea"})
        store.put(("n",), "coffee", {"text": "black coffee"})
        with psycopg.connect(dsn) as conn:
            kind = conn.execute(
                "SELECT pg_typeof(embedding)::text FROM graph_agent_store_vectors LIMIT 1"
            ).fetchone()[0]
        assert kind == "double precision[]"
        found = store.search(("n",), query="tea")
        assert [item.key for item in found] == ["tea", "coffee"]
        assert found[0].score == pytest.approx(1 / 2**0.5, abs=1e-6)  # 1 of 2 words shared
        assert found[1].score == pytest.approx(0.0, abs=1e-9)


def test_auto_picks_pgvector_when_the_server_has_it_else_arrays():
    with fresh_schema() as dsn, PostgresStore(dsn, index=INDEX) as store:
        expected = "pgvector" if _server_has_pgvector() else "array"
        assert store.vector_kind == expected
        store.put(("n",), "tea", {"text": "tea"})
        assert store.search(("n",), query="tea")[0].score == pytest.approx(1.0)


def test_asking_for_pgvector_on_a_server_without_it_says_how_to_fix_it():
    if _server_has_pgvector():
        with fresh_schema() as dsn, PostgresStore(dsn, vectors="pgvector") as store:
            assert store.vector_kind == "pgvector"
        return
    with fresh_schema() as dsn, pytest.raises(StoreInputError, match="CREATE EXTENSION vector"):
        PostgresStore(dsn, vectors="pgvector")


def test_tables_made_before_keep_their_kind_of_vectors():
    with fresh_schema() as dsn:
        PostgresStore(dsn, vectors="array").close()
        with PostgresStore(dsn) as again:
            assert again.vector_kind == "array"


def test_many_processes_may_set_the_tables_up_at_once():
    with fresh_schema() as dsn:
        errors: list[BaseException] = []
        stores: list[PostgresStore] = []

        def open_one() -> None:
            try:
                stores.append(PostgresStore(dsn, pool_size=1, index=INDEX))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=open_one) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        stores[0].put(("n",), "k", {"text": "tea"})
        assert all(store.get(("n",), "k") is not None for store in stores)
        for store in stores:
            store.close()


def test_full_durability_waits_for_the_flush_and_normal_does_not():
    with fresh_schema() as dsn:
        for durability, setting in (("full", "on"), ("normal", "off")):
            with (
                PostgresStore(dsn, durability=durability) as store,
                store._using("checking") as conn,
            ):
                assert conn.execute("SHOW synchronous_commit").fetchone()[0] == setting


def test_a_server_that_cannot_be_reached_is_a_store_error_without_the_password():
    with pytest.raises(StoreError, match="check the DSN") as raised:
        PostgresStore("host=127.0.0.1 port=1 dbname=x user=u password=hunter2 connect_timeout=2")
    assert "hunter2" not in str(raised.value)


def test_a_closed_store_fails_with_a_store_error():
    with fresh_schema() as dsn:
        store = PostgresStore(dsn)
        store.close()
        with pytest.raises(StoreError):
            store.get(("n",), "k")


def test_a_put_that_stores_no_vectors_drops_the_items_old_ones():
    with fresh_schema() as dsn, PostgresStore(dsn, index=INDEX, vectors="array") as store:
        store.put(("n",), "drink", {"text": "green tea"})
        store.put(
            ("n",), "drink", {"text": "green tea"}, index=False
        )  # the text is not indexed now
        with psycopg.connect(dsn) as conn:
            left = conn.execute("SELECT count(*) FROM graph_agent_store_vectors").fetchone()[0]
        assert left == 0
        assert [item.key for item in store.search(("n",), query="tea") if item.score] == []
