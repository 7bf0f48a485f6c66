"""``graph-agent demo`` and ``graph-agent run``: one call of an agent or a graph, shown live."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from graph_agent.agent.react import ReactAgent
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.checkpoint.sqlite import SqliteSaver
from graph_agent.cli.attach import image_part, message_with_images
from graph_agent.cli.endpoints import online_model, wants_online
from graph_agent.cli.errors import EXIT_USAGE, CliError
from graph_agent.cli.output import (
    Reporter,
    RichReporter,
    RunSummary,
    make_progress,
    make_reporter,
    printable,
    shown_text,
    to_json,
)
from graph_agent.cli.running import (
    continuable,
    execute,
    new_thread_id,
    parse_input,
    unanswered_error,
)
from graph_agent.cli.targets import DEMO_DB, Target, db_option, open_saver, open_target
from graph_agent.cli.unstreamed import UnstreamedModel
from graph_agent.graph.errors import InvalidResumeError
from graph_agent.graph.types import Interrupt, RunnableConfig
from graph_agent.messages import UserMessage
from graph_agent.models.base import ChatModel
from graph_agent.store.sqlite import SqliteStore

__all__ = ["DEMO_DB", "demo_command", "resume_hint", "run_command"]

IMAGE_QUESTION = "What is in this picture?"
"""The demo's question when --image comes without one."""
_STREAM_DELAY = 0.02
"""Seconds between the offline model's words on a terminal, so the streaming can be seen."""


def demo_command(args: argparse.Namespace) -> int:
    """Run the demo agent once on ``args.question`` (offline unless the flags say otherwise)."""
    from graph_agent.demo import DemoChatModel, build_agent

    reporter = make_reporter(plain=args.plain)
    if wants_online(
        online=args.online, base_url=args.base_url, model=args.model, provider=args.provider
    ):
        endpoint = online_model(
            os.environ,
            base_url=args.base_url,
            model=args.model,
            api_key_env=args.api_key_env,
            provider=args.provider,
        )
        model: ChatModel = endpoint.model
        described = endpoint.description
    else:
        live = isinstance(reporter, RichReporter)
        model = DemoChatModel(chunk_delay=_STREAM_DELAY if live else 0.0)
        described = "offline demo model (add --online for a real one)"
    if args.no_stream_model:
        model = UnstreamedModel(model)
    saver = open_saver(args.db)
    try:
        store = SqliteStore(args.db)
    except BaseException:
        saver.close()
        raise
    try:
        agent = build_agent(model, saver, store)
        with _mcp_tools(agent, args.mcp):
            _demo(args, agent, saver, described, reporter)
    finally:
        store.close()
        saver.close()
    return 0


@contextlib.contextmanager
def _mcp_tools(agent: ReactAgent, config: str | None) -> Iterator[None]:
    """``--mcp CONFIG``: the agent has those servers' tools inside (none without a config)."""
    if config is None:
        yield
        return
    from graph_agent.cli.mcp import add_mcp_tools

    remove = add_mcp_tools(agent, "graph_agent.demo:agent", config)
    try:
        yield
    finally:
        remove()


def _demo(
    args: argparse.Namespace,
    agent: ReactAgent,
    saver: SqliteSaver,
    described: str,
    reporter: Reporter,
) -> None:
    from graph_agent.demo import DEFAULT_QUESTION

    image = image_part(args.image) if args.image else None  # a bad path fails before the run
    thread = args.thread or new_thread_id("demo")
    reporter.header("graph-agent demo", {"model": described, "thread": thread, "db": args.db})
    db_flag, shown = db_option(args.db), shlex.quote(thread)
    stored = saver.get(thread) if args.thread else None
    question: str | None = args.question or (IMAGE_QUESTION if image else DEFAULT_QUESTION)
    if args.thread and stored is None:
        reporter.note(
            f"new thread {thread} (not in {args.db}; see graph-agent threads list{db_flag})"
        )
    elif stored is not None and stored.next and args.question is None and image is None:
        reporter.note(f"thread {thread} stopped before its run finished: finishing it")
        question = None  # continue the thread where it stopped
    elif stored is not None:
        reporter.note(f"continuing thread {thread}")
    input: str | UserMessage | None = question
    if question is not None and image is not None:
        input = message_with_images(question, [image])
        reporter.question(shown_text(input))
    elif question is not None:
        reporter.question(question)
    target = Target(spec="graph_agent.demo:agent", runnable=agent)
    again = f"graph-agent demo --thread {shown}{db_flag}{_model_flags(args)}"
    with continuable(target, thread, again):
        config = RunnableConfig(thread_id=thread, context={"user_id": args.user})
        summary = execute(target, input, config, reporter)
    if summary.interrupts:
        reporter.paused(summary.interrupts, "")
    else:
        reporter.finish(summary)
    reporter.note(
        f'continue: {again} "your next question"\n'
        f"inspect:  graph-agent threads history {shown}{db_flag}"
    )
    problem = unanswered_error(target, summary)
    if problem is not None:
        raise problem


