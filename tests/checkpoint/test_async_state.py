"""``aget_state`` / ``aget_state_history`` / ``aupdate_state`` on every saver: the sync twins'
results (one plan runs under both), through the saver's async API on the caller's loop."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    CachePolicy,
    Command,
    CompileConfig,
    MemorySaver,
    RunnableConfig,
    StateGraph,
    StateSnapshot,
    interrupt,
)
from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.checkpoint.postgres import AsyncPostgresSaver, PostgresSaver
from graph_agent.checkpoint.sqlite import SqliteSaver
from graph_agent.graph.compiled import CompiledGraph
from graph_agent.graph.errors import ThreadBusyError
from tests.checkpoint.postgres_db import fresh_schema

_T = TypeVar("_T")
Run = Callable[[Coroutine[Any, Any, _T]], _T]


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        "postgres",
        pytest.param("async-postgres", marks=pytest.mark.postgres),
    ]
)
def saver(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[CheckpointSaver]:
    """Every saver; ``postgres``'s async twins run its sync calls in worker threads,
    ``async-postgres``'s are natively async (on the event loop that first calls one)."""
    if request.param == "memory":
        yield MemorySaver()
    elif request.param == "sqlite":
        sqlite = SqliteSaver(tmp_path / "checkpoints.db")
        yield sqlite
        sqlite.close()
    else:
        kind = PostgresSaver if request.param == "postgres" else AsyncPostgresSaver
        with fresh_schema() as dsn:
            postgres = kind(dsn, pool_size=4)
            yield postgres
            postgres.close()


@pytest.fixture
def run(saver: CheckpointSaver) -> Iterator[Run[Any]]:
    """Runs coroutines on one event loop for the whole test (an AsyncPostgresSaver is bound to
    the loop that first used it), closing an async pool on it at the end."""
    loop = asyncio.new_event_loop()
    yield loop.run_until_complete
    if isinstance(saver, AsyncPostgresSaver):
        loop.run_until_complete(saver.aclose())
    loop.run_until_complete(loop.shutdown_default_executor())
    loop.close()


async def collect(items: AsyncIterator[StateSnapshot]) -> list[StateSnapshot]:
    return [item async for item in items]


def child_graph() -> CompiledGraph:
    """draft -> review, which asks a human."""
    graph = StateGraph("inner", key_strategies={"log": AppendStrategy()})
    graph.add_node("draft", lambda s: {"log": "draft"})
    graph.add_node("review", lambda s: {"log": f"review:{interrupt('approve?')}"})
    graph.add_edge(START, "draft").add_edge("draft", "review").add_edge("review", END)
    return graph.compile()


def parent_graph(saver: CheckpointSaver) -> CompiledGraph:
    """prepare -> child (a subgraph that pauses) -> finish."""
    graph = StateGraph("parent", key_strategies={"log": AppendStrategy()})
    graph.add_node("prepare", lambda s: {"log": "prepare"})
    graph.add_node("child", child_graph())
    graph.add_node("finish", lambda s: {"log": "finish"})
    graph.add_edge(START, "prepare").add_edge("prepare", "child")
    graph.add_edge("child", "finish").add_edge("finish", END)
    return graph.compile(CompileConfig(saver=saver))


def breakpoint_graph(saver: CheckpointSaver) -> CompiledGraph:
    """a -> b -> c, paused before ``b``."""
    graph = StateGraph("steps", key_strategies={"log": AppendStrategy()})
    for name in "abc":
        graph.add_node(name, lambda s, name=name: {"log": name})
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", END)
    return graph.compile(CompileConfig(saver=saver, interrupt_before=["b"]))


def same_shape(snapshot: StateSnapshot) -> tuple[Any, ...]:
    """What two threads given the same calls agree on (ids and times differ)."""
    tasks = tuple(
        (t.name, t.interrupts and tuple(i.value for i in t.interrupts)) for t in snapshot.tasks
    )
    metadata = {k: v for k, v in snapshot.metadata.items()}
    place = snapshot.config.checkpoint_ns.partition(":")[0]  # the task id holds the thread's
    return (snapshot.values, snapshot.next, metadata, tasks, place)


