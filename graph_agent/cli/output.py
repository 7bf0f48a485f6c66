"""How a run looks in the terminal: live with rich, or plain text for pipes, logs and ``--plain``.

A :class:`Reporter` receives the events of a run (a node finished, a token arrived, the run
paused or ended). :class:`RichReporter` shows a spinner with the streaming text while a node
works, a line per finished node with its tool calls and results, and a final panel;
:class:`PlainReporter` writes the same facts as plain lines. Both describe nodes through
:func:`describe_node`, so they never disagree about what happened.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import time
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import IO, Any, Literal, Protocol, TextIO

from pydantic import BaseModel
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.rule import Rule
from rich.spinner import Spinner
from rich.text import Text

from graph_agent.agent.middleware.todos import TODOS_KEY, format_todos
from graph_agent.cli.errors import CliError
from graph_agent.graph.state import ReplaceAll
from graph_agent.graph.types import START, Interrupt, NodeOutput
from graph_agent.messages import (
    AssistantMessage,
    AudioPart,
    BaseMessage,
    FilePart,
    ImagePart,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
    Usage,
    content_text,
)

__all__ = [
    "NodeLine",
    "PlainReporter",
    "ProgressReporter",
    "QuietReporter",
    "Reporter",
    "RichReporter",
    "RunSummary",
    "describe_node",
    "format_call",
    "make_console",
    "make_progress",
    "make_reporter",
    "print_error",
    "printable",
    "shown_text",
    "to_json",
    "to_jsonable",
]

LineKind = Literal["call", "result", "error", "update", "todo"]
_MAX_DETAIL = 240

_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_UNSAFE_IN_TEXT = re.compile(f"[{_CONTROLS}]")
_UNSAFE_IN_LINE = re.compile(f"[\t\n{_CONTROLS}]")
_SHORT_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def printable(text: str, *, multiline: bool = False) -> str:
    """``text`` safe to print: every control character shown as its JSON escape.

    Thread ids, metadata, tool output and answers come from an application's users, models and
    tools. Printed raw, an escape sequence would drive the terminal (clear it, retitle it, plant
    a hyperlink), a newline would forge a line of a table, a bidi override would reorder what
    is read. Every command prints such text through this function (and its consoles never read
    rich markup, so ``[/oops]`` is shown as written). The escapes are JSON's (``\\n``,
    ``\\u001b``), so escaped JSON text is still valid JSON.

    Args:
        text: What to show.
        multiline: Keep newlines and tabs (an answer, a JSON document); else they are escaped
            too (an id, a table cell, one line of output).
    """
    pattern = _UNSAFE_IN_TEXT if multiline else _UNSAFE_IN_LINE
    if pattern.search(text) is None:
        return text
    return pattern.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    character = match.group()
    return _SHORT_ESCAPES.get(character) or f"\\u{ord(character):04x}"


def print_error(error: CliError) -> None:
    """``error: what`` and ``hint: how`` on stderr, each one line (ids in them escaped)."""
    sys.stdout.flush()
    print(f"error: {printable(error.message)}", file=sys.stderr)
    if error.hint:
        print(f"hint: {printable(error.hint)}", file=sys.stderr)


@dataclass(frozen=True, slots=True)
class NodeLine:
    """One detail under a finished node: a tool call, a result, an error, or a state update."""

    kind: LineKind
    text: str


@dataclass(kw_only=True)
class RunSummary:
    """What a run came to, for the final panel and for callers."""

    answer: str | None = None
    state: dict[str, Any] = field(default_factory=dict)
    streamed: str = ""
    model_calls: int = 0
    iterations: int = 0
    tool_calls: int = 0
    usage: Usage | None = None
    elapsed: float = 0.0
    interrupts: tuple[Interrupt, ...] = ()
    thread_id: str | None = None
    unanswered: tuple[ToolCall, ...] = ()
    """Tool calls of the run's last answer that nothing ran (an agent without tools)."""

    def stats(self) -> str:
        """``1 iteration · 2 model calls · 3 tool calls · 472 tokens (412 in, 60 out) · 0.05 s``."""
        parts = []
        if self.model_calls:
            parts.append(_plural(self.iterations, "iteration"))
            parts.append(_plural(self.model_calls, "model call"))
            parts.append(_plural(self.tool_calls, "tool call"))
        if self.usage is not None and self.usage.total_tokens:
            usage = self.usage
            parts.append(
                f"{usage.total_tokens} tokens "
                f"({usage.prompt_tokens} in, {usage.completion_tokens} out)"
            )
        parts.append(f"{self.elapsed:.2f} s")
        return " · ".join(parts)

    def followed_by(self, later: RunSummary) -> RunSummary:
        """This run and its continuation (after a pause) as one: the counts, tokens and time
        of both, the outcome of ``later``."""
        if self.usage is None or later.usage is None:
            usage = self.usage or later.usage
        else:
            usage = self.usage + later.usage
        return dataclasses.replace(
            later,
            model_calls=self.model_calls + later.model_calls,
            iterations=self.iterations + later.iterations,
            tool_calls=self.tool_calls + later.tool_calls,
            usage=usage,
            elapsed=self.elapsed + later.elapsed,
        )


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def to_jsonable(value: Any) -> Any:
    """``value`` made of JSON types: messages and models as dicts, tuples as lists; an image,
    audio or file part as its placeholder (``[image: image/png, 12 KB]``), not its data."""
    if isinstance(value, ImagePart | AudioPart | FilePart):
        return value.placeholder
    if isinstance(value, BaseMessage) and not isinstance(value.content, str):
        dumped = value.model_dump(mode="json", exclude_none=True)
        dumped["content"] = [to_jsonable(part) for part in value.content]
        return dumped
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, Sequence | Set) and not isinstance(value, str | bytes):
        return [to_jsonable(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Interrupt):
        return {"id": value.id, "node": value.node, "value": to_jsonable(value.value)}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    items = getattr(value, "items", None)
    if isinstance(items, tuple | list):  # ReplaceAll and similar wrappers
        return [to_jsonable(v) for v in items]
    return repr(value)


def to_json(value: Any, *, indent: int | None = 2) -> str:
    """Pretty (or, with ``indent=None``, compact) JSON of any state value."""
    separators = (",", ": ") if indent else (", ", ": ")
    return json.dumps(to_jsonable(value), indent=indent, ensure_ascii=False, separators=separators)


def shown_text(message: BaseMessage) -> str:
    """A message's text as the terminal shows it: each image, audio or file part as its
    placeholder, e.g. ``What is this? [image: image/png, 12 KB]``."""
    return content_text(message.content, placeholders=True)


def _short(text: str, limit: int = _MAX_DETAIL) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def format_call(call: ToolCall) -> str:
    """``calculator(expression="(17 * 23) + 4")``."""
    arguments = ", ".join(
        f"{name}={json.dumps(value, ensure_ascii=False)}" for name, value in call.arguments.items()
    )
    return f"{call.name}({arguments})"


def describe_node(output: NodeOutput) -> tuple[str, list[NodeLine]]:
    """A finished node as a short summary and detail lines (tool calls, results, updates)."""
    messages = output.update.get("messages") if output.update else None
    replaced = isinstance(messages, ReplaceAll)
    if isinstance(messages, ReplaceAll):
        messages = list(messages.items)
    elif isinstance(messages, BaseMessage):
        messages = [messages]
    if isinstance(messages, list | tuple) and messages:
        lines: list[NodeLine] = []
        summary: list[str] = ["messages replaced"] if replaced else []
        for message in messages:
            if isinstance(message, SystemMessage):
                lines.append(NodeLine("update", f"system: {_short(message.text, 100)}"))
            elif isinstance(message, AssistantMessage):
                if message.tool_calls:
                    summary.append(_plural(len(message.tool_calls), "tool call"))
                    lines += [NodeLine("call", format_call(c)) for c in message.tool_calls]
                elif message.text:
                    summary.append("answer")
            elif isinstance(message, ToolResponseMessage):
                kind: LineKind = "error" if message.is_error else "result"
                lines.append(NodeLine(kind, f"{message.name}: {_short(shown_text(message))}"))
        results = sum(1 for line in lines if line.kind in ("result", "error"))
        if results:
            summary.append(_plural(results, "result"))
        if isinstance(output.usage, Usage) and output.usage.total_tokens:
            summary.append(f"{output.usage.total_tokens} tokens")
        todos = _todo_lines(output.update)
        if todos:
            summary.append("todo list")
            lines += todos
        shown = ("messages", TODOS_KEY) if todos else ("messages",)
        others = {k: v for k, v in output.update.items() if k not in shown}
        if others:
            lines.append(NodeLine("update", _short(to_json(others, indent=None))))
        return ", ".join(summary) or _plural(len(messages), "message"), lines
    if output.interrupts:
        return "paused, waiting for input", []
    if not output.update:
        return "no change", []
    todos = _todo_lines(output.update)
    if todos:
        others = {k: v for k, v in output.update.items() if k != TODOS_KEY}
        extra = [NodeLine("update", _short(to_json(others, indent=None)))] if others else []
        return "todo list", [*todos, *extra]
    return "", [NodeLine("update", _short(to_json(output.update, indent=None)))]


def _todo_lines(update: Mapping[str, Any]) -> list[NodeLine]:
    """The todo list a step wrote (see :class:`~graph_agent.agent.middleware.TodoListHook`),
    a line per item; nothing when the step left it alone or it is not a list of items."""
    todos = update.get(TODOS_KEY)
    if not isinstance(todos, list | tuple) or not all(isinstance(t, Mapping) for t in todos):
        return []
    if not todos:
        return [NodeLine("todo", "todo list cleared")]
    return [NodeLine("todo", _short(line)) for line in format_todos(todos).splitlines()]


class Reporter(Protocol):
    """Receives the events of a run, in order.

    ``live`` reporters show what runs now: they also get :meth:`running` after each superstep,
    with the nodes of the next one.
    """

    live: bool

    def header(self, title: str, details: Mapping[str, str]) -> None: ...

    def question(self, text: str) -> None: ...

    def start(self) -> None: ...

    def token(self, node: str, text: str) -> None: ...

    def node(self, output: NodeOutput) -> None: ...

    def running(self, nodes: Sequence[str]) -> None: ...

    def paused(self, interrupts: Sequence[Interrupt], hint: str) -> None: ...

    def finish(self, summary: RunSummary) -> None: ...

    def note(self, text: str) -> None: ...

    def stop(self) -> None: ...


def _interrupt_lines(interrupt: Interrupt) -> list[str]:
    value = interrupt.value
    calls = value.get("tool_calls") if isinstance(value, Mapping) else None
    if isinstance(calls, list) and calls:
        lines = []
        for call in calls:
            arguments = call.get("arguments") or {}
            shown = format_call(
                ToolCall(id=str(call.get("id", "")), name=call["name"], arguments=dict(arguments))
            )
            reason = f" ({call['description']})" if call.get("description") else ""
            lines.append(f"approve {shown}?{reason}  [call id {call.get('id')}]")
        return lines
    return [f"{interrupt.node} asks: {_short(to_json(value, indent=None))}"]


class PlainReporter:
    """Plain lines on a stream: what happened, in order, with no colour or boxes.

    ``compact`` (chat) shows only tool calls, results and the answer.
    """

    live = False

    def __init__(self, stream: IO[str] | None = None, *, compact: bool = False) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.compact = compact
        self._streamed = ""
        self._mid_line = False

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def _line(self, text: str) -> None:
        """One line of output: anything in ``text`` that would break the line is escaped."""
        self._write(printable(text) + "\n")

    def _block(self, text: str) -> None:
        """Lines of output (an answer, a JSON document), control characters escaped."""
        self._write(printable(text, multiline=True) + "\n")

    def _end_tokens(self) -> None:
        if self._mid_line:
            self._write("\n")
            self._mid_line = False

    def header(self, title: str, details: Mapping[str, str]) -> None:
        shown = ", ".join(f"{k} {v}" for k, v in details.items())
        self._line(f"{title}: {shown}" if shown else title)

    def question(self, text: str) -> None:
        self._block(f"you: {text}")

    def start(self) -> None:
        self._streamed = ""

    def token(self, node: str, text: str) -> None:
        if not text:
            return
        if not self._mid_line:
            self._write("assistant: ")
            self._mid_line = True
        self._streamed += text
        self._write(printable(text, multiline=True))

    def node(self, output: NodeOutput) -> None:
        self._end_tokens()
        summary, lines = describe_node(output)
        if self.compact:  # chat: tool calls and results only
            lines = [line for line in lines if line.kind != "update"]
        if output.node == START:
            if not self.compact and lines:
                self._line(f"input: {lines[0].text}")
            return
        if self.compact and not lines:
            return
        if not self.compact:
            self._line(f"[step {output.step}] {output.node}{': ' + summary if summary else ''}")
        for line in lines:
            arrows = {
                "call": "-> ",
                "result": "<- ",
                "error": "<- error ",
                "update": "",
                "todo": "",
            }
            arrow = arrows[line.kind]
            self._line(f"    {arrow}{line.text}")

    def running(self, nodes: Sequence[str]) -> None:
        pass

    def paused(self, interrupts: Sequence[Interrupt], hint: str) -> None:
        self._end_tokens()
        self._write("paused, waiting for input:\n")
        for interrupt in interrupts:
            for line in _interrupt_lines(interrupt):
                self._line(f"    {line}")
        if hint:
            self._block(hint)

    def finish(self, summary: RunSummary) -> None:
        self._end_tokens()
        answer = summary.answer
        if answer is not None and answer.strip() != self._streamed.strip():
            self._block(f"answer:\n{answer}")
        elif answer is None and summary.state and not self.compact:
            self._block(f"final state:\n{to_json(summary.state)}")
        if not self.compact:
            self._line(summary.stats())

    def note(self, text: str) -> None:
        self._end_tokens()
        self._block(text)

    def stop(self) -> None:
        self._end_tokens()


class RichReporter:
    """Live terminal output: a spinner and the streaming text while a node works (cleared when
    it finishes), a line per finished node, and a final panel with the answer and the stats."""

    _ARROWS: Mapping[LineKind, tuple[str, str]] = {
        "call": ("→", "yellow"),
        "result": ("←", "green"),
        "error": ("✗", "red"),
        "update": ("·", "dim"),
        "todo": ("☰", "magenta"),
    }
    live = True

    def __init__(self, console: Console, *, compact: bool = False) -> None:
        self.console = console
        self.compact = compact
        self._live: Live | None = None
        self._streaming = Text(style="cyan")
        self._streamed = ""
        self._status = "working"

    def _view(self) -> RenderableType:
        spinner = Spinner("dots", text=Text(self._status, style="dim"))
        return Group(self._streaming, spinner) if self._streaming.plain else spinner

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._view(), refresh=True)

    def header(self, title: str, details: Mapping[str, str]) -> None:
        text = Text(printable(title), style="bold")
        for key, value in details.items():
            text.append(f"  {printable(key)} ", style="dim").append(printable(value))
        self.console.print(text)

    def question(self, text: str) -> None:
        self.console.print(Text.assemble(("you ", "bold magenta"), printable(text, multiline=True)))

    def start(self) -> None:
        self._streamed = ""
        self._status = "working"
        if self._live is None:
            self._live = Live(
                self._view(), console=self.console, transient=True, refresh_per_second=20
            )
            self._live.start()

    def token(self, node: str, text: str) -> None:
        if not text:
            return
        self._streamed += text
        self._streaming.append(printable(text, multiline=True))
        self._status = f"{printable(node)} is answering"
        self._refresh()

    def node(self, output: NodeOutput) -> None:
        summary, lines = describe_node(output)
        if self.compact:
            lines = [line for line in lines if line.kind != "update"]
        self._streaming = Text(style="cyan")
        self._status = "working"
        self._refresh()  # clear the streamed text before printing above the live area
        if self.compact and (output.node == START or not lines):
            return
        if output.node == START:
            if lines:
                self.console.print(Text.assemble(("input ", "bold"), printable(lines[0].text)))
            return
        if not self.compact:
            title = Text.assemble(
                ("✓ ", "green"), (f"{output.step:>2} ", "dim"), (printable(output.node), "bold")
            )
            if summary:
                title.append(f"  {summary}", style="dim")
            self.console.print(title)
        for line in lines:
            arrow, style = self._ARROWS[line.kind]
            self.console.print(Text.assemble(f"     {arrow} ", (printable(line.text), style)))

    def running(self, nodes: Sequence[str]) -> None:
        self._status = _running(nodes)
        self._refresh()

    def paused(self, interrupts: Sequence[Interrupt], hint: str) -> None:
        self.stop()
        lines = (printable(line) for i in interrupts for line in _interrupt_lines(i))
        body = Text("\n".join(lines))
        if hint:
            body.append(f"\n{printable(hint, multiline=True)}", style="dim")
        self.console.print(Panel(body, title="paused: waiting for input", border_style="yellow"))

    def finish(self, summary: RunSummary) -> None:
        self.stop()
        if self.compact:
            if summary.answer is not None:
                answer = printable(summary.answer, multiline=True)
                self.console.print(Text.assemble(("assistant ", "bold cyan"), answer))
            self.console.print(Text(summary.stats(), style="dim"))
            return
        if summary.answer is not None:
            body: RenderableType = Text(printable(summary.answer, multiline=True))
            title = "answer"
        else:
            body = Text(printable(to_json(summary.state), multiline=True))
            title = "final state"
        stats = Text(summary.stats(), style="dim")
        self.console.print(
            Panel(Group(body, Rule(style="dim"), stats), title=title, border_style="green")
        )

    def note(self, text: str) -> None:
        self.console.print(Text(printable(text, multiline=True), style="dim"))

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


