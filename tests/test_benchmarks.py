"""The benchmarks run in quick mode, so they cannot rot; their numbers are not asserted."""

from __future__ import annotations

import json

from benchmarks.__main__ import main


def test_the_benchmarks_run_in_quick_mode_and_write_json(tmp_path, capsys):
    output = tmp_path / "results.json"
    assert main(["--quick", "--output", str(output)]) == 0
    table = json.loads(output.read_text())
    assert "W1 chain, per node step" in table
    assert set(table["W1 chain, per node step"]) >= {"graph_agent", "plain loop"}
    assert "µs" in capsys.readouterr().out
