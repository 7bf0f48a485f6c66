"""RunnableConfig: what a call accepts, and how a malformed config is refused."""

from __future__ import annotations

import dataclasses
import re

import pytest

from graph_agent import END, START, CompileConfig, MemorySaver, RunnableConfig, StateGraph


def test_an_empty_thread_id_is_refused_naming_the_fix():
    with pytest.raises(ValueError, match=r"thread_id=''\) names no thread.*non-empty id"):
        RunnableConfig(thread_id="")


def test_an_empty_thread_id_is_refused_on_replace_too():
    with pytest.raises(ValueError, match="names no thread"):
        dataclasses.replace(RunnableConfig(thread_id="t"), thread_id="")


@pytest.mark.parametrize("thread", [5, b"t1", ("t", 1)])
def test_a_thread_id_that_is_not_a_string_is_refused_naming_the_fix(thread):
    with pytest.raises(TypeError, match=r"a thread id is a string, e\.g\. RunnableConfig"):
        RunnableConfig(thread_id=thread)


def one_node_app(saver=None):
    g = StateGraph("one")
    g.add_node("a", lambda s: {"x": 1}).add_edge(START, "a").add_edge("a", END)
    return g.compile(CompileConfig(saver=saver))


LANGGRAPH_STYLE = {"configurable": {"thread_id": "t1"}}
FIX = re.escape("pass RunnableConfig(thread_id='t1')")


@pytest.mark.parametrize("saver", [None, MemorySaver()], ids=["no saver", "memory"])
def test_a_dict_config_is_refused_naming_the_runnable_config_to_pass(driver, saver):
    app = one_node_app(saver)
    with pytest.raises(TypeError, match=r"invoke\(\) takes a RunnableConfig.*not a dict.*" + FIX):
        driver.invoke(app, {}, LANGGRAPH_STYLE)
    with pytest.raises(TypeError, match=r"stream\(\) takes a RunnableConfig.*" + FIX):
        driver.stream(app, {}, {"thread_id": "t1"})


def test_a_refused_config_is_described_without_its_values():
    config = {"configurable": {"thread_id": "t1", "api_key": "sk-live-abcdef123456"}}
    with pytest.raises(TypeError) as caught:
        one_node_app().invoke({}, config)
    message = str(caught.value)
    assert "sk-live" not in message
    assert "not a dict with keys 'configurable'" in message and "thread_id='t1'" in message


@pytest.mark.parametrize("method", ["get_state", "get_state_history", "update_state"])
def test_the_state_methods_refuse_a_dict_config_too(method):
    app = one_node_app(MemorySaver())
    call = getattr(app, method)
    args = (LANGGRAPH_STYLE, {"x": 2}) if method == "update_state" else (LANGGRAPH_STYLE,)
    with pytest.raises(TypeError, match=rf"{method}\(\) takes a RunnableConfig.*" + FIX):
        result = call(*args)
        if method == "get_state_history":  # a generator: checks when first read
            next(result)


def test_no_config_still_means_the_defaults(driver):
    assert driver.invoke(one_node_app(), {}, None) == {"x": 1}


def fan(names, node_factory):
    """One node per name, all from START to END, built by ``node_factory(name)``."""
    g = StateGraph("fan")
    for name in names:
        g.add_node(name, node_factory(name)).add_edge(START, name).add_edge(name, END)
    return g.compile()


def test_a_lambda_binding_a_loop_variable_keeps_its_default(driver):
    # the closure idiom: `n` must stay the name, not become the config
    app = fan(["a", "b"], lambda name: lambda s, n=name: {n: n.upper()})
    assert driver.invoke(app, {}).data() == {"a": "A", "b": "B"}


def test_a_def_binding_a_loop_variable_keeps_its_default(driver):
    def make(name):
        def node(state, n=name):
            return {n: len(n)}

        return node

    app = fan(["ab", "abc"], make)
    assert driver.invoke(app, {}).data() == {"ab": 2, "abc": 3}


def test_a_router_binding_a_loop_variable_keeps_its_default(driver):
    g = StateGraph("route")
    g.add_node("a", lambda s: {"x": 1}).add_node("b", lambda s: {"y": 2})
    g.add_edge(START, "a").add_edge("b", END)
    g.add_conditional_edges("a", lambda s, target="b": target, ["b"])
    assert driver.invoke(g.compile(), {}).data() == {"x": 1, "y": 2}


def typed_config(state, config: RunnableConfig | None = None):
    return {"got": type(config).__name__}


def named_config(state, config=None):
    return {"got": type(config).__name__}


def required_second(state, cfg):
    return {"got": type(cfg).__name__}


def unresolved_annotation(state, options: langchain_core.RunnableConfig = None):  # noqa: F821
    # this module defers annotations, and this one cannot be resolved: it stays a string
    return {"got": type(options).__name__}


@pytest.mark.parametrize(
    "node",
    [typed_config, named_config, required_second, unresolved_annotation],
    ids=["annotated", "named config", "required", "unresolved annotation"],
)
def test_the_config_goes_to_a_required_named_or_annotated_second_parameter(driver, node):
    g = StateGraph("one")
    g.add_node("a", node).add_edge(START, "a").add_edge("a", END)
    assert driver.invoke(g.compile(), {})["got"] == "RunnableConfig"


def test_a_router_gets_the_config_in_a_parameter_named_config(driver):
    g = StateGraph("route")
    g.add_node("a", lambda s: {}).add_node("b", lambda s: {"seen": "b"})
    g.add_edge(START, "a").add_edge("b", END)
    g.add_conditional_edges(
        "a", lambda s, config=None: "b" if config.context["go"] else END, ["b", END]
    )
    config = RunnableConfig(context={"go": True})
    assert driver.invoke(g.compile(), {}, config).data() == {"seen": "b"}
