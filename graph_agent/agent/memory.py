"""Long-term memory for agents: a hook that recalls what the store holds about the user before
each model call, and the ``remember`` / ``forget`` tools the model calls to change it.

The memories of a user live in the run's store (``ReactAgent(store=...)``, reached as
``config.store``) under a namespace made from ``config.context``: by default
``("memories", "{user_id}")``, so ``RunnableConfig(context={"user_id": "u42"})`` picks the
user, on any thread. Each memory is an item ``{"text": ...}``.

Example:
    >>> from graph_agent import ReactAgent, RunnableConfig
    >>> from graph_agent.models import ScriptedChatModel
    >>> from graph_agent.store import InMemoryStore
    >>> agent = ReactAgent(
    ...     "assistant",
    ...     ScriptedChatModel(["Hello!"]),
    ...     tools=memory_tools(),
    ...     hooks=[MemoryHook()],
    ...     store=InMemoryStore(),
    ... )
    >>> agent.call("hi", RunnableConfig(context={"user_id": "u42"})).text
    'Hello!'
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from graph_agent.agent.hooks import ModelHook
from graph_agent.graph.state import OverAllState, RemoveMessage
from graph_agent.graph.types import RunnableConfig
from graph_agent.messages import SystemMessage, UserMessage
from graph_agent.store.base import BaseStore, Item, StoreInputError
from graph_agent.tools import Tool, ToolContext

__all__ = ["MEMORIES_ID", "MemoryHook", "memory_namespace", "memory_tools"]

DEFAULT_NAMESPACE = ("memories", "{user_id}")
MEMORIES_ID = "memories"
"""The id of the system message holding the recalled memories (replaced in place each call)."""


def memory_namespace(config: Any, template: Sequence[str] = DEFAULT_NAMESPACE) -> tuple[str, ...]:
    """The namespace ``template`` names for this run: each ``{key}`` filled from
    ``config.context``.

    Raises:
        StoreInputError: the context lacks a key the template names.
    """
    context: Mapping[str, Any] = getattr(config, "context", None) or {}
    labels = []
    for label in template:
        try:
            labels.append(label.format_map(context))
        except KeyError as exc:
            raise StoreInputError(
                f"the memory namespace {tuple(template)!r} needs {exc.args[0]!r} in the run's "
                f"context: call with RunnableConfig(context={{{exc.args[0]!r}: ...}})"
            ) from exc
    return tuple(labels)


def _store_of(config: Any) -> BaseStore:
    store = getattr(config, "store", None)
    if store is None:
        raise StoreInputError(
            "long-term memory needs a store: ReactAgent(..., store=InMemoryStore()) (or "
            "SqliteStore / PostgresStore), or CompileConfig(store=...) for a graph"
        )
    if not isinstance(store, BaseStore):
        raise StoreInputError(f"config.store is {type(store).__name__}, not a graph_agent store")
    return store


def memory_id(text: str) -> str:
    """A memory's key: the same text is one memory, however often it is remembered."""
    return "m-" + hashlib.sha256(text.strip().lower().encode()).hexdigest()[:12]


class MemoryHook(ModelHook):
    """Before each model call, puts the user's most relevant memories into the conversation,
    as one system message (id :data:`MEMORIES_ID`) replaced in place as they change.

    Relevance is the store's ranking against the latest user message when the store has an
    ``index``, else the newest memories. A run whose context does not name the user (see
    ``namespace``) recalls nothing.

    Args:
        namespace: The namespace template (``{key}`` filled from ``config.context``).
        limit: Most memories recalled per call.
    """

    name = "memory"

    def __init__(self, namespace: Sequence[str] = DEFAULT_NAMESPACE, limit: int = 5) -> None:
        self.namespace = tuple(namespace)
        self.limit = limit

    def before_model(self, state: OverAllState, config: RunnableConfig) -> Any:
        store = _store_of(config)
        try:
            namespace = memory_namespace(config, self.namespace)
        except StoreInputError:
            return None  # no user named: nobody's memories to recall
        messages = list(state.value("messages", ()))
        question = next((m.text for m in reversed(messages) if isinstance(m, UserMessage)), "")
        query = question if store.index is not None and question else None
        items = store.search(namespace, query=query, limit=self.limit)
        current = next((m for m in messages if m.id == MEMORIES_ID), None)
        if not items:
            return {"messages": [RemoveMessage(MEMORIES_ID)]} if current is not None else None
        text = recalled_text(items)
        if current is not None and current.text == text:
            return None
        return {"messages": [SystemMessage(text, id=MEMORIES_ID)]}


def recalled_text(items: Sequence[Item]) -> str:
    """The system message's text for recalled memories."""
    lines = [f"- [{item.key}] {item.value.get('text', item.value)}" for item in items]
    return "What you remember about this user (forget(memory_id) removes one):\n" + "\n".join(lines)


def memory_tools(namespace: Sequence[str] = DEFAULT_NAMESPACE) -> list[Tool]:
    """The tools ``remember(fact)`` and ``forget(memory_id)``, writing to the run's store
    under ``namespace`` (a template filled from ``config.context``, as :class:`MemoryHook`'s)."""
    template = tuple(namespace)

    def remember(fact: str, ctx: ToolContext) -> str:
        """Remember a fact about the user for later conversations (one short sentence)."""
        fact = fact.strip()
        if not fact:
            return "Nothing to remember: give the fact as one short sentence."
        key = memory_id(fact)
        _store_of(ctx.config).put(memory_namespace(ctx.config, template), key, {"text": fact})
        return f"Remembered [{key}]: {fact}"

    def forget(memory_id: str, ctx: ToolContext) -> str:
        """Forget a remembered fact, by the id shown in brackets before it."""
        store, where = _store_of(ctx.config), memory_namespace(ctx.config, template)
        if store.get(where, memory_id, refresh_ttl=False) is None:
            return f"There is no memory {memory_id!r}; the ids are shown in brackets."
        store.delete(where, memory_id)
        return f"Forgot [{memory_id}]."

    return [Tool(remember), Tool(forget)]
