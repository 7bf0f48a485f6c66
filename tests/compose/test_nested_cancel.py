"""Cancelling a run stops the agents running inside it at once: a team's agent awaiting its
model, an agent called as a tool awaiting a node."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any

import pytest

from graph_agent import (
    END,
    START,
    AssistantMessage,
    AssistantMessageChunk,
    GraphCancelledError,
    ReactAgent,
    RunnableConfig,
    SequentialAgent,
    StateGraph,
)
from graph_agent.agent.compose import agent_tool
from graph_agent.messages import BaseMessage
from graph_agent.models import ScriptedChatModel
from graph_agent.models.base import message_to_chunks
from tests.compose.agents import calls, scripted

LONG = 30.0
"""How long what is to be stopped waits: a run stopped at once ends long before."""

AT_ONCE = 10.0
"""The seconds a stopped run may take, however loaded the machine."""


def cancel_once(started: threading.Event, cancel: threading.Event) -> threading.Thread:
    """Set ``cancel`` from another thread once ``started`` is."""

    def wait_then_cancel() -> None:
        if started.wait(LONG):
            cancel.set()

    thread = threading.Thread(target=wait_then_cancel, daemon=True)
    thread.start()
    return thread


class WaitingModel(ScriptedChatModel):
    """A model whose calls take 30 s and say when they start: its async face awaits them (a
    cancel stops it, and ``stopped`` is set), its sync face blocks until ``release``."""

    def __init__(self) -> None:
        super().__init__(["late answer"] * 4)
        self.started, self.stopped, self.release = (threading.Event() for _ in range(3))

    def generate(
        self,
        messages: Sequence[BaseMessage],
        tools: Iterable[Any] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AssistantMessage:
        self.started.set()
        self.release.wait(LONG)
        return super().generate(messages, tools, options)

    def stream(
        self,
        messages: Sequence[BaseMessage],
        tools: Iterable[Any] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> Iterator[AssistantMessageChunk]:
        yield from message_to_chunks(self.generate(messages, tools, options))

    async def agenerate(
        self,
        messages: Sequence[BaseMessage],
        tools: Iterable[Any] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AssistantMessage:
        self.started.set()
        try:
            await asyncio.sleep(LONG)
        except asyncio.CancelledError:
            self.stopped.set()
            raise
        return super().generate(messages, tools, options)

    async def astream(
        self,
        messages: Sequence[BaseMessage],
        tools: Iterable[Any] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[AssistantMessageChunk]:
        for chunk in message_to_chunks(await self.agenerate(messages, tools, options)):
            yield chunk


@pytest.mark.parametrize("streamed", [False, True], ids=["ainvoke", "astream"])
def test_cancelling_a_team_stops_its_agent_awaiting_its_model_at_once(streamed: bool) -> None:
    model = WaitingModel()
    team = SequentialAgent("pipeline", [ReactAgent("writer", model)])
    cancel = threading.Event()
    config = RunnableConfig(thread_id="t1", cancel=cancel)

    async def call() -> None:
        if streamed:
            async for _ in team.astream("Write about graphs.", config):
                pass
        else:
            await team.ainvoke("Write about graphs.", config)

    canceller = cancel_once(model.started, cancel)
    started = time.monotonic()
    try:
        with pytest.raises(GraphCancelledError, match="which runs writer"):
            asyncio.run(call())
        took = time.monotonic() - started
    finally:
        model.release.set()  # a sync model call left running ends
    canceller.join()

    assert took < AT_ONCE  # not after the model's 30 s
    assert model.stopped.is_set()  # the model call itself was cancelled
    messages = team.get_state(RunnableConfig(thread_id="t1")).values["messages"]
    assert [m.text for m in messages] == ["Write about graphs."]  # no partial write


class GraphAgent:
    """A plain graph as an agent (what ``agent_tool`` takes): its one node awaits 30 s."""

    description = "Waits."
    instruction_keys: tuple[str, ...] = ()
    output_keys: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.started, self.stopped = threading.Event(), threading.Event()
        graph = StateGraph("waiter")

        async def wait(state: Any) -> dict[str, Any]:
            self.started.set()
            try:
                await asyncio.sleep(LONG)
            except asyncio.CancelledError:
                self.stopped.set()
                raise
            return {}

        graph.add_node("wait", wait).add_edge(START, "wait").add_edge("wait", END)
        self.name = "waiter"
        self.graph = graph.compile()

    def _max_steps(self) -> int:
        return 10


def test_cancelling_the_caller_stops_the_node_an_agent_tool_awaits_at_once(caller: Any) -> None:
    waiter = GraphAgent()
    boss = scripted(
        "boss", calls(("c1", "waiter", {"request": "wait"})), "done", tools=[agent_tool(waiter)]
    )
    cancel = threading.Event()
    canceller = cancel_once(waiter.started, cancel)
    started = time.monotonic()

    with pytest.raises(GraphCancelledError, match="which runs __tool__"):
        caller.invoke(boss, "go", RunnableConfig(thread_id="t1", cancel=cancel))

    assert waiter.stopped.wait(AT_ONCE)  # the agent's node, not only its caller, stopped
    assert time.monotonic() - started < AT_ONCE
    canceller.join()


def test_an_agent_tool_that_times_out_stops_the_node_it_awaits_at_once(caller: Any) -> None:
    waiter = GraphAgent()
    boss = scripted(
        "boss",
        calls(("c1", "waiter", {"request": "wait"})),
        lambda request: request.messages[-1].text,
        tools=[agent_tool(waiter)],
        tool_timeout=0.5,  # the call gives up long before the node would end
    )
    started = time.monotonic()

    final = caller.invoke(boss, "go", RunnableConfig(thread_id="t1"))

    assert "did not finish within 0.5 s" in final["messages"][-1].text
    assert waiter.stopped.wait(AT_ONCE)  # stopped with its call, not left to run 30 s
    assert time.monotonic() - started < AT_ONCE
