"""compile() and the builder refuse malformed graphs with messages that say how to fix them."""

from __future__ import annotations

import pytest

from graph_agent import END, START, Command, CompileConfig, GraphSetupError, StateGraph


def noop(state):
    return {}


def test_an_edge_to_an_unknown_node_names_it_and_suggests_a_fix():
    g = StateGraph("g")
    g.add_node("draft", noop)
    g.add_edge(START, "draft").add_edge("draft", "drafty").add_edge("draft", END)
    with pytest.raises(
        GraphSetupError,
        match=r"add_edge\('draft', 'drafty'\): unknown node 'drafty' \(did you mean 'draft'\?\).*add_node",
    ):
        g.compile()


def test_an_edge_from_an_unknown_node_is_reported():
    g = StateGraph("g")
    g.add_node("a", noop)
    g.add_edge(START, "a").add_edge("a", END).add_edge("ghost", "a")
    with pytest.raises(GraphSetupError, match=r"unknown node 'ghost'"):
        g.compile()


def test_a_path_map_naming_an_unknown_node_is_reported():
    g = StateGraph("g")
    g.add_node("a", noop)
    g.add_edge(START, "a")
    g.add_conditional_edges("a", lambda s: "x", {"x": "missing", "y": END})
    with pytest.raises(
        GraphSetupError,
        match=r"path_map names an unknown node.*path_map\['x'\]: unknown node 'missing'",
    ):
        g.compile()


def test_destinations_naming_an_unknown_node_are_reported():
    g = StateGraph("g")
    g.add_node("a", noop, destinations=("nowhere",))
    g.add_edge(START, "a").add_edge("a", END)
    with pytest.raises(GraphSetupError, match=r"destinations names an unknown node.*'nowhere'"):
        g.compile()


def test_a_graph_without_an_entry_edge_is_refused():
    g = StateGraph("g")
    g.add_node("a", noop).add_edge("a", END)
    with pytest.raises(GraphSetupError, match=r"no entry edge: add g.add_edge\(START, 'a'\)"):
        g.compile()


def test_unreachable_nodes_are_named():
    g = StateGraph("g")
    g.add_node("a", noop).add_node("island", noop)
    g.add_edge(START, "a").add_edge("a", END).add_edge("island", END)
    with pytest.raises(GraphSetupError, match=r"'island' can never run: no path from START"):
        g.compile()


def test_nodes_that_can_never_reach_end_are_named():
    g = StateGraph("g")
    g.add_node("a", noop).add_node("sink", noop)
    g.add_edge(START, "a").add_edge("a", "sink").add_edge("a", END)
    with pytest.raises(GraphSetupError, match=r"'sink' have no path to END.*add_edge\(node, END\)"):
        g.compile()


def test_a_cycle_with_no_exit_is_refused():
    g = StateGraph("g")
    g.add_node("a", noop).add_node("b", noop)
    g.add_edge(START, "a").add_edge("a", "b").add_edge("b", "a")
    with pytest.raises(GraphSetupError, match=r"'a', 'b' have no path to END"):
        g.compile()


def test_duplicate_node_names_are_refused():
    g = StateGraph("g")
    g.add_node("a", noop)
    with pytest.raises(GraphSetupError, match=r"a node named 'a' already exists"):
        g.add_node("a", noop)


@pytest.mark.parametrize("name", [START, END, "__model__", "", "__x__"])
def test_reserved_or_empty_names_are_refused(name):
    g = StateGraph("g")
    with pytest.raises(GraphSetupError, match=r"reserved|non-empty"):
        g.add_node(name, noop)


def test_interrupts_naming_unknown_nodes_are_refused():
    from graph_agent import MemorySaver

    g = StateGraph("g")
    g.add_node("publish", noop).add_edge(START, "publish").add_edge("publish", END)
    with pytest.raises(
        GraphSetupError,
        match=r"interrupt_before names unknown node\(s\): 'publsh' \(did you mean 'publish'\?\)",
    ):
        g.compile(CompileConfig(saver=MemorySaver(), interrupt_before=["publsh"]))


def test_interrupts_without_a_saver_are_refused():
    g = StateGraph("g")
    g.add_node("publish", noop).add_edge(START, "publish").add_edge("publish", END)
    with pytest.raises(GraphSetupError, match=r"interrupt_after needs a checkpoint saver"):
        g.compile(CompileConfig(interrupt_after=["publish"]))


