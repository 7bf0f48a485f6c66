"""MODULES.md is the code's module map: regenerate it with ``python -m tests.module_map``."""

from __future__ import annotations

from tests.module_map import MAP, render


def test_the_module_map_is_current():
    assert MAP.read_text(encoding="utf-8") == render(), (
        "MODULES.md is out of date: run python -m tests.module_map"
    )


def test_the_map_names_every_module_with_what_it_is_for():
    entries = [line for line in render().splitlines() if line.startswith("- `")]
    assert any(line.startswith("- `saver.py`: What the engine needs") for line in entries)
    assert all(line.split(": ", 1)[1].strip() for line in entries)  # none without a summary
