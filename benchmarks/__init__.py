"""Benchmarks of the engine, side by side with a plain Python loop (and LangGraph when
installed with ``pip install -e '.[bench]'``). Run ``python -m benchmarks``."""
