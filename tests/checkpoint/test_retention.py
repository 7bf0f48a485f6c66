"""``saver.sweep(RetentionPolicy(...))`` on every saver: threads idle past their TTL are deleted
or cut to their latest checkpoint (which still loads, resumes and answers its interrupts),
``checkpoint_keep`` keeps the newest N, a thread a run holds is left alone, and a sweep that
fails midway leaves every thread whole or as the policy wants it."""

from __future__ import annotations

import asyncio
import collections
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    Command,
    CompileConfig,
    RunnableConfig,
    StateGraph,
    interrupt,
)
from graph_agent.checkpoint import RetentionPolicy, SweepResult
from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.graph import saver as checkpoint_clock

LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)
DAY = 60 * 24


def steps_graph(saver: CheckpointSaver) -> Any:
    """a, b, c in a row, each appending to ``log`` (4 checkpoints per run)."""
    graph = StateGraph("steps", key_strategies={"log": AppendStrategy()})
    for name in ("a", "b", "c"):
        graph.add_node(name, lambda state, name=name: {"log": name})
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", END)
    return graph.compile(CompileConfig(saver=saver))


def asking_graph(saver: CheckpointSaver, runs: collections.Counter[str]) -> Any:
    """start, then ask (interrupt()) beside tally, then done."""
    graph = StateGraph("ask", key_strategies={"log": AppendStrategy()})

    def node(name: str) -> Any:
        def run(state: Any) -> dict[str, Any]:
            runs[name] += 1
            if name == "ask":
                return {"log": f"ask:{interrupt('ok?')}"}
            return {"log": name}

        return run

    for name in ("start", "ask", "tally", "done"):
        graph.add_node(name, node(name))
    graph.add_edge(START, "start").add_edge("start", "ask").add_edge("start", "tally")
    graph.add_edge(["ask", "tally"], "done").add_edge("done", END)
    return graph.compile(CompileConfig(saver=saver))


def run_at(monkeypatch: pytest.MonkeyPatch, when: datetime, app: Any, thread: str) -> None:
    """Run ``app`` on ``thread`` with its checkpoints stamped ``when``."""
    monkeypatch.setattr(checkpoint_clock, "now", lambda: when)
    try:
        app.invoke({"log": []}, RunnableConfig(thread_id=thread))
    finally:
        monkeypatch.undo()


def count(saver: CheckpointSaver, thread: str) -> int:
    return len(list(saver.list(thread)))


def test_a_thread_idle_past_its_ttl_is_deleted_and_a_recent_one_stays(saver):
    app = steps_graph(saver)
    now = datetime.now(UTC)
    with pytest.MonkeyPatch.context() as patch:
        run_at(patch, now - timedelta(days=3), app, "old")
        run_at(patch, now - timedelta(hours=1), app, "recent")

    result = saver.sweep(RetentionPolicy(thread_ttl=DAY), now=now)

    assert result == SweepResult(threads_seen=2, threads_deleted=1, checkpoints_removed=4)
    assert saver.get("old") is None and count(saver, "old") == 0
    assert list(app.get_state(RunnableConfig(thread_id="recent")).values["log"]) == ["a", "b", "c"]
    assert saver.threads() == ["recent"]


def test_the_sweep_reads_the_clock_when_no_time_is_given(saver, monkeypatch):
    app = steps_graph(saver)
    app.invoke({"log": []}, RunnableConfig(thread_id="t"))
    assert saver.sweep(RetentionPolicy(thread_ttl=60)).threads_deleted == 0
    later = datetime.now(UTC) + timedelta(hours=2)
    monkeypatch.setattr(checkpoint_clock, "now", lambda: later)
    assert saver.sweep(RetentionPolicy(thread_ttl=60)).threads_deleted == 1


def test_keep_latest_leaves_a_paused_thread_that_still_resumes(saver, caller):
    runs: collections.Counter[str] = collections.Counter()
    app = asking_graph(saver, runs)
    config = RunnableConfig(thread_id="paused")
    caller.invoke(app, {"log": []}, config)
    before = app.get_state(config)
    assert count(saver, "paused") > 1 and before.interrupts

    policy = RetentionPolicy(thread_ttl=60, strategy="keep_latest")
    result = saver.sweep(policy, now=datetime.now(UTC) + timedelta(days=1))

    assert result.threads_pruned == 1 and result.threads_deleted == 0
    assert count(saver, "paused") == 1
    after = app.get_state(config)
    assert after.values == before.values and after.interrupts == before.interrupts
    assert after.next == before.next
    final = caller.invoke(app, Command(resume={before.interrupts[0].id: "yes"}), config)
    assert sorted(final["log"]) == sorted(["start", "ask:yes", "tally", "done"])
    assert runs == {"start": 1, "ask": 2, "tally": 1, "done": 1}  # tally is not run again


