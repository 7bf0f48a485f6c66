"""Checkpoint savers: where a thread's state lives between calls and across crashes.

The PostgreSQL savers load on first use (``from graph_agent.checkpoint import PostgresSaver``),
so importing the package costs nothing for those who never use them.
"""

from typing import TYPE_CHECKING, Any

from graph_agent.checkpoint.base import Checkpoint, CheckpointSaver, Lease, PendingWrite
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.checkpoint.sqlite import SqliteSaver
from graph_agent.graph.errors import CheckpointStoreError

if TYPE_CHECKING:
    from graph_agent.checkpoint.postgres import AsyncPostgresSaver, PostgresSaver

_POSTGRES = ("AsyncPostgresSaver", "PostgresSaver")


def __getattr__(name: str) -> Any:
    if name in _POSTGRES:
        from graph_agent.checkpoint import postgres

        return getattr(postgres, name)
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
    "SqliteSaver",
]
