"""LLM tool selector: a (cheaper) model picks the tools that matter before each model call.

An agent with dozens of tools sends every schema with every request: slow, costly, and a
model choosing among many tools chooses worse. :class:`LLMToolSelectorInterceptor` asks a
selection model first, with the user's latest request and each tool's name and
description, for the names of the relevant tools (structured output: ``{"tools": [...]}``),
and sends the agent's model only those, plus ``always_include``.

What the selector may answer, and what happens:

- known names: those tools are sent (at most ``max_tools`` of them, in the selector's
  order of preference), unknown names among them are ignored;
- an empty list: no tool is needed, only ``always_include`` is sent;
- no JSON of that shape, or only unknown names: a bad choice. With
  ``on_invalid="all_tools"`` (the default) the request keeps every tool and a warning is
  logged, so a confused selector costs tokens, never the answer; with ``"error"``,
  :class:`ToolSelectionError` ends the call.

A request with no tools (the summarising call after ``max_iterations``) or no user message is
sent unchanged. The ``final_answer`` tool of ``output_mode="tool"`` is always kept.

The selector sees only the latest user request and the tools, so its choice is kept and
reused while both stay the same: the model calls of one run (tool call after tool call) ask
it once. The last ``cache_size`` choices are kept (per interceptor, in memory).

Example:
    >>> from graph_agent.models import ScriptedChatModel
    >>> selector = LLMToolSelectorInterceptor(
    ...     ScriptedChatModel(['{"tools": ["search"]}']), max_tools=3, always_include=["clock"]
    ... )
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ValidationError

from graph_agent.agent.flows import _strip_fence
from graph_agent.agent.interceptors import ModelCall, ModelInterceptor
from graph_agent.agent.nodes import FINAL_ANSWER_TOOL
from graph_agent.graph.errors import GraphRuntimeError
from graph_agent.messages import AssistantMessage, BaseMessage, SystemMessage, UserMessage
from graph_agent.models.base import ChatModel, ModelRequest, ToolDefinition

logger = logging.getLogger("graph_agent.agent")

SELECTOR_PROMPT = (
    "You choose which tools an assistant needs for the user's request below. Pick only the "
    "tools that are relevant, most relevant first; pick none if no tool is needed."
)


class ToolSelection(BaseModel):
    """What the selection model answers: the names of the tools to offer."""

    tools: list[str]


class ToolSelectionError(GraphRuntimeError):
    """The selection model's answer named no known tool, with ``on_invalid="error"``."""


