"""``ReactAgent``: a ReAct loop (model → tools → model ...) compiled into a state graph."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import typing
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel

from graph_agent.agent.base import AgentBase, coerce_state
from graph_agent.agent.builtin_hooks import InstructionAgentHook
from graph_agent.agent.contributions import add_contributed_tools, by_priority
from graph_agent.agent.hooks import Hook
from graph_agent.agent.interceptors import ModelInterceptor, ToolInterceptor
from graph_agent.agent.keys import AGENT_KEYS, STEERED_KEY
from graph_agent.agent.recovery import recovering
from graph_agent.agent.shape import build_graph
from graph_agent.agent.spec import AgentSpec, NodeSettings
from graph_agent.agent.steering import SteeringQueue, steering_thread
from graph_agent.agent.templates import placeholders
from graph_agent.agent.turns import FINAL_ANSWER_TOOL, messages_of
from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.checkpoint.serde import register
from graph_agent.graph.compiled import CompiledGraph, check_config
from graph_agent.graph.errors import GraphSetupError
from graph_agent.graph.policies import RetryPolicy
from graph_agent.graph.types import (
    Command,
    CompileConfig,
    RunnableConfig,
)
from graph_agent.messages import BaseMessage, UserMessage
from graph_agent.models.base import ChatModel
from graph_agent.store.base import BaseStore
from graph_agent.tools import Tool, Toolkit

REBUILT_ON_CHANGE = frozenset(
    ({field.name for field in dataclasses.fields(AgentSpec)} - {"tools"})
    | ({field.name for field in dataclasses.fields(NodeSettings)} - {"spec", "toolkit", "steering"})
    | {"hooks", "listeners", "store"}
)
"""The attributes of a :class:`ReactAgent` its graph is built from: setting one after the agent
was made builds the graph again on next use (as ``add_tools`` and a new ``saver`` do)."""

AgentInput = str | BaseMessage | Sequence[BaseMessage] | Mapping[str, Any] | Command | None
ToolLike = Tool | Callable[..., Any]


class ReactAgent(AgentBase):
    """An agent that reasons with a chat model and acts with tools, on the graph runtime.

    The graph (see :mod:`graph_agent.agent.shape`) is built on first use. Every call runs on a
    thread: the same ``thread_id`` continues the conversation (the saver defaults to a
    :class:`MemorySaver`; a call without a config gets a fresh thread).

    Args:
        name: The agent's name (the graph's name, ``NodeOutput.agent``).
        model: Any :class:`~graph_agent.models.ChatModel`.
        tools: ``@tool`` functions, :class:`Tool` objects or plain functions.
        hooks: :class:`~graph_agent.agent.hooks.Hook` instances, ordered by their
            ``priority`` (lower first; equal ones in the order given). Their ``tools`` join
            the agent's tools.
        model_interceptors: Wrap each model call, the first outermost (by ``priority``, as
            hooks).
        tool_interceptors: Wrap each tool call, the first outermost (by ``priority``).
        saver: Where threads are kept.
        max_iterations: Model calls that may ask for tools in one run; then one last call
            without tools summarises (``finish_reason="max_iterations"``).
        instruction: The system instruction, put first in every thread. ``{key}``
            placeholders are filled from the state at each model call (``{{`` and ``}}`` are
            literal braces); a key the state lacks is an :class:`InstructionKeyError`.
        output_schema: A pydantic model the final answer must match; the validated object is
            stored at ``output_key``. The schema (and the models, dataclasses and enums its
            fields use) is registered with the checkpoint serializer by name, so it is saved
            and loaded by every saver without a manual ``register``.
        output_key: Where the final answer lands in the state: its text, or the validated
            object with an ``output_schema``. In a team, the next agents read it (as state,
            or as ``{output_key}`` in their instruction).
        output_mode: How the model is asked for the schema: ``"response_format"`` (the
            server's structured output) or ``"tool"`` (a ``final_answer`` tool whose
            parameters are the schema, for servers without ``response_format``; the call is
            stored as an answer holding the validated JSON, not as a tool call).
        tool_timeout: Seconds a tool may run (a tool's own ``timeout`` wins); ``None``: no
            limit, and an async tool then runs on the caller's loop under ``ainvoke``.
        max_parallel_tools: Tool calls of one answer that run at once.
        max_tool_calls_per_step: Tool calls of one answer that run at all; the rest are
            answered with an error telling the model to call fewer at once.
        max_tool_output_chars: Longer tool results are cut, with a marker.
        model_options: Extra request fields for every model call (temperature, ...).
        model_retry: A :class:`~graph_agent.graph.policies.RetryPolicy` for the model node:
            a model call failing with what its ``retry_on`` accepts (by default lost
            connections, 5xx, rate limits, as they remain after the client's own retries) is
            made again after a backoff, instead of ending the run.
        model_timeout: Seconds the model node may take (each attempt); past them it fails
            with a ``NodeTimeoutError`` (which ``model_retry`` retries by default).
        tool_retry: A ``RetryPolicy`` for the tool node, should it raise (tool errors
            already become tool results); tool calls recorded before the failure are not
            made again.
        listeners: :class:`~graph_agent.graph.listeners.Listener` objects told of each run,
            node, model call and tool call (``CompileConfig(listeners=...)``).
        store: Long-term memory shared across threads (a ``graph_agent.store`` store):
            ``config.store`` in hooks, ``ToolContext.store`` in tools; see
            :mod:`graph_agent.agent.memory` for a recall hook and remember/forget tools.

    Example:
        >>> from graph_agent import ReactAgent, tool
        >>> from graph_agent.models import ScriptedChatModel
        >>> from graph_agent.messages import AssistantMessage, ToolCall
        >>> @tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two numbers.'''
        ...     return a + b
        >>> model = ScriptedChatModel([
        ...     AssistantMessage(tool_calls=[ToolCall("c1", "add", {"a": 2, "b": 3})]),
        ...     "2 + 3 = 5",
        ... ])
        >>> ReactAgent("calc", model, tools=[add]).call("What is 2 + 3?").text
        '2 + 3 = 5'
    """

    NO_ANSWER = "the run ended without an answer from the model"

    def __init__(
        self,
        name: str,
        model: ChatModel,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        instruction: str | None = None,
        hooks: Sequence[Hook] = (),
        model_interceptors: Sequence[ModelInterceptor] = (),
        tool_interceptors: Sequence[ToolInterceptor] = (),
        saver: CheckpointSaver | None = None,
        max_iterations: int = 10,
        output_schema: type[BaseModel] | None = None,
        output_key: str = "output",
        *,
        tool_timeout: float | None = 60.0,
        max_parallel_tools: int = 8,
        max_tool_calls_per_step: int = 32,
        max_tool_output_chars: int = 20_000,
        model_options: Mapping[str, Any] | None = None,
        output_mode: Literal["response_format", "tool"] = "response_format",
        description: str | None = None,
        model_retry: RetryPolicy | None = None,
        model_timeout: float | None = None,
        tool_retry: RetryPolicy | None = None,
        listeners: Sequence[Any] = (),
        store: BaseStore | None = None,
    ) -> None:
        if max_iterations < 0:
            raise ValueError(f"max_iterations must be >= 0, got {max_iterations}")
        if max_tool_calls_per_step < 1:
            raise ValueError(f"max_tool_calls_per_step must be >= 1, got {max_tool_calls_per_step}")
        if output_mode not in ("response_format", "tool"):
            raise ValueError(
                f"output_mode must be 'response_format' or 'tool', got {output_mode!r}"
            )
        if not isinstance(output_key, str) or output_key in ("", "messages", *AGENT_KEYS):
            raise ValueError(
                f"agent {name!r}: output_key={output_key!r} cannot hold the answer; give a "
                "state key other than 'messages', e.g. output_key='draft'"
            )
        self.name = name
        self.description = description
        self.model = model
        self.instruction = instruction
        self.hooks = by_priority(hooks)
        self.model_interceptors = by_priority(model_interceptors)
        self.tool_interceptors = by_priority(tool_interceptors)
        contributors = (*self.hooks, *self.model_interceptors, *self.tool_interceptors)
        self.toolkit = add_contributed_tools(Toolkit(tools).copy(), name, contributors)
        self.steering = SteeringQueue(held=self._held_message_ids)
        """Messages :meth:`steer` queued, by thread, until the next model call takes them."""
        self.max_iterations = max_iterations
        self.output_schema = output_schema
        self.output_key = output_key
        self.output_mode = output_mode
        if output_schema is not None:
            if output_mode == "tool" and FINAL_ANSWER_TOOL in self.toolkit:
                raise GraphSetupError(
                    f"agent {name!r}: output_mode='tool' adds a tool named "
                    f"{FINAL_ANSWER_TOOL!r}, and the agent already has one; rename that tool"
                )
            _register_output_types(name, output_schema)
        self.tool_timeout = tool_timeout
        self.max_parallel_tools = max_parallel_tools
        self.max_tool_calls_per_step = max_tool_calls_per_step
        self.max_tool_output_chars = max_tool_output_chars
        self.model_options = model_options or {}
        self.model_retry = model_retry
        self.model_timeout = model_timeout
        self.tool_retry = tool_retry
        self.listeners = tuple(listeners)  # told of its runs, nodes, model and tool calls
        self.store = store
        # last: from here on a setting changed (see __setattr__) takes the lock and drops the graph
        self._init_graph(saver if saver is not None else MemorySaver())

    @property
    def output_keys(self) -> tuple[str, ...]:
        """The keys a run of this agent hands back to a graph it runs in: its output key."""
        return (self.output_key,)

    @property
    def instruction_keys(self) -> tuple[str, ...]:
        """The state keys the instruction's ``{key}`` placeholders read (a team passes them
        to this agent from its own state)."""
        return placeholders(self.instruction) if self.instruction else ()

    # tools
    def add_tools(self, *tools: ToolLike | Iterable[ToolLike]) -> tuple[Tool, ...]:
        """Give the agent more tools, after it was made: ``add_tools(search, fetch)``, or
        ``add_tools(toolset)`` with any iterable of tools (an ``MCPToolset``).

        The graph is built again now, with the new tools (an agent that had none gains its
        tool node); the saver, store and listeners stay, so a thread checkpointed before goes
        on with them. They are offered from the next run: a run already going keeps the tools
        its graph was built with.

        Returns:
            The tools added (plain functions wrapped as :class:`Tool`).

        Raises:
            GraphSetupError: A tool's name is taken, by one of the agent's tools or by another
                tool given here (both are named), or the graph cannot be built with them (a
                hook's check fails); then none is added.
            TypeError: Something given is not a tool, a function or an iterable of them.
        """
        given = list(_tools_given(tools))
        with self._lock:
            toolkit = self.toolkit.copy()
            try:
                added = tuple(toolkit.add(item) for item in given)
            except GraphSetupError as exc:
                raise GraphSetupError(f"agent {self.name!r}: cannot add the tools: {exc}") from exc
            answer_tool = self.output_schema is not None and self.output_mode == "tool"
            if answer_tool and any(new.name == FINAL_ANSWER_TOOL for new in added):
                raise GraphSetupError(
                    f"agent {self.name!r}: output_mode='tool' adds a tool named "
                    f"{FINAL_ANSWER_TOOL!r}, so no other tool may take that name; rename it"
                )
            self._set_toolkit(toolkit, self._compile_for(toolkit, "add"))
        return added

    def remove_tools(self, *names: str) -> tuple[Tool, ...]:
        """Take tools away by name (e.g. ones :meth:`add_tools` gave); the graph is built again
        now, without them, for the next run: a run already going keeps them.

        Raises:
            KeyError: The agent has no tool of one of the names; then none is removed.
            GraphSetupError: The graph cannot be built without them (e.g. a
                ``ToolCallLimitHook`` limits one of them); then none is removed.
        """
        with self._lock:
            toolkit = self.toolkit.copy()
            removed = tuple(toolkit.remove(name) for name in names)
            self._set_toolkit(toolkit, self._compile_for(toolkit, "remove"))
        return removed

    def _compile_for(self, toolkit: Toolkit, change: Literal["add", "remove"]) -> CompiledGraph:
        """The graph with ``toolkit``, built before the agent takes it, so a change of tools
        that its hooks reject leaves the agent as it was (the caller holds the lock)."""
        try:
            return self._compile(toolkit)
        except GraphSetupError as exc:
            raise GraphSetupError(
                f"agent {self.name!r}: cannot {change} the tools, its graph would not build: "
                f"{exc}; none is {change}d"
            ) from exc

    def _set_toolkit(self, toolkit: Toolkit, compiled: CompiledGraph) -> None:
        """Use ``toolkit`` and its graph from now on (the caller holds the lock)."""
        self.toolkit = toolkit
        object.__setattr__(self, "_compiled", compiled)
        object.__setattr__(self, "_building", None)

    def _compile(self, toolkit: Toolkit) -> CompiledGraph:
        """The agent's graph with ``toolkit``, compiled (the caller holds the lock)."""
        graph = build_graph(self._settings_with(toolkit), self.effective_hooks)
        return graph.compile(
            CompileConfig(saver=self._saver, listeners=self.listeners, store=self.store)
        )

    # the graph
    @property
    def spec(self) -> AgentSpec:
        """What this agent's hooks are told of it (their ``agent`` argument), as it is now; the
        graph's hooks and nodes read it as it was when the graph was built."""
        return self._spec_with(self.toolkit)

    def _spec_with(self, toolkit: Toolkit) -> AgentSpec:
        return AgentSpec(
            name=self.name,
            model=self.model,
            tools=tuple(toolkit),
            instruction=self.instruction,
            description=self.description,
            max_iterations=self.max_iterations,
            output_schema=self.output_schema,
            output_key=self.output_key,
        )

    def _settings_with(self, toolkit: Toolkit) -> NodeSettings:
        """The one description of this agent that its graph is built from: what the hooks are
        told (the spec) and what the nodes read, taken together now."""
        return NodeSettings(
            spec=self._spec_with(toolkit),
            toolkit=toolkit,
            model_interceptors=tuple(self.model_interceptors),
            tool_interceptors=tuple(self.tool_interceptors),
            output_mode=self.output_mode,
            tool_timeout=self.tool_timeout,
            max_parallel_tools=self.max_parallel_tools,
            max_tool_calls_per_step=self.max_tool_calls_per_step,
            max_tool_output_chars=self.max_tool_output_chars,
            model_options=self.model_options,
            model_retry=self.model_retry,
            model_timeout=self.model_timeout,
            tool_retry=self.tool_retry,
            steering=self.steering,
        )

    def _shapes_graph(self, name: str) -> bool:
        return name in REBUILT_ON_CHANGE

    def __setattr__(self, name: str, value: Any) -> None:
        """Set an attribute; one the graph is built from (:data:`REBUILT_ON_CHANGE`) makes the
        agent build its graph again on next use, so its hooks and nodes see the change alike
        (a run already going keeps the graph it started with). ``model_options`` is kept
        read-only: a change in place would reach no graph, so it fails; assign new options."""
        if name == "model_options":
            value = MappingProxyType(dict(value))
        super().__setattr__(name, value)

    @property
    def effective_hooks(self) -> tuple[Hook, ...]:
        """The hooks in the graph: the instruction hook first (when there is an instruction)."""
        first = (InstructionAgentHook(self.instruction),) if self.instruction else ()
        return (*first, *self.hooks)

    # calls
    def stream_messages(
        self, input: AgentInput, config: RunnableConfig | None = None
    ) -> Iterator[BaseMessage]:
        """Run, yielding each message the run adds, in order."""
        for output in self.stream(input, check_config(config, "stream_messages")):
            if output.state is not None:
                yield from messages_of(output.update)

    async def astream_messages(
        self, input: AgentInput, config: RunnableConfig | None = None
    ) -> AsyncIterator[BaseMessage]:
        """Async :meth:`stream_messages`."""
        async for output in self.astream(input, check_config(config, "astream_messages")):
            if output.state is not None:
                for message in messages_of(output.update):
                    yield message

    def steer(self, config: RunnableConfig, message: str | UserMessage) -> UserMessage:
        """Queue a user message for the thread of ``config``: the next model call of its
        running run (or, with no run going, of its next run) sends it and adds it to the
        thread. Safe from any thread or event loop of this process; in-process only (see
        :mod:`graph_agent.agent.steering`).

        Returns:
            The queued message.

        Raises:
            SteeringInputError: the config has no ``thread_id``, or ``message`` is neither a
                string nor a ``UserMessage``.
            SteeringQueueFullError: too many messages wait already.
        """
        return self.steering.put(steering_thread(config), message)

    def _held_message_ids(self, thread_id: str) -> set[str]:
        """The ids of the messages the thread's last checkpoint holds, in its messages or in
        the private record of steered ones (a hook may have removed one): a full steering
        queue drops the messages delivered already. Reads the saver, not the graph, which
        hides private keys."""
        saver = self._saver
        checkpoint = saver.get(thread_id) if saver is not None else None
        if checkpoint is None:
            return set()
        values = checkpoint.values
        held = {message.id for message in values.get("messages", ())}
        held.update(values.get(STEERED_KEY) or ())
        return held

    # what AgentBase asks of an agent
    def _input(self, input: AgentInput, config: RunnableConfig) -> Any:
        """The graph input for one call: the input as a state update, which the run applies
        with pending tool recovery (DESIGN §5; see :mod:`graph_agent.agent.recovery`) to the
        thread as it loads it."""
        if isinstance(input, Command):
            return input
        return recovering(None if input is None else coerce_state(input))

    def _build_graph(self) -> CompiledGraph:
        return self._compile(self.toolkit)

    def _detach(self, twin: ReactAgent) -> None:
        """A copy steers its own threads, and has a toolkit of its own."""
        object.__setattr__(twin, "steering", SteeringQueue(held=twin._held_message_ids))
        object.__setattr__(twin, "toolkit", self.toolkit.copy())

    def _max_steps(self) -> int:
        """A step budget that ``max_iterations`` always exhausts first."""
        hooks = self.effective_hooks
        per_loop = 2 + sum(
            len({"before_model", "after_model"} & set(h.active_positions())) for h in hooks
        )
        return 20 + len(hooks) * 2 + (self.max_iterations + 2) * per_loop * 2

    def __repr__(self) -> str:
        return f"ReactAgent({self.name!r}, tools={list(self.toolkit.names)})"


def _tools_given(items: Iterable[Any]) -> Iterator[ToolLike]:
    """The tools of ``add_tools(*items)``: each item a tool or function, or an iterable of them."""
    for item in items:
        if isinstance(item, Tool) or callable(item):
            yield item
            continue
        if isinstance(item, str | bytes | Mapping) or not isinstance(item, Iterable):
            raise TypeError(
                f"add_tools takes tools, functions or iterables of them, got {type(item).__name__}"
            )
        for inner in item:
            if not (isinstance(inner, Tool) or callable(inner)):
                raise TypeError(
                    f"add_tools takes tools, functions or iterables of them, got "
                    f"{type(inner).__name__} inside a {type(item).__name__}"
                )
            yield inner


def _register_output_types(agent_name: str, schema: type[BaseModel]) -> None:
    """Register ``schema`` by name with the checkpoint serializer, with the pydantic models,
    dataclasses and enums its fields hold, so that its validated value can be stored.

    Classes already registered (with a code or by name) keep their registration.
    """
    for cls in _types_held_by(schema):
        try:
            register(cls)
        except (ValueError, TypeError) as exc:
            used_by = "" if cls is schema else f" (used by output_schema {schema.__name__})"
            raise GraphSetupError(
                f"agent {agent_name!r}: cannot register {cls.__name__}{used_by} with the "
                f"checkpoint serializer: {exc}"
            ) from exc


def _types_held_by(schema: type[BaseModel]) -> list[type]:
    """``schema`` and the models, dataclasses and enums its field annotations name."""
    found: list[type] = []
    seen: set[int] = set()
    hints: list[Any] = [schema]
    while hints:
        hint = hints.pop()
        if id(hint) in seen:
            continue
        seen.add(id(hint))
        hints.extend(typing.get_args(hint))  # list[X], X | None, Annotated[X, ...], dict[K, V]
        if not isinstance(hint, type):
            continue
        if issubclass(hint, BaseModel):
            found.append(hint)
            hints.extend(field.annotation for field in hint.model_fields.values())
        elif dataclasses.is_dataclass(hint):
            found.append(hint)
            # unresolvable annotations are skipped: a save that fails names the value
            with contextlib.suppress(Exception):
                hints.extend(typing.get_type_hints(hint).values())
        elif issubclass(hint, enum.Enum):
            found.append(hint)
    return found
