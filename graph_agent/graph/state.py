"""Keyed state: OverAllState (a read-only view) and the per-key merge strategies."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RemoveMessage:
    """Written to an :class:`AppendStrategy` key, removes the item whose id is ``id``."""

    id: str


@dataclass(frozen=True, slots=True, init=False)
class ReplaceAll:
    """Written to an :class:`AppendStrategy` key, replaces the whole list with ``items``."""

    items: tuple[Any, ...]

    def __init__(self, items: Iterable[Any]) -> None:
        object.__setattr__(self, "items", tuple(items))
