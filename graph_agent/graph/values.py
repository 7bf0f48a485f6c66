"""The smallest values every part of the runtime names: the two virtual nodes and
:class:`Interrupt`. A leaf module: it imports nothing of the package."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

START = "__start__"
"""The virtual node a run enters by: ``add_edge(START, "first")``."""
END = "__end__"
"""The virtual node a run ends at: ``add_edge("last", END)``."""


@dataclass(frozen=True, slots=True)
class Interrupt:
    """A pause waiting for input. ``id`` is stable when the node that raised it runs again."""

    id: str
    value: Any
    node: str
