"""A thread saved by one version of a graph, continued by the next: a node it stopped before
that is gone is an error naming it and the way on, never a silent "finished"."""

from __future__ import annotations

from typing import Any

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    Command,
    CompileConfig,
    InvalidResumeError,
    RunnableConfig,
    SqliteSaver,
    StateGraph,
    interrupt,
)

CFG = RunnableConfig(thread_id="t1")


def version(review_name: str, saver: Any) -> Any:
    """draft -> <review_name> (asks a human) -> publish."""
    graph = StateGraph("doc", key_strategies={"log": AppendStrategy()})

    def review(state: Any) -> dict[str, Any]:
        return {"log": f"{review_name}:{interrupt('ok?')}"}

    graph.add_node("draft", lambda s: {"log": "draft"})
    graph.add_node(review_name, review)
    graph.add_node("publish", lambda s: {"log": "publish"})
    graph.add_edge(START, "draft").add_edge("draft", review_name)
    graph.add_edge(review_name, "publish").add_edge("publish", END)
    return graph.compile(CompileConfig(saver=saver))


@pytest.fixture
def saver(tmp_path: Any) -> Any:
    return SqliteSaver(tmp_path / "threads.db")


@pytest.mark.parametrize("answer", [Command(resume="yes"), None], ids=["resume", "continue"])
def test_a_paused_thread_whose_next_node_was_renamed_is_an_error_naming_it(driver, saver, answer):
    driver.invoke(version("review", saver), {}, CFG)
    renamed = version("human_review", saver)

    with pytest.raises(InvalidResumeError) as caught:
        driver.invoke(renamed, answer, CFG)

    message = str(caught.value)
    assert "stopped before 'review', which graph 'doc' no longer has" in message
    assert "'human_review'" in message and "update_state(config, values, as_node=...)" in message
    assert renamed.get_state(CFG).next == ("review",)  # nothing changed


def test_update_state_as_node_moves_such_a_thread_on_to_the_renamed_node(driver, saver):
    driver.invoke(version("review", saver), {}, CFG)
    renamed = version("human_review", saver)

    renamed.update_state(CFG, {}, as_node="draft")
    paused = driver.invoke(renamed, None, CFG)
    assert [i.value for i in paused.interrupts] == ["ok?"]
    final = driver.invoke(renamed, Command(resume="yes"), CFG)

    assert final["log"] == ["draft", "human_review:yes", "publish"]


def test_new_input_on_such_a_thread_starts_a_new_run(driver, saver):
    driver.invoke(version("review", saver), {}, CFG)
    renamed = version("human_review", saver)

    paused = driver.invoke(renamed, {"log": "again"}, CFG)

    assert renamed.get_state(CFG).next == ("human_review",)
    assert paused["log"] == ["draft", "again", "draft"]
