"""Names a module gives without importing where they live until first asked for: the
module-level ``__getattr__`` that keeps ``import graph_agent`` light and keeps old import paths
of names that moved out of the engine working.

Example:
    >>> __getattr__ = lazy_names(__name__, {"sqrt": "math"})
    >>> __getattr__("sqrt")(9.0)
    3.0
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    module: str, table: Mapping[str, str], *, keep: MutableMapping[str, Any] | None = None
) -> Callable[[str], Any]:
    """A ``__getattr__`` for ``module`` giving each name of ``table`` from the module ``table``
    names for it, imported on first use (and stored in ``keep``, the module's ``globals()``,
    when given, so the next lookup is a plain attribute); any other name is an
    ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        home = table.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        if keep is not None:
            keep[name] = value
        return value

    return __getattr__
