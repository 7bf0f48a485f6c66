"""The hooks that come with graph_agent: instruction, human approval, limits, summarising."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from graph_agent.agent.hooks import AgentHook, JumpTo, ModelHook
from graph_agent.agent.keys import REJECTED_KEY, RUN_KEY, THREAD_KEY
from graph_agent.agent.nodes import (
    INSTRUCTION_ID,
    counters,
    error_response,
    last_assistant,
    pending_tool_calls,
    rejected_calls,
    rejection_response,
)
from graph_agent.agent.spec import AgentSpec
from graph_agent.graph.errors import GraphRuntimeError, InvalidResumeError
from graph_agent.graph.state import OverAllState, ReplaceAll
from graph_agent.graph.task import interrupt
from graph_agent.graph.types import RunnableConfig
from graph_agent.messages import (
    AssistantMessage,
    BaseMessage,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
    content_text,
)
from graph_agent.models.base import ChatModel

SUMMARY_ID = "summary"
"""How the ids of the messages :class:`SummarizationHook` puts in place of the older
conversation begin (``"summary-<uuid>"``: unique, so two agents' summaries never replace each
other where their messages meet, as in a team's shared history)."""


class AgentLimitError(GraphRuntimeError):
    """A call limit was reached and the hook was set to ``exit_behavior="error"``."""


class InstructionAgentHook(AgentHook):
    """Puts the agent's instruction first in the conversation, once per thread.

    Inserts ``SystemMessage(instruction, id="instruction")`` at the front when no message has
    that id, and replaces it in place when the instruction changed; otherwise does nothing.
    """

    name = "instruction"

    def __init__(self, instruction: str) -> None:
        self.instruction = instruction

    def before_agent(self, state: OverAllState, config: RunnableConfig) -> Any:
        messages = list(state.value("messages", ()))
        current = next((m for m in messages if m.id == INSTRUCTION_ID), None)
        if current is not None:
            if current.text == self.instruction:
                return None
            return {"messages": SystemMessage(self.instruction, id=INSTRUCTION_ID)}
        first = SystemMessage(self.instruction, id=INSTRUCTION_ID)
        return {"messages": ReplaceAll([first, *messages])}


class HumanInTheLoopHook(ModelHook):
    """Asks a human before listed tools run: one interrupt per model answer that calls them.

    The interrupt's value is ``{"tool_calls": [{"id", "name", "arguments", "description"}]}``.
    Resume with ``Command(resume={call_id: decision})`` where a decision is
    ``{"decision": "approve"}``, ``{"decision": "edit", "arguments": {...}}`` or
    ``{"decision": "reject", "reason": "..."}`` (the tool node answers the call with the reason,
    in call order with the other results); ``"approve"`` and ``"reject"`` alone are shorthands.
    Any other decision raises :class:`~graph_agent.graph.errors.InvalidResumeError` naming the
    call, and the approval stays pending for a corrected resume. Calls of other tools in the
    same answer run normally; a rejected call never runs.

    Example:
        >>> hook = HumanInTheLoopHook(approve={"send_email": "sends mail on your behalf"})
    """

    name = "human_in_the_loop"
    gates_tools = True
    """Hooks that run before it in the afterModel chain may not jump to TOOL (build_graph)."""

    def __init__(self, approve: Mapping[str, str], name: str | None = None) -> None:
        self.approve = dict(approve)
        if name:
            self.name = name

    def after_model(self, state: OverAllState, config: RunnableConfig) -> Any:
        messages = state.value("messages", ())
        gated = [call for call in pending_tool_calls(messages) if call.name in self.approve]
        if not gated:
            return None
        decisions = interrupt({"tool_calls": [self._shown(call) for call in gated]})
        return self._apply(state, gated, decisions)

    def _shown(self, call: Any) -> dict[str, Any]:
        """A gated call as the human sees it; arguments that were not valid JSON come as the
        model sent them (``raw_arguments``), since ``arguments`` is then empty."""
        shown = {
            "id": call.id,
            "name": call.name,
            "arguments": call.arguments,
            "description": self.approve[call.name],
        }
        if call.has_malformed_arguments:
            shown["raw_arguments"] = call.raw_arguments
        return shown

    def _apply(self, state: OverAllState, gated: list[Any], decisions: Any) -> dict[str, Any]:
        if not isinstance(decisions, Mapping):
            raise InvalidResumeError(
                "resume a tool approval with a dict {call_id: decision}, where a decision is "
                f"{_DECISION_SHAPES}; got {type(decisions).__name__}"
            )
        missing = [call.id for call in gated if call.id not in decisions]
        if missing:
            names = ", ".join(f"{c.id} ({c.name})" for c in gated if c.id in missing)
            raise InvalidResumeError(
                f"no decision for the tool call(s) {names}: resume with "
                f"Command(resume={{call_id: decision}}), where a decision is {_DECISION_SHAPES}"
            )
        _, message = last_assistant(state.value("messages", ()))
        assert message is not None
        edited = {}
        rejections: dict[str, str] = {}
        for call in gated:
            kind, detail = _decision(call, decisions[call.id])
            if kind == "edit":
                edited[call.id] = detail
            elif kind == "reject":
                rejections[call.id] = detail
        update: dict[str, Any] = {}
        if edited:
            calls = [
                call.model_copy(update={"arguments": edited[call.id], "raw_arguments": None})
                if call.id in edited
                else call
                for call in message.tool_calls
            ]
            update["messages"] = message.model_copy(update={"tool_calls": calls})  # in place
        if rejections:
            # the tool node answers these with the reason, in call order, and never runs them;
            # kept with the message id so that they apply to these calls only (another approval
            # hook may have rejected other calls of the same message before)
            earlier = rejected_calls(state, message)
            update[REJECTED_KEY] = {message.id: {**earlier, **rejections}}
        return update


_DECISION_SHAPES = (
    "'approve', 'reject', {'decision': 'approve'}, {'decision': 'edit', 'arguments': {...}} or "
    "{'decision': 'reject', 'reason': '...'}"
)
"""The decisions a human may give for one gated tool call (named in every refusal)."""


def _decision(call: Any, decision: Any) -> tuple[str, Any]:
    """``("approve", None)``, ``("edit", arguments)`` or ``("reject", reason)`` for one call.

    A bare string is shorthand for ``approve`` and ``reject`` (no reason); an edit needs its
    new arguments, so it has only the dict form.
    """
    where = f"tool call {call.id} ({call.name})"
    if isinstance(decision, str):
        kind: Any = decision
        if kind == "edit":
            raise InvalidResumeError(
                f"the edit of {where} needs its new arguments: {{'decision': 'edit', "
                f"'arguments': {{...}}}}; a decision is {_DECISION_SHAPES}"
            )
    elif isinstance(decision, Mapping):
        kind = decision.get("decision")
    else:
        raise InvalidResumeError(
            f"the decision for {where} is {_short(decision)} ({type(decision).__name__}); a "
            f"decision is {_DECISION_SHAPES}"
        )
    if kind == "approve":
        return "approve", None
    if kind == "reject":
        reason = decision.get("reason") if isinstance(decision, Mapping) else None
        return "reject", str(reason or "no reason given")
    if kind == "edit":
        arguments = decision.get("arguments")
        if not isinstance(arguments, Mapping):
            raise InvalidResumeError(
                f"the edit of {where} needs a dict of arguments: {{'decision': 'edit', "
                f"'arguments': {{...}}}}, got arguments={_short(arguments)}"
            )
        return "edit", dict(arguments)
    raise InvalidResumeError(
        f"unknown decision {_short(kind)} for {where}; a decision is {_DECISION_SHAPES}"
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _limit(hook: str, argument: str, value: object) -> int | None:
    """``value`` checked as a call limit: an int of 0 or more (0: no call at all), or ``None``
    for no limit."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{hook}: {argument} must be an int of 0 or more (or None for no limit), got "
            f"{value!r} ({type(value).__name__})"
        )
    if value < 0:
        raise ValueError(
            f"{hook}: {argument} must be an int of 0 or more (or None for no limit), got {value!r}"
        )
    return value


def _exit_behavior(hook: str, value: object) -> Literal["end", "error"]:
    if value == "end":
        return "end"
    if value == "error":
        return "error"
    raise ValueError(
        f"{hook}: exit_behavior must be 'end' (stop the run with a message) or 'error' "
        f"(raise AgentLimitError), got {value!r}"
    )


class ModelCallLimitHook(ModelHook):
    """Stops the run when the model was called ``run_limit`` times in this run or
    ``thread_limit`` times on the thread: it ends with a message (``"end"``) or raises
    :class:`AgentLimitError` (``"error"``).

    Raises:
        TypeError: a limit is not an int.
        ValueError: no limit is given, a limit is negative, or ``exit_behavior`` is neither
            ``"end"`` nor ``"error"``.
    """

    name = "model_call_limit"
    can_jump_to: ClassVar[tuple[JumpTo, ...]] = (JumpTo.END,)

    def __init__(
        self,
        thread_limit: int | None = None,
        run_limit: int | None = None,
        exit_behavior: Literal["end", "error"] = "end",
    ) -> None:
        if thread_limit is None and run_limit is None:
            raise ValueError("ModelCallLimitHook needs thread_limit and/or run_limit")
        self.thread_limit = _limit("ModelCallLimitHook", "thread_limit", thread_limit)
        self.run_limit = _limit("ModelCallLimitHook", "run_limit", run_limit)
        self.exit_behavior = _exit_behavior("ModelCallLimitHook", exit_behavior)

    def before_model(self, state: OverAllState, config: RunnableConfig) -> Any:
        reached = _limit_reached(
            counters(state, RUN_KEY)["model_calls"],
            counters(state, THREAD_KEY)["model_calls"],
            self.run_limit,
            self.thread_limit,
        )
        if reached is None:
            return None
        text = f"Stopped: the model call limit ({reached}) was reached."
        if self.exit_behavior == "error":
            raise AgentLimitError(text)
        return {
            "messages": AssistantMessage(text, finish_reason="model_call_limit"),
            "jump_to": JumpTo.END,
        }


class ToolCallLimitHook(ModelHook):
    """Stops the run before tool calls would exceed ``run_limit`` (this run) or
    ``thread_limit`` (the thread), for one tool (``tool_name``) or all: the pending calls are
    answered with an error and the run ends with a message (``"end"``), or
    :class:`AgentLimitError` is raised (``"error"``).

    Calls a human rejected (by an approval hook that ran before this one in the afterModel
    chain) never run, so they are not counted; when the limit ends the run, they keep the
    human's reason as their result. A ``tool_name`` the agent has no tool for is refused when
    the agent's graph is built.

    Raises:
        TypeError: a limit is not an int, or ``tool_name`` not a string.
        ValueError: no limit is given, a limit is negative, ``tool_name`` is empty, or
            ``exit_behavior`` is neither ``"end"`` nor ``"error"``.
    """

    name = "tool_call_limit"
    can_jump_to: ClassVar[tuple[JumpTo, ...]] = (JumpTo.END,)

    def __init__(
        self,
        tool_name: str | None = None,
        thread_limit: int | None = None,
        run_limit: int | None = None,
        exit_behavior: Literal["end", "error"] = "end",
    ) -> None:
        if thread_limit is None and run_limit is None:
            raise ValueError("ToolCallLimitHook needs thread_limit and/or run_limit")
        if tool_name is not None and not isinstance(tool_name, str):
            raise TypeError(
                f"ToolCallLimitHook: tool_name must be a tool's name (or None for all tools), "
                f"got {tool_name!r} ({type(tool_name).__name__})"
            )
        if tool_name == "":
            raise ValueError("ToolCallLimitHook: tool_name is empty; use None to limit all tools")
        self.tool_name = tool_name
        self.thread_limit = _limit("ToolCallLimitHook", "thread_limit", thread_limit)
        self.run_limit = _limit("ToolCallLimitHook", "run_limit", run_limit)
        self.exit_behavior = _exit_behavior("ToolCallLimitHook", exit_behavior)
        if tool_name:
            self.name = f"tool_call_limit_{tool_name}"

    def _count(self, state: OverAllState, key: str) -> int:
        made: dict[str, int] = counters(state, key)["tool_calls"]
        if self.tool_name is None:
            return sum(made.values())
        return made.get(self.tool_name, 0)

    def after_model(self, state: OverAllState, config: RunnableConfig) -> Any:
        messages = state.value("messages", ())
        pending = pending_tool_calls(messages)
        if not pending:
            return None
        _, message = last_assistant(messages)
        assert message is not None
        # a call a human rejected (an approval hook that ran before this one) never runs
        rejected = rejected_calls(state, message)
        wanted = [
            c
            for c in pending
            if c.id not in rejected and (self.tool_name is None or c.name == self.tool_name)
        ]
        if not wanted:
            return None
        reached = _limit_reached(
            self._count(state, RUN_KEY) + len(wanted) - 1,
            self._count(state, THREAD_KEY) + len(wanted) - 1,
            self.run_limit,
            self.thread_limit,
        )
        if reached is None:
            return None
        which = f"{self.tool_name!r} " if self.tool_name else ""
        text = f"Stopped: the {which}tool call limit ({reached}) was reached."
        if self.exit_behavior == "error":
            raise AgentLimitError(text)
        answers: list[BaseMessage] = [
            rejection_response(call, rejected[call.id])
            if call.id in rejected
            else error_response(call, f"Error: {text}")
            for call in pending
        ]
        answers.append(AssistantMessage(text, finish_reason="tool_call_limit"))
        update: dict[str, Any] = {"messages": answers, "jump_to": JumpTo.END}
        if state.value(REJECTED_KEY) is not None:
            update[REJECTED_KEY] = None  # answered here, as the tool node would have
        return update


def _limit_reached(
    run_count: int, thread_count: int, run_limit: int | None, thread_limit: int | None
) -> int | None:
    if run_limit is not None and run_count >= run_limit:
        return run_limit
    if thread_limit is not None and thread_count >= thread_limit:
        return thread_limit
    return None


class SummarizationHook(ModelHook):
    """Keeps the conversation under ``max_tokens`` by summarising its older part.

    Before a model call, when the estimated size (about four characters per token) exceeds
    ``max_tokens``, every message but the instruction and the last ``messages_to_keep`` is
    replaced by one summary written by ``model`` (by default the model of the agent running the
    hook, also when one instance serves several agents). The cut never
    separates a tool call from its results: every kept result keeps the assistant message that
    made its call, also when other messages (a hook's note) sit between them. When nothing but
    the earlier summary would be summarised (the model is asked again with no new messages),
    the history is left as it is.
    """

    name = "summarization"
    prompt = (
        "Summarise the conversation below for the assistant that will continue it. Keep every "
        "fact, number, decision, tool result and open question that may matter later; drop "
        "pleasantries. Write plain prose, at most a few paragraphs."
    )

    def __init__(
        self, max_tokens: int, messages_to_keep: int = 20, model: ChatModel | None = None
    ) -> None:
        self.max_tokens = max_tokens
        self.messages_to_keep = messages_to_keep
        self.model = model

    def before_model(
        self, state: OverAllState, config: RunnableConfig, *, agent: AgentSpec | None = None
    ) -> Any:
        messages = list(state.value("messages", ()))
        if estimate_tokens(messages) <= self.max_tokens:
            return None
        head = [m for m in messages[:1] if m.id == INSTRUCTION_ID]
        body = messages[len(head) :]
        cut = _cut_keeping_calls(body, max(0, len(body) - self.messages_to_keep))
        old, kept = body[:cut], body[cut:]
        if all(m.id.startswith(f"{SUMMARY_ID}-") for m in old):
            return None  # nothing new: summarising the summary alone would only cost a call
        model = self.model or (agent.model if agent is not None else None)
        if model is None:
            raise GraphRuntimeError("SummarizationHook needs a model: pass model=...")
        transcript = "\n".join(f"{_role(m)}: {_render(m)}" for m in old)
        summary = model.generate([SystemMessage(self.prompt), UserMessage(transcript)])
        note = UserMessage(
            f"Summary of the earlier conversation:\n{summary.text}",
            id=f"{SUMMARY_ID}-{uuid.uuid4().hex}",
        )
        return {"messages": ReplaceAll([*head, note, *kept])}


def _cut_keeping_calls(body: list[BaseMessage], cut: int) -> int:
    """``cut`` moved back until every tool result from ``cut`` on has its call there too.

    A result whose call (the assistant message whose ``tool_calls`` own it) was summarised away
    would reach the model alone, which OpenAI-compatible servers reject. Walking from the end
    also covers the results of a call that an earlier move brought into the kept part.
    """
    index = len(body) - 1
    while index >= cut:
        message = body[index]
        if isinstance(message, ToolResponseMessage):
            cut = min(cut, _call_index(body, index, message.tool_call_id))
        index -= 1
    return cut


def _call_index(body: list[BaseMessage], result_index: int, call_id: str) -> int:
    """The index of the assistant message before ``result_index`` that made call ``call_id``;
    ``result_index`` itself for a result with no such message (nothing to keep with it)."""
    for index in range(result_index - 1, -1, -1):
        message = body[index]
        if isinstance(message, AssistantMessage) and any(
            c.id == call_id for c in message.tool_calls
        ):
            return index
    return result_index


def estimate_tokens(messages: list[BaseMessage]) -> int:
    """A rough token count: about four characters per token, plus a little per message."""
    return sum(4 + len(_render(m)) // 4 for m in messages)


def _role(message: BaseMessage) -> str:
    return str(getattr(message, "role", type(message).__name__))


def _render(message: BaseMessage) -> str:
    # an image, audio or file part shows as its placeholder, e.g. [image: image/png, 12 KB]
    text = content_text(message.content, placeholders=True)
    if isinstance(message, AssistantMessage) and message.tool_calls:
        calls = "; ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
        return f"{text} [called {calls}]".strip()
    if isinstance(message, ToolResponseMessage):
        return f"[{message.name} result] {text}"
    return text
