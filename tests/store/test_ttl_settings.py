"""A store's TTL settings, as LangGraph's ``store.ttl``: ``default_ttl`` for puts that give no
ttl, ``refresh_on_read`` for reads that do not say; on every store."""

from __future__ import annotations

import asyncio

import pytest

from graph_agent.store import InMemoryStore, StoreInputError
from graph_agent.store.items import NOT_PROVIDED, PutOp
from tests.store.conftest import MakeStore


def test_a_put_without_ttl_lives_default_ttl_minutes(make_store: MakeStore, clock) -> None:
    store = make_store(default_ttl=1)
    store.put(("n",), "default", {"v": 1})
    store.put(("n",), "forever", {"v": 2}, ttl=None)  # None: never expires, as in LangGraph
    store.put(("n",), "longer", {"v": 3}, ttl=5)
    store.batch([PutOp(namespace=("n",), key="op", value={"v": 4})])  # an op's ttl: the default
    clock(61)
    assert store.get(("n",), "default") is None
    assert store.get(("n",), "op") is None
    assert store.get(("n",), "forever") is not None
    assert store.get(("n",), "longer") is not None
    assert store.sweep() == 2


def test_the_async_put_takes_the_default_too(make_store: MakeStore, clock) -> None:
    store = make_store(default_ttl=1)
    asyncio.run(store.aput(("n",), "k", {"v": 1}))
    clock(61)
    assert asyncio.run(store.aget(("n",), "k")) is None


def test_refresh_on_read_false_reads_without_restarting_the_ttl(
    make_store: MakeStore, clock
) -> None:
    store = make_store(refresh_on_read=False)
    store.put(("n",), "k", {"v": 1}, ttl=1)
    clock(50)
    assert store.get(("n",), "k") is not None  # read, and not refreshed
    assert len(store.search(("n",))) == 1  # nor by a search
    clock(15)
    assert store.get(("n",), "k") is None


def test_a_read_may_still_ask_for_a_refresh(make_store: MakeStore, clock) -> None:
    store = make_store(refresh_on_read=False)
    store.put(("n",), "k", {"v": 1}, ttl=1)
    store.put(("n",), "s", {"v": 1}, ttl=1)
    clock(50)
    assert store.get(("n",), "k", refresh_ttl=True) is not None
    assert len(store.search(("n",), filter={"v": 1}, refresh_ttl=True)) == 2
    clock(50)
    assert store.get(("n",), "k") is not None and store.get(("n",), "s") is not None


def test_not_provided_reads_as_its_name() -> None:
    assert repr(NOT_PROVIDED) == "NOT_PROVIDED"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"default_ttl": 0}, "default_ttl=0"),
        ({"default_ttl": "10"}, "default_ttl='10'"),
        ({"default_ttl": True}, "default_ttl=True"),
        ({"refresh_on_read": "yes"}, "refresh_on_read='yes'"),
    ],
)
def test_bad_settings_are_refused_naming_them(options: dict[str, object], named: str) -> None:
    with pytest.raises(StoreInputError, match=named):
        InMemoryStore(**options)  # type: ignore[arg-type]


def test_a_bool_is_no_ttl() -> None:
    with pytest.raises(StoreInputError, match="ttl=True"):
        InMemoryStore().put(("n",), "k", {}, ttl=True)
