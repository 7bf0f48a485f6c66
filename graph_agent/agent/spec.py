"""``AgentSpec``: what a hook knows of the agent it runs for, as an immutable value.

A hook is a plain object that may serve several agents at once (one approval policy for a
team, one summariser for every agent). So the agent is never stored on the hook: each hook
node of an agent's graph holds that agent's spec, made when the graph is built, and hands it
to the hook's method on every call (the ``agent`` keyword argument), so a shared hook always
sees, in each call, the agent whose graph is running it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from pydantic import BaseModel

    from graph_agent.agent.interceptors import ModelInterceptor, ToolInterceptor
    from graph_agent.agent.steering import SteeringQueue
    from graph_agent.graph.policies import RetryPolicy
    from graph_agent.models.base import ChatModel
    from graph_agent.tools import Tool, Toolkit


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentSpec:
    """The agent a hook runs for, as it was when the agent built its graph.

    Attributes:
        name: The agent's name (its graph's name, ``NodeOutput.agent``).
        model: The agent's chat model (e.g. what :class:`SummarizationHook` summarises with
            when it has no model of its own).
        tools: The agent's tools, in the order they were given.
        instruction: The agent's instruction (a template with ``{key}`` placeholders, as
            given), or ``None``.
        description: What the agent is for, as a team or a caller sees it, or ``None``.
        max_iterations: Model calls that may ask for tools in one run.
        output_schema: The pydantic model the final answer must match, or ``None``.
        output_key: Where the final answer lands in the state.

    Example:
        >>> from graph_agent.agent import ModelHook, ReactAgent
        >>> from graph_agent.models import ScriptedChatModel
        >>> class Greeter(ModelHook):
        ...     def before_model(self, state, config, *, agent):
        ...         print(f"{agent.name} calls its model")
        >>> _ = ReactAgent("helper", ScriptedChatModel(["hi"]), hooks=[Greeter()]).call("hello")
        helper calls its model
    """

    name: str
    model: ChatModel
    tools: tuple[Tool, ...] = ()
    instruction: str | None = None
    description: str | None = None
    max_iterations: int = 10
    output_schema: type[BaseModel] | None = None
    output_key: str = "output"

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The names of :attr:`tools`, in order."""
        return tuple(tool.name for tool in self.tools)

    def __repr__(self) -> str:
        return f"AgentSpec({self.name!r}, tools={list(self.tool_names)})"


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeSettings:
    """What an agent's graph is built from: the :class:`AgentSpec` its hooks are told, and what
    its model and tool nodes read besides, taken together from the agent when it builds the
    graph. Nodes and hooks so read one description: after ``agent.model = other`` the agent
    builds a new graph, whose model node calls ``other`` and whose hooks see ``other``, while a
    run already going keeps the graph (and the model) it started with.

    ``name``, ``model``, ``instruction``, ``max_iterations``, ``output_schema`` and
    ``output_key`` are the spec's. ``steering`` is the agent's queue of steered messages (see
    :mod:`graph_agent.agent.steering`): a live queue, not a setting.
    """

    spec: AgentSpec
    toolkit: Toolkit
    model_interceptors: tuple[ModelInterceptor, ...]
    tool_interceptors: tuple[ToolInterceptor, ...]
    output_mode: Literal["response_format", "tool"]
    tool_timeout: float | None
    max_parallel_tools: int
    max_tool_calls_per_step: int
    max_tool_output_chars: int
    model_options: Mapping[str, Any]
    model_retry: RetryPolicy | None
    model_timeout: float | None
    tool_retry: RetryPolicy | None
    steering: SteeringQueue | None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def model(self) -> ChatModel:
        return self.spec.model

    @property
    def instruction(self) -> str | None:
        return self.spec.instruction

    @property
    def max_iterations(self) -> int:
        return self.spec.max_iterations

    @property
    def output_schema(self) -> type[BaseModel] | None:
        return self.spec.output_schema

    @property
    def output_key(self) -> str:
        return self.spec.output_key
