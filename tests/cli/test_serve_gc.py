"""``graph-agent serve`` settles the garbage collector before it serves."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
import uvicorn

from graph_agent.cli import serve
from graph_agent.cli.main import main

CHAIN = str(Path(__file__).resolve().parents[1] / "serve" / "graphs.py") + ":chain"


def test_serving_freezes_what_is_loaded_and_collects_less_often(tmp_path, monkeypatch) -> None:
    seen: list[tuple[tuple[int, int, int], int]] = []

    def run(self: uvicorn.Server, sockets: object = None) -> None:  # what serving would see
        seen.append((gc.get_threshold(), gc.get_freeze_count()))

    monkeypatch.setattr(uvicorn.Server, "run", run)
    before = gc.get_threshold()
    try:
        argv = ["serve", CHAIN, "--port", "0"]
        assert main([*argv, "--db", str(tmp_path / "s.db")]) == 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
    assert len(seen) == 1
    thresholds, frozen = seen[0]
    assert thresholds == serve.GC_THRESHOLDS
    assert frozen > 0


def test_the_settings_are_left_to_the_command_not_the_library() -> None:
    pytest.importorskip("starlette")
    from graph_agent.serve import create_app

    before = gc.get_threshold()
    create_app({})  # an app for embedding: the process's collector is not its to change
    assert gc.get_threshold() == before
