"""The graph the kill tests stop: ``prep -> work (a child graph: a -> b -> c) -> after``.

Run as ``python -m tests.compose.crash_team DB WHERE``, it runs the graph on a SqliteSaver and
SIGKILLs itself: with ``WHERE=b`` as node ``b`` of the child starts (``a`` is committed in
the child's namespace), with ``WHERE=child-done`` right after the child stored its last
checkpoint (before the parent recorded that ``work`` finished).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from graph_agent import END, START, AppendStrategy, CompileConfig, RunnableConfig, StateGraph
from graph_agent.checkpoint.sqlite import SqliteSaver

THREAD = "killed"
CHILD = ["a", "b", "c"]
EXPECTED_LOG = ["prep", *CHILD, "after"]


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def build(saver: Any, ledger: list[str], kill_in: str | None = None) -> Any:
    """The parent graph; each node appends its name to ``log`` and to ``ledger``."""

    def node(name: str) -> Any:
        def run(state: Any) -> dict[str, Any]:
            if name == kill_in:
                _die()
            ledger.append(name)
            return {"log": name}

        return run

    child = StateGraph("child", key_strategies={"log": AppendStrategy()})
    previous = START
    for name in CHILD:
        child.add_node(name, node(name)).add_edge(previous, name)
        previous = name
    child.add_edge(previous, END)
    parent = StateGraph("parent", key_strategies={"log": AppendStrategy()})
    parent.add_node("prep", node("prep"))
    parent.add_node("work", child.compile())
    parent.add_node("after", node("after"))
    parent.add_edge(START, "prep").add_edge("prep", "work").add_edge("work", "after")
    parent.add_edge("after", END)
    return parent.compile(CompileConfig(saver=saver))


class DiesAfterTheChildFinishes(SqliteSaver):
    """Killed right after committing the child's last checkpoint (nothing left to run)."""

    def put(self, checkpoint: Any) -> None:
        super().put(checkpoint)
        if checkpoint.checkpoint_ns and not checkpoint.next:
            _die()


def main(path: str, where: str) -> None:
    if where == "child-done":
        app = build(DiesAfterTheChildFinishes(path), [])
    else:
        app = build(SqliteSaver(path), [], kill_in=where)
    app.invoke({"log": []}, RunnableConfig(thread_id=THREAD))


if __name__ == "__main__":
    main(*sys.argv[1:3])
