"""A :class:`Toolkit`: tools by name, in the order they were added."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from graph_agent.graph.errors import GraphSetupError
from graph_agent.tools.tool import Tool


class Toolkit:
    """Tools by name, in the order they were added. Each agent works on its own :meth:`copy`.

    Example:
        >>> from graph_agent.tools import tool
        >>> @tool
        ... def ping() -> str:
        ...     '''Answer pong.'''
        ...     return "pong"
        >>> kit = Toolkit([ping])
        >>> kit["ping"].invoke({}), "ping" in kit, kit.names
        ('pong', True, ('ping',))
    """

    __slots__ = ("_tools",)

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            self.add(item)

    def add(self, item: Tool | Callable[..., Any]) -> Tool:
        """Add a tool (a plain function is wrapped with :meth:`Tool.from_function`).

        Raises:
            GraphSetupError: A tool with the same name is already here.
        """
        new = item if isinstance(item, Tool) else Tool.from_function(item)
        existing = self._tools.get(new.name)
        if existing is not None:
            raise GraphSetupError(
                f"two tools are named {new.name!r} ({_origin(existing)} and {_origin(new)}): "
                "give one a distinct name, e.g. @tool(name=...)"
            )
        self._tools[new.name] = new
        return new

    def remove(self, name: str) -> Tool:
        """Remove and return the tool called ``name``."""
        return self._tools.pop(self[name].name)

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def __getitem__(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            known = ", ".join(self._tools) or "none"
            raise KeyError(f"no tool named {name!r}; known tools: {known}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"Toolkit({list(self._tools)})"

    @property
    def names(self) -> tuple[str, ...]:
        """The tool names, in the order they were added."""
        return tuple(self._tools)

    def copy(self) -> Toolkit:
        """A new toolkit with the same tools; adding to or removing from it leaves this one be."""
        duplicate = Toolkit()
        duplicate._tools = dict(self._tools)
        return duplicate


def _origin(item: Tool) -> str:
    function = item.function
    module = getattr(function, "__module__", None) or "?"
    qualname = getattr(function, "__qualname__", None) or type(function).__name__
    return f"{module}.{qualname}"
