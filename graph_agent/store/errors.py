"""The errors of the stores, apart so that every store module can raise them."""

from __future__ import annotations

from graph_agent.graph.errors import GraphAgentError, GraphRuntimeError

__all__ = ["EmbeddingError", "StoreError", "StoreInputError"]


class StoreError(GraphRuntimeError):
    """The store's database failed (connection lost, disk full...): nothing was half-written."""


class StoreInputError(GraphAgentError, ValueError):
    """A namespace, key, value, filter or option a store cannot take; the message says why."""


class EmbeddingError(GraphAgentError, RuntimeError):
    """An embedder failed or answered something that is not one vector per text."""
