"""graph_agent: a small, fast, durable graph runtime for ReAct agents.

The public API is re-exported here; everything else is internal.
"""

from typing import TYPE_CHECKING, Any

from graph_agent.checkpoint import Checkpoint, CheckpointSaver, MemorySaver
from graph_agent.graph.builder import StateGraph
from graph_agent.graph.compiled import CompiledGraph
from graph_agent.graph.errors import (
    CheckpointStoreError,
    GraphAgentError,
    GraphCancelledError,
    GraphInterrupted,
    GraphRecursionError,
    GraphRuntimeError,
    GraphSetupError,
    InvalidResumeError,
    InvalidUpdateError,
    NodeError,
    NodeTimeoutError,
    SerializationError,
    ThreadBusyError,
)
from graph_agent.graph.listeners import Listener
from graph_agent.graph.policies import CachePolicy, RetryPolicy
from graph_agent.graph.state import (
    AppendStrategy,
    KeyStrategy,
    MergeStrategy,
    OverAllState,
    RemoveMessage,
    ReplaceAll,
    ReplaceStrategy,
)
from graph_agent.graph.task import TaskContext, emit_chunk, interrupt
from graph_agent.graph.types import (
    END,
    START,
    Command,
    CompileConfig,
    Interrupt,
    NodeOutput,
    RunnableConfig,
    Send,
    StateSnapshot,
    StreamingOutput,
    TaskSnapshot,
)
from graph_agent.messages import (
    AssistantMessage,
    AssistantMessageChunk,
    AudioPart,
    FilePart,
    ImagePart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from graph_agent.runnable import Runnable
from graph_agent.tools import Tool, ToolContext, Toolkit, tool

if TYPE_CHECKING:
    from graph_agent.agent import (
        AgentCommand,
        AgentHook,
        AgentSpec,
        HumanInTheLoopHook,
        JumpTo,
        LlmRoutingAgent,
        LoopAgent,
        MessagesAgentHook,
        MessagesModelHook,
        ModelCallLimitHook,
        ModelFallbackInterceptor,
        ModelHook,
        ModelInterceptor,
        ModelRetryInterceptor,
        ParallelAgent,
        ReactAgent,
        SequentialAgent,
        SummarizationHook,
        ToolCallLimitHook,
        ToolCallRequest,
        ToolEmulatorInterceptor,
        ToolInterceptor,
        ToolRetryInterceptor,
    )
    from graph_agent.checkpoint.postgres import AsyncPostgresSaver, PostgresSaver
    from graph_agent.checkpoint.sqlite import SqliteSaver
    from graph_agent.models.errors import ModelError
    from graph_agent.store import InMemoryStore, Item, PostgresStore, SqliteStore

__all__ = [
    "END",
    "START",
    "AgentCommand",
    "AgentHook",
    "AgentSpec",
    "AppendStrategy",
    "AssistantMessage",
    "AssistantMessageChunk",
    "AsyncPostgresSaver",
    "AudioPart",
    "CachePolicy",
    "Checkpoint",
    "CheckpointSaver",
    "CheckpointStoreError",
    "Command",
    "CompileConfig",
    "CompiledGraph",
    "FilePart",
    "GraphAgentError",
    "GraphCancelledError",
    "GraphInterrupted",
    "GraphRecursionError",
    "GraphRuntimeError",
    "GraphSetupError",
    "HumanInTheLoopHook",
    "ImagePart",
    "InMemoryStore",
    "Interrupt",
    "InvalidResumeError",
    "InvalidUpdateError",
    "Item",
    "JumpTo",
    "KeyStrategy",
    "Listener",
    "LlmRoutingAgent",
    "LoopAgent",
    "MemorySaver",
    "MergeStrategy",
    "MessagesAgentHook",
    "MessagesModelHook",
    "ModelCallLimitHook",
    "ModelError",
    "ModelFallbackInterceptor",
    "ModelHook",
    "ModelInterceptor",
    "ModelRetryInterceptor",
    "NodeError",
    "NodeOutput",
    "NodeTimeoutError",
    "OverAllState",
    "ParallelAgent",
    "PostgresSaver",
    "PostgresStore",
    "ReactAgent",
    "RemoveMessage",
    "ReplaceAll",
    "ReplaceStrategy",
    "RetryPolicy",
    "Runnable",
    "RunnableConfig",
    "Send",
    "SequentialAgent",
    "SerializationError",
    "SqliteSaver",
    "SqliteStore",
    "StateGraph",
    "StateSnapshot",
    "StreamingOutput",
    "SummarizationHook",
    "SystemMessage",
    "TaskContext",
    "TaskSnapshot",
    "TextPart",
    "ThreadBusyError",
    "Tool",
    "ToolCall",
    "ToolCallLimitHook",
    "ToolCallRequest",
    "ToolContext",
    "ToolEmulatorInterceptor",
    "ToolInterceptor",
    "ToolResponseMessage",
    "ToolRetryInterceptor",
    "Toolkit",
    "Usage",
    "UserMessage",
    "emit_chunk",
    "interrupt",
    "tool",
]


_AGENT_NAMES = frozenset(
    {
        "AgentCommand",
        "AgentHook",
        "AgentSpec",
        "HumanInTheLoopHook",
        "JumpTo",
        "LlmRoutingAgent",
        "LoopAgent",
        "MessagesAgentHook",
        "MessagesModelHook",
        "ModelCallLimitHook",
        "ModelFallbackInterceptor",
        "ModelHook",
        "ModelInterceptor",
        "ModelRetryInterceptor",
        "ParallelAgent",
        "ReactAgent",
        "SequentialAgent",
        "SummarizationHook",
        "ToolCallLimitHook",
        "ToolCallRequest",
        "ToolEmulatorInterceptor",
        "ToolInterceptor",
        "ToolRetryInterceptor",
    }
)


def __getattr__(name: str) -> Any:
    """What loads on first use: the agent layer (:mod:`graph_agent.agent`), the SQLite and
    PostgreSQL savers (:mod:`graph_agent.checkpoint`), the stores and the chat models' errors
    (:mod:`graph_agent.models.errors`), so ``import graph_agent`` stays light."""
    if name in _AGENT_NAMES:
        from graph_agent import agent

        return getattr(agent, name)
    if name in ("AsyncPostgresSaver", "PostgresSaver", "SqliteSaver"):
        from graph_agent import checkpoint

        return getattr(checkpoint, name)
    if name == "ModelError":  # the chat models' errors: graph_agent.models.errors
        from graph_agent.models.errors import ModelError

        return ModelError
    if name in ("InMemoryStore", "Item", "PostgresStore", "SqliteStore"):
        from graph_agent import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
