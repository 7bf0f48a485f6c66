"""What every store does alike: items, search, filters, pagination, ranking, TTL, namespaces."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import pytest

from graph_agent import SerializationError
from graph_agent.store import BaseStore, HashEmbeddings, InMemoryStore, StoreInputError
from graph_agent.store.base import GetOp, ListNamespacesOp, PutOp, SearchOp

INDEX = {"embed": HashEmbeddings(64), "fields": ["text"]}


def test_a_put_item_comes_back_with_its_namespace_key_and_value(store):
    value = {"text": "likes tea", "when": datetime(2024, 5, 1, tzinfo=UTC), "tags": ("a", "b")}
    store.put(("users", "u1"), "tea", value)
    item = store.get(("users", "u1"), "tea")
    assert item is not None
    assert (item.namespace, item.key, item.value) == (("users", "u1"), "tea", value)
    assert item.created_at == item.updated_at
    assert item.created_at.tzinfo is not None
    assert item.score is None


def test_a_missing_item_is_none(store):
    assert store.get(("users", "u1"), "nothing") is None


def test_a_value_read_back_does_not_alias_the_stored_one(store):
    value = {"list": [1, 2]}
    store.put(("n",), "k", value)
    value["list"].append(3)
    first = store.get(("n",), "k")
    first.value["list"].append(4)
    assert store.get(("n",), "k").value == {"list": [1, 2]}


def test_putting_again_replaces_the_value_and_keeps_created_at(store, clock):
    store.put(("n",), "k", {"v": 1})
    clock(5)
    store.put(("n",), "k", {"v": 2})
    item = store.get(("n",), "k")
    assert item.value == {"v": 2}
    assert (item.updated_at - item.created_at).total_seconds() == pytest.approx(5)


def test_delete_removes_the_item_and_deleting_nothing_is_fine(store):
    store.put(("n",), "k", {"v": 1})
    store.delete(("n",), "k")
    store.delete(("n",), "k")
    assert store.get(("n",), "k") is None
    assert store.search(("n",)) == []


def test_search_lists_items_under_a_prefix_newest_first(store, clock):
    for number in range(3):
        store.put(("users", "u1"), f"k{number}", {"n": number})
        clock(1)
    store.put(("users", "u2"), "other", {"n": 9})
    store.put(("teams", "t1"), "elsewhere", {"n": 9})
    assert [i.key for i in store.search(("users", "u1"))] == ["k2", "k1", "k0"]
    assert [i.key for i in store.search(("users",))] == ["other", "k2", "k1", "k0"]
    assert len(store.search(())) == 5


def test_pages_of_a_search_cover_every_item_once(store, clock):
    for number in range(23):
        store.put(("n",), f"k{number:02}", {"n": number, "even": number % 2 == 0})
        clock(1)
    pages = [store.search(("n",), limit=5, offset=start) for start in range(0, 25, 5)]
    keys = [item.key for page in pages for item in page]
    assert keys == [f"k{n:02}" for n in range(22, -1, -1)]
    assert [len(page) for page in pages] == [5, 5, 5, 5, 3]
    evens = [
        item.key
        for start in range(0, 15, 4)
        for item in store.search(("n",), filter={"even": True}, limit=4, offset=start)
    ]
    assert evens == [f"k{n:02}" for n in range(22, -1, -2)]
    assert store.search(("n",), limit=0) == []


HUGE_PAGES = [(10, 2**63), (2**63, 0), (2**63 - 1, 1), (2**63 - 1, 2**63 - 1), (10**30, 1)]


@pytest.mark.parametrize(("limit", "offset"), HUGE_PAGES)
@pytest.mark.parametrize("how", [{}, {"filter": {"even": True}}, {"query": "tea"}])
def test_a_limit_or_offset_beyond_any_row_count_pages_like_a_list_slice(
    make_store, clock, how, limit, offset
):
    store = make_store(index=INDEX)
    for number in range(3):
        store.put(("n",), f"k{number}", {"text": "tea", "even": number % 2 == 0})
        clock(1)
    every = store.search(("n",), limit=3, **how)
    found = store.search(("n",), limit=limit, offset=offset, **how)
    assert [item.key for item in found] == [item.key for item in every][offset : offset + limit]


@pytest.mark.parametrize(("limit", "offset"), HUGE_PAGES)
def test_list_namespaces_takes_a_limit_or_offset_beyond_any_count(store, limit, offset):
    for namespace in [("a",), ("b",)]:
        store.put(namespace, "k", {})
    assert (
        store.list_namespaces(limit=limit, offset=offset)
        == [("a",), ("b",)][offset : offset + limit]
    )


def test_filters_compare_fields_with_the_mongo_style_operators(store):
    store.put(("n",), "a", {"kind": "fact", "score": 1, "who": {"name": "ada"}})
    store.put(("n",), "b", {"kind": "fact", "score": 5, "who": {"name": "bob"}})
    store.put(("n",), "c", {"kind": "note", "score": 9, "who": {"name": "ada"}})
    store.put(("n",), "d", {"kind": "note", "score": "high"})

    def keys(filter):
        return sorted(item.key for item in store.search(("n",), filter=filter))

    assert keys({"kind": "fact"}) == ["a", "b"]
    assert keys({"who.name": "ada"}) == ["a", "c"]
    assert keys({"kind": "note", "who.name": "ada"}) == ["c"]
    assert keys({"score": {"$eq": 5}}) == ["b"]
    assert keys({"score": {"$ne": 5}}) == ["a", "c", "d"]
    assert keys({"score": {"$gt": 1}}) == ["b", "c"]  # "high" does not compare with 1
    assert keys({"score": {"$gte": 5}}) == ["b", "c"]
    assert keys({"score": {"$lt": 5}}) == ["a"]
    assert keys({"score": {"$lte": 5, "$gt": 1}}) == ["b"]
    assert keys({"missing": 1}) == []
    assert keys({"who": {"name": "bob"}}) == ["b"]  # a dict without operators: equality


def test_an_unknown_filter_operator_is_refused_naming_the_field(store):
    store.put(("n",), "a", {"score": 1})
    with pytest.raises(StoreInputError, match=r"filter\['score'\].*\$regex"):
        store.search(("n",), filter={"score": {"$regex": "1"}})


@pytest.mark.parametrize("field", [1, None, ("a",)])
def test_a_filter_field_that_is_no_name_is_refused_saying_what_to_give(store, field):
    store.put(("n",), "a", {"score": 1})
    with pytest.raises(StoreInputError, match=r"a field is a string"):
        store.search(("n",), filter={field: 1})


def test_a_query_ranks_items_by_the_cosine_of_their_embedded_fields(make_store):
    store = make_store(index=INDEX)
    store.put(("notes",), "tea", {"text": "the user drinks green tea every morning"})
    store.put(("notes",), "meeting", {"text": "the weekly meeting moved to friday"})
    store.put(("notes",), "cat", {"text": "their cat is called Miso"})
    store.put(("notes",), "plain", {"other": "no text field: not embedded"})
    found = store.search(("notes",), query="green tea in the morning")
    assert found[0].key == "tea"
    assert sorted(item.key for item in found) == ["cat", "meeting", "tea"]
    assert [i.score for i in found] == sorted((i.score for i in found), reverse=True)
    assert found[0].score == pytest.approx(_cosine("green tea in the morning", found[0]), abs=1e-6)
    assert "plain" not in [item.key for item in found]
    cat = store.search(("notes",), query="what is the cat called", limit=1)
    assert [item.key for item in cat] == ["cat"]


def _cosine(query: str, item) -> float:
    import math

    a, b = HashEmbeddings(64)([query, item.value["text"]])
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(x * x for x in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norm


def test_a_ranked_search_pages_and_filters_like_any_search(make_store):
    store = make_store(index=INDEX)
    for number in range(6):
        words = " ".join(["tea"] * (6 - number) + ["coffee"] * number)
        store.put(("n",), f"k{number}", {"text": words, "odd": number % 2 == 1})
    ranked = [item.key for item in store.search(("n",), query="tea", limit=10)]
    assert ranked == [f"k{n}" for n in range(6)]
    assert [i.key for i in store.search(("n",), query="tea", limit=2, offset=2)] == ["k2", "k3"]
    odd = store.search(("n",), query="tea", filter={"odd": True}, limit=2, offset=1)
    assert [item.key for item in odd] == ["k3", "k5"]


def test_an_item_put_with_index_false_is_not_ranked(make_store):
    store = make_store(index=INDEX)
    store.put(("n",), "shown", {"text": "tea"})
    store.put(("n",), "hidden", {"text": "tea"}, index=False)
    store.put(("n",), "other field", {"text": "coffee", "note": "tea"}, index=["note"])
    found = [item.key for item in store.search(("n",), query="tea")]
    assert sorted(found) == ["other field", "shown"]


def test_replacing_an_item_replaces_its_vectors(make_store):
    store = make_store(index=INDEX)
    store.put(("n",), "k", {"text": "tea"})
    store.put(("n",), "k", {"text": "coffee"})
    store.put(("n",), "j", {"text": "tea tea"})
    assert store.search(("n",), query="coffee")[0].key == "k"
    assert store.search(("n",), query="tea")[0].key == "j"
    assert store.search(("n",), query="tea")[1].score == pytest.approx(0.0, abs=1e-9)


def test_a_query_without_an_index_is_refused_with_the_fix(store):
    with pytest.raises(StoreInputError, match="index="):
        store.search(("n",), query="tea")


def test_an_item_expires_after_its_ttl_and_a_read_refreshes_it(store, clock):
    store.put(("n",), "short", {"v": 1}, ttl=1)  # minutes
    store.put(("n",), "kept", {"v": 2})
    clock(50)
    assert store.get(("n",), "short") is not None  # read at 50 s: now lives until 110 s
    clock(50)
    assert store.get(("n",), "short", refresh_ttl=False) is not None
    clock(15)
    assert store.get(("n",), "short") is None
    assert [item.key for item in store.search(("n",))] == ["kept"]
    assert store.list_namespaces() == [("n",)]


def test_a_search_refreshes_the_ttl_of_what_it_returns(store, clock):
    store.put(("n",), "k", {"v": 1}, ttl=1)
    clock(50)
    assert len(store.search(("n",))) == 1
    clock(50)
    assert store.get(("n",), "k", refresh_ttl=False) is not None


def test_sweep_deletes_expired_items_and_says_how_many(make_store, clock):
    store = make_store(index=INDEX)
    store.put(("n",), "a", {"text": "tea"}, ttl=1)
    store.put(("n",), "b", {"text": "tea"}, ttl=1)
    store.put(("n",), "c", {"text": "tea"})
    clock(61)
    assert store.sweep() == 2
    assert store.sweep() == 0
    assert [item.key for item in store.search(("n",), query="tea")] == ["c"]


def test_expired_items_are_not_ranked(make_store, clock):
    store = make_store(index=INDEX)
    store.put(("n",), "old", {"text": "tea"}, ttl=1)
    store.put(("n",), "new", {"text": "tea and biscuits"})
    clock(61)
    assert [item.key for item in store.search(("n",), query="tea")] == ["new"]


CRAFTED = [
    ("a%",),
    ("a_",),
    ("a.b",),
    ("a/b",),
    ("a", "b"),
    ("a%2Fb",),
    ("a\\",),
    ("a\x00b",),
    ("ab",),
    ("a",),
    ("a", "%"),
    ("a", "_"),
    ("a", "b/c"),
    ("a", "b", "c"),
    ("a'; DROP TABLE store_items; --",),
    ("\ud800",),
]


def test_no_crafted_label_reaches_another_namespace(store):
    for index, namespace in enumerate(CRAFTED):
        store.put(namespace, "k", {"owner": index})
        store.put(namespace, "%", {"owner": index, "key": "%"})
    for index, namespace in enumerate(CRAFTED):
        assert store.get(namespace, "k").value == {"owner": index}
        below = {item.namespace for item in store.search(namespace, limit=100) if item.key == "k"}
        expected = {other for other in CRAFTED if other[: len(namespace)] == namespace}
        assert below == expected, namespace
        assert set(store.list_namespaces(namespace)) == expected
    assert store.get(("a",), "_") is None
    assert store.get(("a",), "%").value == {"owner": CRAFTED.index(("a",)), "key": "%"}
    assert sorted(store.list_namespaces(("a",), max_depth=1)) == [("a",)]
    assert sorted(store.list_namespaces()) == sorted(CRAFTED)


def test_list_namespaces_cuts_to_max_depth_and_pages(store):
    for namespace in [("a", "x", "1"), ("a", "x", "2"), ("a", "y"), ("b",)]:
        store.put(namespace, "k", {})
    assert store.list_namespaces() == [("a", "x", "1"), ("a", "x", "2"), ("a", "y"), ("b",)]
    assert store.list_namespaces(max_depth=2) == [("a", "x"), ("a", "y"), ("b",)]
    assert store.list_namespaces(("a",), max_depth=2) == [("a", "x"), ("a", "y")]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "x", "2"), ("a", "y")]


def test_a_batch_runs_its_operations_in_order(store):
    results = store.batch(
        [
            PutOp(namespace=("n",), key="a", value={"v": 1}),
            PutOp(namespace=("n",), key="b", value={"v": 2}),
            GetOp(namespace=("n",), key="a"),
            PutOp(namespace=("n",), key="a", value=None),
            GetOp(namespace=("n",), key="a"),
            SearchOp(namespace_prefix=("n",)),
            ListNamespacesOp(),
        ]
    )
    assert results[:2] == [None, None]
    assert results[2].value == {"v": 1}
    assert results[3:5] == [None, None]
    assert [item.key for item in results[5]] == ["b"]
    assert results[6] == [("n",)]


def test_the_async_twins_do_what_the_sync_calls_do(store):
    async def scenario():
        await store.aput(("n", "1"), "a", {"v": 1})
        await store.aput(("n", "2"), "b", {"v": 2}, ttl=5)
        got = await store.aget(("n", "1"), "a")
        found = await store.asearch(("n",), filter={"v": 2})
        namespaces = await store.alist_namespaces(("n",))
        await store.adelete(("n", "1"), "a")
        return got, found, namespaces, await store.aget(("n", "1"), "a"), await store.asweep()

    got, found, namespaces, gone, swept = asyncio.run(scenario())
    assert got.value == {"v": 1}
    assert [item.key for item in found] == ["b"]
    assert namespaces == [("n", "1"), ("n", "2")]
    assert gone is None
    assert swept == 0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.put(["n"], "k", {}), "tuple of non-empty strings"),
        (lambda s: s.put(("n", ""), "k", {}), "tuple of non-empty strings"),
        (lambda s: s.put((), "k", {}), "needs a namespace"),
        (lambda s: s.put(("n",), "", {}), "non-empty string"),
        (lambda s: s.put(("n",), "k", ["not", "a", "dict"]), "a value is a dict"),
        (lambda s: s.put(("n",), "k", {}, ttl=0), "minutes"),
        (lambda s: s.get(("n",), 7), "non-empty string"),
        (lambda s: s.search(("n",), limit=-1), "limit"),
        (lambda s: s.search(("n",), offset=-1), "offset"),
        (lambda s: s.search(("n",), offset=2.0), "offset"),
        (lambda s: s.list_namespaces(limit=-1), "limit"),
        (lambda s: s.list_namespaces(offset=-1), "offset"),
        (lambda s: s.list_namespaces(max_depth=0), "max_depth"),
    ],
)
def test_bad_input_is_refused_saying_what_to_pass(store, call, message):
    with pytest.raises(StoreInputError, match=message):
        call(store)


def test_a_value_the_serializer_cannot_store_is_refused_naming_it(store):
    with pytest.raises(SerializationError, match="store value 'k'"):
        store.put(("n",), "k", {"handle": object()})
    assert store.get(("n",), "k") is None


def test_a_reopened_store_holds_what_was_put(make_store):
    first = make_store(index=INDEX)
    first.put(("users", "u1"), "tea", {"text": "green tea"}, ttl=60)
    again: BaseStore = make_store(index=INDEX)
    assert again.get(("users", "u1"), "tea").value == {"text": "green tea"}
    assert again.search(("users",), query="tea")[0].key == "tea"


def test_a_background_sweep_deletes_expired_items_until_the_store_closes(make_store, clock):
    store = make_store(sweep_interval=0.05)
    store.put(("n",), "k", {"v": 1}, ttl=1)
    clock(61)
    deadline = time.monotonic() + 20
    while list(store._namespaces("", 0)) and time.monotonic() < deadline:  # rows, expired or not
        time.sleep(0.05)
    assert list(store._namespaces("", 0)) == []
    store.close()
    assert not store._sweeper.is_alive()


def test_a_sweep_interval_must_be_positive():
    with pytest.raises(StoreInputError, match="sweep_interval"):
        InMemoryStore(sweep_interval=0)


def test_filters_match_equal_values_of_other_types_and_any_text(store):
    store.put(("n",), "int", {"v": 1, "t": "é\ud800", "deep": {"kind": "x"}})
    store.put(("n",), "float", {"v": 1.0, "t": "plain"})
    store.put(("n",), "bool", {"v": True, "t": "kind"})
    store.put(("n",), "nested only", {"inner": {"t": "plain"}})

    def keys(filter):
        return sorted(item.key for item in store.search(("n",), filter=filter))

    assert keys({"v": 1}) == ["bool", "float", "int"]  # 1 == 1.0 == True, as in Python
    assert keys({"v": {"$eq": 1.0}}) == ["bool", "float", "int"]
    assert keys({"t": "é\ud800"}) == ["int"]
    assert keys({"t": "plain"}) == ["float"]  # not the nested one
    assert keys({"inner.t": {"$eq": "plain"}}) == ["nested only"]
    assert keys({"deep.kind": "x", "t": {"$ne": "plain"}}) == ["int"]
    assert keys({"t": "kind"}) == ["bool"]
