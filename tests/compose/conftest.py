"""Fixtures for the composition tests: each call goes through the sync or the async face."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from graph_agent import NodeOutput, OverAllState, RunnableConfig


class Caller:
    """Calls a compiled graph, an agent or a team through one face (``sync`` or ``async``)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def invoke(
        self, runnable: Any, input: Any, config: RunnableConfig | None = None
    ) -> OverAllState:
        if self.kind == "sync":
            return runnable.invoke(input, config)
        return asyncio.run(runnable.ainvoke(input, config))

    def stream(
        self,
        runnable: Any,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
    ) -> list[NodeOutput]:
        options = {"subgraphs": True} if subgraphs else {}
        if self.kind == "sync":
            return list(runnable.stream(input, config, **options))

        async def collect() -> list[NodeOutput]:
            return [item async for item in runnable.astream(input, config, **options)]

        return asyncio.run(collect())

    def __repr__(self) -> str:
        return self.kind


@pytest.fixture(params=["sync", "async"])
def caller(request: pytest.FixtureRequest) -> Iterator[Caller]:
    yield Caller(request.param)
