"""The demo agent: a ReactAgent with a calculator, a clock and a unit converter.

Offline it talks to :class:`DemoChatModel`, a small rule-based model that reads the latest
question, decides which tools to call (several at once when the question asks several things),
and after the tools answered writes a reply from their real results. It streams its text word by
word and reports token usage like a served model would, so everything the runtime does is
visible without a network. ``graph-agent demo`` runs it; ``build_agent(model=...)`` puts any real
model in its place.

Example:
    >>> from graph_agent.demo import build_agent
    >>> reply = build_agent().call("What is 6 * 7, and how many kg is 10 pounds?")
    >>> print(reply.text)
    - 6 * 7 = 42
    - 10 pounds is 4.5359 kg
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from graph_agent.agent.memory import MEMORIES_ID, MemoryHook, memory_tools
from graph_agent.agent.react import ReactAgent
from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.demo_tools import UNIT_ALIASES, calculator, clock, convert_units
from graph_agent.messages import (
    AssistantMessage,
    BaseMessage,
    ToolCall,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from graph_agent.models.base import (
    ChatModel,
    LocalChatModel,
    ModelRequest,
    ToolLike,
    as_tool_definitions,
)
from graph_agent.store.base import BaseStore

__all__ = [
    "DEFAULT_QUESTION",
    "INSTRUCTION",
    "DemoChatModel",
    "agent",
    "build_agent",
    "plan_memory_calls",
    "plan_tool_calls",
]

DEFAULT_QUESTION = "What is (17 * 23) + 4, how many km is 26.2 miles, and what time is it in Tokyo?"
INSTRUCTION = (
    "You are a precise assistant with three tools: a calculator, a clock and a unit converter. "
    "Use them for any arithmetic, the current date or time, and unit conversions (call several "
    "at once when the question asks several things), then answer briefly from their results."
)

MEMORY_INSTRUCTION = (
    " You remember things about the user across conversations: when they tell you something "
    "worth keeping (their name, a preference), call remember with it as one short sentence."
)

CITY_ZONES: dict[str, str] = {
    "tokyo": "Asia/Tokyo",
    "beijing": "Asia/Shanghai",
    "shanghai": "Asia/Shanghai",
    "hangzhou": "Asia/Shanghai",
    "hong kong": "Asia/Hong_Kong",
    "singapore": "Asia/Singapore",
    "seoul": "Asia/Seoul",
    "delhi": "Asia/Kolkata",
    "mumbai": "Asia/Kolkata",
    "dubai": "Asia/Dubai",
    "moscow": "Europe/Moscow",
    "istanbul": "Europe/Istanbul",
    "berlin": "Europe/Berlin",
    "paris": "Europe/Paris",
    "madrid": "Europe/Madrid",
    "rome": "Europe/Rome",
    "amsterdam": "Europe/Amsterdam",
    "london": "Europe/London",
    "new york": "America/New_York",
    "toronto": "America/Toronto",
    "chicago": "America/Chicago",
    "denver": "America/Denver",
    "los angeles": "America/Los_Angeles",
    "san francisco": "America/Los_Angeles",
    "seattle": "America/Los_Angeles",
    "mexico city": "America/Mexico_City",
    "sao paulo": "America/Sao_Paulo",
    "sydney": "Australia/Sydney",
    "auckland": "Pacific/Auckland",
    "utc": "UTC",
}
"""Cities the offline model recognises in a question about the time."""

_UNSIGNED = (
    r"(?:(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+(?:_\d+)*)(?:\.\d+(?:_\d+)*)?|\.\d+(?:_\d+)*)"
    r"(?:[eE][-+]?\d+)?"
    r"(?![.,_]?\d)"
)
"""A number as people write it: ``1,500``, ``1_000``, ``2.5``, ``2.5e3``; it never stops inside
a longer token (``1,5000``, ``3.11.2``). Behind the lookbehind that ``_NUMBER`` and ``_ARITHMETIC``
put before it, it never starts inside one either (``abc123``, the ``500`` of ``1,5000``)."""
_NUMBER = rf"(?<![\w.,])-?{_UNSIGNED}"
_UNIT = "|".join(re.escape(name) for name in sorted(UNIT_ALIASES, key=len, reverse=True))
_UNIT_GROUP = rf"(?<![\w°])(?:{_UNIT})(?![\w°])"
_CONVERSIONS = (
    re.compile(
        rf"(?P<value>{_NUMBER})\s*(?P<source>{_UNIT_GROUP})\s+(?:to|in|into|as)\s+"
        rf"(?P<target>{_UNIT_GROUP})",
        re.IGNORECASE,
    ),
    re.compile(
        rf"how\s+many\s+(?P<target>{_UNIT_GROUP})\s+(?:is|are|in|makes?|are\s+there\s+in)\s+"
        rf"(?P<value>{_NUMBER})\s*(?P<source>{_UNIT_GROUP})",
        re.IGNORECASE,
    ),
)
_WORD_OPERATORS = (
    (re.compile(r"\s+(?:plus|added to)\s+", re.IGNORECASE), " + "),
    (re.compile(r"\s+minus\s+", re.IGNORECASE), " - "),
    (re.compile(r"\s+(?:times|multiplied by)\s+", re.IGNORECASE), " * "),
    (re.compile(r"\s+divided by\s+", re.IGNORECASE), " / "),
    (re.compile(r"\s+(?:to the power of|raised to)\s+", re.IGNORECASE), " ** "),
    (re.compile(r"(?<=\d)\s*[x×]\s*(?=[\d(])"), " * "),
    (re.compile(r"\^"), "**"),
)
_ARITHMETIC = re.compile(rf"(?:(?<![\w.,]){_UNSIGNED}|[-+*/%()\s])+")
_OPERATOR = re.compile(r"\d\s*\)*\s*(?:\*\*|//|[-+*/%])\s*\(*\s*-?\d")
_TIME = re.compile(r"\b(?:time|date|day|today|clock|o'clock)\b", re.IGNORECASE)
_ZONE = re.compile(r"\b(?:[A-Z][A-Za-z_]+/)+[A-Z][A-Za-z_]+\b")
_RECALL = re.compile(
    r"\b(?:earlier|before|previous(?:ly)?|last question|what did i (?:just )?ask)\b",
    re.IGNORECASE,
)
_ERROR_DETAIL = re.compile(r"raised \w+: (.*)$", re.DOTALL)
_NAME_GIVEN = re.compile(r"\b(?:my name is|call me|i am called|i'm called)\s+([\w'-]+)", re.I)
_NAME_ASKED = re.compile(
    r"\b(?:what(?:'s| is) my name|who am i|do you (?:know|remember) (?:my name|who i am))\b", re.I
)
_NAME_FORGET = re.compile(r"\bforget my name\b", re.I)
_NAME_REMEMBERED = re.compile(r"\[([\w-]+)\] The user's name is ([^.\n]+)\.")


@dataclass(frozen=True, slots=True)
class _Conversion:
    start: int
    end: int
    value: float
    source: str
    target: str


def plan_tool_calls(question: str) -> list[ToolCall]:
    """The tool calls the offline model makes for ``question`` (empty when it needs none).

    Example:
        >>> [(c.name, c.arguments) for c in plan_tool_calls("What is 2 + 3 and 5 kg in lb?")]
        [('calculator', {'expression': '2 + 3'}), ('convert_units', {'value': 5.0, \
'from_unit': 'kg', 'to_unit': 'lb'})]
    """
    conversions = _find_conversions(question)
    rest = question
    for found in reversed(conversions):  # blank them out so their numbers are not arithmetic
        rest = rest[: found.start] + " " * (found.end - found.start) + rest[found.end :]
    calls = [_call("calculator", expression=e) for e in _find_expressions(rest)]
    calls += [
        _call("convert_units", value=c.value, from_unit=c.source, to_unit=c.target)
        for c in conversions
    ]
    if _TIME.search(rest):
        calls += [_call("clock", timezone=zone) for zone in _find_zones(rest)]
    return calls


def plan_memory_calls(question: str, messages: Sequence[BaseMessage]) -> list[ToolCall]:
    """The memory tool calls the offline model makes: ``remember`` when the user gives their
    name, ``forget`` when they ask to forget it (and a memory of it was recalled)."""
    given = _NAME_GIVEN.search(question)
    if given:
        return [_call("remember", fact=f"The user's name is {given.group(1)}.")]
    recalled = _remembered_name(messages)
    if _NAME_FORGET.search(question) and recalled is not None:
        return [_call("forget", memory_id=recalled[0])]
    return []


def _remembered_name(messages: Sequence[BaseMessage]) -> tuple[str, str] | None:
    """``(memory id, name)`` from the recalled memories (the memory hook's system message)."""
    for message in messages:
        if message.id == MEMORIES_ID:
            found = _NAME_REMEMBERED.search(message.text)
            if found:
                return found.group(1), found.group(2)
    return None


def _call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=f"call_{uuid.uuid4().hex[:12]}", name=name, arguments=arguments)


