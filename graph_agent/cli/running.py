"""Running a target once, streamed to a reporter, and what the run came to."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx

from graph_agent.agent.nodes import pending_tool_calls, run_answer
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.cli.errors import EXIT_ERROR, EXIT_USAGE, CliError, RunStopped
from graph_agent.cli.output import Reporter, RunSummary, format_call, shown_text
from graph_agent.cli.targets import Target
from graph_agent.graph.errors import GraphAgentError
from graph_agent.graph.state import OverAllState
from graph_agent.graph.types import Command, Interrupt, NodeOutput, RunnableConfig, StreamingOutput
from graph_agent.messages import AssistantMessage, ToolCall, ToolResponseMessage, Usage
from graph_agent.node import pending_interrupts
from graph_agent.runnable_traits import local_graph

__all__ = [
    "answer_of",
    "continuable",
    "execute",
    "new_thread_id",
    "parse_input",
    "parse_json",
    "unanswered_calls",
    "unanswered_error",
]


def new_thread_id(prefix: str = "thread") -> str:
    """A readable, unique thread id: ``demo-20250101-120000-3f2a``."""
    return f"{prefix}-{datetime.now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:4]}"


def parse_json(text: str, what: str) -> Any:
    """``text`` as JSON, or a usage error naming ``what`` was expected."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{what} is not valid JSON ({exc.msg} at column {exc.colno}): {text!r:.80}",
            'quote it for the shell, e.g. \'{"topic": "graphs"}\'',
            EXIT_USAGE,
        ) from exc


def parse_input(target: Target, text: str | None, resume: str | None = None) -> Any:
    """The input of a call: a question for an agent, a JSON object for a graph, a resume, or
    ``None`` (continue the thread)."""
    if resume is not None:
        return Command(resume=parse_json(resume, "--resume"))
    if text is None:
        return None
    if target.is_agent:
        return text
    value = parse_json(text, "INPUT")
    if not isinstance(value, dict):
        raise CliError(
            f"a graph's INPUT is a JSON object of state keys, got {type(value).__name__}",
            'e.g. \'{"topic": "graphs"}\'',
            EXIT_USAGE,
        )
    return value


def answer_of(state: OverAllState) -> str | None:
    """The text of the answer the current run gave, from an agent's state (with its private
    keys, as a run returns or streams it), or ``None`` when the run gave none: never an earlier
    turn's answer, as ``ReactAgent.call`` (see :func:`~graph_agent.agent.nodes.run_answer`)."""
    message = run_answer(state)
    return shown_text(message) if message is not None else None


@contextlib.contextmanager
def continuable(
    target: Target, thread: str, command: str, *, finished_too: bool = False
) -> Iterator[None]:
    """Turn Ctrl-C inside into :class:`RunStopped` naming ``command``, which carries the thread
    on, when the thread's saver kept what it did.

    Args:
        target: What ran; its saver tells whether the thread survives the command.
        thread: The thread that ran.
        command: The command line that continues it.
        finished_too: Suggest ``command`` for a thread whose run had finished too (a chat goes
            on with a finished thread); else only for one stopped in the middle of a run, or
            paused.
    """
    try:
        yield
    except RunStopped:
        raise
    except KeyboardInterrupt:
        raise RunStopped(_carry_on(target, thread, command, finished_too)) from None


def _carry_on(target: Target, thread: str, command: str, finished_too: bool) -> str:
    remote = target.remote
    if remote is not None:  # the server kept the thread: ask it where it stands
        try:
            snapshot = remote.get_state(RunnableConfig(thread_id=thread))
        except (GraphAgentError, httpx.HTTPError):
            return ""
        unfinished = bool(snapshot.next) or bool(snapshot.interrupts)
        return f"continue: {command}" if unfinished or finished_too else ""
    saver = target.saver
    if saver is None or isinstance(saver, MemorySaver):
        return "the thread lived in memory and is gone: with --db PATH it can be continued"
    try:
        checkpoint = saver.get(thread)
    except GraphAgentError:  # the database cannot say: no advice rather than a second error
        return ""
    if checkpoint is None:
        return ""
    unfinished = bool(checkpoint.next) or bool(pending_interrupts(checkpoint.pending_writes))
    return f"continue: {command}" if unfinished or finished_too else ""