def test_aget_state_is_get_state(saver: CheckpointSaver, run: Run[Any]) -> None:
    app = parent_graph(saver)
    config = RunnableConfig(thread_id="t1")
    app.invoke({}, config)
    first = list(app.get_state_history(config))[-1].config

    async def main() -> list[StateSnapshot]:
        return [
            await app.aget_state(config),
            await app.aget_state(config, subgraphs=True),
            await app.aget_state(first),
            await app.aget_state(RunnableConfig(thread_id="no-such-thread")),
        ]

    now, nested, oldest, empty = run(main())
    assert now == app.get_state(config) and now.next == ("child",)
    assert nested == app.get_state(config, subgraphs=True)
    (task,) = nested.tasks
    assert task.state is not None and task.state.next == ("review",)
    assert task.state.values == {"log": ["prepare", "draft"]}
    assert [i.value for i in nested.interrupts] == ["approve?"]
    assert oldest == app.get_state(first) and oldest.config.checkpoint_id == first.checkpoint_id
    assert empty == app.get_state(RunnableConfig(thread_id="no-such-thread"))
    assert empty.values == {} and empty.created_at is None

    child_config = task.state.config  # the child's namespace: its own keys and next tasks
    in_child = run(app.aget_state(child_config))
    assert in_child == app.get_state(child_config) and in_child.next == ("review",)


def test_aget_state_history_is_get_state_history(saver: CheckpointSaver, run: Run[Any]) -> None:
    app = parent_graph(saver)
    config = RunnableConfig(thread_id="t1")
    app.invoke({}, config)
    app.update_state(config, {"log": "one"})
    app.update_state(config, {"log": "two"})
    history = list(app.get_state_history(config))
    assert len(history) == 4
    middle = history[1].config

    async def main() -> list[list[StateSnapshot]]:
        return [
            await collect(app.aget_state_history(config)),
            await collect(app.aget_state_history(config, limit=2)),
            await collect(app.aget_state_history(config, before=middle.checkpoint_id)),
            await collect(app.aget_state_history(config, before=middle)),
            await collect(app.aget_state_history(config, limit=1, before=middle)),
        ]

    everything, two, before_id, before_config, one = run(main())
    assert everything == history  # newest first
    assert [s.config.checkpoint_id for s in everything] == sorted(
        (s.config.checkpoint_id for s in everything), reverse=True
    )
    assert two == history[:2] == list(app.get_state_history(config, limit=2))
    assert before_id == before_config == history[2:]
    assert before_id == list(app.get_state_history(config, before=middle))
    assert one == history[2:3]

    child_config = app.get_state(config, subgraphs=True).tasks[0].state.config  # type: ignore[union-attr]
    child_history = run(collect(app.aget_state_history(child_config)))
    assert child_history == list(app.get_state_history(child_config))
    assert child_history[0].next == ("review",)


def test_aupdate_state_is_update_state(saver: CheckpointSaver, run: Run[Any]) -> None:
    """The same calls on two threads, one sync and one async, leave the same threads."""
    app = breakpoint_graph(saver)
    sync_config, async_config = RunnableConfig(thread_id="sync"), RunnableConfig(thread_id="async")
    app.invoke({}, sync_config)
    app.invoke({}, async_config)

    made_sync = [
        app.update_state(sync_config, {"log": "kept"}),
        app.update_state(sync_config, {"log": "as-b"}, as_node="b"),
    ]

    async def main() -> list[RunnableConfig]:
        return [
            await app.aupdate_state(async_config, {"log": "kept"}),
            await app.aupdate_state(async_config, {"log": "as-b"}, as_node="b"),
        ]

    made_async = run(main())
    sync_history = list(app.get_state_history(sync_config))
    async_history = list(app.get_state_history(async_config))
    assert [same_shape(s) for s in async_history] == [same_shape(s) for s in sync_history]
    assert async_history[0].values == {"log": ["a", "kept", "as-b"]}
    assert async_history[0].next == ("c",)  # b's edges decided
    assert async_history[1].next == ("b",)  # without as_node the thread kept its next node
    assert async_history[0].metadata["source"] == "update"
    for made, history in ((made_sync, sync_history), (made_async, async_history)):
        assert [c.checkpoint_id for c in reversed(made)] == [
            s.config.checkpoint_id for s in history[:2]
        ]
        assert made[-1] == dataclasses.replace(RunnableConfig(), **_where(history[0].config))
    assert app.invoke(None, async_config)["log"] == app.invoke(None, sync_config)["log"]