def _find_conversions(question: str) -> list[_Conversion]:
    found: list[_Conversion] = []
    for pattern in _CONVERSIONS:
        for match in pattern.finditer(question):
            if any(match.start() < f.end and f.start < match.end() for f in found):
                continue
            found.append(
                _Conversion(
                    match.start(),
                    match.end(),
                    float(_without_separators(match["value"])),
                    match["source"],
                    match["target"],
                )
            )
    return sorted(found, key=lambda f: f.start)


def _find_expressions(text: str) -> list[str]:
    for pattern, replacement in _WORD_OPERATORS:
        text = pattern.sub(replacement, text)
    expressions = []
    for match in _ARITHMETIC.finditer(text):
        candidate = _without_separators(" ".join(match.group().split()))
        candidate = _balance(candidate)
        if _OPERATOR.search(candidate) and _parses(candidate):
            expressions.append(candidate)
    return expressions


def _without_separators(text: str) -> str:
    """Drop the digit separators of the numbers in ``text`` (the only commas and underscores
    a match of ``_NUMBER`` or ``_ARITHMETIC`` holds), so Python reads them as one number."""
    return text.replace(",", "").replace("_", "")


def _balance(candidate: str) -> str:
    """Drop parentheses a sentence cut in half: ``"4) + (2"`` keeps its arithmetic."""
    while candidate.count("(") > candidate.count(")") and candidate.startswith("("):
        candidate = candidate[1:].strip()
    while candidate.count(")") > candidate.count("(") and candidate.endswith(")"):
        candidate = candidate[:-1].strip()
    return candidate


