"""Checkpoint ids: unique, in creation order, after their parent, and apart per process."""

from __future__ import annotations

import os

from graph_agent.checkpoint.base import new_checkpoint_id


def test_ids_sort_in_creation_order_and_never_repeat() -> None:
    ids = [new_checkpoint_id() for _ in range(2000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_an_id_made_after_a_parent_from_a_clock_ahead_sorts_after_it() -> None:
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
