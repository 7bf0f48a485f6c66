"""SqliteSaver leases: whether a holder lives is never judged from its PID alone.

The holders here are real processes (``tests/checkpoint/sqlite_holder.py``), some in their own
PID namespace (``unshare --pid --fork --mount-proc``, as root), where the app is PID 1 as in a
container: a restart then really gives the new process the dead one's PID.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from graph_agent import ThreadBusyError
from graph_agent.checkpoint.sqlite import SqliteSaver
from tests.checkpoint.sqlite_holder import THREAD

ROOT = Path(__file__).resolve().parents[2]


def holder(mode: str, db: Path, *, namespace: bool) -> subprocess.Popen[bytes]:
    """``python -m tests.checkpoint.sqlite_holder MODE DB``, in a new PID namespace (where it is
    PID 1) when ``namespace``."""
    command = [sys.executable, "-m", "tests.checkpoint.sqlite_holder", mode, str(db)]
    if namespace:
        command = ["unshare", "--pid", "--fork", "--mount-proc", *command]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE)


def read_line(process: subprocess.Popen[bytes], timeout: float = 30) -> str:
    assert process.stdout is not None
    readable, _, _ = select.select([process.stdout], [], [], timeout)
    assert readable, f"the holder said nothing for {timeout} s"
    return process.stdout.readline().decode().strip()


def lease_row(db: Path) -> tuple[int, str]:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT pid, host FROM leases WHERE thread_id = ?", (THREAD,)).fetchone()
    assert row is not None, "no lease row"
    return row


def namespace_init(unshare: subprocess.Popen[bytes]) -> int:
    """The host PID of the process ``unshare --fork`` started (PID 1 of its namespace)."""
    children = Path(f"/proc/{unshare.pid}/task/{unshare.pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


@pytest.fixture
def crashed_in_a_namespace(tmp_path) -> Iterator[Path]:
    """A database whose thread ``t`` was left mid-run by a process that was PID 1 of its own
    namespace and was killed (SIGKILL) inside its node: its lease row names PID 1."""
    db = tmp_path / "x.db"
    process = holder("hold", db, namespace=True)
    try:
        assert read_line(process) == "entered"
        assert lease_row(db)[0] == 1
        os.kill(namespace_init(process), signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
        assert process.stdout is not None
        process.stdout.close()
    yield db


def test_a_restarted_container_whose_app_is_pid_1_again_resumes_the_thread_its_crash_left(
    crashed_in_a_namespace,
):
    restarted = holder("resume", crashed_in_a_namespace, namespace=True)
    try:
        answer = json.loads(read_line(restarted))
    finally:
        restarted.wait(timeout=30)
        assert restarted.stdout is not None
        restarted.stdout.close()
    assert answer.get("error") is None
    assert answer == {"pid": 1, "values": {"started_by": 1, "done_by": 1}}


def test_any_other_process_of_the_host_takes_over_the_thread_of_a_crashed_pid_1(
    crashed_in_a_namespace,
):
    saver = SqliteSaver(crashed_in_a_namespace)  # this process: PID 1 here is the host's init
    saver.release(saver.acquire(THREAD))


def test_a_live_holder_in_another_pid_namespace_keeps_its_thread(tmp_path):
    db = tmp_path / "x.db"
    process = holder("hold", db, namespace=True)
    try:
        assert read_line(process) == "entered"
        assert lease_row(db)[0] == 1  # a PID that means another process here
        with pytest.raises(ThreadBusyError, match="busy"):
            SqliteSaver(db).acquire(THREAD)
    finally:
        os.kill(namespace_init(process), signal.SIGKILL)
        process.wait(timeout=30)
        assert process.stdout is not None
        process.stdout.close()


def test_a_lease_held_by_an_unreaped_zombie_process_is_taken_over(tmp_path):
    db = tmp_path / "x.db"
    SqliteSaver(db).close()
    taker = holder("take", db, namespace=False)  # takes the lease and exits without release
    try:
        deadline = time.monotonic() + 30
        while Path(f"/proc/{taker.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the holder never exited"
            time.sleep(0.01)
        assert lease_row(db)[0] == taker.pid  # still a zombie: nobody reaped it
        os.kill(taker.pid, 0)  # which still answers signals
        saver = SqliteSaver(db)
        saver.release(saver.acquire(THREAD))
    finally:
        taker.wait(timeout=30)
        assert taker.stdout is not None
        taker.stdout.close()


def test_a_forked_child_holds_its_leases_by_its_own_lock_not_its_parents(tmp_path):
    db = tmp_path / "x.db"
    parent = holder("fork", db, namespace=False)
    child = int(read_line(parent).removeprefix("child "))
    try:
        parent.wait(timeout=30)  # the parent is gone, and the lock it held with it
        with pytest.raises(ThreadBusyError, match=f"process {child}"):
            SqliteSaver(db).acquire(THREAD)
    finally:
        os.kill(child, signal.SIGKILL)
        assert parent.stdout is not None
        parent.stdout.close()
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child}").exists():  # reaped by init once it dies
        assert time.monotonic() < deadline, "the child never died"
        time.sleep(0.01)
    saver = SqliteSaver(db)
    saver.release(saver.acquire(THREAD))


def put_lease_row(db: Path, *, pid: int, expires_in: float, process: str) -> None:
    """A lease row for thread ``t`` of this host, as another process would write it."""
    import socket

    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT OR REPLACE INTO leases (thread_id, checkpoint_ns, owner, pid, expires_at, "
            "host, process) VALUES (?, '', 'them', ?, ?, ?, ?)",
            (THREAD, pid, time.time() + expires_in, socket.gethostname(), process),
        )


def test_a_lease_naming_no_lock_binds_until_it_expires_even_while_its_pid_lives(tmp_path):
    db = tmp_path / "x.db"
    saver = SqliteSaver(db)
    live_pid = os.getppid()  # some other live process: a PID alone proves nothing
    put_lease_row(db, pid=live_pid, expires_in=60, process="token:theirs")
    with pytest.raises(ThreadBusyError, match=f"process {live_pid}"):
        saver.acquire(THREAD)
    put_lease_row(db, pid=live_pid, expires_in=-1, process="token:theirs")
    saver.release(saver.acquire(THREAD))


def test_a_lease_naming_no_lock_whose_pid_is_gone_is_taken_over_before_it_expires(tmp_path):
    db = tmp_path / "x.db"
    saver = SqliteSaver(db)
    gone = subprocess.Popen(["true"])
    gone.wait()
    put_lease_row(db, pid=gone.pid, expires_in=60, process="")  # a row from before locks
    saver.release(saver.acquire(THREAD))


def test_a_lease_naming_a_lock_nobody_holds_is_taken_over_before_it_expires(tmp_path):
    db = tmp_path / "x.db"
    saver = SqliteSaver(db)
    put_lease_row(db, pid=os.getppid(), expires_in=60, process="lock:12345")
    saver.release(saver.acquire(THREAD))


def test_without_record_locks_a_process_still_keeps_its_own_leases(tmp_path, monkeypatch):
    from graph_agent.checkpoint import liveness

    monkeypatch.setattr(liveness, "fcntl", None)  # as on Windows
    db = tmp_path / "x.db"
    first, second = SqliteSaver(db), SqliteSaver(db)
    lease = first.acquire(THREAD)
    with pytest.raises(ThreadBusyError):
        second.acquire(THREAD)
    first.release(lease)
    second.release(second.acquire(THREAD))


def test_a_run_whose_lapsed_lease_was_taken_stops_before_its_next_step(tmp_path):
    from graph_agent import END, START, CompileConfig, RunnableConfig, StateGraph

    db = tmp_path / "x.db"
    ran: list[str] = []

    def first(state):
        ran.append("first")
        time.sleep(0.3)  # longer than lease_ttl: the lease lapses (it named no lock, say)
        with sqlite3.connect(db) as conn:  # and another host takes the thread meanwhile
            conn.execute("UPDATE leases SET owner = 'another host', host = 'elsewhere'")
        return {"n": 1}

    g = StateGraph("g")
    g.add_node("first", first).add_node("second", lambda s: ran.append("second") or {"n": 2})
    g.add_edge(START, "first").add_edge("first", "second").add_edge("second", END)
    app = g.compile(CompileConfig(saver=SqliteSaver(db, lease_ttl=0.2)))
    with pytest.raises(ThreadBusyError, match="lost its lease"):
        app.invoke({"n": 0}, RunnableConfig(thread_id=THREAD))
    assert ran == ["first"]
    assert SqliteSaver(db).get(THREAD).values == {"n": 0}  # the lost run wrote nothing more


def test_a_saver_collected_while_another_takes_the_liveness_lock_neither_deadlocks_nor_leaks(
    tmp_path,
):
    """The garbage collector may run a collected saver's finalizer (let_go) in the middle of
    hold() on the same thread, where the guard is held: the release waits its turn instead."""
    import threading

    from graph_agent.checkpoint import liveness

    lease_file = str(tmp_path / "db-lease")
    first, _ = liveness.hold(lease_file)
    second, _ = liveness.hold(lease_file)
    assert first == second and liveness._locks[first].users == 2

    def collected_mid_hold() -> None:
        with liveness._locks_guard:  # as inside hold(), when a finalizer runs
            liveness.let_go(first)

    worker = threading.Thread(target=collected_mid_hold, daemon=True)
    worker.start()
    worker.join(timeout=5)
    assert not worker.is_alive(), "let_go waited for the guard its own thread held"
    assert liveness._locks[first].users == 2  # queued, not lost
    liveness.let_go(second)  # settles the queued release too
    assert first not in liveness._locks  # the last user gone: the file is closed
