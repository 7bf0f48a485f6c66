"""A checkpoint's pending writes, grouped by task: what makes a half-finished superstep
resumable.

Savers store pending writes as ``(task id, channel, value)``; the channels, defined in
``saver.py`` (the storage contract), are a finished node's write (``WRITE``), interrupts raised
by ``interrupt()`` (``INTERRUPT``) or by a static breakpoint (``BREAKPOINT``), resume values
given (``RESUME``), which of a task's interrupts a graph nested in it raised (``NESTED``), the
scope each of its interrupts raised inside an ``InterruptScope`` came from (``SCOPED``), the
error a failed attempt raised (``ERROR``: shown in snapshots, ignored by a resume, which runs
the task again), and sub-task records (``RECORD_PREFIX`` + key). :class:`Pending` reads them
back for the flow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from graph_agent.graph._writes import Write, write_from_stored
from graph_agent.graph.saver import (
    BREAKPOINT,
    ERROR,
    IDS_THREAD,
    INTERRUPT,
    NESTED,
    RESUME,
    SCOPED,
    WRITE,
)
from graph_agent.graph.state import OverAllState
from graph_agent.graph.task import RECORD_PREFIX, ThreadStart, task_id_for
from graph_agent.graph.types import Interrupt

SUBGRAPH_TASK = "__subgraph_task__"
"""Record key: the task id a subgraph node's namespace derives from, when the task took over
a paused task after ``update_state`` (so the paused child is found where it waits)."""
SUBGRAPH_CONSUMED = "__subgraph_consumed__"
"""Record key: ids of answers a nested graph took and stored a checkpoint after; a later
failure of the nested graph is then not a refusal of those answers."""


def subgraph_place(node: str, task_id: str, records: Mapping[str, Any]) -> str:
    """Where the subgraph run by ``node``'s task keeps its checkpoints, relative to the
    parent's namespace: ``"<node>:<task id>"`` (the id of the task it took over, after
    ``update_state`` on a paused parent: see :data:`SUBGRAPH_TASK`)."""
    return f"{node}:{records.get(SUBGRAPH_TASK, task_id)}"


def nested_namespace(parent_ns: str, place: str) -> str:
    """The namespace of a graph run at ``place`` by a task of the graph in ``parent_ns``."""
    return f"{parent_ns}|{place}" if parent_ns else place


class Pending:
    """The pending writes of the checkpoint a call starts from, grouped by task.

    ``order`` (node name → ``add_node`` index) sorts interrupts the same way however they
    were stored: by the node whose task raised them (for an interrupt raised inside a
    subgraph, the node running it, not the child's node named in ``Interrupt.node``), then in
    the order each task raised them.
    """

    def __init__(self, writes: Sequence[Any], order: Mapping[str, int] | None = None) -> None:
        self.order = order
        self.done: dict[str, Write] = {}
        self.records: dict[str, dict[str, Any]] = {}
        self.resume: dict[str, dict[str, Any]] = {}
        self.interrupts: dict[str, list[Interrupt]] = {}
        self.static_ids: set[str] = set()
        self.nested: dict[str, tuple[str, frozenset[str]]] = {}
        """Per task that ran a graph which paused: (the task's node, the nested ids)."""
        self.ids_thread: str | None = None
        """The thread this checkpoint's step derives its ids from, when not its own (a copy:
        see :data:`IDS_THREAD`)."""
        self.errors: dict[str, str] = {}
        """Per task: the error its last attempt failed with (only shown, never acted on)."""
        self.scopes: dict[str, dict[str, tuple[str, int]]] = {}
        """Per task: interrupt id → (scope key, index in the scope), for the interrupts it
        raised inside an ``InterruptScope``."""
        for write in writes:
            task_id, channel, value = write.task_id, write.channel, write.value
            if channel == WRITE:
                self.done[task_id] = write_from_stored(value)
            elif channel in (INTERRUPT, BREAKPOINT):
                for item in value:
                    self.add_interrupt(task_id, item, static=channel == BREAKPOINT)
            elif channel == NESTED:
                self.nested[task_id] = (value["node"], frozenset(value["ids"]))
            elif channel == SCOPED:
                self.scopes[task_id] = {i: (key, index) for i, (key, index) in value.items()}
            elif channel == RESUME:
                self.resume.setdefault(task_id, {}).update(value)
            elif channel == ERROR:
                self.errors[task_id] = str(value)
            elif channel == IDS_THREAD and isinstance(value, str):
                self.ids_thread = value
            elif channel.startswith(RECORD_PREFIX):
                self.records.setdefault(task_id, {})[channel[len(RECORD_PREFIX) :]] = value

    @property
    def empty(self) -> bool:
        """True when nothing is pending (the usual case: no task id needs deriving)."""
        return not (self.done or self.interrupts or self.records or self.resume or self.ids_thread)

    def add_interrupt(self, task_id: str, item: Interrupt, *, static: bool) -> None:
        items = self.interrupts.setdefault(task_id, [])
        if all(i.id != item.id for i in items):  # a nested graph asks again what it still waits for
            items.append(item)
        if static:
            self.static_ids.add(item.id)

    def add_nested(self, task_id: str, node: str, ids: frozenset[str]) -> tuple[str, Any]:
        """Note that ``ids`` were raised by a graph running in ``node``'s task; returns the
        pending write that stores it (every nested id of the task: writes replace)."""
        earlier = self.nested.get(task_id)
        ids = ids | earlier[1] if earlier is not None else ids
        self.nested[task_id] = (node, ids)
        return (NESTED, {"node": node, "ids": sorted(ids)})

    def add_scopes(self, task_id: str, scopes: Mapping[str, tuple[str, int]]) -> tuple[str, Any]:
        """Note the scopes of interrupts ``task_id`` raised; returns the pending write that
        stores them all (writes replace)."""
        known = self.scopes.setdefault(task_id, {})
        known.update(scopes)
        return (SCOPED, {i: [key, index] for i, (key, index) in known.items()})

    def stored(self, task_id: str, *, static: bool) -> tuple[str, list[Interrupt]]:
        """The whole interrupt list of a task, as one pending write (writes replace)."""
        items = [i for i in self.interrupts.get(task_id, []) if (i.id in self.static_ids) == static]
        return (BREAKPOINT if static else INTERRUPT, items)

    def dynamic_waiting(self) -> list[tuple[str, Interrupt]]:
        """Unanswered interrupts raised by ``interrupt()`` (not static breakpoints)."""
        return [(t, i) for t, i in self.unanswered() if i.id not in self.static_ids]

    def unanswered_of(self, task_id: str) -> tuple[Interrupt, ...]:
        """The interrupts ``task_id`` still waits on, in the order it raised them."""
        answered = self.resume.get(task_id, {})
        return tuple(i for i in self.interrupts.get(task_id, ()) if i.id not in answered)

    def unanswered(self) -> list[tuple[str, Interrupt]]:
        """Interrupts with no resume value yet, as (task id, interrupt), in node order."""
        found = [
            (task_id, item)
            for task_id, items in self.interrupts.items()
            for item in items
            if item.id not in self.resume.get(task_id, {})
        ]
        order = self.order
        if order is not None and len(found) > 1:
            nested, last = self.nested, len(order)

            def rank(pair: tuple[str, Interrupt]) -> int:
                task = nested.get(pair[0])
                return order.get(task[0] if task is not None else pair[1].node, last)

            found.sort(key=rank)
        return found


def pending_interrupts(
    writes: Sequence[Any], order: Mapping[str, int] | None = None
) -> tuple[Interrupt, ...]:
    """The interrupts still waiting for an answer among a checkpoint's pending writes."""
    return tuple(item for _, item in Pending(writes, order).unanswered())


def thread_start(
    saved: Any, state: OverAllState, thread_id: str | None, order: Mapping[str, int]
) -> ThreadStart:
    """The checkpoint ``saved`` (``None``: the thread has none) as a call's
    :class:`~graph_agent.graph.task.FromThread` input sees it, with its values as ``state``:
    what ``get_state`` shows of it, and what the tasks of its next nodes recorded. Read from
    ``saved`` itself: a run forking from it has already dropped its pending writes."""
    if saved is None:
        return ThreadStart(values=state)
    if not saved.pending_writes:
        return ThreadStart(values=state, next=tuple(saved.next))
    pending = Pending(saved.pending_writes, order)
    ids_thread = pending.ids_thread or thread_id
    records: dict[str, Mapping[str, Any]] = {}
    for node in saved.next if pending.records else ():
        kept = pending.records.get(task_id_for(ids_thread, saved.id, node))
        if kept:
            records[node] = dict(kept)
    return ThreadStart(
        values=state,
        next=tuple(saved.next),
        interrupts=tuple(item for _, item in pending.unanswered()),
        records=records,
    )
