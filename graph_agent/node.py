"""For node authors: what a node needs from the engine besides the public graph API.

A node is a plain function of ``(state)`` or ``(state, config)``; this module holds the rest
that the agent, the tool layer, MCP and the CLI build their nodes with, so that no module
outside :mod:`graph_agent.graph` reaches into the engine's private machinery:

- the running task: :func:`current_task` (its :class:`TaskContext`), :func:`interrupt`,
  :func:`emit_chunk` (a streamed chunk, e.g. a model's token);
- :class:`DualNode`: a node with a sync and an async face doing the same work, so
  ``ainvoke`` awaits it on the caller's loop instead of on a worker thread;
- :class:`Updates`: several writes from one node, merged in order as if from nodes of their own;
- :class:`SubgraphNode` and :func:`run_nested`: a compiled graph run inside a node, on the
  parent's thread, in its own checkpoint namespace;
- :class:`AnySignal`: a cancel signal set when any of several is;
- :func:`pending_interrupts`: the interrupts a stored checkpoint still waits on.
"""

from graph_agent.graph._cancel import AnySignal
from graph_agent.graph._engine import DualNode
from graph_agent.graph._pending import pending_interrupts
from graph_agent.graph._subgraph import SubgraphNode, run_nested
from graph_agent.graph._writes import Updates
from graph_agent.graph.task import TaskContext, current_task, emit_chunk, interrupt

__all__ = [
    "AnySignal",
    "DualNode",
    "SubgraphNode",
    "TaskContext",
    "Updates",
    "current_task",
    "emit_chunk",
    "interrupt",
    "pending_interrupts",
    "run_nested",
]
