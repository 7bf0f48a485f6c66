"""A process that holds a SqliteSaver lease, for the PID-reuse and zombie tests.

``python -m tests.checkpoint.sqlite_holder MODE PATH`` (run from the repository root):

- ``hold``: runs thread ``t`` on :func:`build`'s graph; its node prints ``entered`` and sleeps
  until the process is killed (a crash mid-run, leaving the lease row behind);
- ``resume``: continues thread ``t`` with ``invoke(None)``; prints one JSON line, ``{"pid": ...,
  "values": ...}`` or ``{"pid": ..., "error": "..."}``;
- ``take``: takes the lease on thread ``t`` and exits at once without releasing it;
- ``fork``: takes (and gives back) a lease, forks, and exits once the child, using the same
  saver, holds the lease on thread ``t``; prints ``child <pid>``. The child sleeps until killed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from graph_agent import END, START, CompileConfig, RunnableConfig, StateGraph, ThreadBusyError
from graph_agent.checkpoint.sqlite import SqliteSaver

THREAD = "t"


def build(saver: SqliteSaver, *, hang: bool) -> Any:
    """START -> work -> END; ``work`` hangs (``hang``) or records which process ran it."""

    def work(state: Any) -> dict[str, Any]:
        if hang:
            print("entered", flush=True)
            while True:
                time.sleep(60)
        return {"done_by": os.getpid()}

    g = StateGraph("held")
    g.add_node("work", work).add_edge(START, "work").add_edge("work", END)
    return g.compile(CompileConfig(saver=saver))


def main(mode: str, path: str) -> None:
    saver = SqliteSaver(path)
    config = RunnableConfig(thread_id=THREAD)
    if mode == "hold":
        build(saver, hang=True).invoke({"started_by": os.getpid()}, config)
    elif mode == "resume":
        try:
            values = build(saver, hang=False).invoke(None, config)
        except ThreadBusyError as exc:
            print(json.dumps({"pid": os.getpid(), "error": str(exc)}), flush=True)
            return
        print(json.dumps({"pid": os.getpid(), "values": dict(values)}), flush=True)
    elif mode == "take":
        saver.acquire(THREAD)
        os._exit(0)
    elif mode == "fork":
        saver.release(saver.acquire("parent's"))  # this process now holds its liveness lock
        taken_read, taken_write = os.pipe()
        child = os.fork()
        if child == 0:
            saver.acquire(THREAD)
            os.write(taken_write, b"T")
            while True:
                time.sleep(60)
        assert os.read(taken_read, 1) == b"T"
        print(f"child {child}", flush=True)
        os._exit(0)  # the parent ends (its lock goes with it); the child runs on
    else:
        raise ValueError(mode)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
