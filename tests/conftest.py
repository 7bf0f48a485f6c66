"""Shared fixtures: every execution test runs through the sync and the async driver."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from graph_agent import CompiledGraph, NodeOutput, OverAllState, RunnableConfig


class Driver:
    """Runs a compiled graph through one driver with one call signature."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def invoke(
        self, app: CompiledGraph, input: Any, config: RunnableConfig | None = None
    ) -> OverAllState:
        if self.kind == "sync":
            return app.invoke(input, config)
        return asyncio.run(app.ainvoke(input, config))

    def stream(
        self, app: CompiledGraph, input: Any, config: RunnableConfig | None = None
    ) -> list[NodeOutput]:
        if self.kind == "sync":
            return list(app.stream(input, config))

        async def collect() -> list[NodeOutput]:
            return [item async for item in app.astream(input, config)]

        return asyncio.run(collect())

    def __repr__(self) -> str:
        return self.kind


@pytest.fixture(params=["sync", "async"])
def driver(request: pytest.FixtureRequest) -> Iterator[Driver]:
    yield Driver(request.param)
