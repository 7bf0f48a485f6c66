"""The benchmarks run in quick mode, so they cannot rot; their numbers are not asserted."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

import pytest

from benchmarks.__main__ import main
from benchmarks.harness import GRAPH_AGENT, PLAIN, langgraph_available

WORKLOADS = {
    "W1 chain",
    "W2 react, no saver",
    "W2 react, in-memory saver",
    "W2 react, SQLite saver",
    "W3 fanout",
    "W3 send",
    "W4 long history, no saver",
    "W4 long history, in-memory saver",
    "W5 stream",
    "Storage growth exponent",
    "SQLite commits per one-node superstep",
}


@pytest.mark.timeout(180)  # every workload, PostgreSQL's processes too: slow when loaded
def test_the_benchmarks_run_in_quick_mode_and_write_json(tmp_path, capsys):
    output = tmp_path / "results.json"
    assert main(["--quick", "--output", str(output)]) == 0
    results = json.loads(output.read_text())["results"]
    assert set(results) >= WORKLOADS
    for workload in WORKLOADS:
        assert {GRAPH_AGENT} <= set(results[workload]), workload
    assert {GRAPH_AGENT, PLAIN} <= set(results["W1 chain"])
    printed = capsys.readouterr().out
    assert "µs per node step" in printed
    # the engine's three targets, side by side from this one run
    targets = {target["name"]: target for target in json.loads(output.read_text())["targets"]}
    assert "W2 iteration, no saver / plain loop (≤ ×10)" in targets
    assert "Engine targets (issue 34), measured in this run:" in printed
    assert "W2 iteration, no saver / plain loop" in printed
    if sys.platform.startswith("linux"):
        assert "import graph_agent, RSS over the interpreter (≤ +20 MB)" in targets
    if langgraph_available():
        assert "W5 streamed event / LangGraph (≤ 1/15)" in targets
    if langgraph_available():
        assert "langgraph" in results["W1 chain"]
        assert results["W1 chain"]["ratio_to_langgraph"] > 0


@pytest.mark.timeout(180)  # every workload, PostgreSQL's processes too: slow when loaded
def test_without_langgraph_the_table_says_so(tmp_path, capsys):
    output = tmp_path / "results.json"
    assert main(["--quick", "--without-langgraph", "--output", str(output)]) == 0
    printed = capsys.readouterr().out
    assert "LangGraph is left out" in printed or "LangGraph is not installed" in printed
    results = json.loads(output.read_text())["results"]
    assert all("langgraph" not in entry for entry in results.values())


class FakeClock:
    """The harness's clock, advanced only by the fake runs: each call takes exactly its time."""

    def __init__(self) -> None:
        self.now = 0.0
        self.calls: list[str] = []

    def __call__(self) -> float:
        return self.now

    def run(self, name: str, seconds: float) -> Callable[[], None]:
        def call() -> None:
            self.calls.append(name)
            self.now += seconds

        return call


@pytest.fixture
def fake_clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    from benchmarks import harness

    fake = FakeClock()
    monkeypatch.setattr(harness, "clock", fake)
    return fake


def test_a_sample_is_a_batch_of_calls_as_long_as_the_slowest_call_taken_in_turns(
    fake_clock: FakeClock,
) -> None:
    from benchmarks.harness import timed_together

    runs = {"fast": fake_clock.run("fast", 0.001), "slow": fake_clock.run("slow", 0.03)}
    samples = timed_together(runs, repeat=3, batch_seconds=0.015)
    assert samples == {"fast": [pytest.approx(0.001)] * 3, "slow": [pytest.approx(0.03)] * 3}
    # a warm-up call of each, three of each to size the batches, then turns: the fast batch
    # lasts as long as one slow call, not batch_seconds
    assert fake_clock.calls[:8] == ["fast", "slow"] + ["fast"] * 3 + ["slow"] * 3
    assert fake_clock.calls[8:] == (["fast"] * 30 + ["slow"]) * 3


def test_batches_last_at_least_batch_seconds(fake_clock: FakeClock) -> None:
    from benchmarks.harness import timed_together

    runs = {"one": fake_clock.run("one", 0.0005), "two": fake_clock.run("two", 0.001)}
    samples = timed_together(runs, repeat=2, batch_seconds=0.02)
    assert samples == {"one": [pytest.approx(0.0005)] * 2, "two": [pytest.approx(0.001)] * 2}
    assert fake_clock.calls[8:] == (["one"] * 40 + ["two"] * 20) * 2


def test_without_batch_seconds_a_sample_is_one_call():
    from benchmarks.harness import timed_together

    calls: list[str] = []
    timed_together({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeat=3)
    assert calls == ["a", "b"] + ["a", "b"] * 3  # a warm-up call each, then one call per turn


def test_the_engine_targets_read_ratios_and_the_import_from_the_rows():
    from benchmarks.harness import LANGGRAPH, Row
    from benchmarks.report import engine_targets

    rows = [
        Row(key="W2 react, no saver", unit="µs", samples={GRAPH_AGENT: [30.0], PLAIN: [10.0]}),
        Row(key="W5 stream", unit="µs", samples={GRAPH_AGENT: [20.0], LANGGRAPH: [200.0]}),
        Row(key="Import RSS", unit="MB", samples={GRAPH_AGENT: [8.0, 9.0, 30.0]}),
    ]
    targets = engine_targets(rows)
    assert [(t.text, t.met) for t in targets] == [
        ("×3.00", True),
        ("1/10.0", False),
        ("+9.0 MB", True),
    ]
    assert engine_targets([]) == []
