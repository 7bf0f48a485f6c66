"""What a server serves: its targets, each on the server's saver, by assistant id.

:func:`served_targets` turns what ``create_app`` was given (graphs, agents, teams, by id or by
name) into the runnables the routes run, with the keys each takes from clients and its
schemas; :func:`assistants_on` is the same for a worker process without HTTP.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from graph_agent.agent.flows import Agent
from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.graph.builder import StateGraph
from graph_agent.graph.compiled import CompiledGraph
from graph_agent.graph.types import CompileConfig
from graph_agent.serve.inputs import InputKeys
from graph_agent.serve.runs import Runnable
from graph_agent.serve.schemas import assistant_schemas

__all__ = ["Servable", "ServedTargets", "assistants_on", "served_targets"]

log = logging.getLogger(__name__)

Servable = Agent | CompiledGraph | StateGraph


@dataclass(frozen=True, kw_only=True)
class ServedTargets:
    """The assistants of a server, by id: what runs, what clients may send, its schemas."""

    runnables: dict[str, Runnable]
    input_keys: dict[str, InputKeys]
    schemas: dict[str, dict[str, Any]]


def served_targets(
    targets: Mapping[str, Servable] | Sequence[Servable],
    saver: CheckpointSaver,
    input_keys: Mapping[str, Iterable[str]] | None = None,
) -> ServedTargets:
    """Each target by its assistant id (a sequence: by their names), running on ``saver``.

    Raises:
        ValueError: ``input_keys`` names an assistant not served, or a private key.
    """
    pairs = list(
        targets.items() if isinstance(targets, Mapping) else ((t.name, t) for t in targets)
    )
    assistants = {name: _on_saver(target, saver) for name, target in pairs}
    declared = dict(input_keys or {})
    unknown = sorted(set(declared) - set(assistants))
    if unknown:
        raise ValueError(
            f"input_keys names {', '.join(map(repr, unknown))}, which is not served; the "
            f"assistants are: {', '.join(sorted(assistants))}"
        )
    keys = {
        name: InputKeys.of(target, declared.get(name), assistant_id=name) for name, target in pairs
    }
    schemas = {name: assistant_schemas(name, target, keys[name]) for name, target in pairs}
    return ServedTargets(runnables=assistants, input_keys=keys, schemas=schemas)


def assistants_on(
    targets: Mapping[str, Servable] | Sequence[Servable], saver: CheckpointSaver
) -> dict[str, Runnable]:
    """Each target by its assistant id, running on ``saver``."""
    pairs = targets.items() if isinstance(targets, Mapping) else ((t.name, t) for t in targets)
    return {name: _on_saver(target, saver) for name, target in pairs}


def _on_saver(target: Servable, saver: CheckpointSaver) -> Runnable:
    """``target`` keeping its threads in the server's ``saver``: a graph compiled on it, or a
    copy of the agent, team or compiled graph (the object given is left as it was). A saver of
    its own that the server does not use is named in a warning (the server keeps every
    assistant's threads in one place: its threads there are not served)."""
    if isinstance(target, StateGraph):
        return target.compile(CompileConfig(saver=saver))
    if isinstance(target, Agent | CompiledGraph):
        own = target.saver
        if own is not None and own is not saver and not isinstance(own, MemorySaver):
            log.warning(
                "%s %r keeps its threads in its own %s, which the server does not use: it "
                "serves the threads of its own saver, %s, instead (serve on that database to "
                "serve them)",
                "graph" if isinstance(target, CompiledGraph) else "agent",
                target.name,
                _saver_name(own),
                _saver_name(saver),
            )
        return target.with_saver(saver)
    raise TypeError(
        f"cannot serve a {type(target).__name__}: give an agent, a team of agents or a graph"
    )


def _saver_name(saver: CheckpointSaver) -> str:
    path = getattr(saver, "path", None)
    return f"{type(saver).__name__}({path!r})" if isinstance(path, str) else type(saver).__name__
