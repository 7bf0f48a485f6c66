"""Key strategies and the read-only state views."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    InvalidUpdateError,
    MergeStrategy,
    NodeError,
    OverAllState,
    RemoveMessage,
    ReplaceAll,
    ReplaceStrategy,
    StateGraph,
)
from graph_agent.graph.state import AppendLog, SeqView, apply_append


class Item:
    def __init__(self, id: str, text: str) -> None:
        self.id = id
        self.text = text

    def __repr__(self) -> str:
        return f"Item({self.id!r}, {self.text!r})"


def one_node_graph(fn, **strategies):
    g = StateGraph("one", key_strategies=strategies)
    g.add_node("node", fn)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    return g.compile()


def test_replace_is_the_default_for_undeclared_keys(driver):
    app = one_node_graph(lambda s: {"x": s["x"] * 10})
    assert driver.invoke(app, {"x": 2})["x"] == 20


def test_append_takes_a_single_item_or_a_list(driver):
    app = one_node_graph(lambda s: {"log": ["b", "c"]}, log=AppendStrategy())
    assert driver.invoke(app, {"log": "a"})["log"] == ["a", "b", "c"]


def test_append_replaces_an_item_with_the_same_id_in_place():
    log = AppendLog([Item("1", "one"), Item("2", "two")])
    apply_append(log, Item("1", "uno"))
    assert [(i.id, i.text) for i in log.items] == [("1", "uno"), ("2", "two")]


def test_append_matches_ids_on_dict_items_too():
    log = AppendLog([{"id": "a", "v": 1}])
    apply_append(log, [{"id": "a", "v": 2}, {"id": "b", "v": 3}])
    assert log.items == [{"id": "a", "v": 2}, {"id": "b", "v": 3}]


def test_remove_message_deletes_the_item_with_that_id():
    log = AppendLog([Item("1", "one"), Item("2", "two"), Item("3", "three")])
    rewritten = not apply_append(log, RemoveMessage("2"))
    assert [i.id for i in log.items] == ["1", "3"]
    assert rewritten


def test_replace_all_swaps_the_whole_list():
    log = AppendLog(["a", "b"])
    apply_append(log, ReplaceAll(["z"]))
    assert log.items == ["z"]


def test_removing_an_unknown_id_is_a_clear_error_naming_node_and_key(driver):
    app = one_node_graph(lambda s: {"log": RemoveMessage("nope")}, log=AppendStrategy())
    with pytest.raises(InvalidUpdateError, match=r"node 'node'.*'log'.*nope") as info:
        driver.invoke(app, {"log": [Item("1", "x")]})
    assert info.value.node == "node"


@pytest.mark.parametrize(
    "write", [{"id": ["bad"], "v": 1}, [Item(["bad"], "x")], RemoveMessage(["bad"])]
)
def test_an_unhashable_id_is_a_clear_error_naming_node_key_and_id(driver, write):
    app = one_node_graph(lambda s: {"log": write}, log=AppendStrategy())
    with pytest.raises(
        InvalidUpdateError, match=r"node 'node'.*'log'.*\['bad'\].*unhashable"
    ) as info:
        driver.invoke(app, {"log": [Item("1", "x")]})
    assert info.value.node == "node" and info.value.step == 0


def test_an_earlier_view_keeps_its_length_after_later_appends():
    log = AppendLog(["a"])
    view = log.view()
    apply_append(log, ["b", "c"])
    assert list(view) == ["a"] and len(view) == 1
    assert log.view() == ["a", "b", "c"]


def test_an_earlier_view_is_unchanged_by_an_in_place_id_replace():
    log = AppendLog([Item("1", "one")])
    view = log.view()
    apply_append(log, Item("1", "changed"))
    assert view[0].text == "one"
    assert log.view()[0].text == "changed"


def test_merge_strategy_merges_dicts_key_by_key(driver):
    app = one_node_graph(lambda s: {"meta": {"b": 2, "a": 3}}, meta=MergeStrategy())
    assert dict(driver.invoke(app, {"meta": {"a": 1}})["meta"]) == {"a": 3, "b": 2}


def test_merge_strategy_rejects_a_non_dict_naming_the_key(driver):
    app = one_node_graph(lambda s: {"meta": ["not", "a", "dict"]}, meta=MergeStrategy())
    with pytest.raises(InvalidUpdateError, match=r"'meta'.*MergeStrategy"):
        driver.invoke(app, {})


def test_a_plain_callable_is_a_strategy_and_sees_none_first(driver):
    seen = []

    def keep_max(old, new):
        seen.append(old)
        return new if old is None else max(old, new)

    app = one_node_graph(lambda s: {"best": 5}, best=keep_max)
    assert driver.invoke(app, {"best": 7})["best"] == 7
    assert seen == [None, 7]


def test_strategies_have_readable_reprs():
    assert repr(AppendStrategy()) == "AppendStrategy()"
    assert repr(ReplaceStrategy()) == "ReplaceStrategy()"
    assert AppendStrategy() == AppendStrategy()


def test_a_bad_strategy_is_rejected_when_the_graph_is_built():
    from graph_agent import GraphSetupError

    with pytest.raises(GraphSetupError, match=r"key_strategies\['log'\]"):
        StateGraph("g", key_strategies={"log": 42})


def test_overallstate_is_a_read_only_mapping():
    state = OverAllState({"x": 1, "items": [1, 2], "meta": {"a": 1}})
    with pytest.raises(TypeError):
        state["x"] = 2  # type: ignore[index]
    assert isinstance(state["meta"], MappingProxyType)
    with pytest.raises(TypeError):
        state["meta"]["a"] = 2
    assert isinstance(state["items"], SeqView)
    assert not hasattr(state["items"], "append")
    assert state.value("missing", "default") == "default"
    assert state.data() == {"x": 1, "items": [1, 2], "meta": {"a": 1}}
    assert "x" in state and "missing" not in state
    with pytest.raises(KeyError):
        state["missing"]


def test_seqview_behaves_like_a_read_only_list():
    view = SeqView(["a", "b", "c", "d"], 3)
    assert view == ["a", "b", "c"] and view == ("a", "b", "c")
    assert view[-1] == "c" and view[1:] == ["b", "c"]
    assert list(reversed(view)) == ["c", "b", "a"]
    assert view + ["x"] == ["a", "b", "c", "x"]  # noqa: RUF005 - testing __add__
    assert ["x", *view] == ["x", "a", "b", "c"]
    assert view.index("b") == 1 and "d" not in view
    with pytest.raises(IndexError):
        view[3]
    assert repr(view) == "['a', 'b', 'c']"


def test_a_node_cannot_mutate_state_behind_the_engines_back(driver):
    def sneaky(state):
        state["log"].append("sneaked")
        return {}

    app = one_node_graph(sneaky, log=AppendStrategy())
    with pytest.raises(NodeError, match="AttributeError") as info:
        driver.invoke(app, {"log": ["a"]})
    assert info.value.node == "sneaky" or info.value.node == "node"


def test_states_streamed_earlier_keep_their_values_after_the_run(driver):
    g = StateGraph("g", key_strategies={"log": AppendStrategy(), "meta": MergeStrategy()})
    g.add_node("first", lambda s: {"log": "1", "meta": {"step": 1}, "x": 1})
    g.add_node("second", lambda s: {"log": "2", "meta": {"step": 2}, "x": 2})
    g.add_edge(START, "first").add_edge("first", "second").add_edge("second", END)
    outputs = driver.stream(g.compile(), {"log": []})
    first = next(o for o in outputs if o.node == "first")
    assert first.state["log"] == ["1"]
    assert first.state["meta"] == {"step": 1}
    assert first.state["x"] == 1
    last = next(o for o in outputs if o.node == "second")
    assert last.state["log"] == ["1", "2"] and last.state["x"] == 2
