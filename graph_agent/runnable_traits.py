"""What a consumer may ask of a :class:`~graph_agent.runnable.Runnable` beyond the protocol.

The server, ``graph-agent mcp serve``, the CLI and composition type against ``Runnable`` and
never ask which class they were given. The little more they need is an optional capability,
asked of the object, with a default for one that lacks it:

- :func:`takes_question`: an agent or a team answers a question (``call``), a served
  assistant says whether it is an agent (``is_agent``); anything else is a graph, whose input
  is a dict of state keys.
- :func:`local_graph`: the compiled graph it runs in this process (an agent's or a team's
  ``graph``; a compiled graph is its own), or ``None`` for one running elsewhere.
- :func:`saver_of`: where it keeps its threads (``saver``), or ``None``.
- :func:`private_keys`: the state keys that are its own bookkeeping.
- :func:`is_runnable`: whether an object a user pointed at runs like a ``Runnable``.

Example:
    >>> from graph_agent import ReactAgent
    >>> from graph_agent.models import ScriptedChatModel
    >>> agent = ReactAgent("helper", ScriptedChatModel(["hi"]))
    >>> takes_question(agent), takes_question(agent.graph), local_graph(agent) is agent.graph
    (True, False, True)
"""

from __future__ import annotations

from typing import Any, cast

from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.graph.compiled import CompiledGraph

__all__ = ["is_runnable", "local_graph", "private_keys", "saver_of", "takes_question"]

RUN_METHODS = (
    "invoke",
    "ainvoke",
    "stream",
    "astream",
    "get_state",
    "aget_state",
    "get_state_history",
    "aget_state_history",
    "update_state",
    "aupdate_state",
    "get_graph",
    "with_saver",
)
"""The methods :func:`is_runnable` asks for: every method of the protocol (``name`` is asked
of instances, as teams set it in ``__init__``)."""


def takes_question(runnable: object) -> bool:
    """Whether ``runnable`` is an agent (or a team of agents): its input is a question (a
    string, a message) and its answer a message; else a graph, whose input is a dict of state
    keys. A served assistant says so itself (``RemoteGraph.is_agent`` asks its server)."""
    said = getattr(runnable, "is_agent", None)
    if isinstance(said, bool):
        return said
    return callable(getattr(runnable, "call", None))


def local_graph(runnable: object) -> CompiledGraph | None:
    """The compiled graph ``runnable`` runs in this process: an agent's or a team's
    ``graph``, a compiled graph itself; ``None`` for one running elsewhere (a served one)."""
    graph = getattr(runnable, "graph", runnable)
    return graph if isinstance(graph, CompiledGraph) else None


def saver_of(runnable: object) -> CheckpointSaver | None:
    """Where ``runnable`` keeps its threads, or ``None`` (no saver here: a served one's
    server keeps them)."""
    return cast("CheckpointSaver | None", getattr(runnable, "saver", None))


def private_keys(target: object) -> frozenset[str]:
    """The state keys ``target`` (a runnable, or a graph not compiled yet) keeps for its own
    bookkeeping, which clients never write: its graph's ``private_keys``."""
    keys = getattr(local_graph(target) or target, "private_keys", None)
    return keys if isinstance(keys, frozenset) else frozenset()


def is_runnable(value: Any) -> bool:
    """Whether the object ``value`` runs like a :class:`Runnable`: it has a ``name`` and
    :data:`RUN_METHODS` (a class is not runnable, its instances may be)."""
    try:
        if isinstance(value, type) or not isinstance(getattr(value, "name", None), str):
            return False
        return all(callable(getattr(value, method, None)) for method in RUN_METHODS)
    except Exception:  # an object whose attributes raise (a lazy proxy, say) is not one
        return False
