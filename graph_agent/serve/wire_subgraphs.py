"""``stream_subgraphs=true``: the events of the graphs running inside a run's nodes (subgraphs,
agent nodes), named with their namespace as LangGraph Server names them: ``<mode>|<namespace>``,
e.g. ``updates|child:1ef...`` or ``values|team:1ef...|writer``.

The run streams with ``subgraphs=True``: a nested graph's outputs come with the path of nodes
they run under (:attr:`~graph_agent.graph.types.NodeOutput.path`), and each namespace's outputs
make that graph's own ``values``, ``updates``, ``messages`` and ``custom`` events (a
:class:`~graph_agent.serve.wire_modes.RunEvents` per namespace). A namespace's first part is
``<node>:<task id>``, as LangGraph's, the task being the one of the run's own graph that runs
the nested graph (told by the engine's task events); deeper parts name the node only (the
engine tells no task ids inside a nested graph), which LangGraph's clients read as a namespace
part without a task id. ``tasks``, ``checkpoints`` and ``debug`` come from the run's own graph
only.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

from graph_agent.graph.stream_modes import TaskEvent
from graph_agent.graph.types import NodeOutput
from graph_agent.serve.wire_modes import Emit, RunEvents

__all__ = ["SubgraphEvents"]


class SubgraphEvents(RunEvents):
    """:class:`RunEvents` of a run streamed with ``subgraphs=True``: the run's own graph's
    events as RunEvents sends them, and each nested graph's named ``<mode>|<namespace>``."""

    def __init__(self, modes: Sequence[str], emit: Emit) -> None:
        super().__init__(modes, emit)
        self.task_events = self.task_events | {"task", "task_result"}  # the namespaces' ids
        self._modes = tuple(modes)
        self._nested: dict[str, RunEvents] = {}
        self._running: dict[str, list[str]] = {}
        """The ids of the run's own tasks running, by node."""

    def __call__(self, output: NodeOutput) -> None:
        if type(output) is TaskEvent:
            self._note(output)
        super().__call__(output)  # a nested graph's output: only what it tells of the run
        if output.path:
            namespace = self._namespace(output.path)
            nested = self._nested.get(namespace)
            if nested is None:
                emit = functools.partial(self._emit_in, namespace)
                nested = self._nested[namespace] = RunEvents(self._modes, emit)
            nested(dataclasses.replace(output, path=()))

    def _emit_in(self, namespace: str, event: str, data: Any) -> None:
        self.emit(f"{event}|{namespace}", data)

    def _note(self, event: TaskEvent) -> None:
        payload = event.payload
        if event.type == "task":
            self._running.setdefault(payload["name"], []).append(payload["id"])
        elif event.type == "task_result":
            running = self._running.get(payload["name"], [])
            if payload["id"] in running:
                running.remove(payload["id"])

    def _namespace(self, path: tuple[str, ...]) -> str:
        node = path[0]
        running = self._running.get(node, ())
        first = f"{node}:{running[0]}" if len(running) == 1 else node
        return "|".join((first, *path[1:]))