def _parses(expression: str) -> bool:
    import ast

    try:
        ast.parse(expression, mode="eval")
    except SyntaxError:
        return False
    return True


def _find_zones(text: str) -> list[str]:
    lowered = text.lower()
    zones = [(m.start(), m.group()) for m in _ZONE.finditer(text)]
    for city, zone in CITY_ZONES.items():
        match = re.search(rf"\b{re.escape(city)}\b", lowered)
        if match:
            zones.append((match.start(), zone))
    ordered = [zone for _, zone in sorted(zones)]
    return list(dict.fromkeys(ordered)) or ["UTC"]


def _latest_question(messages: Sequence[BaseMessage]) -> tuple[int, str]:
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], UserMessage):
            return index, messages[index].text
    return -1, ""


def _place(timezone: str) -> str:
    return timezone.rsplit("/", 1)[-1].replace("_", " ")


def _error_text(content: str) -> str:
    match = _ERROR_DETAIL.search(content)
    return match.group(1) if match else content.removeprefix("Error: ")


def _sentence(call: ToolCall, result: ToolResponseMessage | None) -> str:
    arguments = call.arguments
    if call.name == "calculator":
        subject = arguments.get("expression", "?")
        ok = f"{subject} = {{}}"
        failed = f"I could not compute {subject}: {{}}"
    elif call.name == "convert_units":
        value = arguments.get("value", "?")
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        subject = f"{shown} {arguments.get('from_unit', '?')}"
        ok = f"{subject} is {{}}"
        failed = f"I could not convert {subject} to {arguments.get('to_unit', '?')}: {{}}"
    elif call.name == "remember":
        ok, failed = "I will remember that. ({})", "I could not remember that: {}"
    elif call.name == "forget":
        ok, failed = "Done: {}", "I could not forget that: {}"
    elif call.name == "clock":
        zone = str(arguments.get("timezone", "UTC"))
        ok = f"In {_place(zone)} it is {{}}" if zone != "UTC" else "It is {} right now"
        failed = f"I could not read the clock for {zone}: {{}}"
    else:
        ok, failed = f"{call.name} said: {{}}", f"{call.name} failed: {{}}"
    if result is None:
        return failed.format("the tool gave no result")
    if result.is_error:
        return failed.format(_error_text(result.text))
    return ok.format(result.text)


