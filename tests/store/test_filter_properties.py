"""Every store's filtered search against a plain reference written here.

The stores filter fast: top-level equalities tested inline, and a backend passes over rows whose
stored bytes lack a string the filter needs (:func:`graph_agent.store.base._needles`). Here
random small item sets and random filters check that none of that changes what a search
returns: the documented semantics (``{"field": value}`` equal, ``$eq``/``$ne``/``$gt``/``$gte``/
``$lt``/``$lte``, dotted paths into nested dicts, a missing field never matches, even ``$ne``;
a string and a number do not compare), newest first, then namespace and key, paged by
``limit``/``offset``.
"""

from __future__ import annotations

import enum
import math
import operator
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graph_agent.checkpoint.serde import register
from graph_agent.store import BaseStore, HashEmbeddings
from graph_agent.store.base import PutOp

# Backends: the pgvector server's PostgresStore filters with the same SQL as the plain one.
pytestmark = pytest.mark.parametrize("make_store", ["memory", "sqlite", "postgres"], indirect=True)

NAMES = ["a", "b", "kind", "é", "", "a.b"]
"""Field names: some equal to the strings values hold, so one's msgpack bytes can sit inside
another's (``"a.b"`` is a literal key that a dotted filter path never reads)."""
TEXTS = [*NAMES, "x", "日本", "\x00", "A", "ab"]
PATHS = ["a", "b", "kind", "é", "", "a.b", "b.a", "kind.a", "a.b.kind", "a."]
NAMESPACES = [("t",), ("t", "s"), ("t", "s", "u"), ("tt",), ("u",)]
PREFIXES = [(), ("t",), ("t", "s")]
KEYS = ["k", "k2", "K", "é", "日", "a b", "k/"]


class Kind(enum.StrEnum):
    """Stored through its codec (not as a msgpack string), yet equal to its text."""

    A = "a"
    X = "x"


register(Kind, 123)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-2, 3)
    | st.sampled_from([0.0, -0.0, 1.0, 2.5, -1.5, 2**64, -(2**70)])
    | st.sampled_from(TEXTS)
    | st.sampled_from(Kind)
    | st.text(max_size=3)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(NAMES), inner),
    max_leaves=6,
)
documents = st.dictionaries(st.sampled_from(NAMES), values, max_size=4)


class Put(NamedTuple):
    ns: tuple[str, ...]
    key: str
    value: dict[str, Any]
    tick: int
    """When it is written (ties are common: then namespace and key order)."""


puts = st.lists(
    st.builds(
        Put,
        st.sampled_from(NAMESPACES),
        st.sampled_from(KEYS),
        documents,
        st.integers(0, 3),
    ),
    min_size=1,
    max_size=8,
    unique_by=lambda put: (put.ns, put.key),
)

ABSENT = object()
COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "$eq": operator.eq,
    "$ne": operator.ne,
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}


def reference_matches(value: dict[str, Any], filter: dict[str, Any]) -> bool:
    """Whether ``value`` matches ``filter``, as the docs say, one entry at a time."""
    for path, wanted in filter.items():
        found: Any = value
        for part in path.split("."):
            found = found.get(part, ABSENT) if isinstance(found, dict) else ABSENT
        if found is ABSENT:
            return False  # a missing field never matches, whatever the test (also $ne)
        is_operators = isinstance(wanted, dict) and wanted and all(k[:1] == "$" for k in wanted)
        tests = wanted.items() if is_operators else [("$eq", wanted)]
        for name, operand in tests:
            try:
                if not COMPARE[name](found, operand):
                    return False
            except TypeError:  # e.g. a string and a number: no order, no match
                return False
    return True


def reference_search(
    written: list[Put], prefix: tuple[str, ...], filter: dict[str, Any], limit: int, offset: int
) -> list[tuple[tuple[str, ...], str]]:
    found = [
        p for p in written if p.ns[: len(prefix)] == prefix and reference_matches(p.value, filter)
    ]
    found.sort(key=lambda p: (-p.tick, "".join(label + "/" for label in p.ns), p.key))
    return [(p.ns, p.key) for p in found[offset : offset + limit]]


@st.composite
def filters(draw: st.DrawFn, written: list[Put]) -> dict[str, Any]:
    """A filter of 1-3 entries, most read from the fields of one item (so that some match)."""
    holding = [put.value for put in written if put.value]
    target = draw(st.sampled_from(holding)) if holding else {}
    fields = sorted(_fields(target), key=repr)
    entries = []
    for _ in range(draw(st.integers(1, 3))):
        if fields and draw(st.sampled_from([True, True, True, False])):  # a field of the target
            path, leaf = draw(st.sampled_from(fields))
            entries.append((path, draw(_held(leaf))))
        else:
            entries.append((draw(st.sampled_from(PATHS)), draw(_conditions(scalars | values))))
    return dict(entries)


