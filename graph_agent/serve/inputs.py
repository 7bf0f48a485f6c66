"""Which state keys a client may send to an assistant: the check behind a 422 on bad input.

A graph_agent state is open: a graph lists strategies only for the keys that do not simply
replace, so any other key is as valid, and a graph with no declaration takes any key. What a
graph does declare is its bookkeeping (``private_keys``, ``ephemeral_keys``, kept by the
compiled graph too; an agent's ``_agent_*`` keys): a client never writes those. A server may
also close an assistant's input to a list of keys (``create_app(..., input_keys={"chain":
["x"]})``, ``graph-agent serve --input-keys chain=x``): any other key is then refused, naming
the valid ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from graph_agent.runnable_traits import private_keys

__all__ = ["InputKeys"]


@dataclass(frozen=True, kw_only=True)
class InputKeys:
    """The keys one assistant takes from clients.

    Args:
        allowed: The only keys a client may send, or ``None`` for any key.
        private: Keys a client may never send (the graph's own bookkeeping).
    """

    allowed: frozenset[str] | None = None
    private: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls, target: Any, declared: Iterable[str] | None = None, *, assistant_id: str = ""
    ) -> InputKeys:
        """What ``target`` (a runnable: a graph, an agent, a team; or a graph not compiled
        yet) takes from clients: only ``declared`` if given, else any key but its private
        ones (its graph's ``private_keys``).

        Raises:
            ValueError: ``declared`` names a private key (a client could never send it).
        """
        private = private_keys(target)
        if declared is None:
            return cls(allowed=None, private=private)
        if isinstance(declared, str):
            raise TypeError(f"input keys must be a list of keys, not the string {declared!r}")
        allowed = frozenset(declared)
        if allowed & private:
            name = assistant_id or getattr(target, "name", "the graph")
            raise ValueError(
                f"input keys {', '.join(sorted(allowed & private))} of {name} are its private "
                "bookkeeping, which clients never write: leave them out of its input keys"
            )
        return cls(allowed=allowed, private=private)

    def problem(self, assistant_id: str, values: Any, where: str) -> str | None:
        """Why ``values`` (a dict sent as ``where``) is refused, or ``None`` when it is fine."""
        if not isinstance(values, Mapping):
            return None  # the shape is checked where the value is read
        for key in values:
            if key in self.private:
                return (
                    f"{where} key {key!r} is {assistant_id}'s own bookkeeping: a client cannot "
                    f"write it; remove it from {where}"
                )
            if self.allowed is not None and key not in self.allowed:
                valid = ", ".join(sorted(self.allowed)) or "none"
                return (
                    f"{where} key {key!r} is not an input of {assistant_id}; "
                    f"its input keys are: {valid}"
                )
        return None