def _where(config: RunnableConfig) -> dict[str, Any]:
    return {
        "thread_id": config.thread_id,
        "checkpoint_id": config.checkpoint_id,
        "checkpoint_ns": config.checkpoint_ns,
    }


def test_aupdate_state_answers_a_paused_subgraph_as_update_state_does(
    saver: CheckpointSaver, run: Run[Any]
) -> None:
    app = parent_graph(saver)
    sync_config, async_config = RunnableConfig(thread_id="sync"), RunnableConfig(thread_id="async")
    app.invoke({}, sync_config)
    app.invoke({}, async_config)
    app.update_state(sync_config, {"log": "note"})
    run(app.aupdate_state(async_config, {"log": "note"}))

    sync_now = app.get_state(sync_config, subgraphs=True)
    async_now = run(app.aget_state(async_config, subgraphs=True))
    assert same_shape(async_now) == same_shape(sync_now)
    assert async_now.tasks[0].state is not None  # the paused child is found where it waits
    assert same_shape(async_now.tasks[0].state) == same_shape(sync_now.tasks[0].state)  # type: ignore[arg-type]
    done_sync = app.invoke(Command(resume="yes"), sync_config)
    done_async = run(app.ainvoke(Command(resume="yes"), async_config))
    assert done_async["log"] == done_sync["log"]
    assert done_async["log"][-2:] == ["review:yes", "finish"]


def test_aupdate_state_refuses_what_update_state_refuses(
    saver: CheckpointSaver, run: Run[Any]
) -> None:
    app = breakpoint_graph(saver)
    config = RunnableConfig(thread_id="t1")
    app.invoke({}, config)
    with pytest.raises(Exception) as sync_error:
        app.update_state(config, {"log": "x"}, as_node="no-such-node")
    with pytest.raises(Exception) as async_error:
        run(app.aupdate_state(config, {"log": "x"}, as_node="no-such-node"))
    assert type(async_error.value) is type(sync_error.value)
    assert str(async_error.value) == str(sync_error.value)
    assert len(list(app.get_state_history(config))) == 2  # nothing was written
    # the lease was given back: the thread takes the next update
    run(app.aupdate_state(config, {"log": "fine"}))
    assert app.get_state(config).values["log"][-1] == "fine"


def test_aupdate_state_takes_the_threads_lease(saver: CheckpointSaver, run: Run[Any]) -> None:
    app = breakpoint_graph(saver)
    config = RunnableConfig(thread_id="t1")
    app.invoke({}, config)
    lease = saver.acquire("t1")
    try:
        with pytest.raises(ThreadBusyError):
            run(app.aupdate_state(config, {"log": "x"}))
    finally:
        saver.release(lease)
    assert app.get_state(config).values == {"log": ["a"]}
    run(app.aupdate_state(config, {"log": "x"}))
    assert app.get_state(config).values == {"log": ["a", "x"]}


def test_the_async_state_api_names_what_is_missing() -> None:
    run = asyncio.run
    bare = breakpoint_graph(MemorySaver()).with_saver(None)
    config = RunnableConfig(thread_id="t1")
    for call in (
        lambda: bare.aget_state(config),
        lambda: collect(bare.aget_state_history(config)),
        lambda: bare.aupdate_state(config, {"log": "x"}),
    ):
        with pytest.raises(ValueError, match=r"^a\w+ reads the checkpoints .* has no saver"):
            run(call())
    saved = breakpoint_graph(MemorySaver())
    with pytest.raises(ValueError, match=r"aget_state needs RunnableConfig\(thread_id"):
        run(saved.aget_state(RunnableConfig()))
    with pytest.raises(TypeError, match=r"aupdate_state\(\) takes a RunnableConfig"):
        run(saved.aupdate_state({"configurable": {"thread_id": "t"}}, {}))  # type: ignore[arg-type]


