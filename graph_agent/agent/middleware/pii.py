"""PII redaction: email addresses, phone numbers, card numbers and custom patterns, kept from
the model (and from the answer).

:class:`PIIRedactionInterceptor` wraps every model call of the agent, so it sees exactly what
is sent, whatever put it in the history (the user's input, a tool, a hook, a steering
message). Per direction it checks:

- ``apply_to_input``: user messages in the request (default on);
- ``apply_to_tool_results``: tool results in the request (default off);
- ``apply_to_output``: the model's answer, before the agent stores it (default off).

and treats each finding by ``strategy``:

- ``"redact"``: replaced by ``[REDACTED_EMAIL]`` (the type, upper case);
- ``"mask"``: partly hidden, the end kept: ``j***@example.com``, ``****-****-****-1111``,
  ``***-***-4567``; custom patterns are all stars;
- ``"hash"``: replaced by ``[EMAIL:1a2b3c4d]``, the start of a SHA-256 of the value, so equal
  values stay recognisably equal (a hash of a guessable value such as a phone number can be
  reversed by trying them all: it hides the value from the model, it is no encryption);
- ``"block"``: nothing is sent; :class:`PIIDetectedError` says what kind of value was found
  and where (never the value itself). The message that held it stays in the thread, so the
  next call on that thread is blocked again: remove it (``update_state`` with
  ``RemoveMessage(id)``; the error names the id) or go on in a new thread.

Card numbers are 13 to 19 digits (spaces or dashes allowed between them) that pass the Luhn
check, so order numbers and timestamps are left alone. Phone numbers are those written with
separators (``555-123-4567``, ``(555) 123-4567``, ``+44 20 7946 0958``) or as ``+`` and 8 to
15 digits. Custom patterns are regular expressions, each under a name of its own.

The thread's history keeps what was said: only the requests (and, with ``apply_to_output``,
the stored answer) are edited. When the caller streams, the answer's tokens reach it before
the whole answer can be checked; ``apply_to_output`` then redacts the stored answer only.
Other model calls (a summarising hook's, which reads the history) do not pass through it.

Example:
    >>> pii = PIIRedactionInterceptor(strategy="redact", patterns={"ticket": r"TCK-\\d{6}"})
    >>> pii.clean("mail ada@example.com about TCK-123456", "input")
    'mail [REDACTED_EMAIL] about [REDACTED_TICKET]'
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeVar

from graph_agent.agent.interceptors import ModelCall, ModelInterceptor
from graph_agent.graph.errors import GraphRuntimeError
from graph_agent.messages import AssistantMessage, BaseMessage, ToolResponseMessage, UserMessage
from graph_agent.models.base import ModelRequest

Message = TypeVar("Message", bound=BaseMessage)
PIIStrategy = Literal["redact", "mask", "hash", "block"]
Direction = Literal["input", "output", "tool_result"]

_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_CARD = re.compile(r"(?<![\d+-])\d(?:[ -]?\d){12,18}(?![\d-])")
_PHONE = re.compile(
    r"(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?|\d{2,4}[ .-])\d{3,4}[ .-]?\d{3,4}(?!\w)"
    r"|(?<![\w+])\+\d{8,15}(?!\w)"
)
BUILTIN_TYPES = ("email", "credit_card", "phone")
"""The kinds of PII found without a custom pattern (cards before phones: a card number's
groups must not be taken for a phone number)."""
_DESCRIPTIONS = {
    "email": "an email address",
    "credit_card": "a card number",
    "phone": "a phone number",
}
_DIRECTIONS: Mapping[Direction, str] = {
    "input": "a user message",
    "output": "the model's answer",
    "tool_result": "a tool result",
}


class PIIDetectedError(GraphRuntimeError):
    """PII was found where the strategy is ``"block"``; nothing was sent to the model.

    Attributes:
        pii_type: What was found (``"email"``, ``"credit_card"``, ``"phone"`` or a custom
            pattern's name).
        direction: Where: ``"input"``, ``"tool_result"`` or ``"output"``.
    """

    def __init__(self, message: str, *, pii_type: str, direction: Direction) -> None:
        super().__init__(message)
        self.pii_type = pii_type
        self.direction = direction


def luhn_valid(digits: str) -> bool:
    """Whether ``digits`` (digits only) pass the Luhn checksum of card numbers.

    Example:
        >>> luhn_valid("4111111111111111"), luhn_valid("4111111111111112")
        (True, False)
    """
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


class PIIRedactionInterceptor(ModelInterceptor):
    """Finds PII in what is sent to the model (and in its answer) and redacts, masks, hashes
    or blocks it (see the module docstring).

    Args:
        types: Built-in kinds to look for, of ``"email"``, ``"credit_card"``, ``"phone"``.
        patterns: Custom kinds: ``{name: regex}`` (a string or a compiled pattern).
        strategy: ``"redact"``, ``"mask"``, ``"hash"`` or ``"block"``.
        apply_to_input: Check user messages.
        apply_to_output: Check the model's answer.
        apply_to_tool_results: Check tool results.

    Raises:
        ValueError: an unknown type or strategy, a custom name that is a built-in's, an
            invalid regex, or nothing to look for.
    """

    def __init__(
        self,
        types: Iterable[str] = BUILTIN_TYPES,
        *,
        patterns: Mapping[str, str | re.Pattern[str]] | None = None,
        strategy: PIIStrategy = "redact",
        apply_to_input: bool = True,
        apply_to_output: bool = False,
        apply_to_tool_results: bool = False,
    ) -> None:
        chosen = tuple(dict.fromkeys(types))
        unknown = [t for t in chosen if t not in BUILTIN_TYPES]
        if unknown:
            raise ValueError(
                f"PIIRedactionInterceptor: unknown PII types {unknown!r}; the built-in ones are "
                f"{BUILTIN_TYPES!r}, give others as patterns={{'name': r'regex'}}"
            )
        if strategy not in ("redact", "mask", "hash", "block"):
            raise ValueError(
                "PIIRedactionInterceptor: strategy must be 'redact', 'mask', 'hash' or "
                f"'block', got {strategy!r}"
            )
        self.types = tuple(t for t in BUILTIN_TYPES if t in chosen)
        self.patterns = _compiled(patterns or {})
        if not self.types and not self.patterns:
            raise ValueError("PIIRedactionInterceptor: give types and/or patterns to look for")
        self.strategy = strategy
        wanted: dict[Direction, bool] = {
            "input": apply_to_input,
            "output": apply_to_output,
            "tool_result": apply_to_tool_results,
        }
        self.directions = frozenset(direction for direction, on in wanted.items() if on)

    def intercept(self, request: ModelRequest, call_next: ModelCall) -> AssistantMessage:
        request.messages = [self._checked(m, index) for index, m in enumerate(request.messages)]
        reply = call_next(request)
        if "output" in self.directions:
            return self._edited(reply, "output", where="")
        return reply

    def clean(self, text: str, direction: Direction, *, where: str = "") -> str:
        """``text`` with its PII treated by the strategy.

        Raises:
            PIIDetectedError: PII was found and the strategy is ``"block"``.
        """
        for pii_type, pattern in self._detectors():
            treat = functools.partial(
                self._treat, pii_type=pii_type, direction=direction, where=where
            )
            text = pattern.sub(treat, text)
        return text

    def _detectors(self) -> list[tuple[str, re.Pattern[str]]]:
        found: dict[str, re.Pattern[str]] = {"email": _EMAIL, "credit_card": _CARD, "phone": _PHONE}
        return [(t, found[t]) for t in self.types] + list(self.patterns.items())

    def _checked(self, message: BaseMessage, index: int) -> BaseMessage:
        direction: Direction | None = None
        if isinstance(message, UserMessage):
            direction = "input"
        elif isinstance(message, ToolResponseMessage):
            direction = "tool_result"
        if direction is None or direction not in self.directions:
            return message
        return self._edited(
            message, direction, where=f" (request message {index}, id {message.id})"
        )

    def _edited(self, message: Message, direction: Direction, *, where: str) -> Message:
        content: Any = message.content
        if isinstance(content, str):
            cleaned = self.clean(content, direction, where=where)
            return (
                message if cleaned == content else message.model_copy(update={"content": cleaned})
            )
        if isinstance(content, list | tuple):  # content parts: their text is checked
            parts = [self._edited_part(part, direction, where) for part in content]
            if all(new is old for new, old in zip(parts, content, strict=True)):
                return message
            return message.model_copy(update={"content": parts})
        return message

    def _edited_part(self, part: Any, direction: Direction, where: str) -> Any:
        text = getattr(part, "text", None)
        if not isinstance(text, str):
            return part
        cleaned = self.clean(text, direction, where=where)
        return part if cleaned == text else part.model_copy(update={"text": cleaned})

    def _treat(self, match: re.Match[str], pii_type: str, direction: Direction, where: str) -> str:
        value = match.group(0)
        if pii_type == "credit_card" and not luhn_valid(_digits(value)):
            return value
        if self.strategy == "block":
            raise PIIDetectedError(
                f"{_DESCRIPTIONS.get(pii_type, f'a {pii_type!r} match')} was found in "
                f"{_DIRECTIONS[direction]}{where}, and PIIRedactionInterceptor blocks it "
                "(strategy='block'): nothing was sent to the model. Remove it, or use "
                "strategy='redact' to send the message without it",
                pii_type=pii_type,
                direction=direction,
            )
        if self.strategy == "redact":
            return f"[REDACTED_{pii_type.upper()}]"
        if self.strategy == "hash":
            digest = hashlib.sha256(value.encode()).hexdigest()[:8]
            return f"[{pii_type.upper()}:{digest}]"
        return _mask(value, pii_type)

    def __repr__(self) -> str:
        kinds = [*self.types, *self.patterns]
        return f"PIIRedactionInterceptor({kinds}, strategy={self.strategy!r})"


def _mask(value: str, pii_type: str) -> str:
    last_digits = _digits(value)[-4:]
    if pii_type == "email":
        local, _, domain = value.partition("@")
        return f"{local[:1]}***@{domain}"
    if pii_type == "credit_card":
        return f"****-****-****-{last_digits}"
    if pii_type == "phone":
        return f"***-***-{last_digits}"
    return "*" * len(value)


def _digits(value: str) -> str:
    return re.sub(r"\D", "", value)


def _compiled(patterns: Mapping[str, str | re.Pattern[str]]) -> dict[str, re.Pattern[str]]:
    compiled: dict[str, re.Pattern[str]] = {}
    for name, pattern in patterns.items():
        if name in BUILTIN_TYPES:
            raise ValueError(
                f"PIIRedactionInterceptor: the custom pattern name {name!r} is a built-in "
                "type's; give it another name"
            )
        try:
            compiled[name] = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
        except re.error as exc:
            raise ValueError(
                f"PIIRedactionInterceptor: the pattern for {name!r} is not a valid regular "
                f"expression: {exc}"
            ) from exc
    return compiled