def test_keep_latest_leaves_a_state_that_can_be_forked_and_run_again(saver):
    app = steps_graph(saver)
    config = RunnableConfig(thread_id="t")
    app.invoke({"log": []}, config)
    app.invoke({"log": []}, config)
    policy = RetentionPolicy(thread_ttl=60, strategy="keep_latest")
    saver.sweep(policy, now=datetime.now(UTC) + timedelta(days=1))

    assert list(app.get_state(config).values["log"]) == ["a", "b", "c"] * 2
    saver.copy_thread("t", "fork")
    assert list(app.invoke({"log": []}, RunnableConfig(thread_id="fork"))["log"]) == list("abc") * 3
    assert list(app.invoke({"log": []}, config)["log"]) == ["a", "b", "c"] * 3
    # swept again: already as the policy wants it, nothing goes
    again = saver.sweep(policy, now=datetime.now(UTC) + timedelta(days=1))
    assert again.checkpoints_removed == 2 * 4  # the two runs since (fork and t), 4 each


def test_checkpoint_keep_keeps_the_newest_checkpoints_of_every_thread(saver):
    app = steps_graph(saver)
    for thread in ("t1", "t2"):
        app.invoke({"log": []}, RunnableConfig(thread_id=thread))
        app.invoke({"log": []}, RunnableConfig(thread_id=thread))
    newest = [c.id for c in saver.list("t1", limit=3)]

    result = saver.sweep(RetentionPolicy(checkpoint_keep=3))

    assert result == SweepResult(threads_seen=2, threads_pruned=2, checkpoints_removed=2 * 5)
    assert [c.id for c in saver.list("t1")] == newest
    for thread in ("t1", "t2"):
        state = app.get_state(RunnableConfig(thread_id=thread))
        assert list(state.values["log"]) == ["a", "b", "c"] * 2
    assert saver.sweep(RetentionPolicy(checkpoint_keep=3)).checkpoints_removed == 0


def test_a_thread_a_run_holds_is_left_alone_until_it_is_released(saver):
    app = steps_graph(saver)
    app.invoke({"log": []}, RunnableConfig(thread_id="held"))
    lease = saver.acquire("held")
    later = datetime.now(UTC) + timedelta(days=2)
    try:
        result = saver.sweep(RetentionPolicy(thread_ttl=60), now=later)
        assert result.threads_busy == 1 and result.threads_deleted == 0
        assert count(saver, "held") == 4
    finally:
        saver.release(lease)
    assert saver.sweep(RetentionPolicy(thread_ttl=60), now=later).threads_deleted == 1


def test_threads_are_read_in_batches(saver):
    app = steps_graph(saver)
    for n in range(7):
        app.invoke({"log": []}, RunnableConfig(thread_id=f"t{n}"))
    policy = RetentionPolicy(thread_ttl=60, batch_size=2)
    result = saver.sweep(policy, now=datetime.now(UTC) + timedelta(days=1))
    assert result.threads_seen == 7 and result.threads_deleted == 7
    assert saver.threads() == []


