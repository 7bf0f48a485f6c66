"""``__model__``: the agent's model node (one model call through the interceptors, the
instruction filled, structured output validated)."""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from graph_agent.agent.interceptors import (
    acall_model,
    chain_model,
    run_model_call,
    stream_to_caller,
)
from graph_agent.agent.keys import RUN_KEY, STEERED_KEY, THREAD_KEY
from graph_agent.agent.steering import take_steering
from graph_agent.agent.templates import fill, is_template
from graph_agent.agent.turns import (
    FINAL_ANSWER_TOOL,
    INSTRUCTION_ID,
    SUMMARIZE_PROMPT,
    counters,
    error_response,
    tokens_used,
    unique_call_ids,
)
from graph_agent.agent.watched import awatched_model_call, watched_model_call
from graph_agent.graph.concurrency import to_thread
from graph_agent.graph.errors import GraphRuntimeError
from graph_agent.graph.state import OverAllState
from graph_agent.graph.task import TaskContext
from graph_agent.graph.types import RunnableConfig
from graph_agent.messages import AssistantMessage, BaseMessage, ToolCall, UserMessage
from graph_agent.models.base import ModelRequest, ToolDefinition
from graph_agent.node import DualNode

if TYPE_CHECKING:
    from graph_agent.agent.spec import NodeSettings


class StructuredOutputError(GraphRuntimeError):
    """The model's final answer did not match ``output_schema``, also after one correction."""


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
            return _Verdict(reply=reply, value=schema.model_validate_json(json_text(reply)))
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
            return self._output(schema.model_validate_json(json_text(reply)))
        except ValidationError:
            return {}


def json_text(reply: AssistantMessage) -> str:
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


def _has_async_api(model: Any) -> bool:
    """Whether ``model`` has ``agenerate`` and ``astream`` (a ChatModel need not)."""
    return callable(getattr(model, "agenerate", None)) and callable(getattr(model, "astream", None))
