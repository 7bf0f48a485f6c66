"""Pending tool recovery (DESIGN §5): what a call does with tool calls its thread left
unanswered, decided inside the run, from the thread as the run loaded it.

A thread whose last assistant message has calls without results (a hook ended the run after
the model asked for tools, a crash stopped the tool node half-way, ``update_state`` added such
a message) is continued according to the call's input, unless an interrupt is pending:

- ``None``: the calls run (a finished thread goes on as if the model had just answered);
- only ``ToolResponseMessage``s: they answer exactly those calls (unknown or repeated ids
  raise ``InvalidResumeError``) and the run goes on from there; calls the tool node finished
  before the run stopped keep their recorded results, the others run;
- anything else (new input): each unanswered call is answered first, with the caller's
  result when the input carries one, else with its recorded result or an "interrupted"
  error, so the history stays valid; then the new run starts.

:func:`recovering` makes the graph input that does this: a
:class:`~graph_agent.graph.task.FromThread`, which the run decides under the thread's
lease, from the checkpoint it loaded; so a call reads its thread once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from graph_agent.agent.keys import REJECTED_KEY, RUN_INPUT_KEY, RUN_KEY
from graph_agent.agent.nodes import (
    INTERRUPTED_RESULT,
    TOOL_RECORD,
    error_response,
    pending_tool_calls,
    run_start,
)
from graph_agent.agent.shape import MODEL_NODE, TOOL_NODE
from graph_agent.graph.errors import InvalidResumeError
from graph_agent.graph.task import ContinueAs, FromThread, ThreadStart
from graph_agent.messages import ToolCall, ToolResponseMessage


def recovering(update: Mapping[str, Any] | None) -> FromThread:
    """The graph input for an agent call whose input is ``update`` (a state update; ``None``
    to continue the thread), with pending tool recovery applied to the thread it lands on."""
    return FromThread(_Recovery(update))


@dataclass(frozen=True, slots=True)
class _Recovery:
    update: Mapping[str, Any] | None

    def __call__(self, thread: ThreadStart) -> Any:
        messages = thread.values.value("messages", ())
        unanswered = pending_tool_calls(messages)
        pending = unanswered if not thread.interrupts else []
        if self.update is None:
            if pending and not thread.next:
                # a finished thread with unanswered calls: on as if the model had just answered
                return ContinueAs(MODEL_NODE, {})
            return None
        state = dict(self.update)
        supplied = state.get("messages", [])
        if supplied and all(isinstance(m, ToolResponseMessage) for m in supplied):
            return _accept_results(supplied, pending, thread)
        # New input abandons the unanswered calls, also those a pending approval was holding
        # back (the graph drops that interrupt): each gets exactly one result, the caller's
        # when the input carries one, else an "interrupted" error, so the history stays valid.
        results = [m for m in supplied if isinstance(m, ToolResponseMessage)]
        if results:
            _check_results(results, unanswered)
        answered = {m.tool_call_id for m in results}
        recorded = _recorded_results(thread)
        filled = [
            recorded.get(call.id) or error_response(call, INTERRUPTED_RESULT)
            for call in unanswered
            if call.id not in answered
        ]
        if filled:
            state["messages"] = [*filled, *supplied]
        state[RUN_KEY] = None  # new input: a new run, its counters start again
        state[REJECTED_KEY] = None  # and rejections given in an earlier run are spent
        state[RUN_INPUT_KEY] = run_start(state.get("messages", ()), messages)
        return state


def _accept_results(
    results: list[ToolResponseMessage], pending: list[ToolCall], thread: ThreadStart
) -> ContinueAs:
    if thread.interrupts:
        raise InvalidResumeError(
            "this thread waits on an interrupt; answer it with Command(resume=...) before "
            "sending tool results"
        )
    _check_results(results, pending)
    # calls the tool node finished before the run stopped keep their recorded results: a
    # new checkpoint gives the tool node a new task, which would run them again
    supplied = {m.tool_call_id for m in results}
    recorded = _recorded_results(thread)
    kept = [recorded[c.id] for c in pending if c.id in recorded and c.id not in supplied]
    return ContinueAs(MODEL_NODE, {"messages": [*kept, *results]})


def _recorded_results(thread: ThreadStart) -> dict[str, ToolResponseMessage]:
    """Results the tool node recorded before the run stopped inside it, by call id."""
    records = thread.records.get(TOOL_NODE, {})
    return {
        value.tool_call_id: value
        for key, value in records.items()
        if key.startswith(TOOL_RECORD) and isinstance(value, ToolResponseMessage)
    }


def _check_results(results: Sequence[ToolResponseMessage], pending: Sequence[ToolCall]) -> None:
    """Caller-supplied tool results must answer pending calls, each at most once."""
    wanted = {call.id for call in pending}
    ids = [m.tool_call_id for m in results]
    unknown = [i for i in ids if i not in wanted]
    duplicated = sorted({i for i in ids if ids.count(i) > 1})
    if unknown or duplicated:
        problems = []
        if unknown:
            problems.append(f"unknown tool call ids {unknown}")
        if duplicated:
            problems.append(f"duplicated ids {duplicated}")
        raise InvalidResumeError(
            f"{' and '.join(problems)}; the pending calls are {sorted(wanted) or 'none'}"
        )
