"""A run's start on the SQLite saver (``acquire_loading``: the lease and the thread's newest
checkpoint in one transaction) loads what a load from the file would, however the file changed
meanwhile: by this saver or by another on the same file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    CompileConfig,
    RunnableConfig,
    SqliteSaver,
    StateGraph,
)
from graph_agent.graph.saver import Checkpoint


def counting(saver: SqliteSaver) -> Any:
    """a → b, each adding one to ``n``, appending to ``log`` and replacing ``last``."""
    g = StateGraph("g", key_strategies={"log": AppendStrategy()})
    for name in "ab":
        g.add_node(
            name,
            lambda state, name=name: {
                "n": state["n"] + 1,
                "log": [f"{name}{state['n']}"],
                "last": {"by": name},
            },
        )
    g.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    return g.compile(CompileConfig(saver=saver))


def fields(checkpoint: Checkpoint | None) -> Any:
    if checkpoint is None:
        return None
    return (
        checkpoint.id,
        checkpoint.parent_id,
        checkpoint.step,
        checkpoint.next,
        checkpoint.versions,
        checkpoint.barriers,
        checkpoint.metadata,
        checkpoint.created_at,
        checkpoint.values,
        checkpoint.chains,
        checkpoint.pending_writes,
    )


def at_start(saver: SqliteSaver, thread_id: str) -> Checkpoint | None:
    """What a run's start loads (``acquire_loading``), its lease given back."""
    lease, loaded = saver.acquire_loading(thread_id)
    saver.release(lease)
    assert loaded is not None
    return loaded[0]


def from_the_file(path: Path, thread_id: str) -> Checkpoint | None:
    fresh = SqliteSaver(path)
    try:
        return fresh.get(thread_id)
    finally:
        fresh.close()


def change_t1(saver: SqliteSaver, change: str) -> None:
    """``change`` made by ``saver``: mostly to thread t1 (``other thread``: a run on t2;
    ``copy``: t2 copied to t3)."""
    if change == "run":
        counting(saver).invoke({"n": 10}, RunnableConfig(thread_id="t1"))
    elif change == "prune":
        saver.prune("t1", keep_last=1)
    elif change == "delete":
        saver.delete_thread("t1")
    elif change == "pending writes":
        newest = saver.get("t1")
        assert newest is not None
        saver.put_writes("t1", "", newest.id, "task", [("log", ["w"])])
    elif change == "other thread":
        counting(saver).invoke({"n": 10}, RunnableConfig(thread_id="t2"))
    else:
        assert change == "copy"
        saver.copy_thread("t2", "t3")


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "heads.db"


def test_a_runs_start_loads_what_the_file_holds_run_after_run(path: Path) -> None:
    saver = SqliteSaver(path)
    app = counting(saver)
    for runs in range(12):  # the append key's chain grows, then is stored whole again
        assert fields(at_start(saver, "t1")) == fields(from_the_file(path, "t1"))
        app.invoke({"n": runs}, RunnableConfig(thread_id="t1"))
    assert fields(at_start(saver, "t1")) == fields(from_the_file(path, "t1"))
    assert at_start(saver, "t1").chains  # (deltas were followed)
    saver.close()


@pytest.mark.parametrize("change", ["run", "prune", "delete", "pending writes", "other thread"])
def test_what_another_saver_on_the_file_changes_is_seen_at_a_runs_start(
    path: Path, change: str
) -> None:
    saver, other = SqliteSaver(path), SqliteSaver(path)
    app = counting(saver)
    for runs in range(4):
        app.invoke({"n": runs}, RunnableConfig(thread_id="t1"))
    at_start(saver, "t1")

    change_t1(other, change)

    assert fields(at_start(saver, "t1")) == fields(from_the_file(path, "t1"))
    app.invoke({"n": 20}, RunnableConfig(thread_id="t1"))  # and a run goes on from there
    assert fields(at_start(saver, "t1")) == fields(from_the_file(path, "t1"))
    saver.close()
    other.close()


@pytest.mark.parametrize("change", ["prune", "delete", "pending writes", "copy"])
def test_what_the_saver_itself_changes_is_seen_at_a_runs_start(path: Path, change: str) -> None:
    saver = SqliteSaver(path)
    app = counting(saver)
    for runs in range(4):
        app.invoke({"n": runs}, RunnableConfig(thread_id="t1"))
        app.invoke({"n": runs}, RunnableConfig(thread_id="t2"))
    at_start(saver, "t1")
    at_start(saver, "t3")

    change_t1(saver, change)

    for thread_id in ("t1", "t3"):
        assert fields(at_start(saver, thread_id)) == fields(from_the_file(path, thread_id))
    saver.close()


def test_changing_what_a_runs_start_loaded_changes_nothing_the_next_one_loads(path: Path) -> None:
    saver = SqliteSaver(path)
    app = counting(saver)
    app.invoke({"n": 0}, RunnableConfig(thread_id="t1"))
    first = at_start(saver, "t1")
    assert first is not None
    first.values["log"].append("changed")
    first.values["last"]["by"] = "changed"
    first.versions.clear()
    first.metadata["writers"].append("changed")

    assert fields(at_start(saver, "t1")) == fields(from_the_file(path, "t1"))
    saver.close()


def looping(saver: SqliteSaver) -> Any:
    """``step`` runs 70 times, appending to ``log`` (so parts get merged and copied whole)."""
    g = StateGraph("loop", key_strategies={"log": AppendStrategy()})
    g.add_node("step", lambda state: {"n": state["n"] + 1, "log": [state["n"]]})
    g.add_edge(START, "step")
    g.add_conditional_edges("step", lambda state: "step" if state["n"] < 70 else END)
    return g.compile(CompileConfig(saver=saver))


def test_a_run_of_many_steps_loads_at_the_next_start_as_from_the_file(path: Path) -> None:
    saver = SqliteSaver(path)
    looping(saver).invoke({"n": 0}, RunnableConfig(thread_id="t1", max_steps=100))

    assert fields(at_start(saver, "t1")) == fields(from_the_file(path, "t1"))
    assert at_start(saver, "t1").values["n"] == 70
    saver.close()
