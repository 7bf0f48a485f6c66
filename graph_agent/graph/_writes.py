"""What a node's return becomes: a :class:`Write` (its partial update, and where its
``Command.goto`` leads, :class:`~graph_agent.graph.types.Send` items included), and how a
finished task's write is kept as a pending write (:func:`stored_write`) and read back.

Pure, like the step machine in ``_engine.py`` that merges and routes the writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from graph_agent.graph.errors import InvalidUpdateError, ParentCommand
from graph_agent.graph.types import START, Command, Send


@dataclass(slots=True)
class Write:
    """A node's normalized return: its partial update and its ``Command.goto`` targets (node
    names, and :class:`Send` items).

    ``parts``, when a node returned :class:`Updates`: the writes to merge, in order, each as
    if written by a node of its own (``update`` then only shows them together)."""

    update: Mapping[str, Any]
    goto: tuple[str | Send, ...] = ()
    parts: tuple[tuple[str, Mapping[str, Any]], ...] = ()

    def labelled(self, node: str) -> list[tuple[str, Mapping[str, Any]]]:
        """The writes to merge for ``node``: its update, or its parts named ``node (label)``."""
        if not self.parts:
            return [(node, self.update)]
        return [(f"{node} ({label})" if label else node, part) for label, part in self.parts]


@dataclass(frozen=True, slots=True)
class Updates:
    """What an engine-internal node (the agent's tool node) returns to have several writes
    merged in order, each by the keys' strategies, as if each came from a node of its own:
    two of them writing one replaced key is an :class:`InvalidUpdateError` naming both
    ``labels``. ``goto`` as in :class:`Command`."""

    parts: tuple[tuple[str, Mapping[str, Any]], ...]
    goto: str | Send | Sequence[str | Send] | None = None


EMPTY_WRITE = Write(MappingProxyType({}))
"""What a node returning ``None`` wrote; read-only, since stream consumers receive it."""


def normalize_return(node: str, step: int, value: Any, destinations: frozenset[str]) -> Write:
    """Turn a node's return value into a :class:`Write`, or explain why it cannot be one."""
    if value is None:
        return EMPTY_WRITE
    if isinstance(value, dict):
        for key in value:
            if type(key) is not str:
                _check_keys(node, step, value)  # raises, naming the key (a str subclass passes)
                break
        return Write(value)
    if isinstance(value, Command):
        if value.graph is not None:
            if value.graph != Command.PARENT:
                raise InvalidUpdateError(
                    f"node {node!r} (step {step}) returned Command(graph={value.graph!r}); the "
                    "only graph a node can address is Command.PARENT",
                    node=node,
                    step=step,
                )
            raise ParentCommand(value, node=node, step=step)
        if value.resume is not None:
            raise InvalidUpdateError(
                f"node {node!r} (step {step}) returned Command(resume=...): resume is an input "
                "to invoke(), not something a node returns; return Command(goto=..., update=...)",
                node=node,
                step=step,
            )
        update = value.update if value.update is not None else {}
        if not isinstance(update, Mapping):
            raise InvalidUpdateError(
                f"node {node!r} (step {step}) returned Command(update={short(update)}): "
                "update must be a dict of state keys",
                node=node,
                step=step,
            )
        _check_keys(node, step, update)
        return Write(dict(update), _goto_targets(node, step, value.goto, destinations))
    if isinstance(value, Mapping):
        _check_keys(node, step, value)
        return Write(dict(value))
    if isinstance(value, Updates):
        for _, part in value.parts:
            _check_keys(node, step, part)
        parts = tuple((label, dict(part)) for label, part in value.parts)
        goto = _goto_targets(node, step, value.goto, destinations)
        return Write(_shown_together(parts), goto, parts)
    raise InvalidUpdateError(
        f"node {node!r} (step {step}) returned {type(value).__name__} {short(value)}; a node "
        "must return a dict of state updates (e.g. {'key': value}), a Command, or None",
        node=node,
        step=step,
    )


def _shown_together(parts: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """Several writes as one update to show (streams): lists written to one key are joined,
    any other value is the last one written."""
    shown: dict[str, Any] = {}
    for _, part in parts:
        for key, value in part.items():
            earlier = shown.get(key)
            if type(earlier) is list and type(value) is list:
                shown[key] = [*earlier, *value]
            else:
                shown[key] = value
    return shown


def _check_keys(node: str, step: int, update: Mapping[Any, Any]) -> None:
    for key in update:
        if not isinstance(key, str):
            raise InvalidUpdateError(
                f"node {node!r} (step {step}) wrote the key {key!r}: state keys must be strings",
                node=node,
                step=step,
            )


def _goto_targets(
    node: str,
    step: int,
    goto: str | Send | Sequence[str | Send] | None,
    destinations: frozenset[str],
) -> tuple[str | Send, ...]:
    if goto is None:
        return ()
    if isinstance(goto, str):
        targets: tuple[Any, ...] = (goto,)
    else:
        try:
            targets = tuple(goto)  # type: ignore[arg-type]  # a lone Send is no iterable
        except TypeError:
            targets = (goto,)  # not iterable: a lone Send, or named as the bad target below
    for target in targets:
        if not isinstance(target, str):
            if type(target) is Send:
                _check_send_goto(node, step, target, destinations)
                continue
            raise InvalidUpdateError(
                f"node {node!r} (step {step}) returned Command(goto={short(goto)}): goto takes "
                f"a node name (str), a Send, a list of them, or END, not "
                f"{type(target).__name__} {short(target)}",
                node=node,
                step=step,
            )
        if target == START:
            raise InvalidUpdateError(
                f"node {node!r} (step {step}) returned Command(goto=START): START cannot be a "
                "goto target (a run passes START only once, when it begins); goto the node to "
                "run next by name instead",
                node=node,
                step=step,
            )
        if target not in destinations:
            declared = ", ".join(sorted(destinations)) or "none"
            raise InvalidUpdateError(
                f"node {node!r} (step {step}) returned Command(goto={target!r}), which it did not "
                f"declare (declared: {declared}); add it with add_node({node!r}, fn, "
                f"destinations=(..., {target!r}))",
                node=node,
                step=step,
            )
    return targets


def _check_send_goto(node: str, step: int, send: Send, destinations: frozenset[str]) -> None:
    """A Send in ``Command.goto`` goes to a node the returning node declared."""
    if send.node not in destinations:
        declared = ", ".join(sorted(destinations)) or "none"
        raise InvalidUpdateError(
            f"node {node!r} (step {step}) returned Command(goto=Send({send.node!r}, ...)), a "
            f"node it did not declare (declared: {declared}); add it with add_node({node!r}, "
            f"fn, destinations=(..., {send.node!r}))",
            node=node,
            step=step,
        )


def short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def stored_write(write: Write) -> dict[str, Any]:
    """A finished task's write as its pending write (``WRITE``) keeps it: ``goto`` holds node
    names only, the Sends go under ``"sends"`` as ``[node, input]`` pairs."""
    stored: dict[str, Any] = {"update": dict(write.update), "goto": list(write.goto)}
    if write.parts:
        stored["parts"] = [[label, dict(part)] for label, part in write.parts]
    if stored["goto"] and any(type(target) is not str for target in write.goto):
        stored["goto"] = [target for target in write.goto if type(target) is str]
        stored["sends"] = [
            [target.node, dict(target.input)] for target in write.goto if type(target) is Send
        ]
    return stored


def write_from_stored(value: Mapping[str, Any]) -> Write:
    """The :class:`Write` a pending write (``WRITE``) stored with :func:`stored_write`."""
    parts = tuple((label, part) for label, part in value.get("parts", ()))
    goto: tuple[str | Send, ...] = tuple(value["goto"])
    sends = value.get("sends")
    if sends:
        goto = (*goto, *(Send(node, input) for node, input in sends))
    return Write(value["update"], goto, parts)
