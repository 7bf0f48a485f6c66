"""The map-reduce graph the Send crash tests kill, and the child process that runs it.

START -> plan -> one Send to ``work`` per item -> ``reduce`` -> END: the ten ``work`` tasks
run in one superstep, each committing its write as it ends (pending writes), so a crash in
that step leaves some finished. Run by the fork server (``tests/forkserver.py``) as
``python -m tests.checkpoint.crash_send_graph``, as ``crash_graph`` is.
"""

from __future__ import annotations

import time
from typing import Any

from graph_agent import END, START, AppendStrategy, CompileConfig, RunnableConfig, Send, StateGraph
from graph_agent.checkpoint.sqlite import SqliteSaver
from tests.checkpoint.crash_graph import CrashingSaver
from tests.forkserver import child_ready, serve

ITEMS = list(range(10))
EXPECTED = [(n, n * n) for n in ITEMS]


def build(saver: Any, ledger: list[tuple[str, int]] | None = None) -> Any:
    def plan(state: Any) -> dict[str, Any]:
        return {"planned": len(state["items"])}

    def work(item: Any, config: RunnableConfig) -> dict[str, Any]:
        if ledger is not None:
            ledger.append((config.task.id, item["n"]))
        time.sleep(0.004 * (1 + item["n"] % 5))  # they end one after another
        return {"results": [(item["n"], item["n"] * item["n"])]}

    def reduce(state: Any) -> dict[str, Any]:
        return {"total": sum(value for _, value in state["results"])}

    g = StateGraph("map_reduce", key_strategies={"results": AppendStrategy()})
    g.add_node("plan", plan)
    g.add_node("work", work)
    g.add_node("reduce", reduce)
    g.add_edge(START, "plan")
    fan_out = lambda state: [Send("work", {"n": n}) for n in state["items"]]  # noqa: E731
    g.add_conditional_edges("plan", fan_out, sends=["work"])
    g.add_edge("work", "reduce").add_edge("reduce", END)
    return g.compile(CompileConfig(saver=saver))


def _child(fields: list[str], ready_fd: int) -> None:
    path, thread, crash_after = fields
    saver = CrashingSaver(path, int(crash_after)) if int(crash_after) else SqliteSaver(path)
    app = build(saver)
    child_ready(ready_fd)
    app.invoke({"items": ITEMS, "results": []}, RunnableConfig(thread_id=thread))


if __name__ == "__main__":
    serve(lambda: build(SqliteSaver(":memory:")), _child)
