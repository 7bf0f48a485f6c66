"""What a server serves: its targets, each on the server's saver, by assistant id.

:func:`served_targets` turns what ``create_app`` was given (graphs, agents, teams, by id or by
name) into the runnables the routes run, with the keys each takes from clients and its
schemas; :func:`assistants_on` is the same for a worker process without HTTP.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.graph.builder import StateGraph
from graph_agent.graph.compiled import CompiledGraph
from graph_agent.graph.types import CompileConfig
from graph_agent.runnable import Runnable
from graph_agent.runnable_traits import is_runnable, local_graph, saver_of, takes_question
from graph_agent.serve.inputs import InputKeys
from graph_agent.serve.schemas import assistant_schemas

__all__ = [
    "Servable",
    "ServedTargets",
    "assistant_kind",
    "assistants_on",
    "graph_of",
    "served_targets",
]

log = logging.getLogger("graph_agent.serve.app")
"""The server's logger: the warnings about a target's own saver came from the app first."""

Servable = Runnable | StateGraph
"""What a server serves: anything runnable (a compiled graph, an agent, a team of agents), or a
graph it compiles on its saver."""


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
    assistants = assistants_on(targets, saver)
    declared = dict(input_keys or {})
    unknown = sorted(set(declared) - set(assistants))
    if unknown:
        raise ValueError(
            f"input_keys names {', '.join(map(repr, unknown))}, which is not served; the "
            f"assistants are: {', '.join(sorted(assistants))}"
        )
    keys = {
        name: InputKeys.of(runnable, declared.get(name), assistant_id=name)
        for name, runnable in assistants.items()
    }
    schemas = {
        name: assistant_schemas(name, runnable, keys[name]) for name, runnable in assistants.items()
    }
    return ServedTargets(runnables=assistants, input_keys=keys, schemas=schemas)


def assistants_on(
    targets: Mapping[str, Servable] | Sequence[Servable], saver: CheckpointSaver
) -> dict[str, Runnable]:
    """Each target by its assistant id, running on ``saver``."""
    pairs = targets.items() if isinstance(targets, Mapping) else ((t.name, t) for t in targets)
    return {name: _on_saver(target, saver) for name, target in pairs}


def _on_saver(target: Servable, saver: CheckpointSaver) -> Runnable:
    """``target`` keeping its threads in the server's ``saver``: a graph compiled on it, or
    ``target.with_saver(saver)``, a copy (the object given is left as it was). A saver of its
    own that the server does not use is named in a warning (the server keeps every
    assistant's threads in one place: its threads there are not served)."""
    if isinstance(target, StateGraph):  # not runnable yet: compiled here, once
        return target.compile(CompileConfig(saver=saver))
    if not is_runnable(target) or local_graph(target) is None:
        raise TypeError(
            f"cannot serve a {type(target).__name__}: give an agent, a team of agents or a graph "
            "(something that runs a graph in this process, which the server runs and draws)"
        )
    own = saver_of(target)
    if own is not None and own is not saver and not isinstance(own, MemorySaver):
        log.warning(
            "%s %r keeps its threads in its own %s, which the server does not use: it "
            "serves the threads of its own saver, %s, instead (serve on that database to "
            "serve them)",
            "agent" if takes_question(target) else "graph",
            target.name,
            _saver_name(own),
            _saver_name(saver),
        )
    return target.with_saver(saver)


def graph_of(runnable: Runnable) -> CompiledGraph:
    """The compiled graph a served assistant runs (an agent's or a team's, a graph itself),
    which the graph and subgraph routes draw; every one has it (:func:`served_targets`
    serves nothing else)."""
    graph = local_graph(runnable)
    assert graph is not None, f"{runnable.name!r} runs no graph here: it was not served"
    return graph


def assistant_kind(runnable: Runnable) -> Literal["agent", "graph"]:
    """``agent`` (an agent or a team: takes a question) or ``graph``, the assistant's
    ``metadata.kind`` for clients like ``graph-agent run --url``."""
    return "agent" if takes_question(runnable) else "graph"


def _saver_name(saver: CheckpointSaver) -> str:
    path = getattr(saver, "path", None)
    return f"{type(saver).__name__}({path!r})" if isinstance(path, str) else type(saver).__name__
