"""PostgresSaver leases under faults, against the real server: a run whose lease session is
cut off (``pg_terminate_backend``) or whose heartbeat stalls stops before its next step unless
it got its lease back first, and savers that are never closed are reclaimed.

Each run here is one of two savers on one schema (two processes' savers, as far as the server
can tell: each has its own pool and lease session). Their graph charges a card, then ships:
``ledger`` records which run did which, so a step run twice shows.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from graph_agent import END, START, CompileConfig, RunnableConfig, StateGraph, ThreadBusyError
from graph_agent.checkpoint.base import Checkpoint, new_checkpoint_id
from graph_agent.checkpoint.postgres import AsyncPostgresSaver, PostgresSaver
from tests.checkpoint.postgres_db import admin, fresh_schema

CONFIG = RunnableConfig(thread_id="order-1")


@pytest.fixture
def dsn() -> Iterator[str]:
    with fresh_schema() as schema_dsn:
        yield schema_dsn


def wait_until(condition: Any, timeout: float = 10, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)


def backends_of(dsn: str) -> list[int]:
    """Server pids of every connection made with ``dsn`` (its application_name)."""
    name = psycopg.conninfo.conninfo_to_dict(dsn)["application_name"]
    sql = "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND pid <> pg_backend_pid()"
    return [pid for (pid,) in admin().execute(sql, (name,)).fetchall()]


def lease_session_backend(saver: PostgresSaver) -> int | None:
    """The server pid of the saver's lease session: the backend holding its advisory lock."""
    key = saver._session.key
    row = (
        admin()
        .execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 "
            "AND classid::bigint = %s AND objid::bigint = %s",
            (key >> 32, key & 0xFFFFFFFF),
        )
        .fetchone()
    )
    return None if row is None else row[0]


def cut_off(saver: PostgresSaver) -> int:
    """Terminate the saver's lease session; returns its server pid once it is gone."""
    pid = lease_session_backend(saver)
    assert pid is not None, "the saver holds no lease session"
    admin().execute("SELECT pg_terminate_backend(%s)", (pid,))
    wait_until(lambda: pid not in backends_of(saver.conninfo), what="the lease session to end")
    return pid


class Shop:
    """A run of the charge-then-ship graph on its own saver; ``charging`` is set once its
    ``charge`` node runs, which then waits for ``go_on``."""

    def __init__(self, name: str, saver: PostgresSaver, ledger: list[tuple[str, str]]) -> None:
        self.name, self.saver = name, saver
        self.charging, self.go_on = threading.Event(), threading.Event()
        self.error: BaseException | None = None
        self.result: dict[str, Any] | None = None

        def charge(state: Any) -> dict[str, Any]:
            ledger.append((name, "charge"))
            self.charging.set()
            assert self.go_on.wait(timeout=30)
            return {"charged_by": name}

        def ship(state: Any) -> dict[str, Any]:
            ledger.append((name, "ship"))
            return {"shipped_by": name}

        g = StateGraph("shop")
        g.add_node("charge", charge).add_node("ship", ship)
        g.add_edge(START, "charge").add_edge("charge", "ship").add_edge("ship", END)
        self.app = g.compile(CompileConfig(saver=saver))
        self.worker: threading.Thread | None = None

    def start(self, input: Any) -> None:
        def run() -> None:
            try:
                self.result = dict(self.app.invoke(input, CONFIG))
            except BaseException as exc:
                self.error = exc

        self.worker = threading.Thread(target=run)
        self.worker.start()
        assert self.charging.wait(timeout=10), f"{self.name} never reached its node"

    def finish(self) -> None:
        self.go_on.set()
        assert self.worker is not None
        self.worker.join(timeout=30)
        assert not self.worker.is_alive()


def history_is_one_chain(saver: PostgresSaver) -> bool:
    history = list(saver.list(CONFIG.thread_id or ""))
    return [cp.parent_id for cp in history[:-1]] == [cp.id for cp in history[1:]]


def hold_back_reconnection(saver: PostgresSaver, monkeypatch: Any) -> threading.Event:
    """From now on the saver's lease session reconnects only once the returned event is set."""
    allowed = threading.Event()
    connect = saver._session._connect

    def connect_when_allowed() -> None:
        assert allowed.wait(timeout=30)
        connect()

    monkeypatch.setattr(saver._session, "_connect", connect_when_allowed)
    return allowed