class _ThreadNoting(MemorySaver):
    """A MemorySaver noting the thread each storage call runs on."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[int] = set()
        for name in ("get", "list", "put", "put_writes", "acquire", "release"):
            setattr(self, name, self._noted(getattr(self, name)))

    def _noted(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.threads.add(threading.get_ident())
            return method(*args, **kwargs)

        return call


def test_memory_saver_async_state_api_starts_no_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    saver = _ThreadNoting()
    app = parent_graph(saver)
    config = RunnableConfig(thread_id="t1")
    app.invoke({}, config)
    saver.threads.clear()

    def no_thread(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the async state API started a thread")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        monkeypatch.setattr(loop, "run_in_executor", no_thread)  # asyncio.to_thread's way
        monkeypatch.setattr(threading.Thread, "start", no_thread)
        state = await app.aget_state(config, subgraphs=True)
        assert state.tasks[0].state is not None
        assert len(await collect(app.aget_state_history(config))) == 2
        await app.aupdate_state(config, {"log": "note"})
        await app.aupdate_state(config, {"log": "as-child"}, as_node="child")
        monkeypatch.undo()

    asyncio.run(main())
    assert saver.threads == {threading.get_ident()}  # every storage call ran on the loop's thread
    assert app.get_state(config).next == ("finish",)


@pytest.mark.postgres
def test_async_postgres_saver_async_state_api_starts_no_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once its async pool is open and its lease session up, every saver call of the async
    state API is awaited on the loop."""
    with fresh_schema() as dsn:
        saver = AsyncPostgresSaver(dsn, pool_size=2)
        app = parent_graph(saver)
        config = RunnableConfig(thread_id="t1")
        app.invoke({}, config)  # the sync pool; takes and gives back the lease session

        def no_thread(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("the async state API started a thread")

        async def main() -> StateSnapshot:
            await app.aget_state(config)  # opens the async pool (its workers are tasks)
            loop = asyncio.get_running_loop()
            monkeypatch.setattr(loop, "run_in_executor", no_thread)
            monkeypatch.setattr(threading.Thread, "start", no_thread)
            try:
                state = await app.aget_state(config, subgraphs=True)
                assert state.tasks[0].state is not None
                assert len(await collect(app.aget_state_history(config))) == 2
                await app.aupdate_state(config, {"log": "note"})
                await app.aupdate_state(config, {"log": "as-child"}, as_node="child")
                return await app.aget_state(config)
            finally:
                monkeypatch.undo()
                await saver.aclose()

        state = asyncio.run(main())
    assert state.next == ("finish",) and state.values["log"] == ["prepare", "note", "as-child"]


def test_memory_saver_node_cache_is_read_and_written_on_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An async node with ``cache=`` on a MemorySaver: the cache's async twins run inline."""
    calls: list[int] = []

    async def square(state: Any) -> dict[str, Any]:
        calls.append(state["n"])
        return {"square": state["n"] ** 2}

    graph = StateGraph("cached")
    graph.add_node("square", square, cache=CachePolicy())
    graph.add_edge(START, "square").add_edge("square", END)
    saver = MemorySaver()
    app = graph.compile(CompileConfig(saver=saver))

    def no_thread(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a thread was started")

    async def main() -> list[int]:
        monkeypatch.setattr(asyncio.get_running_loop(), "run_in_executor", no_thread)
        monkeypatch.setattr(threading.Thread, "start", no_thread)
        try:
            results = []
            for thread_id in ("a", "b"):
                done = await app.ainvoke({"n": 6}, RunnableConfig(thread_id=thread_id))
                results.append(done["square"])
            await saver.acache_put("ns", "k", {"v": 1}, None)
            hit = await saver.acache_get("ns", "k", 0.0)
            assert hit is not None and hit.value == {"v": 1}
            return results
        finally:
            monkeypatch.undo()

    assert asyncio.run(main()) == [36, 36]
    assert calls == [6]  # the second thread's run was served from the cache