def _running(nodes: Sequence[str]) -> str:
    return printable(f"running {', '.join(nodes)}") if nodes else "finishing"


class ProgressReporter:
    """A spinner naming the nodes that run now, and the time so far; nothing else, and nothing
    left behind. ``run`` without ``--stream`` shows it (on stderr, on a terminal) while it
    waits for the answer it prints."""

    live = True

    def __init__(self, console: Console) -> None:
        self.console = console
        self._live: Live | None = None
        self._spinner = Spinner("dots")
        self._status = "starting"
        self._started = 0.0

    def __rich__(self) -> Spinner:
        elapsed = time.monotonic() - self._started
        self._spinner.update(text=Text(f"{self._status} · {elapsed:.0f} s", style="dim"))
        return self._spinner

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()

    def header(self, title: str, details: Mapping[str, str]) -> None:
        pass

    def question(self, text: str) -> None:
        pass

    def start(self) -> None:
        self._started = time.monotonic()
        if self._live is None:
            self._live = Live(self, console=self.console, transient=True, refresh_per_second=10)
            self._live.start()

    def token(self, node: str, text: str) -> None:
        self._status = printable(f"{node} is answering")
        self._refresh()

    def node(self, output: NodeOutput) -> None:
        self._status = printable(f"{output.node} finished")  # until running() knows more
        self._refresh()

    def running(self, nodes: Sequence[str]) -> None:
        self._status = _running(nodes)
        self._refresh()

    def paused(self, interrupts: Sequence[Interrupt], hint: str) -> None:
        self.stop()

    def finish(self, summary: RunSummary) -> None:
        self.stop()

    def note(self, text: str) -> None:
        pass

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


