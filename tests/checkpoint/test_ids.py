"""Checkpoint ids: unique, in creation order, after their parent, and apart per process."""

from __future__ import annotations

import os

import pytest

from graph_agent.checkpoint.base import new_checkpoint_id
from graph_agent.graph import saver as base  # checkpoint ids and times are made there


def test_ids_sort_in_creation_order_and_never_repeat() -> None:
    ids = [new_checkpoint_id() for _ in range(2000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_an_id_made_after_a_parent_from_a_clock_ahead_sorts_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # later tests get ids from the real clock again, not from far in the future
    monkeypatch.setattr(base, "_last_id", base._last_id)
    parent = "7fffffffffffff-0000000000"  # made by a process whose clock was far ahead
    child = new_checkpoint_id(after=parent)
    assert child > parent and new_checkpoint_id(after=child) > child


def test_a_forked_process_makes_ids_with_its_own_pid_tag() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report one id, then leave without running the parent's cleanup
        try:
            os.write(write, new_checkpoint_id().encode())
        finally:
            os._exit(0)
    os.close(write)
    child_id = os.read(read, 100).decode()
    os.close(read)
    os.waitpid(pid, 0)
    mine = new_checkpoint_id()
    assert child_id.split("-")[1][:4] == f"{pid & 0xFFFF:04x}"
    assert mine.split("-")[1][:4] == f"{os.getpid() & 0xFFFF:04x}"
    # the rest of the tag is random per process: two containers' pid 7 still differ
    assert child_id.split("-")[1][4:] != mine.split("-")[1][4:]


def test_an_id_is_fourteen_hex_digits_of_time_then_a_ten_digit_process_tag() -> None:
    time_part, tag = new_checkpoint_id().split("-")
    assert len(time_part) == 14 and len(tag) == 10
    assert set(time_part + tag) <= set("0123456789abcdef")


def test_a_process_forked_while_the_id_lock_is_held_can_still_make_ids() -> None:
    import time

    base._id_lock.acquire()  # as another thread of this process would, at the fork
    try:
        pid = os.fork()
        if pid == 0:
            try:
                new_checkpoint_id()
            finally:
                os._exit(0)
    finally:
        base._id_lock.release()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError("the forked process hung making an id: the lock was not renewed")


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"step": "3"}, "step must be an int, got str"),
        ({"next": ("a", object())}, "next must be a tuple of node names"),
        ({"versions": {"k": ["x"]}}, "versions must map key names to checkpoint ids"),
        ({"barriers": {"join": ("a", 1)}}, "barriers must map barrier names"),
        ({"parent_id": 7}, "parent_id must be a string or None"),
        ({"created_at": "2024-05-01"}, "created_at must be a datetime, got str"),
    ],
)
def test_a_checkpoint_built_by_hand_with_wrong_field_types_is_refused(
    fields: dict[str, object], problem: str
) -> None:
    from graph_agent.checkpoint.base import Checkpoint

    with pytest.raises(TypeError, match=problem):
        Checkpoint(id=new_checkpoint_id(), thread_id="t", **fields)


def test_a_checkpoint_built_by_hand_takes_lists_of_node_names_as_tuples() -> None:
    from graph_agent.checkpoint.base import Checkpoint

    made = Checkpoint(id="c", thread_id="t", next=["a"], barriers={"j": ["x", "y"]})
    assert made.next == ("a",) and made.barriers == {"j": ("x", "y")}