def _conditions(operands: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A value to equal, or 1-2 operators."""
    return operands | st.dictionaries(
        st.sampled_from(sorted(COMPARE)), operands, min_size=1, max_size=2
    )


def _held(leaf: Any) -> st.SearchStrategy[Any]:
    """Conditions on a field holding ``leaf``: most of them true of it."""
    same = _near(leaf)
    return st.sampled_from(
        [
            same,
            same.map(lambda operand: {"$eq": operand}),
            same.map(lambda operand: {"$gte": operand}),
            same.map(lambda operand: {"$lte": operand, "$ne": 2}),
            same.map(lambda operand: {"$ne": operand}),
            _conditions(scalars | values),
        ]
    ).flatmap(lambda chosen: chosen)


def _near(leaf: Any) -> st.SearchStrategy[Any]:
    """Mostly operands equal to ``leaf`` (of its type or another), sometimes any scalar."""
    same = [leaf]
    if isinstance(leaf, Kind):
        same.insert(0, leaf.value)  # a plain string equal to it (first: drawn more often)
    if type(leaf) in (int, float) and abs(leaf) < 2**53:
        same += [float(leaf), int(leaf)]
    return _mostly(st.sampled_from(same), scalars)


def _mostly(usual: st.SearchStrategy[Any], other: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``usual`` 3 times in 4 (``|`` would flatten ``other``'s branches, each as likely)."""
    return st.sampled_from([usual, usual, usual, other]).flatmap(lambda chosen: chosen)


def _fields(value: dict[str, Any], path: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted path, value)`` of every field of ``value`` a path reaches, nested ones too."""
    for name, inner in value.items():
        if "." in name:
            continue  # a literal key no dotted path reads
        at = f"{path}.{name}" if path else name
        yield at, inner
        if isinstance(inner, dict):
            yield from _fields(inner, at)


@contextmanager
def written_at(store: BaseStore, written: list[Put]) -> Iterator[None]:
    """``written`` put into ``store``, each at its tick; deleted again on the way out (the
    store outlives the example: hypothesis runs many in one test's fixtures)."""
    try:
        for put in written:
            at = 1_800_000_000.0 + put.tick
            with mock.patch("graph_agent.store.base.now", lambda at=at: at):
                store.put(put.ns, put.key, put.value)
        yield
    finally:
        store.batch([PutOp(namespace=p.ns, key=p.key, value=None) for p in written])


def check_search(store: BaseStore, written: list[Put], data: st.DataObject) -> None:
    for _ in range(3):
        filter = data.draw(filters(written), label="filter")
        prefix = data.draw(st.sampled_from(PREFIXES), label="prefix")
        limit = data.draw(st.sampled_from([0, 1, 2, 3, 10]), label="limit")
        offset = data.draw(st.sampled_from([0, 0, 0, 1, 2, 4]), label="offset")
        found = store.search(prefix, filter=filter, limit=limit, offset=offset)
        assert [(item.namespace, item.key) for item in found] == reference_search(
            written, prefix, filter, limit, offset
        )
        by_place = {(p.ns, p.key): p.value for p in written}
        assert all(_same(item.value, by_place[(item.namespace, item.key)]) for item in found)


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same types throughout (``==`` alone takes ``1`` for ``True``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return bool(a == b)


@pytest.mark.parametrize(
    ("value", "filter"),
    [
        ({"kind": Kind.X}, {"kind": "x"}),
        ({"kind": Kind.X}, {"kind": {"$eq": "x"}}),
        ({"deep": {"kind": Kind.X}}, {"deep.kind": "x"}),
        ({Kind.A: "x"}, {"a": "x"}),
        ({"kind": "x"}, {"kind": Kind.X}),
    ],
)
def test_a_string_filter_matches_a_str_enum_member_stored_through_its_codec(store, value, filter):
    """Regression: a filter's needle (the msgpack bytes of ``key`` then ``"x"``) missed values
    that hold the text only inside a registered type's ext form, so such equal fields were
    never returned (while ``$gte`` found them)."""
    store.put(("n",), "enum", value)
    store.put(("n",), "other", {"kind": "y", "a": "y"})
    assert [item.key for item in store.search(("n",), filter=filter)] == ["enum"]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(written=puts, data=st.data())
def test_a_filtered_search_returns_what_the_reference_does(store, written, data):
    with written_at(store, written):
        check_search(store, written, data)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(written=puts, data=st.data())
def test_a_filtered_ranked_search_is_the_ranking_filtered_by_the_reference(
    make_store, written, data
):
    """With ``query=``, items come best first: the filtered page is the page of the ranked
    items the reference keeps."""
    store = make_store(index={"embed": HashEmbeddings(16), "fields": ["$"]})
    with written_at(store, written):
        query = data.draw(st.sampled_from(TEXTS), label="query")
        ranked = store.search((), query=query, limit=100)
        for _ in range(2):
            filter = data.draw(filters(written), label="filter")
            limit = data.draw(st.sampled_from([0, 1, 2, 10]), label="limit")
            offset = data.draw(st.sampled_from([0, 0, 1, 3]), label="offset")
            found = store.search((), query=query, filter=filter, limit=limit, offset=offset)
            kept = [item for item in ranked if reference_matches(item.value, filter)]
            assert [(i.namespace, i.key, i.score) for i in found] == [
                (i.namespace, i.key, i.score) for i in kept[offset : offset + limit]
            ]