class QuietReporter:
    """Shows nothing: ``run`` without ``--stream`` in plain mode or off a terminal prints only
    the result."""

    live = False

    def header(self, title: str, details: Mapping[str, str]) -> None:
        pass

    def question(self, text: str) -> None:
        pass

    def start(self) -> None:
        pass

    def token(self, node: str, text: str) -> None:
        pass

    def node(self, output: NodeOutput) -> None:
        pass

    def running(self, nodes: Sequence[str]) -> None:
        pass

    def paused(self, interrupts: Sequence[Interrupt], hint: str) -> None:
        pass

    def finish(self, summary: RunSummary) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def stop(self) -> None:
        pass


def make_console(*, plain: bool = False, stream: TextIO | None = None) -> Console:
    """A console on ``stream`` (stdout), with colours only when it is a terminal.

    It never reads rich markup in strings (``[link=...]``, ``[/x]``): what it prints is text
    from users and models, shown as written (and through :func:`printable`).
    """
    return Console(
        file=stream if stream is not None else sys.stdout,
        no_color=plain,
        markup=False,
        highlight=False,
        emoji=False,
        soft_wrap=False,
    )


def make_progress(*, plain: bool = False) -> Reporter:
    """A :class:`ProgressReporter` on stderr when it is a terminal (and not ``plain``), else a
    :class:`QuietReporter`: the result on stdout stays all there is to read or pipe."""
    console = make_console(plain=plain, stream=sys.stderr)
    if plain or not console.is_terminal:
        return QuietReporter()
    return ProgressReporter(console)


def make_reporter(
    *, plain: bool = False, compact: bool = False, stream: TextIO | None = None
) -> Reporter:
    """A :class:`RichReporter` on a terminal, else (or with ``plain``) a :class:`PlainReporter`."""
    console = make_console(plain=plain, stream=stream)
    if plain or not console.is_terminal:
        return PlainReporter(console.file, compact=compact)
    return RichReporter(console, compact=compact)
