"""Checkpoints, human approval, history and time travel on a SQLite file.

Run: python examples/checkpoints.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from graph_agent import (
    END,
    START,
    AppendStrategy,
    Command,
    CompileConfig,
    RunnableConfig,
    SqliteSaver,
    StateGraph,
    interrupt,
)


def write(state):
    return {"draft": f"A post about {state['topic']}", "log": "write"}


def approve(state):
    decision = interrupt({"question": "Publish this draft?", "draft": state["draft"]})
    return {"approved": decision == "yes", "log": f"approve: {decision}"}


def publish(state):
    return {"published": state["draft"] if state["approved"] else None, "log": "publish"}


def publisher() -> StateGraph:
    """The graph, not yet compiled (``graph-agent draw examples/checkpoints.py:publisher``)."""
    g = StateGraph("publisher", key_strategies={"log": AppendStrategy()})
    g.add_node("write", write).add_node("approve", approve).add_node("publish", publish)
    g.add_edge(START, "write").add_edge("write", "approve").add_edge("approve", "publish")
    g.add_edge("publish", END)
    return g


def build(path: Path):
    return publisher().compile(CompileConfig(saver=SqliteSaver(path)))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        app = build(Path(folder) / "runs.db")
        config = RunnableConfig(thread_id="post-1")

        paused = app.invoke({"topic": "durable agents"}, config)
        print("paused on:", paused.interrupts[0].value)
        print("next:", app.get_state(config).next)

        done = app.invoke(Command(resume="yes"), config)
        print("published:", done["published"])

        print("\nhistory, newest first:")
        for snapshot in app.get_state_history(config):
            print(
                f"  step {snapshot.metadata['step']:>2} {snapshot.metadata['source']:<6}"
                f" next={snapshot.next}"
            )

        # time travel: go back to just before approval and decide differently
        before_approval = next(s for s in app.get_state_history(config) if s.next == ("approve",))
        app.invoke(None, before_approval.config)  # pauses on the approval again
        forked = app.invoke(Command(resume="no"), config)
        print("\nafter time travel, published:", forked["published"])
        print("log:", list(forked["log"]))
