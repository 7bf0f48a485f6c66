"""Tools that return ``Command(update=..., goto=...)``: what the tool node makes of it.

The call's result is the ``ToolResponseMessage`` for it in ``update["messages"]`` (else one is
made from the update); its other messages follow the step's results; its other keys are written
after the tool step, each tool's as a write of its own, merged in call order by the keys'
strategies (two tools writing one replaced key is an ``InvalidUpdateError`` naming both);
``goto=END`` ends the run after the step, ``goto="model"`` is the usual way on.

Example:
    >>> from graph_agent.messages import ToolCall
    >>> call = ToolCall("c1", "remember", {})
    >>> response, update = from_command(call, Command(update={"name": "Ada"}), frozenset())
    >>> response.content, update.update
    ('{"name":"Ada"}', {'name': 'Ada'})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from graph_agent.agent.keys import AGENT_KEYS, JUMP_KEY
from graph_agent.graph.types import END, Command
from graph_agent.messages import BaseMessage, ToolCall, ToolResponseMessage
from graph_agent.node import Updates
from graph_agent.tools import result_to_text


class ToolCommandError(ValueError):
    """A tool returned a ``Command`` the agent cannot apply; the model reads why."""


class ToolUpdate(NamedTuple):
    """What a tool's ``Command`` asks besides its result: state writes (``messages`` apart),
    messages to add after the step's results, and a jump (``"end"``) or ``None``."""

    update: dict[str, Any]
    messages: list[BaseMessage]
    goto: str | None


def from_command(
    call: ToolCall, command: Command, private_keys: frozenset[str]
) -> tuple[ToolResponseMessage, ToolUpdate]:
    """The call's result and the rest of what its ``Command`` asks, checked.

    ``private_keys``: the private keys (``_name``) hooks declare, the only ones a tool may write.

    Raises:
        ToolCommandError: the Command cannot be applied (the model reads why).
    """
    where = f"tool {call.name!r} returned Command"
    if command.resume is not None:
        raise ToolCommandError(f"{where}(resume=...): a tool cannot answer interrupts")
    update = command.update if command.update is not None else {}
    if not isinstance(update, Mapping):
        raise ToolCommandError(f"{where}(update={update!r:.60}): update must be a dict")
    writes: dict[str, Any] = {}
    for key, value in update.items():
        if not isinstance(key, str):
            raise ToolCommandError(f"{where}(update={{{key!r}: ...}}): state keys are strings")
        if key in AGENT_KEYS or (key.startswith("_") and key not in private_keys):
            raise ToolCommandError(
                f"{where}(update={{{key!r}: ...}}): {key!r} is private to the agent; a tool "
                "may write public keys, and private ones a hook declares in its state_keys"
            )
        if key != "messages":
            writes[key] = value
    response, extra = _command_messages(call, update.get("messages"), where)
    if response is None:
        text = result_to_text(writes) if writes else "Done."
        response = ToolResponseMessage(tool_call_id=call.id, name=call.name, content=text)
    return response, ToolUpdate(writes, extra, _tool_goto(command.goto, where))


def command_updates(
    update: dict[str, Any], outcomes: Sequence[tuple[ToolCall, ToolUpdate]]
) -> Updates:
    """The tool node's ``update`` with what its calls' Commands asked, as ordered writes: the
    results first (with the Commands' other messages after them, as models expect), then each
    call's keys as a write of its own, in call order."""
    extra = [message for _, outcome in outcomes for message in outcome.messages]
    first = {**update, "messages": [*update["messages"], *extra]}
    if any(outcome.goto == "end" for _, outcome in outcomes):
        first[JUMP_KEY] = "end"
    parts: list[tuple[str, Mapping[str, Any]]] = [("", first)]
    parts += [
        (f"tool {call.name!r}, call {call.id}", outcome.update)
        for call, outcome in outcomes
        if outcome.update
    ]
    return Updates(tuple(parts))


def _command_messages(
    call: ToolCall, messages: Any, where: str
) -> tuple[ToolResponseMessage | None, list[BaseMessage]]:
    """The call's own result among a Command's messages, and the other messages."""
    items = [] if messages is None else messages
    if not isinstance(items, list | tuple):
        items = [items]
    response: ToolResponseMessage | None = None
    extra: list[BaseMessage] = []
    for item in items:
        if not isinstance(item, BaseMessage):
            raise ToolCommandError(
                f"{where}(update={{'messages': [...]}}) holding {type(item).__name__}: a tool "
                "adds messages (a ToolResponseMessage for its call first of all), not removals "
                "or replacements of the history"
            )
        if isinstance(item, ToolResponseMessage):
            if item.tool_call_id != call.id or response is not None:
                raise ToolCommandError(
                    f"{where} with a result for call {item.tool_call_id!r}; a tool answers its "
                    f"own call once: ToolResponseMessage(tool_call_id={call.id!r}, ...)"
                )
            response = item
        else:
            extra.append(item)
    return response, extra


def _tool_goto(goto: Any, where: str) -> str | None:
    """A tool's ``Command.goto`` as a jump after the tool step: ``"end"`` or ``None``."""
    targets = [goto] if isinstance(goto, str) or goto is None else list(goto)
    jump: str | None = None
    for target in targets:
        if target in (END, "end"):
            jump = "end"
        elif target not in (None, "model", "__model__"):
            raise ToolCommandError(
                f"{where}(goto={target!r}); after a tool step the run goes on to the model, or "
                "ends with goto=END"
            )
    return jump
