"""Long-term memory: a store of dict values under namespaced keys, shared across threads,
processes and machines (DESIGN §10).

``InMemoryStore`` (tests, one process), ``SqliteStore`` (a file, the checkpoint file is fine)
and ``PostgresStore`` (the saver's database) share one base (:mod:`graph_agent.store.base`):
``put``/``get``/``delete``/``search``/``list_namespaces``, their async twins and ``batch``;
TTLs; filters; semantic search with an optional ``index``.

A graph reaches its store as ``config.store`` (``CompileConfig(store=...)``), a tool as
``ToolContext.store``, an agent through ``ReactAgent(store=...)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graph_agent.store.base import BaseStore, Item, StoreError, StoreInputError
from graph_agent.store.embeddings import EmbeddingError, HashEmbeddings, OpenAIEmbeddings
from graph_agent.store.memory import InMemoryStore

if TYPE_CHECKING:
    from graph_agent.store.postgres import PostgresStore
    from graph_agent.store.sqlite import SqliteStore

_LAZY = {"PostgresStore": "postgres", "SqliteStore": "sqlite"}

__all__ = [
    "BaseStore",
    "EmbeddingError",
    "HashEmbeddings",
    "InMemoryStore",
    "Item",
    "OpenAIEmbeddings",
    "PostgresStore",
    "SqliteStore",
    "StoreError",
    "StoreInputError",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)  # loaded on first use: PostgresStore needs the postgres extra
    if module is not None:
        import importlib

        return getattr(importlib.import_module(f"graph_agent.store.{module}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
