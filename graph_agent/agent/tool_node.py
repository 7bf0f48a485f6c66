"""``__tool__``: the agent's tool node (the pending calls of the last answer, run in
parallel, recorded, answered in call order)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from graph_agent.agent.fan_out import ain_parallel, in_parallel
from graph_agent.agent.interceptors import ToolCallRequest, chain_tool
from graph_agent.agent.keys import JUMP_KEY, REJECTED_KEY, RUN_KEY, THREAD_KEY
from graph_agent.agent.model_node import json_text
from graph_agent.agent.return_direct import direct_answer
from graph_agent.agent.tool_commands import (
    ToolCommandError,
    ToolUpdate,
    command_updates,
    from_command,
)
from graph_agent.agent.turns import (
    TOOL_RECORD,
    TOOL_UPDATE_RECORD,
    counters,
    error_response,
    last_assistant,
    pending_tool_calls,
    rejected_calls,
    rejection_response,
)
from graph_agent.agent.watched import awatched_tool_call, watched_tool_call
from graph_agent.graph.concurrency import run_on_caller_loop, to_thread
from graph_agent.graph.errors import GraphCancelledError, exception_text
from graph_agent.graph.state import OverAllState
from graph_agent.graph.task import InterruptScope, TaskContext
from graph_agent.graph.types import Command, RunnableConfig
from graph_agent.messages import AssistantMessage, ToolCall, ToolResponseMessage
from graph_agent.node import DualNode, Updates
from graph_agent.tools import Tool, ToolContext, result_to_content

if TYPE_CHECKING:
    from graph_agent.agent.spec import NodeSettings


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
            results = in_parallel(run, max(1, self.agent.max_parallel_tools))
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
            results = await ain_parallel(run, max(1, self.agent.max_parallel_tools))
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
            update[self.agent.output_key] = schema.model_validate_json(json_text(answer))
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


def _is_set(cancel: Any) -> bool:
    return cancel is not None and bool(cancel.is_set())


def _describe(exc: Exception, call: ToolCall) -> str:
    from graph_agent.tools import ToolArgumentsError, ToolTimeoutError

    if isinstance(exc, ToolArgumentsError | ToolTimeoutError | LookupError | ToolCommandError):
        return f"Error: {exc}"
    return f"Error: tool {call.name!r} raised {type(exc).__name__}: {exception_text(exc)}"


def _answered(response: ToolResponseMessage) -> Callable[[], Awaitable[ToolResponseMessage]]:
    """A job of :func:`ain_parallel` whose result is known already."""

    async def answer() -> ToolResponseMessage:
        return response

    return answer
