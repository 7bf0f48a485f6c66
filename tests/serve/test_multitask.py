"""A run on a busy thread with ``multitask_strategy="interrupt"`` or ``"rollback"``, and cancel
with ``action="rollback"``, as LangGraph Server does them."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from langgraph_sdk import get_sync_client

from graph_agent import END, START, RunnableConfig, StateGraph
from graph_agent.checkpoint.postgres import AsyncPostgresSaver
from graph_agent.serve import create_app
from graph_agent.serve.pg_records import PostgresRecords
from tests.checkpoint.postgres_db import fresh_schema
from tests.serve.conftest import Server, free_port, wait_until_up


def _busy_thread(server: Server) -> tuple[str, str, str]:
    """A thread that finished one run (``n`` = 10) and runs ``slow`` again from 0."""
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    done = client.runs.create(thread_id, "slow", input={"n": 9})
    client.runs.join(thread_id, done["run_id"])
    running = client.runs.create(thread_id, "slow", input={"n": 0})
    time.sleep(0.25)  # two or three steps
    return thread_id, done["run_id"], running["run_id"]


def _runs_of(server: Server, thread_id: str, run_id: str) -> list:
    client = get_sync_client(url=server.url)
    history = client.threads.get_history(thread_id, limit=100)
    return [s["values"]["n"] for s in history if s["metadata"].get("run_id") == run_id]


def test_interrupt_stops_the_running_run_keeps_its_progress_and_starts_the_new(
    server: Server,
) -> None:
    client = get_sync_client(url=server.url)
    thread_id, _, running = _busy_thread(server)
    new = client.runs.create(thread_id, "slow", input=None, multitask_strategy="interrupt")
    assert client.runs.join(thread_id, new["run_id"]) == {"n": 10}
    assert client.runs.get(thread_id, running)["status"] == "interrupted"
    kept = _runs_of(server, thread_id, running)
    assert kept and 0 < max(kept) < 10  # the interrupted run's steps stay in the thread
    assert min(_runs_of(server, thread_id, new["run_id"])) > max(kept)  # and the new goes on


def test_rollback_deletes_the_running_run_and_starts_from_before_it(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id, done, running = _busy_thread(server)
    new = client.runs.create(thread_id, "slow", input={"n": 8}, multitask_strategy="rollback")
    assert client.runs.join(thread_id, new["run_id"]) == {"n": 10}
    with pytest.raises(httpx.HTTPStatusError) as gone:
        client.runs.get(thread_id, running)
    assert gone.value.response.status_code == 404
    assert {r["run_id"] for r in client.runs.list(thread_id)} == {done, new["run_id"]}
    assert sorted(_runs_of(server, thread_id, new["run_id"])) == [8, 9, 10]
    # resuming finds nothing to continue: the thread is back at the end of the first run
    thread_id, _, running = _busy_thread(server)
    new = client.runs.create(thread_id, "slow", input=None, multitask_strategy="rollback")
    assert "nothing to continue" in str(client.runs.join(thread_id, new["run_id"]))


def test_cancel_with_rollback_takes_the_thread_back(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id, _, running = _busy_thread(server)
    client.runs.cancel(thread_id, running, wait=True, action="rollback")
    state = client.threads.get_state(thread_id)
    assert state["values"] == {"n": 10} and state["next"] == []
    assert client.threads.get(thread_id)["status"] == "idle"
    with pytest.raises(httpx.HTTPStatusError):
        client.runs.get(thread_id, running)


def test_cancel_with_rollback_of_a_first_run_empties_the_thread(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "slow", input={"n": 0})
    time.sleep(0.25)
    client.runs.cancel(thread_id, run["run_id"], wait=True, action="rollback")
    assert client.threads.get_state(thread_id)["values"] == {}
    assert client.threads.get(thread_id)["status"] == "idle"


def test_an_unknown_cancel_action_is_a_422(server: Server) -> None:
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "chain", input={"x": 1})
    client.runs.join(thread_id, run["run_id"])
    url = f"{server.url}/threads/{thread_id}/runs/{run['run_id']}/cancel?action=explode"
    assert httpx.post(url).status_code == 422


LONG = 30
"""The seconds a run's ``wait`` node awaits when it is to be stopped: one stopped at once ends
long before."""

AT_ONCE = 10.0
"""The seconds stopping it may take, however loaded the machine."""

started_waiting: dict[str, threading.Event] = {}
"""Set when a ``wait`` node on the thread (by id) starts to await (the server runs in this
process)."""


def _started(thread_id: str) -> threading.Event:
    return started_waiting.setdefault(thread_id, threading.Event())


def waiting() -> StateGraph:
    """``first`` marks the state, then ``wait`` awaits ``seconds`` (a model call, say) and
    writes how long it waited."""
    graph = StateGraph("waiting")

    async def wait(state: Any, config: RunnableConfig) -> dict[str, Any]:
        assert config.thread_id is not None
        _started(config.thread_id).set()
        await asyncio.sleep(state["seconds"])
        return {"waited": state["seconds"]}

    graph.add_node("first", lambda state: {"first": True}).add_node("wait", wait)
    graph.add_edge(START, "first").add_edge("first", "wait").add_edge("wait", END)
    return graph


let_go_hanging: dict[str, threading.Event] = {}
"""Set to let the ``hang`` node on the thread (by id) return."""


def _let_go(thread_id: str) -> threading.Event:
    return let_go_hanging.setdefault(thread_id, threading.Event())


def hanging() -> StateGraph:
    """:func:`waiting` with a plain function blocking in ``hang`` (a sync call that cannot be
    stopped): the server runs it in the thread reading the run."""
    graph = StateGraph("hanging")

    def hang(state: Any, config: RunnableConfig) -> dict[str, Any]:
        assert config.thread_id is not None
        _started(config.thread_id).set()
        _let_go(config.thread_id).wait(state["seconds"])
        return {"waited": state["seconds"]}

    graph.add_node("first", lambda state: {"first": True}).add_node("hang", hang)
    graph.add_edge(START, "first").add_edge("first", "hang").add_edge("hang", END)
    return graph


class _PostgresServer:
    """``create_app`` on PostgreSQL records and checkpoints (this process claims its runs)."""

    def __init__(self, dsn: str) -> None:
        self.saver = AsyncPostgresSaver(dsn)
        self.records = PostgresRecords(dsn)
        app = create_app([waiting(), hanging()], saver=self.saver, records=self.records)
        self.url = f"http://127.0.0.1:{free_port()}"
        config = uvicorn.Config(app, port=int(self.url.rsplit(":", 1)[1]), log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> _PostgresServer:
        self.thread.start()
        wait_until_up(self.url)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.should_exit = True
        self.thread.join(20)
        self.records.close()
        self.saver.close()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def waiting_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """A server of :func:`waiting`, its threads and runs in SQLite or in PostgreSQL."""
    if request.param == "sqlite":
        db = tmp_path_factory.mktemp("serve") / "serve.db"
        with Server(db, targets=[waiting(), hanging()]) as server:
            yield server
    else:
        with fresh_schema() as dsn, _PostgresServer(dsn) as server:
            yield server


def _waiting_run(server: Any) -> tuple[str, str]:
    """A thread whose run of ``waiting`` awaits in its ``wait`` node for :data:`LONG`
    seconds (``first`` committed)."""
    client = get_sync_client(url=server.url)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "waiting", input={"seconds": LONG})
    assert _started(thread_id).wait(LONG), "the run never reached its wait node"
    return thread_id, run["run_id"]


def _written_by(server: Any, thread_id: str, run_id: str) -> list[dict[str, Any]]:
    client = get_sync_client(url=server.url)
    history = client.threads.get_history(thread_id, limit=100)
    return [s["values"] for s in history if s["metadata"].get("run_id") == run_id]


def _ended(server: Any, thread_id: str, run_id: str) -> str:
    """The run's status once it is no longer running."""
    client = get_sync_client(url=server.url)
    deadline = time.monotonic() + 10
    while (status := client.runs.get(thread_id, run_id)["status"]) in ("pending", "running"):
        assert time.monotonic() < deadline, "the run never ended"
        time.sleep(0.02)
    return str(status)