def test_edges_into_start_or_out_of_end_are_refused():
    g = StateGraph("g")
    with pytest.raises(GraphSetupError, match="cannot lead into START"):
        g.add_edge("a", START)
    with pytest.raises(GraphSetupError, match="cannot leave END"):
        g.add_edge(END, "a")


def test_nodes_must_take_the_state():
    g = StateGraph("g")
    with pytest.raises(GraphSetupError, match=r"node 'a' takes no arguments"):
        g.add_node("a", lambda: {})
    with pytest.raises(GraphSetupError, match=r"needs 3 arguments"):
        g.add_node("b", lambda s, c, d: {})
    with pytest.raises(GraphSetupError, match="not callable"):
        g.add_node("c", "not a function")


def test_routers_must_be_synchronous():
    async def router(state):
        return END

    g = StateGraph("g")
    with pytest.raises(GraphSetupError, match=r"router on 'a' is async"):
        g.add_conditional_edges("a", router)


def test_compile_accepts_a_valid_graph_with_a_conditional_loop():
    g = StateGraph("ok")
    g.add_node("a", noop)
    g.add_edge(START, "a")
    g.add_conditional_edges("a", lambda s: "done", {"again": "a", "done": END})
    assert g.compile().name == "ok"


def test_a_list_as_an_edge_target_is_refused_with_one_edge_per_target_as_the_fix():
    g = StateGraph("g")
    with pytest.raises(
        GraphSetupError,
        match=r"add_edge\('a', \['b', 'c'\]\): the target must be one node name or END, not "
        r"list\. For a fan-out call add_edge\('a', 'b'\) and add_edge\('a', 'c'\)",
    ):
        g.add_edge("a", ["b", "c"])


@pytest.mark.parametrize("source", [None, 5, ["a", None]])
def test_an_edge_source_that_is_not_node_names_is_refused(source):
    g = StateGraph("g")
    with pytest.raises(
        GraphSetupError, match=r"the source must be a node name, START, or a list of node names"
    ):
        g.add_edge(source, "a")


def test_a_path_map_value_that_is_a_list_is_refused_with_the_fan_out_fix():
    g = StateGraph("g")
    with pytest.raises(
        GraphSetupError,
        match=r"add_conditional_edges\('a', \.\.\.\): path_map\['both'\] is \['b', 'c'\].*"
        r"router return a list of keys",
    ):
        g.add_conditional_edges("a", lambda s: "both", {"both": ["b", "c"]})


def test_a_listed_path_map_of_non_names_is_refused():
    g = StateGraph("g")
    with pytest.raises(GraphSetupError, match=r"path_map item 1 is \['c'\]"):
        g.add_conditional_edges("a", lambda s: "b", ["b", ["c"]])


def test_a_conditional_edge_source_must_be_one_node_name():
    g = StateGraph("g")
    with pytest.raises(GraphSetupError, match=r"one add_conditional_edges call per source"):
        g.add_conditional_edges(["a", "b"], lambda s: END)


@pytest.mark.parametrize("destinations", [None, 5, ("b", None), {5: "five"}])
def test_destinations_that_are_not_a_tuple_of_names_are_refused(destinations):
    g = StateGraph("g")
    with pytest.raises(
        GraphSetupError, match=r"add_node\('a', \.\.\., destinations=.*tuple of node names"
    ):
        g.add_node("a", noop, destinations=destinations)


def test_destinations_may_be_a_dict_of_node_names_to_edge_labels_as_in_langgraph():
    g = StateGraph("g")
    g.add_node("a", lambda s: Command(goto="b"), destinations={"b": "to b", END: "done"})
    g.add_node("b", lambda s: {"went": "b"}).add_edge(START, "a").add_edge("b", END)
    assert g.compile().invoke({})["went"] == "b"


def test_start_is_refused_as_a_destination_or_path_map_target():
    g = StateGraph("g")
    with pytest.raises(GraphSetupError, match=r"START cannot be a destination"):
        g.add_node("a", noop, destinations=(START,))
    with pytest.raises(GraphSetupError, match=r"path_map\['again'\] is START"):
        g.add_conditional_edges("a", lambda s: "again", {"again": START})


def test_conditional_edges_from_an_unknown_node_are_refused_even_with_an_empty_path_map():
    g = StateGraph("g")
    g.add_node("a", noop)
    g.add_edge(START, "a").add_edge("a", END)
    g.add_conditional_edges("ghost", lambda s: "x", {})
    with pytest.raises(
        GraphSetupError,
        match=r"add_conditional_edges\('ghost', \.\.\.\): unknown node 'ghost'.*add_node",
    ):
        g.compile()
