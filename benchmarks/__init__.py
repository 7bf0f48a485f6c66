"""Issue 7's benchmarks: graph_agent side by side with LangGraph and a plain Python loop.

Run ``python -m benchmarks`` (``--quick`` for a smoke run); LangGraph comes from the optional
extra, ``pip install -e '.[bench]'``. One module per family of workloads:

- ``chain``: W1, a 100-node chain (µs per node step);
- ``react``: the ReAct workload in three implementations, used by
  ``iterations`` (W2 per iteration with no saver, in-memory and SQLite; W4 long history),
  ``streaming`` (W5 per streamed event) and ``storage`` (bytes per run, growth exponent,
  commits per superstep);
- ``fanout``: W3, 50 parallel branches and a join; ``send``: W3 with 50 Sends to one node
  instead of 50 branches;
- ``footprint``: import time and resident memory, in a fresh interpreter;
- ``harness`` (timing, settings, rows) and ``report`` (the table and the JSON);
- ``instructions``: one workload run N times, for instruction counts under valgrind.
"""
