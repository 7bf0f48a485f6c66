"""A cancel while a lone sync node runs in the thread reading the call (``InlineCancel``): the
call lets go of its thread at once, and what the node returns later is dropped."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    CompileConfig,
    GraphCancelledError,
    RunnableConfig,
    SqliteSaver,
    StateGraph,
    StreamingOutput,
    ThreadBusyError,
)
from graph_agent.node import emit_chunk

LONG = 30.0
"""How long a hanging node blocks unless let go: a call stopped at once ends long before."""

AT_ONCE = 10.0
"""The seconds a stopped call may take, however loaded the machine."""


class Hanging:
    """``hang`` (after ``emitted`` chunks) blocks until :attr:`let_go` is set, then writes;
    ``after`` follows it. What ran is in :attr:`ran`."""

    def __init__(self, emitted: int = 0) -> None:
        self.started, self.let_go = threading.Event(), threading.Event()
        self.ran: list[str] = []
        self.cleaned: list[str] = []
        self.emitted = emitted

    def graph(self) -> StateGraph:
        def hang(state: Any) -> dict[str, Any]:
            try:
                for n in range(self.emitted):
                    emit_chunk(f"chunk {n}")
                self.started.set()
                assert self.let_go.wait(LONG)
                self.ran.append("hang")
                return {"log": "hang"}
            finally:
                self.cleaned.append("hang")

        g = StateGraph("g", key_strategies={"log": AppendStrategy()})
        g.add_node("hang", hang)
        g.add_node("after", lambda state: self.ran.append("after"))
        g.add_edge(START, "hang").add_edge("hang", "after").add_edge("after", END)
        return g


def lease_taken_within(saver: SqliteSaver, thread_id: str, seconds: float) -> bool:
    """Whether the thread's lease could be taken (and was given back) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            saver.release(saver.acquire(thread_id))
        except ThreadBusyError:
            time.sleep(0.01)
        else:
            return True
    return False


def call_in_thread(call: Any) -> tuple[threading.Thread, list[BaseException]]:
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, raised


@pytest.mark.parametrize("streamed", [False, True], ids=["invoke", "stream"])
def test_a_cancel_frees_the_thread_of_a_call_whose_node_hangs_in_its_thread(
    tmp_path: Path, streamed: bool
) -> None:
    hanging, cancel, stops = Hanging(), threading.Event(), []
    saver = SqliteSaver(tmp_path / "c.db")
    app = hanging.graph().compile(CompileConfig(saver=saver))
    config = RunnableConfig(thread_id="t1", cancel=cancel)

    def call() -> None:
        if streamed:
            for _ in app.stream({"log": []}, config, on_stop=stops.append):
                pass
        else:
            app.invoke({"log": []}, config)

    caller, raised = call_in_thread(call)
    assert hanging.started.wait(AT_ONCE)
    stored = len(list(saver.list("t1")))
    cancel.set()

    assert lease_taken_within(saver, "t1", AT_ONCE)  # while the node still hangs
    assert caller.is_alive() and hanging.ran == []
    hanging.let_go.set()  # it returns now: what it returns is dropped
    caller.join(AT_ONCE)
    assert not caller.is_alive()
    assert len(raised) == 1 and isinstance(raised[0], GraphCancelledError)
    assert "during step 0, which runs hang" in str(raised[0])
    assert hanging.ran == ["hang"]  # `after` never ran
    assert len(list(saver.list("t1"))) == stored  # nothing was written after the cancel
    snapshot = app.get_state(RunnableConfig(thread_id="t1"))
    assert list(snapshot.values["log"]) == [] and snapshot.next == ("hang",)
    if streamed:
        assert [str(stop) for stop in stops] == [str(raised[0])]
    saver.close()


def test_a_stream_stopped_at_a_chunk_of_a_cancelled_node_ends_the_node_there(
    tmp_path: Path,
) -> None:
    hanging, cancel, stops = Hanging(emitted=1), threading.Event(), []
    saver = SqliteSaver(tmp_path / "c.db")
    app = hanging.graph().compile(CompileConfig(saver=saver))
    stream = app.stream(
        {"log": []}, RunnableConfig(thread_id="t1", cancel=cancel), on_stop=stops.append
    )

    chunk = next(output for output in stream if isinstance(output, StreamingOutput))
    assert chunk.chunk == "chunk 0"  # the node stands at its chunk
    cancel.set()
    assert lease_taken_within(saver, "t1", AT_ONCE)
    with pytest.raises(GraphCancelledError, match="during step 0, which runs hang"):
        next(stream)

    assert hanging.cleaned == ["hang"] and hanging.ran == []  # ended there, never resumed
    assert len(stops) == 1
    saver.close()


def test_a_cancel_set_between_inline_nodes_stops_the_call_at_the_next_step(
    tmp_path: Path,
) -> None:
    cancel, stops = threading.Event(), []
    g = StateGraph("g", key_strategies={"log": AppendStrategy()})
    g.add_node("a", lambda state: {"log": "a"})
    g.add_node("b", lambda state: {"log": "b"})
    g.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    saver = SqliteSaver(tmp_path / "c.db")
    app = g.compile(CompileConfig(saver=saver))
    stream = app.stream(
        {"log": []}, RunnableConfig(thread_id="t1", cancel=cancel), on_stop=stops.append
    )

    assert next(output for output in stream if output.node == "a")  # b has not started
    cancel.set()
    with pytest.raises(GraphCancelledError, match="before step 1"):
        next(stream)

    assert stops == []  # no node ran when it was set: nothing was taken over
    assert list(app.get_state(RunnableConfig(thread_id="t1")).values["log"]) == ["a"]
    assert lease_taken_within(saver, "t1", AT_ONCE)
    saver.close()
