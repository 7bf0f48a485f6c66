"""Every example runs offline as is, and says what it did."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXPECTED_OUTPUT = {
    "workflow.py": "final draft: Graph runtimes (v2)",
    "checkpoints.py": "after time travel, published: None",
}


@pytest.mark.parametrize("name", sorted(EXPECTED_OUTPUT))
def test_the_example_runs_and_prints_its_result(name):
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert EXPECTED_OUTPUT[name] in result.stdout


def test_every_example_is_covered():
    assert {p.name for p in EXAMPLES.glob("*.py")} == set(EXPECTED_OUTPUT)
