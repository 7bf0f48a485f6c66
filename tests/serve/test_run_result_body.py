"""A run's result, as ``runs/wait`` and ``runs/join`` send it: the JSON of a run that streamed
to its end is the text its last ``values`` event carried, encoded once; any other result is
encoded as every response is."""

from __future__ import annotations

import json
from typing import Any

import pytest

from graph_agent import CompileConfig
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.serve import runs as runs_module
from graph_agent.serve.records import Records, ThreadRecord, now
from graph_agent.serve.runs import ActiveRun, Runner, RunRequest
from tests.serve.graphs import chain


async def _finished(
    modes: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch
) -> tuple[ActiveRun, bytes, int]:
    """A run of the chain streaming ``modes``, ended; its result body, and how often that
    encoded JSON."""
    runner = Runner({"chain": chain().compile(CompileConfig(saver=MemorySaver()))}, Records())
    runner.records.put_thread(ThreadRecord(thread_id="t", created_at=now(), updated_at=now()))
    run = runner.start("t", RunRequest(assistant_id="chain", input={"x": 1}, stream_modes=modes))
    await run.wait()
    encoded = 0
    encode = runs_module.sse_text

    def counted(data: Any) -> str:
        nonlocal encoded
        encoded += 1
        return encode(data)

    monkeypatch.setattr(runs_module, "sse_text", counted)
    body = await run.result_body()
    assert json.loads(body) == run.result == {"x": 12}
    await runner.close()
    return run, body, encoded


async def test_the_result_of_a_run_streamed_to_its_end_is_its_last_values_events_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run, body, encoded = await _finished(("values",), monkeypatch)
    event, text = run.events[-1]
    assert event == "values" and body == text.encode("utf-8")
    assert encoded == 0  # the final values were encoded once, for their event


async def test_a_result_no_event_carried_is_encoded_for_the_response(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run, body, encoded = await _finished(("updates",), monkeypatch)
    assert run.events[-1][0] == "updates" and encoded == 1
    assert body == json.dumps({"x": 12}, separators=(",", ":")).encode()