def test_a_sweep_that_fails_between_threads_leaves_each_whole_or_gone(saver, monkeypatch):
    app = steps_graph(saver)
    threads = [f"t{n}" for n in range(6)]
    for thread in threads:
        app.invoke({"log": []}, RunnableConfig(thread_id=thread))
    real = saver._retain_thread
    calls = collections.Counter[str]()

    def failing(thread_id: str, decide: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 4:
            raise RuntimeError("the sweeper died")
        return real(thread_id, decide)

    monkeypatch.setattr(saver, "_retain_thread", failing)
    later = datetime.now(UTC) + timedelta(days=1)
    with pytest.raises(RuntimeError, match="sweeper died"):
        saver.sweep(RetentionPolicy(thread_ttl=60, batch_size=2), now=later)

    assert_whole_or_gone(saver, app, threads, whole=4)
    monkeypatch.undo()
    assert saver.sweep(RetentionPolicy(thread_ttl=60), now=later).threads_deleted == 3


def assert_whole_or_gone(saver: CheckpointSaver, app: Any, threads: list[str], whole: int) -> None:
    """Each thread has no checkpoint at all, or ``whole`` of them, all loading."""
    gone = 0
    for thread in threads:
        checkpoints = list(saver.list(thread))
        if not checkpoints:
            gone += 1
            assert saver.get(thread) is None
            continue
        assert len(checkpoints) == whole, thread
        state = app.get_state(RunnableConfig(thread_id=thread))
        assert list(state.values["log"]) == ["a", "b", "c"]
    assert 0 < gone < len(threads)


def test_async_sweep_does_the_same(saver):
    app = steps_graph(saver)
    app.invoke({"log": []}, RunnableConfig(thread_id="t"))
    policy = RetentionPolicy(thread_ttl=60)
    result = asyncio.run(saver.asweep(policy, now=datetime.now(UTC) + timedelta(days=1)))
    assert result.threads_deleted == 1 and saver.threads() == []


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"thread_ttl": 0}, "thread_ttl"),
        ({"thread_ttl": "60"}, "thread_ttl"),
        ({"thread_ttl": float("inf")}, "thread_ttl"),
        ({"strategy": "archive"}, "strategy"),
        ({"checkpoint_keep": 0}, "checkpoint_keep"),
        ({"checkpoint_keep": 2.5}, "checkpoint_keep"),
        ({"batch_size": 0}, "batch_size"),
    ],
)
def test_a_policy_that_makes_no_sense_is_refused_naming_the_setting(options, named):
    with pytest.raises(ValueError, match=named):
        RetentionPolicy(**options)


def test_a_naive_time_is_refused():
    from graph_agent import MemorySaver

    with pytest.raises(ValueError, match="aware"):
        MemorySaver().sweep(RetentionPolicy(thread_ttl=1), now=datetime(2030, 1, 1))


def test_a_thread_with_no_ttl_and_no_keep_is_never_touched(saver):
    app = steps_graph(saver)
    app.invoke({"log": []}, RunnableConfig(thread_id="t"))
    result = saver.sweep(RetentionPolicy(), now=datetime.now(UTC) + timedelta(days=900))
    assert result == SweepResult(threads_seen=1) and count(saver, "t") == 4


def test_a_thread_another_process_runs_is_left_alone(saver, reopen):
    app = steps_graph(saver)
    app.invoke({"log": []}, RunnableConfig(thread_id="held"))
    other = reopen()  # another process's saver on the same storage
    lease = other.acquire("held")
    later = datetime.now(UTC) + timedelta(days=2)
    try:
        assert saver.sweep(RetentionPolicy(thread_ttl=60), now=later).threads_busy == 1
    finally:
        other.release(lease)
    assert saver.sweep(RetentionPolicy(thread_ttl=60), now=later).threads_deleted == 1


@pytest.fixture(params=["sqlite", "postgres"])
def durable(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    from graph_agent.checkpoint.postgres import PostgresSaver
    from graph_agent.checkpoint.sqlite import SqliteSaver
    from tests.checkpoint.postgres_db import fresh_schema

    if request.param == "postgres":
        with fresh_schema() as dsn, PostgresSaver(dsn, pool_size=2) as postgres:
            yield postgres
        return
    sqlite = SqliteSaver(tmp_path / "checkpoints.db")
    yield sqlite
    sqlite.close()


def test_a_failure_inside_a_thread_s_transaction_leaves_the_thread_whole(durable, monkeypatch):
    from graph_agent.checkpoint import postgres_retention, sqlite_retention

    def failing_prune(conn: Any, thread_id: str, keep: int) -> int:
        real_prune(conn, thread_id, keep)
        raise RuntimeError("killed halfway")

    def failing_plan(thread_id: str, keep: int) -> Any:
        yield from real_plan(thread_id, keep)
        raise RuntimeError("killed halfway")

    real_prune, real_plan = sqlite_retention.prune_thread, postgres_retention.prune_plan
    monkeypatch.setattr(sqlite_retention, "prune_thread", failing_prune)
    monkeypatch.setattr(postgres_retention, "prune_plan", failing_plan)
    app = steps_graph(durable)
    config = RunnableConfig(thread_id="t")
    app.invoke({"log": []}, config)
    app.invoke({"log": []}, config)
    history = [c.id for c in durable.list("t")]

    with pytest.raises(RuntimeError, match="halfway"):
        durable.sweep(RetentionPolicy(checkpoint_keep=1))

    assert [c.id for c in durable.list("t")] == history
    assert list(durable.get("t").values["log"]) == ["a", "b", "c"] * 2  # every one loads
    monkeypatch.undo()
    assert durable.sweep(RetentionPolicy(checkpoint_keep=1)).checkpoints_removed == 7
