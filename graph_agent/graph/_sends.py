"""Sends: tasks that run a node with an input of their own (map-reduce), as the step machine
(``_engine.py``) takes them from routers and keeps them between steps.

A router or a node's ``Command.goto`` returns :class:`~graph_agent.graph.types.Send` items; each
becomes a task of the next superstep. Between steps they are the run's ``sends``; a checkpoint
stores them as ``[node, input]`` pairs under :data:`~graph_agent.graph.saver.SENDS_KEY` (a key
no node writes), and lists their nodes last in its ``next``, so that a thread stopped before
them shows them and carries on with them, with the same task ids.

A Send task's id derives from its node, its place among the step's Sends to that node, and its
input (:func:`~graph_agent.graph.task.send_key`): the same after a crash or a resume, so
finished Send tasks are not run again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from graph_agent.graph.errors import InvalidUpdateError
from graph_agent.graph.saver import SENDS_KEY
from graph_agent.graph.task import send_key, task_id_for
from graph_agent.graph.types import END, Send

DEFERRED = "__deferred__"
"""The ``barrier_seen`` entry (so checkpoints keep it with the barriers) listing the deferred
nodes that were triggered and wait for a step in which nothing else runs."""


class Router(Protocol):
    """What :func:`route_answers` needs of a conditional edge (a ``BranchSpec``)."""

    @property
    def source(self) -> str: ...

    @property
    def path_map(self) -> Mapping[Any, str] | None: ...

    @property
    def sends(self) -> frozenset[str] | None: ...


def route_answers(
    router: Router, answers: Sequence[Any], nodes: Mapping[str, Any], step: int
) -> tuple[tuple[str, ...], list[Send]]:
    """A router's answers split into the nodes they name and the Sends among them, each
    checked; raises :class:`InvalidUpdateError` naming the router, the answer and the fix."""
    source, path_map = router.source, router.path_map
    targets: list[str] = []
    sends: list[Send] = []
    for answer in answers:
        if type(answer) is Send:
            _check_routed_send(router, answer, nodes, step)
            sends.append(answer)
        elif path_map is None:
            if answer != END and (not isinstance(answer, str) or answer not in nodes):
                valid = ", ".join([*nodes, END])
                raise InvalidUpdateError(
                    f"the router on {source!r} returned {answer!r}, which is not a node "
                    f"(valid: {valid}) (step {step})",
                    node=source,
                    step=step,
                )
            targets.append(answer)
        else:
            try:
                target = path_map.get(answer)
            except TypeError:  # an unhashable answer is no key
                target = None
            if target is None:
                raise _not_a_key(router, answer, step)
            targets.append(target)
    return tuple(targets), sends


def _not_a_key(router: Router, answer: Any, step: int) -> InvalidUpdateError:
    source, path_map = router.source, router.path_map or {}
    if not path_map and router.sends:
        declared = ", ".join(map(repr, sorted(router.sends)))
        return InvalidUpdateError(
            f"the router on {source!r} returned {answer!r}, but it declared only Send targets "
            f"(sends=[{declared}]) (step {step}); return Send(node, input) items (or an empty "
            "list), or give add_conditional_edges a path_map for the plain routes",
            node=source,
            step=step,
        )
    valid = ", ".join(repr(k) for k in path_map)
    return InvalidUpdateError(
        f"the router on {source!r} returned {answer!r}, which is not a key of its path_map "
        f"(valid: {valid}) (step {step})",
        node=source,
        step=step,
    )


def _check_routed_send(router: Router, send: Send, nodes: Mapping[str, Any], step: int) -> None:
    source, node = router.source, send.node
    if node not in nodes:
        raise InvalidUpdateError(
            f"the router on {source!r} returned Send({node!r}, ...), and {node!r} is not a node "
            f"of this graph (nodes: {', '.join(nodes)}) (step {step}); send to one of them",
            node=source,
            step=step,
        )
    declared = router.sends
    if declared is not None and node not in declared:
        named = ", ".join(map(repr, sorted(declared))) or "none"
        raise InvalidUpdateError(
            f"the router on {source!r} returned Send({node!r}, ...), a node it did not declare "
            f"(declared: {named}) (step {step}); declare it: "
            f"add_conditional_edges({source!r}, fn, ..., sends=[..., {node!r}])",
            node=source,
            step=step,
        )


def encode_sends(sends: Sequence[Send]) -> list[list[Any]]:
    """How a checkpoint stores the next step's Sends: ``[node, input]`` pairs, in order."""
    return [[send.node, dict(send.input)] for send in sends]


def decode_sends(stored: Any) -> list[Send]:
    """The Sends :func:`encode_sends` stored."""
    return [Send(node, input) for node, input in stored]


def plain_next(next_nodes: Sequence[str], sends: Sequence[Send]) -> Sequence[str]:
    """A stored ``next`` without the Sends' nodes, which it lists last."""
    return next_nodes[: len(next_nodes) - len(sends)]


def send_indexes(sends: Sequence[Send]) -> Iterator[tuple[Send, int]]:
    """Each Send with its place among the Sends to its node (0 for the first)."""
    counts: dict[str, int] = {}
    for send in sends:
        index = counts.get(send.node, 0)
        counts[send.node] = index + 1
        yield send, index


def once_per_node(
    ran: Sequence[tuple[str, tuple[str | Send, ...]]],
) -> list[tuple[str, tuple[str | Send, ...]]]:
    """The tasks that ran as the step machine routes them: each node once (its edges and
    routers are taken once however many of its Sends ran), with every task's gotos, in order."""
    gotos: dict[str, list[str | Send]] = {}
    for node, goto in ran:
        gotos.setdefault(node, []).extend(goto)
    return [(node, tuple(goto)) for node, goto in gotos.items()]


def next_task_ids(
    thread_id: str | None, checkpoint_id: str, next_nodes: Sequence[str], values: Mapping[str, Any]
) -> Iterator[tuple[str, str]]:
    """The tasks of the step after a stored checkpoint, as (node, task id): one per node of
    its ``next``, the Sends (stored in ``values``) with theirs."""
    stored = values.get(SENDS_KEY)
    sends = decode_sends(stored) if stored else []
    for node in plain_next(next_nodes, sends):
        yield node, task_id_for(thread_id, checkpoint_id, node)
    for send, index in send_indexes(sends):
        key = send_key(send.input)
        yield send.node, task_id_for(thread_id, checkpoint_id, send.node, index + 1, key)