def test_a_run_whose_lease_session_was_cut_off_and_whose_thread_was_taken_stops_before_shipping(
    dsn, monkeypatch
):
    ledger: list[tuple[str, str]] = []
    with PostgresSaver(dsn) as saver_a, PostgresSaver(dsn) as saver_b:
        a, b = Shop("A", saver_a, ledger), Shop("B", saver_b, ledger)
        a.start({"order": 1})
        reconnect = hold_back_reconnection(saver_a, monkeypatch)  # until B took the thread
        cut_off(saver_a)
        b.start(None)  # B takes the thread at once and charges too: that much stays possible
        reconnect.set()
        a.finish()  # A's charge returns: its checkpoint would land first
        b.finish()
        assert isinstance(a.error, ThreadBusyError) and "lost its lease" in str(a.error)
        assert b.error is None and b.result == {"order": 1, "charged_by": "B", "shipped_by": "B"}
        assert ledger == [("A", "charge"), ("B", "charge"), ("B", "ship")]
        assert history_is_one_chain(saver_b)


async def test_the_async_saver_also_refuses_to_write_for_a_run_that_lost_its_lease(
    dsn, monkeypatch
):
    async with AsyncPostgresSaver(dsn) as saver:
        with PostgresSaver(dsn) as other:
            lease = await saver.aacquire("t")
            reconnect = hold_back_reconnection(saver, monkeypatch)
            cut_off(saver)
            taken = other.acquire("t")
            reconnect.set()
            checkpoint = Checkpoint(id=new_checkpoint_id(), thread_id="t")
            with pytest.raises(ThreadBusyError, match="lost its lease on thread 't'"):
                await saver.aput(checkpoint)
            with pytest.raises(ThreadBusyError, match="lost its lease"):
                await saver.aput_writes("t", "", checkpoint.id, "task", [("k", 1)])
            await saver.arelease(lease)
            assert await saver.aget("t") is None  # nothing was written
            other.release(taken)


def test_a_run_that_gets_its_lease_back_before_anyone_took_it_goes_on(dsn):
    ledger: list[tuple[str, str]] = []
    with PostgresSaver(dsn) as saver_a, PostgresSaver(dsn) as saver_b:
        a, b = Shop("A", saver_a, ledger), Shop("B", saver_b, ledger)
        a.start({"order": 1})
        old = cut_off(saver_a)
        wait_until(  # at once, not at the next heartbeat (lease_ttl / 3 = 10 s)
            lambda: lease_session_backend(saver_a) not in (None, old),
            timeout=3,
            what="A's lease session to come back",
        )
        with pytest.raises(ThreadBusyError, match="busy"):
            b.app.invoke(None, CONFIG)
        a.finish()
        assert a.error is None and a.result == {"order": 1, "charged_by": "A", "shipped_by": "A"}
        assert ledger == [("A", "charge"), ("A", "ship")]


def test_a_run_whose_lease_lapsed_while_its_heartbeat_stalled_stops_before_shipping(dsn):
    ledger: list[tuple[str, str]] = []
    with PostgresSaver(dsn, lease_ttl=0.5) as saver_a, PostgresSaver(dsn) as saver_b:
        a, b = Shop("A", saver_a, ledger), Shop("B", saver_b, ledger)
        a.start({"order": 1})
        with saver_a._session._lock:  # the heartbeat stalls (a host cut off from the server)
            time.sleep(0.6)  # the lease expires: B may take the thread
            b.start(None)
        a.finish()
        b.finish()
        assert isinstance(a.error, ThreadBusyError) and "lost its lease" in str(a.error)
        assert b.error is None and b.result == {"order": 1, "charged_by": "B", "shipped_by": "B"}
        assert ledger == [("A", "charge"), ("B", "charge"), ("B", "ship")]


def test_a_run_that_keeps_its_lease_asks_the_server_nothing_more_per_step(dsn, monkeypatch):
    from graph_agent.checkpoint.postgres import _LeaseSession

    confirmations: list[int] = []
    confirm = _LeaseSession.confirm
    monkeypatch.setattr(
        _LeaseSession, "confirm", lambda self: confirmations.append(1) or confirm(self)
    )
    g = StateGraph("steps")
    g.add_node("step", lambda s: {"n": s["n"] + 1}).add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: "step" if s["n"] < 30 else END)
    with PostgresSaver(dsn) as saver:
        app = g.compile(CompileConfig(saver=saver))
        assert app.invoke({"n": 0}, CONFIG)["n"] == 30
    assert confirmations == []


