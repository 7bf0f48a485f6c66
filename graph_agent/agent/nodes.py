"""The agent's two working nodes, ``__model__`` and ``__tool__``, and the pending-call filter.

Private state keys the nodes keep (hidden from ``data()`` and snapshots):
``_agent_run`` (counters of the current run: model calls, iterations, tool calls per tool;
reset by new input, kept across resumes) and ``_agent_thread`` (the same, for the thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import functools
import json
import uuid
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from graph_agent.agent.interceptors import (
    ToolCallRequest,
    acall_model,
    chain_model,
    chain_tool,
    run_model_call,
    stream_to_caller,
)
from graph_agent.agent.keys import (
    JUMP_KEY,
    REJECTED_KEY,
    RUN_INPUT_KEY,
    RUN_KEY,
    STEERED_KEY,
    THREAD_KEY,
)
from graph_agent.agent.return_direct import direct_answer
from graph_agent.agent.steering import take_steering
from graph_agent.agent.templates import fill, is_template
from graph_agent.agent.tool_commands import (
    ToolCommandError,
    ToolUpdate,
    command_updates,
    from_command,
)
from graph_agent.agent.watched import (
    awatched_model_call,
    awatched_tool_call,
    watched_model_call,
    watched_tool_call,
)
from graph_agent.graph.concurrency import (
    run_on_caller_loop,
    shared_pool,
    to_thread,
    wait_delivering,
)
from graph_agent.graph.errors import (
    GraphCancelledError,
    GraphInterrupted,
    GraphRuntimeError,
    ParentCommand,
    exception_text,
)
from graph_agent.graph.state import OverAllState
from graph_agent.graph.task import InterruptScope, TaskContext
from graph_agent.graph.types import Command, RunnableConfig
from graph_agent.messages import (
    AssistantMessage,
    BaseMessage,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from graph_agent.models.base import ModelRequest, ToolDefinition
from graph_agent.node import DualNode, Updates
from graph_agent.tools import Tool, ToolContext, result_to_content

if TYPE_CHECKING:
    from graph_agent.agent.spec import NodeSettings

INSTRUCTION_ID = "instruction"
"""The id of the message that holds the agent's instruction, first in its history."""
SUMMARIZE_PROMPT = (
    "You have reached the maximum number of tool-calling steps for this request. Do not call "
    "any more tools. Using what you have found so far, give your best final answer, and say "
    "briefly what is still open."
)
INTERRUPTED_RESULT = (
    "Error: this tool call was interrupted before it returned a result; it did not complete."
)
TOOL_RECORD = "tool:"
"""Prefix of the task record the tool node keeps per finished call (``tool:<call id>``)."""
TOOL_UPDATE_RECORD = "tool-update:"
"""Prefix of the record of what a call's ``Command`` wrote besides its result
(``tool-update:<call id>``), kept before the result so a replayed call loses nothing."""
FINAL_ANSWER_TOOL = "final_answer"
"""The tool the model answers through when ``output_mode="tool"``."""


class StructuredOutputError(GraphRuntimeError):
    """The model's final answer did not match ``output_schema``, also after one correction."""


def counters(state: OverAllState, key: str) -> dict[str, Any]:
    """A copy of the run or thread counters (model_calls, iterations, tool_calls, and tokens:
    the total tokens the model's answers report in their ``usage``)."""
    value = state.value(key)
    result: dict[str, Any] = {"model_calls": 0, "iterations": 0, "tool_calls": {}, "tokens": 0}
    if value:
        result.update(value)
        result["tool_calls"] = dict(result["tool_calls"])
    return result


def tokens_used(message: BaseMessage) -> int:
    """The tokens an assistant message's ``usage`` reports (0 without usage)."""
    usage = getattr(message, "usage", None)
    if usage is None:
        return 0
    return int(usage.total_tokens or usage.prompt_tokens + usage.completion_tokens)


