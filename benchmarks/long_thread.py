"""A long conversation: ``get_state`` and one W2 iteration on a thread of 15,000 messages, on
SQLite, and what the thread stores.

graph_agent's thread is built as a conversation builds it: one checkpoint per step, each adding
two messages (so its append key is a full copy and the parts appended since, merged as they
pile up: see ``graph_agent/graph/append_chain.py``). LangGraph's thread holds the same messages
in one checkpoint, which is how its saver keeps any history: one blob of the whole list per
checkpoint, read in one go. Built step by step, it would store that list again at every step,
so its bytes row is computed, not stored: the sum, over the same steps, of the size its
serializer gives the list at that step (each message's size measured once, and a list's size is
its items' plus a short header).

graph_agent's savers keep the lists their loads rebuilt, so a load of a thread a little longer
than at the last load decodes only what was added since (``LoadedLists``): the first load of a
thread in a process decodes it all, and is shown on its own row.

A W2 iteration is one call of the ReAct workload (``react.py``) with one tool call on the long
thread: the model asks for the tool, the tool answers, the model answers. Each timed call adds
four messages to the thread, a rounding error at 15,000.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import react
from benchmarks.harness import GRAPH_AGENT, LANGGRAPH, Row, Settings, micros, timed_together
from graph_agent import (
    END,
    START,
    AppendStrategy,
    AssistantMessage,
    CompileConfig,
    RunnableConfig,
    SqliteSaver,
    StateGraph,
    UserMessage,
)

MESSAGES = 15_000
THREAD = "long"


def messages(quick: bool) -> int:
    return 2_000 if quick else MESSAGES


def run(settings: Settings) -> list[Row]:
    length = messages(settings.quick)
    with tempfile.TemporaryDirectory(prefix="graph-agent-bench-") as name:
        folder = Path(name)
        ours = _GraphAgentThread(folder, length)
        implementations: dict[str, Any] = {GRAPH_AGENT: ours}
        if settings.with_langgraph:
            implementations[LANGGRAPH] = _LangGraphThread(folder, length)
        repeat = settings.repeat_slow
        cold = timed_together({n: t.get_state_cold for n, t in implementations.items()}, repeat)
        loads = timed_together({n: t.get_state for n, t in implementations.items()}, repeat)
        calls = timed_together({n: t.iteration for n, t in implementations.items()}, repeat)
        stored = {n: [float(t.stored_bytes())] for n, t in implementations.items()}
        parts = ours.parts_per_load()
        first_load_extra: dict[str, Any] = {}
        if settings.with_langgraph:
            objects = _LangGraphThread(folder, length, message_objects=True)
            median = sorted(
                micros(timed_together({LANGGRAPH: objects.get_state}, repeat)[LANGGRAPH])
            )
            first_load_extra["LangGraph with LangChain message objects, µs per get_state"] = median[
                len(median) // 2
            ]
    title = f"Long thread, SQLite, {length:,} messages"
    return [
        Row(
            key=f"{title}: get_state, first load",
            unit="µs per call",
            samples={name: micros(values) for name, values in cold.items()},
            note="graph_agent: its saver has decoded nothing of the thread yet; it builds "
            "message objects, as LangGraph does from LangChain messages (extra row)",
            extra=first_load_extra,
        ),
        Row(
            key=f"{title}: get_state",
            unit="µs per call",
            samples={name: micros(values) for name, values in loads.items()},
            target="no slower than LangGraph",
            extra={"graph_agent appended parts a load reads": parts},
            note="graph_agent: the saver goes on from the list it rebuilt at the last load",
        ),
        Row(
            key=f"{title}: one W2 iteration",
            unit="µs per call",
            samples={name: micros(values) for name, values in calls.items()},
            target="no slower than LangGraph",
        ),
        Row(
            key=f"{title}: bytes stored",
            unit="bytes for the whole thread",
            samples=stored,
            target="≤ 1/20 of LangGraph",
            note="LangGraph: computed for the same steps (see benchmarks/long_thread.py)",
        ),
    ]


def _history(length: int) -> list[Any]:
    return [
        UserMessage(f"Question {i // 2}?") if i % 2 == 0 else AssistantMessage(f"Answer {i // 2}.")
        for i in range(length)
    ]


class _GraphAgentThread:
    """A thread of ``length`` messages stored two per checkpoint, and the W2 graph on it."""

    def __init__(self, folder: Path, length: int) -> None:
        self.saver = SqliteSaver(folder / "graph_agent.db")
        history = _history(length)
        grow = StateGraph("conversation", key_strategies={"messages": AppendStrategy()})

        def two_more(state: Any) -> dict[str, Any]:
            done = len(state["messages"])
            return {"messages": history[done : done + 2]}

        grow.add_node("two_more", two_more).add_edge(START, "two_more")
        grow.add_conditional_edges(
            "two_more", lambda s: "two_more" if len(s["messages"]) < length else END
        )
        config = RunnableConfig(thread_id=THREAD, max_steps=length)
        grow.compile(CompileConfig(saver=self.saver)).invoke({"messages": []}, config)
        self.config = RunnableConfig(thread_id=THREAD, max_steps=react.max_steps(1))
        self.app = react.graph_agent_react(1, self.saver)

    def get_state(self) -> Any:
        return self.app.get_state(self.config)

    def get_state_cold(self) -> Any:
        self.saver._loaded.clear()  # as a process that has not loaded this thread yet
        return self.app.get_state(self.config)

    def iteration(self) -> Any:
        return self.app.invoke({"messages": [UserMessage(react.QUESTION)]}, self.config)

    def stored_bytes(self) -> int:
        return self.saver.stored_bytes(THREAD)

    def parts_per_load(self) -> int:
        stored = self.saver.get(THREAD)
        assert stored is not None
        chain = stored.chains.get("messages", ((None, 0),))
        return len(chain) - 1


class _LangGraphThread:
    """The same messages in LangGraph's SQLite saver (one checkpoint), and its W2 graph.

    With ``message_objects`` the history is LangChain's ``HumanMessage``/``AIMessage`` (what a
    LangGraph agent stores) instead of dicts, so a load builds message objects as ours does."""

    def __init__(self, folder: Path, length: int, *, message_objects: bool = False) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver as LGSqliteSaver

        name = "langgraph-objects.db" if message_objects else "langgraph.db"
        self.saver = LGSqliteSaver(sqlite3.connect(folder / name, check_same_thread=False))
        self.app = react.langgraph_react(1, self.saver)
        self.config = {
            "configurable": {"thread_id": THREAD},
            "recursion_limit": react.max_steps(1),
        }
        self.history: list[Any] = react.dict_history(length)[:length]
        if message_objects:
            from langchain_core.messages import AIMessage, HumanMessage

            self.history = [
                (HumanMessage if m["role"] == "user" else AIMessage)(m["content"], id=m["id"])
                for m in self.history
            ]
        self.app.update_state(self.config, {"messages": self.history})
        self.question = react.dict_history(0)

    def get_state(self) -> Any:
        return self.app.get_state(self.config)

    get_state_cold = get_state  # it keeps nothing between loads

    def iteration(self) -> Any:
        return self.app.invoke({"messages": self.question}, self.config)

    def stored_bytes(self) -> int:
        """What LangGraph's saver stores for this history built two messages per step."""
        serializer: Callable[[Any], tuple[str, bytes]] = self.saver.serde.dumps_typed
        sizes = [len(serializer([message])[1]) - 1 for message in self.history]
        total, prefix = 0, 0
        for step in range(0, len(sizes), 2):
            prefix += sum(sizes[step : step + 2])
            total += prefix + 3  # the list's msgpack header
        return total
