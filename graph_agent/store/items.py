"""What a store holds and is asked: :class:`Item`, the operations a batch runs (:class:`GetOp`,
:class:`PutOp`, :class:`SearchOp`, :class:`ListNamespacesOp`), and the :class:`Row` and
:class:`Write` a backend reads and writes."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, NamedTuple, TypeAlias

__all__ = [
    "NOT_PROVIDED",
    "GetOp",
    "Item",
    "ListNamespacesOp",
    "NotProvided",
    "Op",
    "PutOp",
    "Row",
    "SearchOp",
    "Write",
]


class NotProvided(enum.Enum):
    """The type of :data:`NOT_PROVIDED`."""

    NOT_PROVIDED = "NOT_PROVIDED"

    def __repr__(self) -> str:
        return "NOT_PROVIDED"


NOT_PROVIDED = NotProvided.NOT_PROVIDED
"""A put's ``ttl`` when none was given: the store's ``default_ttl`` (``None`` is no TTL)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Item:
    """One stored value and where it lives.

    ``score`` is the cosine similarity to the query of a :meth:`BaseStore.search` with
    ``query=`` (``None`` otherwise).
    """

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    score: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class GetOp:
    """Read one item (result: ``Item | None``); ``refresh_ttl`` None: the store's
    ``refresh_on_read``."""

    namespace: tuple[str, ...]
    key: str
    refresh_ttl: bool | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class PutOp:
    """Store one item, or delete it with ``value=None`` (result: ``None``).

    ``ttl`` is in minutes (``None``: the item never expires; :data:`NOT_PROVIDED`: the
    store's ``default_ttl``); ``index`` is ``None`` (the store's index fields), ``False`` (do
    not embed this item) or the field paths to embed.
    """

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] | None
    ttl: float | NotProvided | None = NOT_PROVIDED
    index: Literal[False] | Sequence[str] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchOp:
    """Items under a namespace prefix (result: ``list[Item]``): ranked by ``query`` when the
    store has an index, else newest first; ``filter`` keeps items whose value matches."""

    namespace_prefix: tuple[str, ...]
    query: str | None = None
    filter: Mapping[str, Any] | None = None
    limit: int = 10
    offset: int = 0
    refresh_ttl: bool | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ListNamespacesOp:
    """The namespaces starting with ``prefix`` and ending with ``suffix`` (a ``"*"`` label
    in either matches any label), then cut to ``max_depth`` labels (result: a sorted list,
    each namespace once), as LangGraph's ``list_namespaces`` does."""

    prefix: tuple[str, ...] = ()
    max_depth: int | None = None
    suffix: tuple[str, ...] = ()
    limit: int = 100
    offset: int = 0


Op: TypeAlias = GetOp | PutOp | SearchOp | ListNamespacesOp


class Row(NamedTuple):
    """An item as a backend reads it: encoded namespace, serialized value, epoch seconds (a
    tuple: a search makes one per row it reads)."""

    ns: str
    key: str
    data: bytes
    created_at: float
    updated_at: float
    ttl: float | None = None
    """Minutes: the item's ``expires_at`` moves to now + ttl when it is read."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Write:
    """A put as a backend stores it (``data`` None: delete)."""

    ns: str
    key: str
    data: bytes | None
    at: float
    """When the put was made: the row's ``updated_at`` (and ``created_at`` when new)."""
    expires_at: float | None
    ttl: float | None
    vectors: dict[str, list[float]] = field(default_factory=dict)
    """Each embedded field path's unit vector (empty: the item has no vectors)."""