@pytest.mark.parametrize("wait", [True, False], ids=["wait", "no wait"])
def test_cancel_stops_the_running_node_at_once_and_drops_its_writes(
    waiting_server: Any, wait: bool
) -> None:
    client = get_sync_client(url=waiting_server.url)
    thread_id, run_id = _waiting_run(waiting_server)
    started = time.monotonic()
    client.runs.cancel(thread_id, run_id, wait=wait)

    assert _ended(waiting_server, thread_id, run_id) == "interrupted"
    assert time.monotonic() - started < AT_ONCE  # not after the node's 30 s
    state = client.threads.get_state(thread_id)
    assert state["values"] == {"seconds": LONG, "first": True} and state["next"] == ["wait"]
    assert all("waited" not in values for values in _written_by(waiting_server, thread_id, run_id))
    assert client.threads.get(thread_id)["status"] == "idle"


def test_a_run_with_multitask_interrupt_stops_the_running_node_at_once(waiting_server: Any) -> None:
    client = get_sync_client(url=waiting_server.url)
    thread_id, old = _waiting_run(waiting_server)
    started = time.monotonic()
    new = client.runs.create(
        thread_id, "waiting", input={"seconds": 0}, multitask_strategy="interrupt"
    )
    assert client.runs.join(thread_id, new["run_id"])["waited"] == 0

    assert time.monotonic() - started < AT_ONCE  # not after the old run's 30 s node
    assert client.runs.get(thread_id, old)["status"] == "interrupted"
    kept = _written_by(waiting_server, thread_id, old)
    assert {"seconds": LONG, "first": True} in kept  # the old run's steps before the node stay
    assert all("waited" not in values for values in kept)  # the node's write never landed


