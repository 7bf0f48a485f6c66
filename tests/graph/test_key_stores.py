"""A strategy owns its key's storage contract (KeyStrategy.store): what a run keeps of the key,
and what each checkpoint stores of it."""

from __future__ import annotations

from typing import Any

from graph_agent import (
    END,
    START,
    AppendStrategy,
    CompileConfig,
    MemorySaver,
    RunnableConfig,
    StateGraph,
)
from graph_agent.graph.saver import Blob
from graph_agent.graph.state import KeyStrategy


class TagSet:
    """A key kept as a set, stored whole (sorted) only when a write added a new tag."""

    def __init__(self, value: Any = None) -> None:
        self.tags = set(value or ())
        self.changed = False

    def view(self) -> tuple[str, ...]:
        return tuple(sorted(self.tags))

    def write(self, new: Any) -> tuple[str, ...]:
        before = len(self.tags)
        self.tags.update([new] if isinstance(new, str) else new)
        self.changed = self.changed or len(self.tags) != before
        return self.view()

    def blob(self, checkpoint_id: str, version: str | None) -> Blob | None:
        if not self.changed and version is not None:
            return None
        self.changed = False
        return Blob("full", sorted(self.tags))


class TagStrategy(KeyStrategy):
    def merge(self, old: Any, new: Any) -> Any:  # not used: the store takes the writes
        raise AssertionError("writes go to the store")

    def store(self, value: Any = None, version: str | None = None, chain: Any = None) -> TagSet:
        return TagSet(value)


def tag_graph(saver: MemorySaver) -> Any:
    g = StateGraph("tags", key_strategies={"tags": TagStrategy()})
    g.add_node("a", lambda s: {"tags": ["x", "y"]})
    g.add_node("b", lambda s: {"tags": "x"})  # nothing new: nothing stored
    g.add_node("c", lambda s: {"tags": ["z"]})
    g.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", END)
    return g.compile(CompileConfig(saver=saver))


def test_a_strategy_store_keeps_the_key_and_decides_what_each_checkpoint_stores():
    saver = MemorySaver()
    app = tag_graph(saver)
    config = RunnableConfig(thread_id="t")
    result = app.invoke({"tags": []}, config)
    assert result["tags"] == ("x", "y", "z")

    history = list(saver.list("t"))  # newest first: c, b, a, input
    stored = [c.versions.get("tags") for c in reversed(history)]
    ids = [c.id for c in reversed(history)]
    # stored at the input, after a and after c; after b (no new tag) the version stays a's
    assert stored == [ids[0], ids[1], ids[1], ids[3]]
    # a new process loads it through the store again, and goes on from what it stored
    again = tag_graph(saver)
    assert again.get_state(config).values["tags"] == ["x", "y", "z"]
    assert again.invoke({"tags": ["w"]}, RunnableConfig(thread_id="t"))["tags"] == (
        "w",
        "x",
        "y",
        "z",
    )


def test_an_append_strategy_that_changes_merge_goes_through_merge():
    class Newest3(AppendStrategy):
        def merge(self, old: Any, new: Any) -> Any:
            return [*(old or []), *new][-3:]

    g = StateGraph("g", key_strategies={"log": Newest3()})
    g.add_node("a", lambda s: {"log": [1, 2]}).add_node("b", lambda s: {"log": [3, 4]})
    g.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    assert Newest3().store() is None
    assert g.compile().invoke({"log": []})["log"] == [2, 3, 4]