def _model_flags(args: argparse.Namespace) -> str:
    """The demo's flags that chose its model (and its MCP tools), for a suggested command to
    use the same ones."""
    flags = ["--online"] if args.online else []
    for flag, value in (
        ("--base-url", args.base_url),
        ("--model", args.model),
        ("--api-key-env", args.api_key_env),
        ("--provider", args.provider),
        ("--mcp", args.mcp),
    ):
        if value is not None:
            flags += [flag, value]
    if args.no_stream_model:
        flags.append("--no-stream-model")
    return "".join(f" {shlex.quote(flag)}" for flag in flags)


def run_command(args: argparse.Namespace) -> int:
    """Run ``MODULE:OBJECT`` (or, with ``--url``, a served assistant) once: print the answer
    (or final state), or stream with --stream."""
    with open_target(args) as target:
        _run(target, args)
    return 0


def _run(target: Target, args: argparse.Namespace) -> None:
    if args.input is None and args.resume is None and args.thread is None:
        raise CliError(
            "nothing to run: give an INPUT",
            "an agent takes a question, a graph a JSON object; --thread with no INPUT continues "
            "a thread, --resume answers a pause",
            EXIT_USAGE,
        )
    input = parse_input(target, args.input, args.resume)
    if args.no_stream_model or (not args.stream and target.is_agent):
        target.ask_model_unstreamed()  # without --stream no token is shown: ask for the whole
    if args.thread is not None and isinstance(target.saver, MemorySaver):
        if args.input is None:
            raise CliError(
                f"thread {args.thread} cannot be continued: without --db, {args.target} keeps "
                "its threads in memory, which ends with each command",
                "pass the --db PATH the thread was started with",
                EXIT_USAGE,
            )
        print(
            printable(
                f"note: without --db, thread {args.thread} lives only as long as this command"
            ),
            file=sys.stderr,
        )
    thread = args.thread or new_thread_id()
    config = RunnableConfig(thread_id=thread)
    reporter = make_reporter(plain=args.plain) if args.stream else make_progress(plain=args.plain)
    again = f"graph-agent run {shlex.quote(args.target)} --thread {shlex.quote(thread)}"
    try:
        with continuable(target, thread, again + target.where(args.db)):
            summary = execute(target, input, config, reporter)
    except InvalidResumeError as exc:
        raise _resume_refused(exc, thread, args.db, target) from exc
    if not args.stream:
        reporter.stop()  # the progress spinner goes before the result is printed
    if summary.interrupts:
        hint = resume_hint(args.target, thread, args.db, summary.interrupts, target)
        shown = reporter if args.stream else make_reporter(plain=args.plain)
        shown.paused(summary.interrupts, hint)
    elif args.stream:
        reporter.finish(summary)
    elif summary.answer or not summary.unanswered:  # no empty line for a run that gave none
        _print_result(summary, target)
    if args.thread is None and (isinstance(target.saver, SqliteSaver) or target.remote):
        print(f"thread: {thread} (continue with --thread {thread})", file=sys.stderr)
    problem = unanswered_error(target, summary)
    if problem is not None:
        raise problem


def _resume_refused(
    error: InvalidResumeError, thread: str, db: str | None, target: Target
) -> CliError:
    """The thread does not wait for what ``--resume`` answered: how to see what it waits for."""
    saver = target.saver
    path = db if db is not None else saver.path if isinstance(saver, SqliteSaver) else None
    remote = target.remote
    if remote is not None:
        hint = f"see what the thread waits for: curl {remote.url}/threads/{thread}/state"
    elif path is None:
        hint = (
            "a thread kept in memory ends with the command that ran it: run with --db PATH so "
            "a pause can be answered later"
        )
    else:
        hint = (
            "show what the thread waits for with: graph-agent threads show "
            f"{shlex.quote(thread)}{db_option(path)}"
        )
    return CliError(" ".join(str(error).split()), hint, EXIT_USAGE)


def _print_result(summary: RunSummary, target: Target) -> None:
    result = (summary.answer or "") if target.is_agent else to_json(summary.state)
    print(printable(result, multiline=True))


def resume_hint(
    spec: str, thread: str, db: str | None, interrupts: tuple[Interrupt, ...], target: Target
) -> str:
    """How to answer the pause from the command line."""
    if not interrupts:
        return ""
    if db is None and not isinstance(target.saver, SqliteSaver) and target.remote is None:
        return (
            f"this thread lives in memory only: run with --db PATH to resume it later, or use "
            f"graph-agent chat {spec}"
        )
    answer: Any = "yes"
    value = interrupts[0].value
    calls = value.get("tool_calls") if isinstance(value, Mapping) else None
    if isinstance(calls, list):
        answer = {str(call.get("id")): {"decision": "approve"} for call in calls}
    db_flag = target.where(db)
    resume = shlex.quote(json.dumps(answer))
    return (
        f"resume: graph-agent run {shlex.quote(spec)} --thread {shlex.quote(thread)}{db_flag} "
        f"--resume {resume}"
    )
