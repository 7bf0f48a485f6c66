"""``graph-agent chat``: talk to an agent (or feed a graph) turn by turn, approving tool calls.

Each line is a new message on one thread. When the run pauses for a human (a
:class:`~graph_agent.agent.HumanInTheLoopHook`), every gated tool call is put to the prompt:
approve, edit its arguments (JSON), or reject it with a reason; the run then resumes with
``Command(resume={call_id: decision})``. Other pauses take a JSON (or text) answer.

``/image PATH [message]`` attaches a picture to an agent: sent with the message on the same
line, or else with the next message typed.
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from graph_agent.cli.attach import image_part, message_with_images
from graph_agent.cli.errors import EXIT_USAGE, CliError, explain
from graph_agent.cli.output import (
    Reporter,
    RunSummary,
    format_call,
    make_reporter,
    print_error,
    printable,
    to_json,
)
from graph_agent.cli.running import (
    continuable,
    execute,
    new_thread_id,
    parse_input,
    unanswered_error,
)
from graph_agent.cli.targets import Target, open_target
from graph_agent.client import RemoteGraphError
from graph_agent.graph.types import Command, Interrupt, RunnableConfig
from graph_agent.messages import ImagePart, ToolCall, UserMessage

__all__ = ["ask_decisions", "chat_command"]

_QUIT = {"/exit", "/quit", "exit", "quit"}
_IMAGE_COMMAND = "/image"


class _EndOfInput(Exception):
    """The user closed the input (Ctrl-D, or the end of piped input)."""


def _ask(prompt: str) -> str:
    try:
        return input(prompt)
    except EOFError:
        raise _EndOfInput from None


def chat_command(args: argparse.Namespace) -> int:
    """The chat loop; returns when the user types /exit or closes the input."""
    with open_target(args) as target:
        _chat(target, args)
    return 0


def _chat(target: Target, args: argparse.Namespace) -> None:
    if args.no_stream_model:
        target.ask_model_unstreamed()
    thread = args.thread or new_thread_id("chat")
    config = RunnableConfig(thread_id=thread)
    reporter = make_reporter(plain=args.plain, compact=target.is_agent)
    details = {"target": args.target, "thread": thread}
    if args.db:
        details["db"] = args.db
    reporter.header("graph-agent chat", details)
    again = f"graph-agent chat {shlex.quote(args.target)} --thread {shlex.quote(thread)}"
    with continuable(target, thread, again + target.where(args.db), finished_too=True):
        try:
            if args.thread:
                _pick_up(target, config, reporter, debug=args.debug)
            _converse(target, config, reporter, debug=args.debug)
        except _EndOfInput:
            print()


def _converse(target: Target, config: RunnableConfig, reporter: Reporter, *, debug: bool) -> None:
    """Turn after turn, until the user leaves."""
    what = (
        "a message; /image PATH attaches a picture"
        if target.is_agent
        else ("a JSON object of state keys")
    )
    reporter.note(f"type {what}; /exit or Ctrl-D to leave")
    images: list[ImagePart] = []  # attached with /image, sent with the next message
    while True:
        line = _ask("you> ")
        if line.strip() in _QUIT:
            return
        message: str | UserMessage = line
        if line.strip().startswith(_IMAGE_COMMAND):
            try:
                line = _attach(target, line, images, reporter)
            except CliError as exc:
                print_error(exc)
                continue
        if line.strip() and images:
            message = message_with_images(line.strip(), images)
            images = []
        if line.strip():
            _turn(target, config, reporter, message, debug=debug)


def _attach(target: Target, line: str, images: list[ImagePart], reporter: Reporter) -> str:
    """Read ``/image PATH [message]``'s picture into ``images``; return the message (or "")."""
    if not target.is_agent:
        raise CliError(
            f"{_IMAGE_COMMAND} attaches a picture to an agent's message; a graph takes JSON",
            "send a JSON object of state keys",
            EXIT_USAGE,
        )
    try:
        words = shlex.split(line.strip()[len(_IMAGE_COMMAND) :])
    except ValueError as exc:
        raise CliError(
            f"cannot read {line.strip()!r}: {exc}", "quote the path", EXIT_USAGE
        ) from exc
    if not words:
        raise CliError(
            f"{_IMAGE_COMMAND} needs a file",
            f"e.g. {_IMAGE_COMMAND} photo.png What is this?",
            EXIT_USAGE,
        )
    image = image_part(words[0])
    images.append(image)
    text = " ".join(words[1:])
    if not text:
        reporter.note(f"attached {image.placeholder}: it goes with your next message")
    return text


def _pick_up(target: Target, config: RunnableConfig, reporter: Reporter, *, debug: bool) -> None:
    """Where the thread given with ``--thread`` stands: new; paused (its pending decisions are
    asked for first, as a new message would drop them); stopped in the middle of a run
    (finished first); or ready for the next message."""
    thread = str(config.thread_id)
    if not target.keeps_threads:
        return
    try:
        snapshot = target.runnable.get_state(config)
    except RemoteGraphError as exc:
        if exc.status != 404:
            raise
        snapshot = None  # the server has no such thread
    if snapshot is None or snapshot.config.checkpoint_id is None:  # a thread this call starts
        reporter.note(f"new thread {thread}")
        return
    if snapshot.interrupts:
        reporter.paused(snapshot.interrupts, "answer these first; then the conversation goes on")
        waiting = RunSummary(thread_id=thread, interrupts=snapshot.interrupts)
        _turn(target, config, reporter, None, debug=debug, paused=waiting)
    elif snapshot.next:
        reporter.note(f"thread {thread} stopped before its run finished: finishing it")
        _turn(target, config, reporter, None, debug=debug)
    else:
        reporter.note(f"continuing thread {thread}")


def _turn(
    target: Target,
    config: RunnableConfig,
    reporter: Reporter,
    line: str | UserMessage | None,
    *,
    debug: bool,
    paused: RunSummary | None = None,
) -> None:
    """One run with every pause answered at the prompt: of the message ``line``, of the
    thread's unfinished run (``None``), or the answers to ``paused``. An error is printed and
    the chat goes on."""
    try:
        if paused is not None:
            summary = paused
        else:
            input = line if not isinstance(line, str) else parse_input(target, line)
            summary = execute(target, input, config, reporter)
        while summary.interrupts:
            reporter.stop()
            resume = ask_decisions(summary.interrupts)
            summary = summary.followed_by(execute(target, Command(resume=resume), config, reporter))
        reporter.finish(summary)
        problem = unanswered_error(target, summary)
        if problem is not None:
            print_error(problem)
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
    """New arguments for a call, asked until they are a JSON object; ``None`` (an empty line)
    goes back to approve / edit / reject. A typo never sends the user back there, where the
    next line would be taken for a decision."""
    print(printable(f"current arguments: {json.dumps(current, ensure_ascii=False)}"))
    while True:
        text = _ask("new arguments (JSON object, empty to go back)> ").strip()
        if not text:
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            print(f"not JSON ({exc.msg} at column {exc.colno}); try again")
            continue
        if isinstance(value, dict):
            return value
        print("the arguments must be a JSON object; try again")