def test_a_heartbeat_while_a_lease_is_being_taken_does_not_take_that_lease_for_lost(
    dsn, monkeypatch
):
    from graph_agent.checkpoint import postgres

    acquire_plan = postgres.plans.acquire_plan
    with PostgresSaver(dsn) as saver:
        saver.acquire("held")  # the session is up, and a lease is held: the heartbeat checks it

        def heartbeat_first(*args: Any) -> Any:  # the lease is known here, its row not written
            saver._session.confirm()
            return (yield from acquire_plan(*args))

        monkeypatch.setattr(postgres.plans, "acquire_plan", heartbeat_first)
        lease = saver.acquire("taken")
        saver.check_lease("taken")  # neither lost, nor in doubt
        assert not saver._lease_in_doubt("taken", "") and not saver._lease_in_doubt("held", "")
        saver.release(lease)


def test_runs_started_at_once_on_a_new_saver_ask_the_server_nothing_more_per_step(dsn, monkeypatch):
    import asyncio

    from graph_agent.checkpoint.postgres import _LeaseSession

    confirmations: list[int] = []
    confirm = _LeaseSession.confirm
    monkeypatch.setattr(
        _LeaseSession, "confirm", lambda self: confirmations.append(1) or confirm(self)
    )
    g = StateGraph("steps")
    g.add_node("step", lambda s: {"n": s["n"] + 1}).add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: "step" if s["n"] < 5 else END)

    async def eight_at_once(saver: PostgresSaver) -> list[Any]:
        app = g.compile(CompileConfig(saver=saver))
        runs = [app.ainvoke({"n": 0}, RunnableConfig(thread_id=f"t{i}")) for i in range(8)]
        return await asyncio.gather(*runs)

    with PostgresSaver(dsn) as saver:
        assert [out["n"] for out in asyncio.run(eight_at_once(saver))] == [5] * 8
    assert confirmations == []


def test_savers_never_closed_warn_and_give_their_connections_back_when_collected(dsn):
    def forget_a_saver() -> None:
        saver = PostgresSaver(dsn, pool_size=1)
        saver.release(saver.acquire("t"))  # opens its lease session and starts its heartbeat

    with pytest.warns(ResourceWarning, match="never closed"):
        for _ in range(3):
            forget_a_saver()
        gc.collect()
    wait_until(lambda: not backends_of(dsn), what="the forgotten savers' connections to close")


def test_a_node_that_checks_its_lease_before_a_side_effect_skips_it_once_the_thread_is_taken(
    dsn, monkeypatch
):
    ledger: list[tuple[str, str]] = []
    waiting, go_on = threading.Event(), threading.Event()

    def charge(state: Any, config: RunnableConfig) -> dict[str, Any]:
        waiting.set()
        assert go_on.wait(timeout=30)
        config.task.check_lease()  # right before the side effect
        ledger.append(("A", "charge"))
        return {"charged": True}

    with PostgresSaver(dsn) as saver_a, PostgresSaver(dsn) as saver_b:
        g = StateGraph("shop")
        g.add_node("charge", charge).add_edge(START, "charge").add_edge("charge", END)
        app = g.compile(CompileConfig(saver=saver_a))
        errors: list[BaseException] = []
        worker = threading.Thread(target=lambda: _run_catching(app, errors))
        worker.start()
        assert waiting.wait(timeout=10)
        reconnect = hold_back_reconnection(saver_a, monkeypatch)
        cut_off(saver_a)
        taken = saver_b.acquire(CONFIG.thread_id or "")  # another run takes the thread
        reconnect.set()
        wait_until(lambda: saver_a._lost_leases, what="A to learn it lost its lease")
        go_on.set()
        worker.join(timeout=30)
        saver_b.release(taken)

    assert ledger == []
    (error,) = errors
    assert isinstance(error.__cause__, ThreadBusyError) and "lost its lease" in str(error)


def _run_catching(app: Any, errors: list[BaseException]) -> None:
    try:
        app.invoke({"order": 1}, CONFIG)
    except BaseException as exc:
        errors.append(exc)
