"""``graph-agent serve`` settles the garbage collector before it serves."""

from __future__ import annotations

import gc

from graph_agent.cli import serve


def test_serving_freezes_what_is_loaded_and_collects_less_often() -> None:
    before = gc.get_threshold()
    try:
        serve._settle_garbage_collection()
        assert gc.get_threshold() == serve.GC_THRESHOLDS
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
