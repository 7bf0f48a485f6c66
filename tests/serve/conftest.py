"""A real uvicorn server on 127.0.0.1, on a free port, serving the test graphs and an agent."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from graph_agent import END, START, StateGraph, emit_chunk, interrupt
from graph_agent.agent.react import ReactAgent
from graph_agent.checkpoint.sqlite import SqliteSaver
from graph_agent.messages import AssistantMessageChunk
from graph_agent.models.scripted import ScriptedChatModel
from graph_agent.serve import Records, create_app


def chain() -> StateGraph:
    """``x`` goes up by one in ``first``, by ten in ``second``; ``first`` emits two chunks."""
    graph = StateGraph("chain")

    def first(state):
        emit_chunk("tick")
        emit_chunk({"progress": 1})
        emit_chunk(AssistantMessageChunk(id="m1", content="Hel"))
        emit_chunk(AssistantMessageChunk(id="m1", content="lo"))
        return {"x": state["x"] + 1}

    graph.add_node("first", first)
    graph.add_node("second", lambda state: {"x": state["x"] + 10})
    graph.add_edge(START, "first").add_edge("first", "second").add_edge("second", END)
    return graph


def approval() -> StateGraph:
    """Asks a human before writing ``answer``."""
    graph = StateGraph("approval")
    graph.add_node("draft", lambda state: {"draft": f"reply to {state['question']}"})
    graph.add_node("ask", lambda state: {"answer": interrupt({"approve": state["draft"]})})
    graph.add_edge(START, "draft").add_edge("draft", "ask").add_edge("ask", END)
    return graph


def slow() -> StateGraph:
    """Ten steps of 0.1 s each: long enough to be busy, cancelled between steps."""
    graph = StateGraph("slow")

    def step(state):
        time.sleep(0.1)
        return {"n": state.get("n", 0) + 1}

    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", lambda state: END if state["n"] >= 10 else "step")
    return graph


def agent() -> ReactAgent:
    return ReactAgent(
        "assistant", model=ScriptedChatModel(["Hello there.", "Second answer.", "Third."])
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    def __init__(self, db: Path) -> None:
        self.db = db
        self.saver = SqliteSaver(str(db))
        self.records = Records(str(db.with_name("records.db")))
        app = create_app(
            [chain(), approval(), slow(), agent()], saver=self.saver, records=self.records
        )
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/ok").status_code == 200:
                    return self
            except httpx.TransportError:
                time.sleep(0.02)
        raise RuntimeError("the test server did not start")

    def __exit__(self, *exc_info: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.records.close()
        self.saver.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with Server(tmp_path_factory.mktemp("serve") / "serve.db") as running:
        yield running