def execute(target: Target, input: Any, config: RunnableConfig, reporter: Reporter) -> RunSummary:
    """Stream one call of ``target`` into ``reporter`` and sum it up (answer, stats, pauses).

    The reporter's ``finish``/``paused`` are left to the caller, which knows what to suggest.
    """
    summary = RunSummary(thread_id=config.thread_id)
    local_graph(target.runnable)  # an agent's built (once) outside the timing: the run's time
    started = time.perf_counter()
    last_state: Any = None
    interrupts: dict[str, Interrupt] = {}
    usage: Usage | None = None
    reporter.start()
    shown_step: str | None = None
    try:
        for output in target.runnable.stream(input, config):
            if isinstance(output, StreamingOutput):
                reporter.token(output.node, output.chunk)
                continue
            reporter.node(output)
            if reporter.live and output.checkpoint_id != shown_step:
                shown_step = output.checkpoint_id  # once per superstep
                upcoming = _next_nodes(target, config, output)
                if upcoming is not None:
                    reporter.running(upcoming)
            _count(summary, output)
            if isinstance(output.usage, Usage):
                usage = output.usage if usage is None else usage + output.usage
            for interrupt in output.interrupts:
                interrupts[interrupt.id] = interrupt
            if output.state is not None:
                last_state = output.state
    except BaseException:
        reporter.stop()
        raise
    summary.elapsed = time.perf_counter() - started
    summary.usage = usage
    summary.state = last_state.data() if last_state is not None else {}
    summary.interrupts = tuple(interrupts.values())
    if target.keeps_threads and config.thread_id is not None:
        snapshot = target.runnable.get_state(config)
        summary.state = dict(snapshot.values)
        summary.interrupts = snapshot.interrupts
    if target.is_agent and not summary.interrupts and last_state is not None:
        summary.answer = answer_of(last_state)  # snapshot values lack where the run began
        summary.unanswered = unanswered_calls(last_state)
    return summary


def unanswered_calls(state: OverAllState) -> tuple[ToolCall, ...]:
    """The tool calls of the run's last answer that nothing answered: the run ended without
    running them (an agent without tools has no tool node; a hook may end a run early)."""
    answer = run_answer(state)
    if answer is None or not answer.tool_calls:
        return ()
    return tuple(pending_tool_calls(state.value("messages", ())))


def unanswered_error(target: Target, summary: RunSummary) -> CliError | None:
    """What to tell the user of a run that ended with tool calls nothing ran (``None``: it
    ended with none)."""
    calls = summary.unanswered
    if not calls:
        return None
    shown = ", ".join(format_call(call) for call in calls)
    runnable = target.runnable
    toolkit = getattr(runnable, "toolkit", None)  # an agent's own tools (a team has none)
    if toolkit is not None and not toolkit.names:
        return CliError(
            f"the model called {shown}, but agent {runnable.name!r} has no tools: nothing ran "
            "the call, so the run ended without an answer",
            "give the agent that tool (ReactAgent(tools=[...]), or --mcp CONFIG for an MCP "
            "server's), or tell the model to answer without tools",
            EXIT_ERROR,
        )
    return CliError(
        f"the run ended before the model's tool call{'s' if len(calls) > 1 else ''} {shown} "
        "ran, so it has no answer",
        "run with --stream to see which step ended it (a hook, or max_iterations)",
        EXIT_ERROR,
    )


def _next_nodes(
    target: Target, config: RunnableConfig, output: NodeOutput
) -> tuple[str, ...] | None:
    """The nodes that run after ``output``'s superstep, as its checkpoint records them;
    ``None`` when unknown (no saver)."""
    saver = target.saver
    if saver is None or output.checkpoint_id is None or config.thread_id is None:
        return None
    checkpoint = saver.get(config.thread_id, output.checkpoint_id)
    return checkpoint.next if checkpoint is not None else None


def _count(summary: RunSummary, output: NodeOutput) -> None:
    """Add what ``output`` did: the model's answers (iterations: those asking for tools) and
    the tool calls that ran, counted by their results, so that a run resumed after an approval
    counts the calls it ran (the model asked for them before the pause)."""
    messages = output.update.get("messages") if output.update else None
    if not isinstance(messages, list | tuple):
        return
    for message in messages:
        if isinstance(message, AssistantMessage):
            summary.model_calls += 1
            summary.iterations += bool(message.tool_calls)
        elif isinstance(message, ToolResponseMessage):
            summary.tool_calls += 1