class LLMToolSelectorInterceptor(ModelInterceptor):
    """Before each model call, lets ``model`` choose the relevant tools of the request.

    Args:
        model: The selection model (often smaller and cheaper than the agent's).
        max_tools: At most this many chosen tools are sent (``None``: all chosen).
        always_include: Tool names always sent, besides the chosen ones (not counted in
            ``max_tools``); a name the request has no tool of is an error.
        on_invalid: What a bad choice does: ``"all_tools"`` (send every tool) or
            ``"error"`` (raise :class:`ToolSelectionError`).
        prompt: The selection model's instruction; the tool list and the answer's shape
            are added to it.
        cache_size: How many choices are kept for reuse (0: ask before every call).

    Raises:
        ValueError: ``max_tools`` is below 1, ``cache_size`` below 0, or ``on_invalid`` is
            not one of the two.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        max_tools: int | None = None,
        always_include: Iterable[str] = (),
        on_invalid: Literal["all_tools", "error"] = "all_tools",
        prompt: str = SELECTOR_PROMPT,
        cache_size: int = 128,
    ) -> None:
        if max_tools is not None and max_tools < 1:
            raise ValueError(f"LLMToolSelectorInterceptor: max_tools must be >= 1, got {max_tools}")
        if cache_size < 0:
            raise ValueError(
                f"LLMToolSelectorInterceptor: cache_size must be >= 0, got {cache_size}"
            )
        if on_invalid not in ("all_tools", "error"):
            raise ValueError(
                "LLMToolSelectorInterceptor: on_invalid must be 'all_tools' (send every tool) "
                f"or 'error' (raise ToolSelectionError), got {on_invalid!r}"
            )
        self.model = model
        self.max_tools = max_tools
        self.always_include = tuple(always_include)
        self.on_invalid = on_invalid
        self.prompt = prompt
        self.cache_size = cache_size
        self._chosen: OrderedDict[tuple[str, tuple[str, ...]], frozenset[str] | None] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def intercept(self, request: ModelRequest, call_next: ModelCall) -> AssistantMessage:
        kept = self._kept(request.tools)
        candidates = [t for t in request.tools if t.name not in kept]
        query = _latest_user_text(request.messages)
        if candidates and query is not None:
            chosen = self._cached_select(candidates, query)
            if chosen is not None:
                request.tools = [t for t in request.tools if t.name in kept or t.name in chosen]
        return call_next(request)

    def _cached_select(
        self, candidates: Sequence[ToolDefinition], query: str
    ) -> frozenset[str] | None:
        key = (query, tuple(t.name for t in candidates))
        with self._lock:
            if key in self._chosen:
                self._chosen.move_to_end(key)
                return self._chosen[key]
        chosen = self.select(candidates, query)
        kept = None if chosen is None else frozenset(chosen)
        if self.cache_size > 0:
            with self._lock:
                self._chosen[key] = kept
                while len(self._chosen) > self.cache_size:
                    self._chosen.popitem(last=False)
        return kept

    def select(self, candidates: Sequence[ToolDefinition], query: str) -> set[str] | None:
        """The names chosen among ``candidates`` for ``query``; ``None``: keep every tool.

        Raises:
            ToolSelectionError: a bad choice, with ``on_invalid="error"``.
        """
        reply = self.model.generate(
            [SystemMessage(self._instruction(candidates)), UserMessage(query)],
            None,
            {"response_format": ToolSelection},
        )
        known = [t.name for t in candidates]
        try:
            named = ToolSelection.model_validate_json(_strip_fence(reply.text)).tools
        except ValidationError:
            return self._invalid(f"an answer that is not {{'tools': [...]}}: {reply.text!r:.120}")
        chosen = list(dict.fromkeys(name for name in named if name in known))
        if named and not chosen:
            return self._invalid(f"only unknown tools {named!r:.120}")
        return set(chosen[: self.max_tools])

    def _kept(self, tools: Sequence[ToolDefinition]) -> set[str]:
        """The names sent whatever the choice: ``always_include`` and ``final_answer``."""
        names = {t.name for t in tools}
        missing = [name for name in self.always_include if name not in names]
        if missing and tools:
            raise ToolSelectionError(
                f"LLMToolSelectorInterceptor: always_include names {missing!r}, but the "
                f"agent has no tool of that name (its tools: {sorted(names)}); fix the names"
            )
        return {*self.always_include, FINAL_ANSWER_TOOL}

    def _instruction(self, candidates: Sequence[ToolDefinition]) -> str:
        listing = "\n".join(f"- {t.name}: {t.description or 'no description'}" for t in candidates)
        limit = f" Pick at most {self.max_tools}." if self.max_tools else ""
        return (
            f"{self.prompt}{limit}\nThe tools:\n{listing}\n"
            'Answer with JSON only: {"tools": ["name", ...]}.'
        )

    def _invalid(self, what: str) -> set[str] | None:
        if self.on_invalid == "error":
            raise ToolSelectionError(
                f"the tool selection model gave {what}; fix its prompt or model, or use "
                "on_invalid='all_tools' to send every tool then"
            )
        logger.warning("tool selection model gave %s; sending every tool", what)
        return None

    def __repr__(self) -> str:
        return f"LLMToolSelectorInterceptor({self.model!r}, max_tools={self.max_tools})"


def _latest_user_text(messages: Sequence[BaseMessage]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            return message.text
    return None
