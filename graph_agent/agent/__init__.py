"""ReactAgent: the ReAct loop on the graph runtime, with hooks, interceptors and HITL."""

from graph_agent.agent.base import AgentBase
from graph_agent.agent.builtin_hooks import (
    AgentLimitError,
    HumanInTheLoopHook,
    InstructionAgentHook,
    ModelCallLimitHook,
    SummarizationHook,
    ToolCallLimitHook,
)
from graph_agent.agent.flows import (
    FlowAgent,
    LlmRoutingAgent,
    LoopAgent,
    ParallelAgent,
    SequentialAgent,
)
from graph_agent.agent.hooks import (
    AgentCommand,
    AgentHook,
    Hook,
    JumpTo,
    MessagesAgentHook,
    MessagesModelHook,
    ModelHook,
)
from graph_agent.agent.interceptors import (
    ModelCallState,
    ModelFallbackInterceptor,
    ModelInterceptor,
    ModelRetryInterceptor,
    ToolCallRequest,
    ToolEmulatorInterceptor,
    ToolInterceptor,
    ToolRetryInterceptor,
    current_model_call,
)
from graph_agent.agent.memory import MemoryHook, memory_tools
from graph_agent.agent.nodes import StructuredOutputError
from graph_agent.agent.react import ReactAgent
from graph_agent.agent.spec import AgentSpec
from graph_agent.agent.templates import InstructionKeyError

__all__ = [
    "AgentBase",
    "AgentCommand",
    "AgentHook",
    "AgentLimitError",
    "AgentSpec",
    "FlowAgent",
    "Hook",
    "HumanInTheLoopHook",
    "InstructionAgentHook",
    "InstructionKeyError",
    "JumpTo",
    "LlmRoutingAgent",
    "LoopAgent",
    "MemoryHook",
    "MessagesAgentHook",
    "MessagesModelHook",
    "ModelCallLimitHook",
    "ModelCallState",
    "ModelFallbackInterceptor",
    "ModelHook",
    "ModelInterceptor",
    "ModelRetryInterceptor",
    "ParallelAgent",
    "ReactAgent",
    "SequentialAgent",
    "StructuredOutputError",
    "SummarizationHook",
    "ToolCallLimitHook",
    "ToolCallRequest",
    "ToolEmulatorInterceptor",
    "ToolInterceptor",
    "ToolRetryInterceptor",
    "current_model_call",
    "memory_tools",
]
