"""Reading an agent's run from its state: counters, the run's answer, pending and rejected
tool calls, and the constants the agent's nodes and hooks share.

Private state keys the nodes keep (hidden from ``data()`` and snapshots):
``_agent_run`` (counters of the current run: model calls, iterations, tool calls per tool;
reset by new input, kept across resumes) and ``_agent_thread`` (the same, for the thread).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from graph_agent.agent.keys import REJECTED_KEY, RUN_INPUT_KEY
from graph_agent.graph.state import OverAllState
from graph_agent.messages import AssistantMessage, BaseMessage, ToolCall, ToolResponseMessage

INSTRUCTION_ID = "instruction"
"""The id of the message that holds the agent's instruction, first in its history."""
SUMMARIZE_PROMPT = (
    "You have reached the maximum number of tool-calling steps for this request. Do not call "
    "any more tools. Using what you have found so far, give your best final answer, and say "
    "briefly what is still open."
)
INTERRUPTED_RESULT = (
    "Error: this tool call was interrupted before it returned a result; it did not complete."
)
TOOL_RECORD = "tool:"
"""Prefix of the task record the tool node keeps per finished call (``tool:<call id>``)."""
TOOL_UPDATE_RECORD = "tool-update:"
"""Prefix of the record of what a call's ``Command`` wrote besides its result
(``tool-update:<call id>``), kept before the result so a replayed call loses nothing."""
FINAL_ANSWER_TOOL = "final_answer"
"""The tool the model answers through when ``output_mode="tool"``."""


def counters(state: OverAllState, key: str) -> dict[str, Any]:
    """A copy of the run or thread counters (model_calls, iterations, tool_calls, and tokens:
    the total tokens the model's answers report in their ``usage``)."""
    value = state.value(key)
    result: dict[str, Any] = {"model_calls": 0, "iterations": 0, "tool_calls": {}, "tokens": 0}
    if value:
        result.update(value)
        result["tool_calls"] = dict(result["tool_calls"])
    return result


def tokens_used(message: BaseMessage) -> int:
    """The tokens an assistant message's ``usage`` reports (0 without usage)."""
    usage = getattr(message, "usage", None)
    if usage is None:
        return 0
    return int(usage.total_tokens or usage.prompt_tokens + usage.completion_tokens)


def last_assistant(messages: Sequence[BaseMessage]) -> tuple[int, AssistantMessage | None]:
    """The index and the last assistant message (``-1, None`` when there is none)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AssistantMessage):
            return index, message
    return -1, None


def run_start(messages: Sequence[BaseMessage], earlier: Sequence[BaseMessage]) -> str | None:
    """The value of :data:`RUN_INPUT_KEY` for a run whose input adds ``messages`` to a thread
    that holds ``earlier``."""
    last = messages[-1] if messages else earlier[-1] if earlier else None
    return last.id if last is not None else None


def run_answer(state: OverAllState) -> AssistantMessage | None:
    """The last assistant message the current run added, or ``None`` when it added none.

    Messages before the run's input (earlier turns) are never taken for this run's answer.
    When a hook removed the input message (a rewrite of the history), every message counts.
    """
    messages: Sequence[BaseMessage] = state.value("messages", ())
    start = state.value(RUN_INPUT_KEY)
    if start is not None:
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].id == start:
                messages = messages[index + 1 :]
                break
    return last_assistant(messages)[1]


def pending_tool_calls(messages: Sequence[BaseMessage]) -> list[ToolCall]:
    """Calls of the last assistant message that have no result yet.

    A call a human rejected has no result until the tool node answers it with the reason
    (the rejection is held under :data:`REJECTED_KEY`, read with :func:`rejected_calls`), so
    it is still listed here; the tool node answers it without running it. Code that needs the
    calls that will actually run leaves out those in :func:`rejected_calls`.
    """
    index, message = last_assistant(messages)
    if message is None or not message.tool_calls:
        return []
    answered = {m.tool_call_id for m in messages[index + 1 :] if isinstance(m, ToolResponseMessage)}
    return [call for call in message.tool_calls if call.id not in answered]


def rejected_calls(state: OverAllState, message: AssistantMessage) -> Mapping[str, str]:
    """The reasons a human gave for rejecting calls of ``message``, by call id."""
    value = state.value(REJECTED_KEY)
    if not isinstance(value, Mapping):
        return {}
    found = value.get(message.id)
    if isinstance(found, Mapping):
        return found
    # a checkpoint written before rejections were keyed by message: {call id: reason}; kept
    # so that an upgrade never runs a call a human rejected (the tool node then drops it)
    return {k: v for k, v in value.items() if isinstance(v, str)}


def unique_call_ids(reply: AssistantMessage, history: Sequence[BaseMessage]) -> AssistantMessage:
    """Replace missing or reused tool-call ids by fresh ones (the model's id kept as raw_id)."""
    if not reply.tool_calls:
        return reply
    seen: set[str] = set()
    for message in history:
        if isinstance(message, AssistantMessage):
            seen.update(call.id for call in message.tool_calls)
    calls = []
    changed = False
    for call in reply.tool_calls:
        if not call.id or call.id in seen:
            call = call.model_copy(
                update={"id": f"call_{uuid.uuid4().hex[:24]}", "raw_id": call.id}
            )
            changed = True
        seen.add(call.id)
        calls.append(call)
    return reply.model_copy(update={"tool_calls": calls}) if changed else reply


def error_response(call: ToolCall, text: str) -> ToolResponseMessage:
    return ToolResponseMessage(tool_call_id=call.id, name=call.name, content=text, is_error=True)


def rejection_response(call: ToolCall, reason: str) -> ToolResponseMessage:
    """The result of a call a human rejected: the reason, as an error the model reads."""
    return error_response(call, f"A human rejected this tool call: {reason}")


def messages_of(update: Mapping[str, Any]) -> list[BaseMessage]:
    """The messages a node's update adds (ignores removals and whole-list replacements)."""
    value = update.get("messages")
    if value is None:
        return []
    items = value if isinstance(value, list | tuple) else [value]
    return [m for m in items if isinstance(m, BaseMessage)]
