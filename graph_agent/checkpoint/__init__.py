"""Checkpoint savers: where a thread's state lives between calls and across crashes.

The SQLite and PostgreSQL savers load on first use (``from graph_agent.checkpoint import
SqliteSaver``), so importing the package costs nothing for those who never use them.
"""

from typing import TYPE_CHECKING, Any

from graph_agent.checkpoint.base import Checkpoint, CheckpointSaver, Lease, PendingWrite
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.checkpoint.retention import RetentionPolicy, SweepResult
from graph_agent.checkpoint.thread_search import ThreadInfo
from graph_agent.graph.errors import CheckpointStoreError

if TYPE_CHECKING:
    from graph_agent.checkpoint.postgres import AsyncPostgresSaver, PostgresSaver
    from graph_agent.checkpoint.sqlite import SqliteSaver

_LAZY = {
    "AsyncPostgresSaver": "postgres",
    "PostgresSaver": "postgres",
    "SqliteSaver": "sqlite",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        import importlib

        return getattr(importlib.import_module(f"graph_agent.checkpoint.{module}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AsyncPostgresSaver",
    "Checkpoint",
    "CheckpointSaver",
    "CheckpointStoreError",
    "Lease",
    "MemorySaver",
    "PendingWrite",
    "PostgresSaver",
    "RetentionPolicy",
    "SqliteSaver",
    "SweepResult",
    "ThreadInfo",
]
