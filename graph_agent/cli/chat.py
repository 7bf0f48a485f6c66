"""``graph-agent chat``: talk to an agent (or feed a graph) turn by turn, approving tool calls.

Each line is a new message on one thread. When the run pauses for a human (a
:class:`~graph_agent.agent.HumanInTheLoopHook`), every gated tool call is put to the prompt:
approve, edit its arguments (JSON), or reject it with a reason; the run then resumes with
``Command(resume={call_id: decision})``. Other pauses take a JSON (or text) answer.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import Any

from graph_agent.cli.errors import explain
from graph_agent.cli.output import (
    Reporter,
    format_call,
    make_reporter,
    print_error,
    printable,
    to_json,
)
from graph_agent.cli.running import execute, new_thread_id, parse_input
from graph_agent.cli.targets import Target, load_target
from graph_agent.graph.types import Command, Interrupt, RunnableConfig
from graph_agent.messages import ToolCall

__all__ = ["ask_decisions", "chat_command"]

_QUIT = {"/exit", "/quit", "exit", "quit"}


class _EndOfInput(Exception):
    """The user closed the input (Ctrl-D, or the end of piped input)."""


def _ask(prompt: str) -> str:
    try:
        return input(prompt)
    except EOFError:
        raise _EndOfInput from None


def chat_command(args: argparse.Namespace) -> int:
    """The chat loop; returns when the user types /exit or closes the input."""
    with load_target(args.target, db=args.db) as target:
        _chat(target, args)
    return 0


def _chat(target: Target, args: argparse.Namespace) -> None:
    thread = args.thread or new_thread_id("chat")
    config = RunnableConfig(thread_id=thread)
    reporter = make_reporter(plain=args.plain, compact=target.is_agent)
    details = {"target": args.target, "thread": thread}
    if args.db:
        details["db"] = args.db
    reporter.header("graph-agent chat", details)
    what = "a message" if target.is_agent else "a JSON object of state keys"
    reporter.note(f"type {what}; /exit or Ctrl-D to leave")
    try:
        while True:
            line = _ask("you> ")
            if line.strip() in _QUIT:
                break
            if not line.strip():
                continue
            _turn(target, line, config, reporter, debug=args.debug)
    except _EndOfInput:
        print()


def _turn(
    target: Target, line: str, config: RunnableConfig, reporter: Reporter, *, debug: bool
) -> None:
    """One message and its run, with every pause answered at the prompt."""
    try:
        summary = execute(target, parse_input(target, line), config, reporter)
        while summary.interrupts:
            reporter.stop()
            resume = ask_decisions(summary.interrupts)
            summary = execute(target, Command(resume=resume), config, reporter)
        reporter.finish(summary)
    except Exception as exc:
        error = explain(exc)
        if error is None or debug:
            raise
        print_error(error)


def ask_decisions(interrupts: Sequence[Interrupt]) -> Any:
    """Ask the user to answer each pause; the ``resume`` value for ``Command``."""
    answers = {interrupt.id: _answer(interrupt) for interrupt in interrupts}
    if len(answers) == 1:
        return next(iter(answers.values()))
    return answers


def _answer(interrupt: Interrupt) -> Any:
    value = interrupt.value
    calls = value.get("tool_calls") if isinstance(value, Mapping) else None
    if isinstance(calls, list) and calls:
        return {str(call["id"]): _decide(call) for call in calls}
    print(printable(f"{interrupt.node} is waiting: {to_json(value, indent=None)}"))
    text = _ask("answer (JSON or text)> ")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _decide(call: Mapping[str, Any]) -> dict[str, Any]:
    """One gated tool call: approve, edit (new JSON arguments) or reject (a reason)."""
    arguments = dict(call.get("arguments") or {})
    shown = format_call(ToolCall(id=str(call["id"]), name=str(call["name"]), arguments=arguments))
    reason = f" ({call['description']})" if call.get("description") else ""
    print(printable(f"approval needed: {shown}{reason}"))
    while True:
        choice = _ask("[a]pprove / [e]dit / [r]eject> ").strip().lower()
        if choice in ("a", "approve", "y", "yes"):
            return {"decision": "approve"}
        if choice in ("e", "edit"):
            edited = _ask_arguments(arguments)
            if edited is not None:
                return {"decision": "edit", "arguments": edited}
        elif choice in ("r", "reject", "n", "no"):
            why = _ask("reason> ").strip() or "rejected by the user"
            return {"decision": "reject", "reason": why}
        else:
            print("please answer a, e or r")


def _ask_arguments(current: Mapping[str, Any]) -> dict[str, Any] | None:
    print(printable(f"current arguments: {json.dumps(current, ensure_ascii=False)}"))
    text = _ask("new arguments (JSON object, empty to go back)> ").strip()
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        print(f"not JSON ({exc.msg}); try again")
        return None
    if not isinstance(value, dict):
        print("the arguments must be a JSON object; try again")
        return None
    return value