def last_assistant(messages: Sequence[BaseMessage]) -> tuple[int, AssistantMessage | None]:
    """The index and the last assistant message (``-1, None`` when there is none)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AssistantMessage):
            return index, message
    return -1, None


def run_start(messages: Sequence[BaseMessage], earlier: Sequence[BaseMessage]) -> str | None:
    """The value of :data:`RUN_INPUT_KEY` for a run whose input adds ``messages`` to a thread
    that holds ``earlier``."""
    last = messages[-1] if messages else earlier[-1] if earlier else None
    return last.id if last is not None else None


def run_answer(state: OverAllState) -> AssistantMessage | None:
    """The last assistant message the current run added, or ``None`` when it added none.

    Messages before the run's input (earlier turns) are never taken for this run's answer.
    When a hook removed the input message (a rewrite of the history), every message counts.
    """
    messages: Sequence[BaseMessage] = state.value("messages", ())
    start = state.value(RUN_INPUT_KEY)
    if start is not None:
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].id == start:
                messages = messages[index + 1 :]
                break
    return last_assistant(messages)[1]


def pending_tool_calls(messages: Sequence[BaseMessage]) -> list[ToolCall]:
    """Calls of the last assistant message that have no result yet.

    A call a human rejected has no result until the tool node answers it with the reason
    (the rejection is held under :data:`REJECTED_KEY`, read with :func:`rejected_calls`), so
    it is still listed here; the tool node answers it without running it. Code that needs the
    calls that will actually run leaves out those in :func:`rejected_calls`.
    """
    index, message = last_assistant(messages)
    if message is None or not message.tool_calls:
        return []
    answered = {m.tool_call_id for m in messages[index + 1 :] if isinstance(m, ToolResponseMessage)}
    return [call for call in message.tool_calls if call.id not in answered]


def rejected_calls(state: OverAllState, message: AssistantMessage) -> Mapping[str, str]:
    """The reasons a human gave for rejecting calls of ``message``, by call id."""
    value = state.value(REJECTED_KEY)
    if not isinstance(value, Mapping):
        return {}
    found = value.get(message.id)
    if isinstance(found, Mapping):
        return found
    # a checkpoint written before rejections were keyed by message: {call id: reason}; kept
    # so that an upgrade never runs a call a human rejected (the tool node then drops it)
    return {k: v for k, v in value.items() if isinstance(v, str)}


def unique_call_ids(reply: AssistantMessage, history: Sequence[BaseMessage]) -> AssistantMessage:
    """Replace missing or reused tool-call ids by fresh ones (the model's id kept as raw_id)."""
    if not reply.tool_calls:
        return reply
    seen: set[str] = set()
    for message in history:
        if isinstance(message, AssistantMessage):
            seen.update(call.id for call in message.tool_calls)
    calls = []
    changed = False
    for call in reply.tool_calls:
        if not call.id or call.id in seen:
            call = call.model_copy(
                update={"id": f"call_{uuid.uuid4().hex[:24]}", "raw_id": call.id}
            )
            changed = True
        seen.add(call.id)
        calls.append(call)
    return reply.model_copy(update={"tool_calls": calls}) if changed else reply


@dataclass(frozen=True, kw_only=True)
class FinalAnswerTool:
    """The ``final_answer`` tool offered in ``output_mode="tool"``: its parameters are the
    output schema's JSON schema. The model node handles its calls; the tool node never sees
    them."""

    name: str = FINAL_ANSWER_TOOL
    description: str = (
        "Give your final answer. Call this once, when you have everything you need, with the "
        "answer as the arguments; do not call other tools in the same turn."
    )
    parameters: dict[str, Any]


@dataclass(kw_only=True)
class _Verdict:
    """What an answer means for structured output.

    ``value`` is set for a valid final answer, ``error`` (with ``feedback`` to send back) for
    an invalid one; with neither, the answer asks for tools and the loop goes on.
    """

    reply: AssistantMessage
    value: BaseModel | None = None
    error: ValidationError | None = None
    feedback: list[BaseMessage] = field(default_factory=list)


class ModelNode(DualNode):
    """``__model__``: one model call through the interceptors, streamed when the caller streams.

    The instruction's ``{key}`` placeholders are filled from the state for each call, and the
    final answer's text is stored at ``output_key``.

    After ``max_iterations`` calls that asked for tools, the next call gets no tools and a
    summarising instruction; its answer carries ``finish_reason="max_iterations"``.

    With an ``output_schema``, the final answer is validated and stored at ``output_key``: it
    is asked for with ``response_format``, or (``output_mode="tool"``) through a
    ``final_answer`` tool whose call is stored as an answer holding the validated JSON, not as
    a tool call. An invalid answer is fed back once; a second one raises
    :class:`StructuredOutputError`.
    """

    def __init__(self, agent: NodeSettings, *, takes_steering: bool = True) -> None:
        self.agent = agent
        """The agent as it was when it built this node's graph (model, tools, options): a run
        keeps them while the agent's change for the next run."""
        self.toolkit = agent.toolkit
        self.takes_steering = takes_steering
        """Whether this node is the loop entry, which delivers steering messages (see
        :mod:`graph_agent.agent.steering`); with beforeModel hooks the first of them is."""
        instruction = agent.instruction
        self.instruction_template = (
            instruction if instruction is not None and is_template(instruction) else None
        )
        schema = agent.output_schema
        self.final_tool = (
            FinalAnswerTool(parameters=schema.model_json_schema())
            if schema is not None and agent.output_mode == "tool"
            else None
        )

    def __call__(self, state: OverAllState, config: RunnableConfig) -> dict[str, Any]:
        flow = self._flow(state, self._steered(state, config))
        request = next(flow)
        try:
            while True:
                request = flow.send(self._call(request, config))
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    async def acall(self, state: OverAllState, config: RunnableConfig) -> dict[str, Any]:
        """:meth:`__call__` on the caller's event loop: the model's async API, no thread."""
        flow = self._flow(state, self._steered(state, config))
        request = next(flow)
        try:
            while True:
                request = flow.send(await self._acall(request, config))
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    def _steered(self, state: OverAllState, config: RunnableConfig) -> tuple[UserMessage, ...]:
        """The messages ``agent.steer`` queued for this thread that it does not hold yet
        (see :mod:`graph_agent.agent.steering`); they stay queued until it does."""
        return take_steering(self.agent.steering, state, config) if self.takes_steering else ()

    def _flow(
        self, state: OverAllState, steered: Sequence[BaseMessage] = ()
    ) -> Generator[ModelRequest, AssistantMessage, dict[str, Any]]:
        """The node's work, for both faces: yields each request to send to the model, is sent
        its reply, and returns the state update. ``steered`` messages are sent after the
        history and added to the thread before the reply."""
        agent = self.agent
        history = [*self._with_instruction_filled(state), *steered]
        run, thread = counters(state, RUN_KEY), counters(state, THREAD_KEY)
        summarizing = bool(self.toolkit) and run["iterations"] >= agent.max_iterations
        reply = yield self._request(history, summarizing)
        reply = unique_call_ids(reply, history)
        new_messages: list[BaseMessage] = []
        update: dict[str, Any] = {}
        if summarizing:
            reply = reply.model_copy(update={"tool_calls": [], "finish_reason": "max_iterations"})
            update = self._summary_output(reply)
        elif agent.output_schema is not None and self._is_final(reply):
            reply, new_messages, update = yield from self._structured(history, reply)
        elif not reply.tool_calls:
            update = {agent.output_key: reply.text}
        tokens = sum(tokens_used(m) for m in (*new_messages, reply))
        for counter in (run, thread):
            counter["model_calls"] += 1 + bool(new_messages)
            counter["iterations"] += bool(reply.tool_calls)
            counter["tokens"] += tokens
        messages = [*steered, *new_messages, reply]
        update = {"messages": messages, RUN_KEY: run, THREAD_KEY: thread, **update}
        if steered:
            update[STEERED_KEY] = tuple(m.id for m in steered)
        return update

    def _with_instruction_filled(self, state: OverAllState) -> list[BaseMessage]:
        """The history as the model sees it: the instruction's ``{key}`` placeholders filled
        from the state now (the stored message keeps the template)."""
        history = list(state.value("messages", ()))
        template = self.instruction_template
        if template is None or not history or history[0].id != INSTRUCTION_ID:
            return history
        if history[0].text != template:  # a hook rewrote it: it is no longer the template
            return history
        text = fill(template, state, agent=self.agent.name)
        return [history[0].model_copy(update={"content": text}), *history[1:]]

    def _request(self, messages: list[BaseMessage], summarizing: bool) -> ModelRequest:
        """A fresh request: interceptors may edit it without touching the next one."""
        agent = self.agent
        options = dict(agent.model_options)
        if summarizing:
            # no tools and no response_format: the summary is free text (validated if it fits)
            summary = [*messages, UserMessage(SUMMARIZE_PROMPT)]
            return ModelRequest(messages=summary, tools=[], options=options)
        tools: list[ToolDefinition] = list(self.toolkit)
        if self.final_tool is not None:
            tools.append(self.final_tool)
        elif agent.output_schema is not None:
            options.setdefault("response_format", agent.output_schema)
        return ModelRequest(messages=list(messages), tools=tools, options=options)

    def _call(self, request: ModelRequest, config: RunnableConfig) -> AssistantMessage:
        task = config.task
        if task is not None:
            task.check_lease()  # a run that lost its thread calls no model (the other run does)
        model = self.agent.model
        streaming = task is not None and task.streaming

        def innermost(final: ModelRequest) -> AssistantMessage:
            if streaming:
                return watched_model_call(
                    task, model, final, True, lambda: stream_to_caller(model, final)
                )
            return watched_model_call(
                task,
                model,
                final,
                False,
                lambda: model.generate(final.messages, final.tools, final.options),
            )

        chain = chain_model(self.agent.model_interceptors, innermost)
        return self._checked(run_model_call(chain, request, streaming=streaming), task)

    async def _acall(self, request: ModelRequest, config: RunnableConfig) -> AssistantMessage:
        """:meth:`_call` through the model's ``agenerate``/``astream``. Model interceptors are
        sync (they may sleep between retries), as are models without the async API: with
        either, the call runs as under ``invoke``, on the shared worker pool."""
        model = self.agent.model
        if self.agent.model_interceptors or not _has_async_api(model):
            return await to_thread(self._call, request, config)
        task = config.task
        if task is not None:
            task.check_lease()
        streaming = task is not None and task.streaming
        reply = await awatched_model_call(
            task,
            model,
            request,
            streaming,
            lambda: acall_model(model, request, streaming=streaming),
        )
        return self._checked(reply, task)

    @staticmethod
    def _checked(reply: Any, task: TaskContext | None) -> AssistantMessage:
        if not isinstance(reply, AssistantMessage):
            raise TypeError(
                f"the model (or a model interceptor) returned {type(reply).__name__}; it must "
                "return an AssistantMessage"
            )
        if task is not None and reply.usage is not None:
            task.add_usage(reply.usage)
        return reply

    def _is_final(self, reply: AssistantMessage) -> bool:
        """Whether ``reply`` is meant as the final answer (and so is validated)."""
        if not reply.tool_calls:
            return True
        return self.final_tool is not None and any(
            call.name == FINAL_ANSWER_TOOL for call in reply.tool_calls
        )

    def _structured(
        self, history: list[BaseMessage], reply: AssistantMessage
    ) -> Generator[
        ModelRequest, AssistantMessage, tuple[AssistantMessage, list[BaseMessage], dict[str, Any]]
    ]:
        """Validate the final answer against ``output_schema``; feed an error back once (a
        request yielded, as in :meth:`_flow`).

        Returns the answer to store, the messages before it (the rejected answer and its
        feedback, when there was a second call) and the state update with the output.
        """
        agent = self.agent
        first = self._judge(reply)
        if first.error is None:
            return first.reply, [], self._output(first.value)
        sent = [first.reply, *first.feedback]
        retry = self._request([*history, *sent], summarizing=False)
        second = self._judge(unique_call_ids((yield retry), [*history, *sent]))
        if second.error is not None:
            assert agent.output_schema is not None
            raise StructuredOutputError(
                f"agent {agent.name!r}: the model's answer does not match "
                f"{agent.output_schema.__name__} after one correction: "
                f"{_short_errors(second.error)}"
            ) from second.error
        return second.reply, sent, self._output(second.value)

    def _judge(self, reply: AssistantMessage) -> _Verdict:
        schema = self.agent.output_schema
        assert schema is not None
        final_calls: list[ToolCall] = []
        other_calls: list[ToolCall] = []
        for call in reply.tool_calls:
            is_final = self.final_tool is not None and call.name == FINAL_ANSWER_TOOL
            (final_calls if is_final else other_calls).append(call)
        if other_calls:
            # Not done yet: the other calls run and the model answers again. A final answer
            # given in the same turn cannot have seen their results, so it is dropped.
            if final_calls:
                reply = reply.model_copy(update={"tool_calls": other_calls})
            return _Verdict(reply=reply)
        if final_calls:
            return self._judge_final_call(reply, final_calls, schema)
        try:
            return _Verdict(reply=reply, value=schema.model_validate_json(_json_text(reply)))
        except ValidationError as error:
            how = (
                f"Call the {FINAL_ANSWER_TOOL} tool with your answer as its arguments."
                if self.final_tool is not None
                else "Answer again with only the JSON object."
            )
            feedback = UserMessage(
                "Your answer did not match the required JSON schema. Errors:\n"
                f"{_short_errors(error)}\n{how}"
            )
            return _Verdict(reply=reply, error=error, feedback=[feedback])

    def _judge_final_call(
        self, reply: AssistantMessage, final_calls: list[ToolCall], schema: type[BaseModel]
    ) -> _Verdict:
        """A ``final_answer`` call: valid, it becomes an answer whose text is the JSON (no
        tool call is stored); invalid, each such call is answered with the errors."""
        call = final_calls[0]
        arguments = call.raw_arguments if call.has_malformed_arguments else None
        try:
            value = schema.model_validate_json(arguments or json.dumps(call.arguments))
        except ValidationError as error:
            text = (
                f"Error: the arguments of {FINAL_ANSWER_TOOL} do not match the required schema: "
                f"{_short_errors(error)}. Call {FINAL_ANSWER_TOOL} again with corrected arguments."
            )
            feedback: list[BaseMessage] = [error_response(c, text) for c in final_calls]
            return _Verdict(reply=reply, error=error, feedback=feedback)
        finish_reason = "stop" if reply.finish_reason == "tool_calls" else reply.finish_reason
        answer = reply.model_copy(
            update={
                "content": value.model_dump_json(by_alias=True),
                "tool_calls": [],
                "finish_reason": finish_reason,
            }
        )
        return _Verdict(reply=answer, value=value)

    def _output(self, value: BaseModel | None) -> dict[str, Any]:
        return {} if value is None else {self.agent.output_key: value}

    def _summary_output(self, reply: AssistantMessage) -> dict[str, Any]:
        """The summary's output when it happens to match the schema (never an error)."""
        schema = self.agent.output_schema
        if schema is None:
            return {self.agent.output_key: reply.text}
        try:
            return self._output(schema.model_validate_json(_json_text(reply)))
        except ValidationError:
            return {}


def _json_text(reply: AssistantMessage) -> str:
    """The JSON in an answer, without a Markdown code fence around it."""
    text = reply.text.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text.strip()


def _short_errors(error: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in error.errors()[:8]
    )


@dataclass(kw_only=True)
class _ToolStep:
    """One pass of the tool node: the calls it answers and what it knows of them."""

    calls: list[ToolCall]
    message: AssistantMessage
    """The assistant message that made the calls."""
    rejected: Mapping[str, str]
    over_limit: dict[str, ToolResponseMessage]
    """The error results of calls beyond ``max_tool_calls_per_step`` (they do not run)."""
    updates: dict[str, ToolUpdate] = field(default_factory=dict)
    """What each call's ``Command`` wrote besides its result, by call id."""


class ToolNode(DualNode):
    """``__tool__``: runs the pending calls of the last assistant message, in parallel.

    Each finished call is recorded in the task (``config.task.record``), so after a crash or a
    resume a call whose result was recorded is not run again. Unknown tools, invalid arguments,
    exceptions and timeouts become error results the model reads; results are appended in call
    order, matched by call id.

    A tool may return ``Command(update=..., goto=...)``: its result is the
    ``ToolResponseMessage`` for the call in ``update["messages"]`` (else one is made from the
    update), its other messages follow the step's results, and its other keys merge by their
    strategies in call order (two calls writing one replaced key is an
    :class:`InvalidUpdateError`); ``goto=END`` ends the run after the step (afterAgent hooks
    still run), ``goto="model"`` is the usual way on.
    """

    def __init__(self, agent: NodeSettings, private_keys: frozenset[str]) -> None:
        self.agent = agent
        self.toolkit = agent.toolkit
        """The tools this node runs: the ones the graph's model node offers (see
        :class:`ModelNode`)."""
        self.private_keys = private_keys
        """The private keys hooks declare: the only ones a tool's Command may write."""

    def __call__(
        self, state: OverAllState, config: RunnableConfig
    ) -> dict[str, Any] | Updates | None:
        step = self._plan(state)
        if step is None:
            return None
        run = [
            (lambda call=call: step.over_limit[call.id])
            if call.id in step.over_limit
            else (lambda call=call: self._run_one(call, step, state, config))
            for call in step.calls
        ]
        if len(run) == 1:
            results = [run[0]()]
        else:
            results = _in_parallel(run, max(1, self.agent.max_parallel_tools))
        return self._update(state, step, results)

    async def acall(
        self, state: OverAllState, config: RunnableConfig
    ) -> dict[str, Any] | Updates | None:
        """:meth:`__call__` on the caller's event loop: async tools through :meth:`Tool.arun`
        (off this loop with a timeout, unless made with ``on_caller_loop=True``), sync ones on
        the shared worker pool."""
        step = self._plan(state)
        if step is None:
            return None
        run = [
            _answered(step.over_limit[call.id])
            if call.id in step.over_limit
            else functools.partial(self._arun_one, call, step, state, config)
            for call in step.calls
        ]
        if len(run) == 1:
            results = [await run[0]()]
        else:
            results = await _ain_parallel(run, max(1, self.agent.max_parallel_tools))
        return self._update(state, step, results)

    def _plan(self, state: OverAllState) -> _ToolStep | None:
        """The calls this pass answers (``None`` when there are none)."""
        calls = pending_tool_calls(state.value("messages", ()))
        if not calls:
            return None
        _, message = last_assistant(state["messages"])
        assert message is not None
        rejected = rejected_calls(state, message)
        return _ToolStep(
            calls=calls,
            message=message,
            rejected=rejected,
            over_limit=self._over_limit(calls, rejected),
        )

    def _update(
        self, state: OverAllState, step: _ToolStep, results: list[ToolResponseMessage]
    ) -> dict[str, Any] | Updates:
        """The state update: the results in call order, the counters, what Commands wrote."""
        calls, updates = step.calls, step.updates
        executed = [
            call
            for call in calls
            if call.id not in step.rejected and call.id not in step.over_limit
        ]
        run_counts, thread_counts = counters(state, RUN_KEY), counters(state, THREAD_KEY)
        for counts in (run_counts, thread_counts):
            for call in executed:
                counts["tool_calls"][call.name] = counts["tool_calls"].get(call.name, 0) + 1
        update: dict[str, Any] = {
            "messages": results,
            RUN_KEY: run_counts,
            THREAD_KEY: thread_counts,
        }
        if state.value(REJECTED_KEY) is not None:
            update[REJECTED_KEY] = None  # answered: no later call can pick them up
        answer = direct_answer(self.toolkit, calls, results)
        if answer is not None:  # return_direct tools answered: the run ends, no model call
            update["messages"] = [*results, answer]
            update.update(self._direct_output(answer))
        if updates:
            return command_updates(update, [(c, updates[c.id]) for c in calls if c.id in updates])
        return update

    def _direct_output(self, answer: AssistantMessage) -> dict[str, Any]:
        """The jump that ends the run after a return_direct step, and its ``output_key``."""
        update: dict[str, Any] = {JUMP_KEY: "end"}
        schema = self.agent.output_schema
        if schema is None:
            update[self.agent.output_key] = answer.text
            return update
        # not the schema's JSON: the run still ends, without a structured output
        with contextlib.suppress(ValidationError):
            update[self.agent.output_key] = schema.model_validate_json(_json_text(answer))
        return update

    def _over_limit(
        self, calls: list[ToolCall], rejected: Mapping[str, str]
    ) -> dict[str, ToolResponseMessage]:
        """Error results for the calls beyond ``max_tool_calls_per_step`` (they do not run)."""
        limit = self.agent.max_tool_calls_per_step
        to_run = [call for call in calls if call.id not in rejected]
        if len(to_run) <= limit:
            return {}
        text = (
            f"Error: this answer asked for {len(to_run)} tool calls, and at most {limit} run per "
            "answer, so this one did not run. Call fewer tools at once; ask for this call again "
            "in your next answer if you still need it."
        )
        return {call.id: error_response(call, text) for call in to_run[limit:]}

    def _run_one(
        self,
        call: ToolCall,
        step: _ToolStep,
        state: OverAllState,
        config: RunnableConfig,
        caller_loop: asyncio.AbstractEventLoop | None = None,
    ) -> ToolResponseMessage:
        known = self._known(call, step, config)
        if known is not None:
            return known
        task = config.task
        with InterruptScope(call.id):  # its interrupts get ids of its own, whatever runs beside it
            response = watched_tool_call(
                task,
                call,
                lambda: self._execute(call, step.message, state, config, step.updates, caller_loop),
            )
        self._settle(call, response, step.updates)
        if task is not None:
            for key, value in self._records(call, response, step.updates):
                task.record(key, value)
        return response

    async def _arun_one(
        self, call: ToolCall, step: _ToolStep, state: OverAllState, config: RunnableConfig
    ) -> ToolResponseMessage:
        """:meth:`_run_one` on the event loop. Tool interceptors are sync: with them, the call
        runs as under ``invoke``, on the shared worker pool, except an async tool, which comes
        back to this loop to run as without them (:meth:`Tool.arun`)."""
        if self.agent.tool_interceptors:
            loop = asyncio.get_running_loop()
            return await to_thread(self._run_one, call, step, state, config, loop)
        known = self._known(call, step, config)
        if known is not None:
            return known
        task = config.task
        with InterruptScope(call.id):
            response = await awatched_tool_call(
                task,
                call,
                lambda: self._aexecute(call, step.message, state, config, step.updates),
            )
        self._settle(call, response, step.updates)
        if task is not None:
            for key, value in self._records(call, response, step.updates):
                await task.arecord(key, value)
        return response

    def _known(
        self, call: ToolCall, step: _ToolStep, config: RunnableConfig
    ) -> ToolResponseMessage | None:
        """The result of a call that does not run: rejected by a human, or recorded by an
        earlier attempt of this task (with what its Command wrote). ``None``: it runs."""
        reason = step.rejected.get(call.id)
        if reason is not None:
            return rejection_response(call, reason)
        task: TaskContext | None = config.task
        if task is None:
            return None
        recorded = task.recorded(f"{TOOL_RECORD}{call.id}")
        if recorded is not None:
            kept = task.recorded(f"{TOOL_UPDATE_RECORD}{call.id}")
            if kept is not None:
                step.updates[call.id] = ToolUpdate(*kept)
            return recorded  # type: ignore[no-any-return]
        task.check_lease()  # a run that lost its thread runs no tool (the other run does)
        return None

    @staticmethod
    def _settle(
        call: ToolCall, response: ToolResponseMessage, updates: dict[str, ToolUpdate]
    ) -> None:
        if response.is_error:
            updates.pop(call.id, None)  # a failed call changes nothing but its result

    @staticmethod
    def _records(
        call: ToolCall, response: ToolResponseMessage, updates: dict[str, ToolUpdate]
    ) -> list[tuple[str, Any]]:
        """What the task records of a finished call: its Command's other writes, then its
        result (so a replayed call loses nothing)."""
        records: list[tuple[str, Any]] = []
        if call.id in updates:
            records.append((f"{TOOL_UPDATE_RECORD}{call.id}", tuple(updates[call.id])))
        records.append((f"{TOOL_RECORD}{call.id}", response))
        return records

    def _execute(
        self,
        call: ToolCall,
        message: AssistantMessage,
        state: OverAllState,
        config: RunnableConfig,
        updates: dict[str, ToolUpdate],
        caller_loop: asyncio.AbstractEventLoop | None,
    ) -> ToolResponseMessage:
        request = self._request(call, message, state, config)

        def innermost(final: ToolCallRequest) -> ToolResponseMessage:
            return self._invoke(final, updates, caller_loop)

        try:
            response = chain_tool(self.agent.tool_interceptors, innermost)(request)
        except Exception as exc:
            response = self._failed(exc, call, config)
        return self._checked(response, call)

    async def _aexecute(
        self,
        call: ToolCall,
        message: AssistantMessage,
        state: OverAllState,
        config: RunnableConfig,
        updates: dict[str, ToolUpdate],
    ) -> ToolResponseMessage:
        """:meth:`_execute` without interceptors, the tool awaited (:meth:`Tool.arun`)."""
        request = self._request(call, message, state, config)
        try:
            tool = self._tool(request)
            value = await tool.arun(
                self._arguments(request.call), request.context, timeout=self._timeout(tool)
            )
            response = self._response(request.call, value, updates)
        except Exception as exc:
            response = self._failed(exc, call, config)
        return self._checked(response, call)

    def _request(
        self, call: ToolCall, message: AssistantMessage, state: OverAllState, config: RunnableConfig
    ) -> ToolCallRequest:
        task = config.task
        thread = task.id_thread if task is not None else config.thread_id
        context = ToolContext(
            call_id=call.id,
            idempotency_key=f"{thread}:{message.id}:{call.id}",
            state=state,
            config=config,
        )
        return ToolCallRequest(
            # the call's own arguments, not the history's: an interceptor editing them in place
            # must not change the message the checkpoint holds (and the next model call sees)
            call=call.model_copy(update={"arguments": copy.deepcopy(call.arguments)}),
            tool=self.toolkit.get(call.name),
            state=state,
            config=config,
            context=context,
        )

    @staticmethod
    def _failed(exc: Exception, call: ToolCall, config: RunnableConfig) -> ToolResponseMessage:
        if isinstance(exc, GraphCancelledError) and _is_set(config.cancel):
            raise exc  # the run stops (an agent tool stopped with it): the call runs again later
        return error_response(call, _describe(exc, call))

    def _checked(self, response: Any, call: ToolCall) -> ToolResponseMessage:
        if not isinstance(response, ToolResponseMessage):
            raise TypeError(
                f"a tool interceptor returned {type(response).__name__} for tool call {call.id} "
                f"({call.name}); it must return a ToolResponseMessage"
            )
        return self._fit(response, call)

    def _invoke(
        self,
        request: ToolCallRequest,
        updates: dict[str, ToolUpdate],
        caller_loop: asyncio.AbstractEventLoop | None,
    ) -> ToolResponseMessage:
        """The innermost call. ``caller_loop`` (under ``ainvoke`` with interceptors, which run
        on a worker thread the caller awaits, its loop free meanwhile): an async tool runs
        there as it would without interceptors (:meth:`Tool.arun`)."""
        tool = self._tool(request)
        arguments, timeout = self._arguments(request.call), self._timeout(tool)
        if caller_loop is not None and tool.is_async:
            awaited = tool.arun(arguments, request.context, timeout=timeout)
            value = run_on_caller_loop(caller_loop, awaited)
        else:
            value = tool.run(arguments, request.context, timeout=timeout)
        return self._response(request.call, value, updates)

    def _tool(self, request: ToolCallRequest) -> Tool:
        if request.tool is None:
            available = ", ".join(self.toolkit.names) or "none"
            raise LookupError(
                f"there is no tool named {request.call.name!r}; available tools: {available}"
            )
        return request.tool

    @staticmethod
    def _arguments(call: ToolCall) -> Any:
        return call.raw_arguments if call.has_malformed_arguments else call.arguments

    def _timeout(self, tool: Tool) -> float | None:
        return tool.timeout if tool.timeout is not None else self.agent.tool_timeout

    def _response(
        self, call: ToolCall, value: Any, updates: dict[str, ToolUpdate]
    ) -> ToolResponseMessage:
        if isinstance(value, Command) and value.graph is None:
            response, updates[call.id] = from_command(call, value, self.private_keys)
            return response
        return ToolResponseMessage(
            tool_call_id=call.id, name=call.name, content=result_to_content(value)
        )

    def _fit(self, response: ToolResponseMessage, call: ToolCall) -> ToolResponseMessage:
        """Match the response to its call and cut output above the size cap."""
        limit = self.agent.max_tool_output_chars
        fixes: dict[str, Any] = {}
        if response.tool_call_id != call.id:
            fixes["tool_call_id"] = call.id
        if not response.name:
            fixes["name"] = call.name
        content = response.content  # parts (images...) are bounded by the checkpoint's limits
        if isinstance(content, str) and len(content) > limit:
            cut = len(content) - limit
            fixes["content"] = content[:limit] + f"\n[... {cut} more characters truncated]"
        return response.model_copy(update=fixes) if fixes else response


def _has_async_api(model: Any) -> bool:
    """Whether ``model`` has ``agenerate`` and ``astream`` (a ChatModel need not)."""
    return callable(getattr(model, "agenerate", None)) and callable(getattr(model, "astream", None))


def _is_set(cancel: Any) -> bool:
    return cancel is not None and bool(cancel.is_set())


def error_response(call: ToolCall, text: str) -> ToolResponseMessage:
    return ToolResponseMessage(tool_call_id=call.id, name=call.name, content=text, is_error=True)


def rejection_response(call: ToolCall, reason: str) -> ToolResponseMessage:
    """The result of a call a human rejected: the reason, as an error the model reads."""
    return error_response(call, f"A human rejected this tool call: {reason}")


def _describe(exc: Exception, call: ToolCall) -> str:
    from graph_agent.tools import ToolArgumentsError, ToolTimeoutError

    if isinstance(exc, ToolArgumentsError | ToolTimeoutError | LookupError | ToolCommandError):
        return f"Error: {exc}"
    return f"Error: tool {call.name!r} raised {type(exc).__name__}: {exception_text(exc)}"


def _in_parallel(jobs: Sequence[Any], limit: int) -> list[Any]:
    """Run ``jobs`` (no-argument callables) on the shared pool, ``limit`` at a time, in order.

    A job that raises (a handoff, a pause, a bug) lets the running ones finish before the
    error is raised, so none is left running behind the caller's back; after a handoff no new
    job starts. Pauses of several jobs are raised together, as one, which keeps what each
    says of its interrupts (raised by a nested graph, static breakpoints, their scopes).
    """
    results: list[Any] = [None] * len(jobs)
    errors: dict[int, BaseException] = {}
    pool = shared_pool()
    pending: dict[Future[Any], int] = {}
    index = 0
    while index < len(jobs) or pending:
        handed_off = any(isinstance(e, ParentCommand) for e in errors.values())
        while index < len(jobs) and len(pending) < limit and not handed_off:
            context = contextvars.copy_context()
            pending[pool.submit(context.run, jobs[index])] = index
            index += 1
        if not pending:
            break
        done, _ = wait_delivering(pending)  # what tools emit meanwhile streams out live
        for future in done:
            position = pending.pop(future)
            try:
                results[position] = future.result()
            except BaseException as exc:
                errors[position] = exc
    if errors:
        _raise_together(errors)
    return results


async def _ain_parallel(jobs: Sequence[Callable[[], Awaitable[Any]]], limit: int) -> list[Any]:
    """:func:`_in_parallel` on the event loop: each job (a coroutine function) a task of its
    own (its own context), ``limit`` at a time; the same rules for errors and handoffs. When
    the caller is cancelled, so are the jobs running."""
    import asyncio

    results: list[Any] = [None] * len(jobs)
    errors: dict[int, BaseException] = {}
    pending: dict[asyncio.Future[Any], int] = {}
    index = 0
    try:
        while index < len(jobs) or pending:
            handed_off = any(isinstance(e, ParentCommand) for e in errors.values())
            while index < len(jobs) and len(pending) < limit and not handed_off:
                pending[asyncio.ensure_future(jobs[index]())] = index
                index += 1
            if not pending:
                break
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                position = pending.pop(future)
                try:
                    results[position] = future.result()
                except BaseException as exc:
                    errors[position] = exc
    finally:
        for future in pending:
            future.cancel()
    if errors:
        _raise_together(errors)
    return results


def _raise_together(errors: Mapping[int, BaseException]) -> None:
    """Raise what parallel jobs raised: their pauses together as one (keeping what each says
    of its interrupts: raised by a nested graph, static breakpoints, their scopes), else the
    first error that is not a pause."""
    raised = [errors[position] for position in sorted(errors)]
    pauses = [e for e in raised if isinstance(e, GraphInterrupted)]
    if len(pauses) == len(raised):
        raise GraphInterrupted(
            [i for pause in pauses for i in pause.interrupts],
            nested=frozenset().union(*(pause.nested for pause in pauses)),
            breakpoints=frozenset().union(*(pause.breakpoints for pause in pauses)),
            scopes={k: v for pause in pauses for k, v in pause.scopes.items()},
        )
    raise next(e for e in raised if not isinstance(e, GraphInterrupted))


def _answered(response: ToolResponseMessage) -> Callable[[], Awaitable[ToolResponseMessage]]:
    """A job of :func:`_ain_parallel` whose result is known already."""

    async def answer() -> ToolResponseMessage:
        return response

    return answer


def messages_of(update: Mapping[str, Any]) -> list[BaseMessage]:
    """The messages a node's update adds (ignores removals and whole-list replacements)."""
    value = update.get("messages")
    if value is None:
        return []
    items = value if isinstance(value, list | tuple) else [value]
    return [m for m in items if isinstance(m, BaseMessage)]
