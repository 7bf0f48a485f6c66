"""A W3C ``traceparent`` header on a run request continues the caller's trace on the server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from graph_agent.observability import instrument, uninstrument
from graph_agent.observability.propagation import with_trace_context
from tests.serve.conftest import Server

TRACE_ID, PARENT_ID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    found = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(found))
    instrument(tracer_provider=provider)
    try:
        yield found
    finally:
        uninstrument()


def test_a_run_request_with_a_traceparent_continues_its_trace(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    with Server(tmp_path / "serve.db") as server:
        headers = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01", "tracestate": "vendor=1"}
        body = {"assistant_id": "chain", "input": {"x": 0}}
        traced = httpx.post(f"{server.url}/runs/wait", json=body, headers=headers)
        untraced = httpx.post(f"{server.url}/runs/wait", json=body)
    assert traced.json() == untraced.json() == {"x": 11}
    runs = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent chain"]
    assert len(runs) == 2
    continued = [s for s in runs if format(s.context.trace_id, "032x") == TRACE_ID]
    assert len(continued) == 1
    (run,) = continued
    assert run.parent is not None and format(run.parent.span_id, "016x") == PARENT_ID
    assert run.parent.is_remote
    nodes = [
        s
        for s in exporter.get_finished_spans()
        if s.parent and s.parent.span_id == run.context.span_id
    ]
    assert sorted(s.name for s in nodes) == ["node first", "node second"]


def test_only_a_well_formed_traceparent_is_carried_and_metadata_given_wins() -> None:
    good = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
    assert with_trace_context({"input": {}}, good)["metadata"] == good
    assert with_trace_context({"input": {}}, {"traceparent": "00-zz-01"}) == {"input": {}}
    mine = {"traceparent": f"00-{'1' * 32}-{'2' * 16}-01"}
    assert with_trace_context({"metadata": mine}, good)["metadata"] == mine
    assert with_trace_context({"metadata": "bad"}, good) == {"metadata": "bad"}
