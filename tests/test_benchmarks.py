"""The benchmarks run in quick mode, so they cannot rot; their numbers are not asserted."""

from __future__ import annotations

import json

from benchmarks.__main__ import main
from benchmarks.harness import GRAPH_AGENT, PLAIN, langgraph_available

WORKLOADS = {
    "W1 chain",
    "W2 react, no saver",
    "W2 react, in-memory saver",
    "W2 react, SQLite saver",
    "W3 fanout",
    "W4 long history, no saver",
    "W4 long history, in-memory saver",
    "W5 stream",
    "Storage growth exponent",
    "SQLite commits per one-node superstep",
}


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
    if langgraph_available():
        assert "langgraph" in results["W1 chain"]
        assert results["W1 chain"]["ratio_to_langgraph"] > 0


def test_without_langgraph_the_table_says_so(tmp_path, capsys):
    output = tmp_path / "results.json"
    assert main(["--quick", "--without-langgraph", "--output", str(output)]) == 0
    printed = capsys.readouterr().out
    assert "LangGraph is left out" in printed or "LangGraph is not installed" in printed
    results = json.loads(output.read_text())["results"]
    assert all("langgraph" not in entry for entry in results.values())


def test_a_sample_is_a_batch_of_calls_as_long_as_the_slowest_call_taken_in_turns():
    import time

    from benchmarks.harness import timed_together

    calls: list[str] = []

    # margins wide enough for a busy machine: a fast call may take several times its sleep
    def fast() -> None:
        calls.append("fast")
        time.sleep(0.0002)

    def slow() -> None:
        calls.append("slow")
        time.sleep(0.03)

    samples = timed_together({"fast": fast, "slow": slow}, repeat=3, batch_seconds=0.015)
    assert len(samples["fast"]) == len(samples["slow"]) == 3
    timed = calls[8:]  # after one warm-up call of each and three of each to size batches
    fast_batch = timed.index("slow")
    assert timed[fast_batch : fast_batch + 2] == ["slow", "fast"]  # one slow call, then turns
    # a sample is the time of one call of the batch
    assert 3 * max(samples["fast"]) < min(samples["slow"])
    # and the fast batch lasts about as long as the slow call (not batch_seconds, shorter)
    assert fast_batch * max(samples["fast"]) > 0.6 * min(samples["slow"]), fast_batch


def test_batches_last_at_least_batch_seconds():
    import time

    from benchmarks.harness import timed_together

    calls: list[str] = []

    def one() -> None:
        calls.append("one")
        time.sleep(0.0005)

    def two() -> None:
        calls.append("two")
        time.sleep(0.001)

    samples = timed_together({"one": one, "two": two}, repeat=2, batch_seconds=0.02)
    timed = calls[8:]
    first_batch = timed.index("two")
    assert first_batch >= 5  # 20 ms of calls that take at most a few ms each on a busy machine
    assert first_batch * max(samples["one"]) > 0.01, first_batch
    assert timed[first_batch:].count("two") >= 2 * 5


def test_without_batch_seconds_a_sample_is_one_call():
    from benchmarks.harness import timed_together

    calls: list[str] = []
    timed_together({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeat=3)
    assert calls == ["a", "b"] + ["a", "b"] * 3  # a warm-up call each, then one call per turn
