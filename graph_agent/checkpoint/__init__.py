"""Checkpoint savers: where a thread's state lives between calls and across crashes."""

from graph_agent.checkpoint.base import Checkpoint, CheckpointSaver, Lease, PendingWrite
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.checkpoint.sqlite import SqliteSaver

__all__ = ["Checkpoint", "CheckpointSaver", "Lease", "MemorySaver", "PendingWrite", "SqliteSaver"]
