"""Cancelling a run stops the agents running inside it at once: a team's agent awaiting its
model."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any

import pytest

from graph_agent import (
    AssistantMessage,
    AssistantMessageChunk,
    GraphCancelledError,
    ReactAgent,
    RunnableConfig,
    SequentialAgent,
)
from graph_agent.messages import BaseMessage
from graph_agent.models import ScriptedChatModel
from graph_agent.models.base import message_to_chunks

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
