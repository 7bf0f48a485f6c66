"""The graph the crash tests kill, and the child process that runs it.

:func:`_child` runs in a process forked by the fork server (``tests/forkserver.py``, run as
``python -m tests.checkpoint.crash_graph``, which has imported and compiled this graph once, so
starting one costs milliseconds): it says it is ready once set up, then runs the graph on a
SqliteSaver; with ``crash_after=k`` the process dies (``os._exit(137)``) right after its k-th
commit (checkpoint or pending write).
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Any

from graph_agent import END, START, AppendStrategy, CompileConfig, RunnableConfig, StateGraph
from graph_agent.checkpoint.sqlite import SqliteSaver
from tests.forkserver import child_ready, serve

CHAIN_BEFORE = ["n0", "n1"]
PARALLEL = {"p1": 0.005, "p2": 0.03, "p3": 0.06}
CHAIN_AFTER = ["n4", "n5", "n6", "n7"]
EXPECTED_LOG = [*CHAIN_BEFORE, *PARALLEL, "join", *CHAIN_AFTER]


def build(saver: Any, ledger: list[str] | None = None) -> Any:
    """START -> n0 -> n1 -> (p1, p2, p3) -> join -> n4 ... n7 -> END, each appending its name."""

    def node(name: str, pause: float):
        def run(state: Any, config: RunnableConfig) -> dict[str, Any]:
            if ledger is not None:
                ledger.append(config.task.id)
            time.sleep(pause)
            return {"log": name, f"{name}_saw": len(state.value("log", []))}

        return run

    g = StateGraph("crashy", key_strategies={"log": AppendStrategy()})
    for name in CHAIN_BEFORE:
        g.add_node(name, node(name, 0.01))
    for name, pause in PARALLEL.items():
        g.add_node(name, node(name, pause))
    g.add_node("join", node("join", 0.01))
    for name in CHAIN_AFTER:
        g.add_node(name, node(name, 0.01))
    g.add_edge(START, "n0").add_edge("n0", "n1")
    for name in PARALLEL:
        g.add_edge("n1", name)
    g.add_edge(list(PARALLEL), "join").add_edge("join", "n4")
    for first, second in itertools.pairwise(CHAIN_AFTER):
        g.add_edge(first, second)
    g.add_edge(CHAIN_AFTER[-1], END)
    return g.compile(CompileConfig(saver=saver))


class CrashingSaver(SqliteSaver):
    """Dies right after its k-th commit, as a power cut or OOM kill would."""

    def __init__(self, path: str, crash_after: int) -> None:
        super().__init__(path)
        self.commits = 0
        self.crash_after = crash_after

    def _committed(self) -> None:
        self.commits += 1
        if self.commits == self.crash_after:
            os._exit(137)

    def put(self, checkpoint: Any) -> None:
        super().put(checkpoint)
        self._committed()

    def put_writes(self, *args: Any) -> None:
        super().put_writes(*args)
        self._committed()


def _child(fields: list[str], ready_fd: int) -> None:
    path, thread, crash_after = fields
    saver = CrashingSaver(path, int(crash_after)) if int(crash_after) else SqliteSaver(path)
    app = build(saver)
    child_ready(ready_fd)
    app.invoke({"log": []}, RunnableConfig(thread_id=thread))


if __name__ == "__main__":
    serve(lambda: build(SqliteSaver(":memory:")), _child)