def test_cancel_with_rollback_stops_the_running_node_at_once(waiting_server: Any) -> None:
    client = get_sync_client(url=waiting_server.url)
    thread_id, run_id = _waiting_run(waiting_server)
    started = time.monotonic()
    client.runs.cancel(thread_id, run_id, wait=True, action="rollback")

    assert time.monotonic() - started < AT_ONCE
    assert client.threads.get_state(thread_id)["values"] == {}  # back to before the run
    with pytest.raises(httpx.HTTPStatusError):
        client.runs.get(thread_id, run_id)


def test_a_run_with_multitask_rollback_stops_the_running_node_at_once(waiting_server: Any) -> None:
    client = get_sync_client(url=waiting_server.url)
    thread_id, _ = _waiting_run(waiting_server)
    started = time.monotonic()
    new = client.runs.create(
        thread_id, "waiting", input={"seconds": 0}, multitask_strategy="rollback"
    )

    assert client.runs.join(thread_id, new["run_id"]) == {"seconds": 0, "first": True, "waited": 0}
    assert time.monotonic() - started < AT_ONCE
    assert [run["run_id"] for run in client.runs.list(thread_id)] == [new["run_id"]]


def test_cancel_stops_a_run_whose_sync_node_hangs_at_once_and_frees_its_thread(
    waiting_server: Any,
) -> None:
    client = get_sync_client(url=waiting_server.url)
    thread_id = client.threads.create()["thread_id"]
    run_id = client.runs.create(thread_id, "hanging", input={"seconds": LONG})["run_id"]
    assert _started(thread_id).wait(LONG), "the run never reached its hang node"
    started = time.monotonic()
    client.runs.cancel(thread_id, run_id, wait=True)

    assert _ended(waiting_server, thread_id, run_id) == "interrupted"
    assert time.monotonic() - started < AT_ONCE  # not after the node's 30 s
    again = client.runs.create(thread_id, "hanging", input={"seconds": 0})  # the thread is free
    assert client.runs.join(thread_id, again["run_id"]) == {
        "seconds": 0,
        "first": True,
        "waited": 0,
    }
    _let_go(thread_id).set()  # the hung node returns now: what it returns is dropped
    last = client.runs.create(thread_id, "hanging", input={"seconds": 0})
    client.runs.join(thread_id, last["run_id"])
    assert all("waited" not in values for values in _written_by(waiting_server, thread_id, run_id))
    assert client.threads.get(thread_id)["status"] == "idle"