def _answer(messages: Sequence[BaseMessage], start: int, question: str) -> str:
    """The final reply: one line per tool call after the question, from the real results."""
    results = {m.tool_call_id: m for m in messages[start:] if isinstance(m, ToolResponseMessage)}
    lines = [
        f"- {_sentence(call, results.get(call.id))}"
        for message in messages[start:]
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
    ]
    recall = _recall(messages, start, question)
    if recall:
        lines.append(recall)
    if _NAME_ASKED.search(question):
        remembered = _remembered_name(messages)
        lines.append(
            f"Your name is {remembered[1]}." if remembered else "I do not know your name yet."
        )
    if lines:
        return "\n".join(lines)
    return (
        "I am the offline demo model: I can do arithmetic, convert units of length, mass, "
        "volume and temperature, and tell the time in a city. Try: " + DEFAULT_QUESTION
    )


def _recall(messages: Sequence[BaseMessage], start: int, question: str) -> str | None:
    if not _RECALL.search(question):
        return None
    earlier = [m.text for m in messages[: start - 1] if isinstance(m, UserMessage)]
    if not earlier:
        return "This is the first thing you asked in this conversation."
    return f'Before this you asked: "{earlier[-1]}"'


def _tokens(text: str) -> int:
    return max(1, round(len(text) / 4))


def _usage(messages: Sequence[BaseMessage], tools: Sequence[Any], reply: AssistantMessage) -> Usage:
    """Token counts in the usual ratio of about four characters a token."""
    prompt = sum(_tokens(m.text) + 4 for m in messages)
    prompt += sum(_tokens(json.dumps(t.parameters)) + _tokens(t.description) for t in tools)
    for message in messages:
        if isinstance(message, AssistantMessage):
            prompt += sum(_tokens(json.dumps(c.arguments)) for c in message.tool_calls)
    completion = _tokens(reply.text) + sum(
        _tokens(json.dumps(c.arguments)) + 3 for c in reply.tool_calls
    )
    total = prompt + completion
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total)


class DemoChatModel(LocalChatModel):
    """An offline chat model whose answers are computed from the conversation.

    For the latest question it calls the tools the question needs (all at once); once their
    results are in, it answers from them. Without a fitting tool it answers directly. Streaming
    yields the text word by word, ``chunk_delay`` seconds apart, so a terminal shows it arrive.

    Args:
        chunk_delay: Seconds to wait before each streamed piece of text (0 in tests).
    """

    model = "demo-offline"

    def __init__(self, *, chunk_delay: float = 0.0) -> None:
        self.chunk_delay = chunk_delay

    def __repr__(self) -> str:
        return "DemoChatModel()"

    def reply(
        self, messages: Sequence[BaseMessage], tools: Sequence[ToolLike] | None = None
    ) -> AssistantMessage:
        """The answer to ``messages``: tool calls for a new question, else the final text."""
        definitions = as_tool_definitions(tools)
        offered = {t.name for t in definitions}
        start, question = _latest_question(messages)
        answered = any(isinstance(m, ToolResponseMessage) for m in messages[start + 1 :])
        planned = [*plan_tool_calls(question), *plan_memory_calls(question, messages)]
        calls = [] if answered else [c for c in planned if c.name in offered]
        if calls:
            message = AssistantMessage("", tool_calls=calls, finish_reason="tool_calls")
        else:
            text = _answer(messages, start + 1, question)
            message = AssistantMessage(text, finish_reason="stop")
        return message.model_copy(update={"usage": _usage(messages, definitions, message)})

    def _reply(self, request: ModelRequest) -> AssistantMessage:
        return self.reply(request.messages, request.tools)


def build_agent(
    model: ChatModel | None = None,
    saver: CheckpointSaver | None = None,
    store: BaseStore | None = None,
) -> ReactAgent:
    """The demo agent, on ``model`` (default: the offline :class:`DemoChatModel`).

    Args:
        model: Any chat model; a real one answers the same questions with the same tools.
        saver: Where threads are kept (default: in memory).
        store: Long-term memory: with one, the agent also recalls what it knows of the user
            (``RunnableConfig(context={"user_id": ...})``) and can ``remember`` and ``forget``,
            across threads. The offline model remembers the user's name ("my name is Ada",
            then, on any thread, "what is my name?").
    """
    memory = store is not None
    return ReactAgent(
        "demo",
        model if model is not None else DemoChatModel(),
        tools=[calculator, clock, convert_units, *(memory_tools() if memory else ())],
        instruction=INSTRUCTION + (MEMORY_INSTRUCTION if memory else ""),
        saver=saver,
        hooks=[MemoryHook()] if memory else (),
        store=store,
    )


agent = build_agent()
"""A ready demo agent (offline model, threads in memory): ``graph-agent run graph_agent.demo:agent
"What is 2 ** 16?"``."""
