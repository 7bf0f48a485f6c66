"""graph_agent: a small, fast, durable graph runtime for ReAct agents.

The public API is re-exported here; everything else is internal.
"""

from typing import TYPE_CHECKING

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
from graph_agent.graph.lazy import lazy_names
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
from graph_agent.runnable import Runnable

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
    from graph_agent.models.errors import ModelError
    from graph_agent.store import InMemoryStore, Item, PostgresStore, SqliteStore
    from graph_agent.tools import Tool, ToolContext, Toolkit, tool

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


_MESSAGE_NAMES = (
    "AssistantMessage",
    "AssistantMessageChunk",
    "AudioPart",
    "FilePart",
    "ImagePart",
    "SystemMessage",
    "TextPart",
    "ToolCall",
    "ToolResponseMessage",
    "Usage",
    "UserMessage",
)
_AGENT_NAMES = (
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
)
_LAZY: dict[str, str] = {
    **dict.fromkeys(_MESSAGE_NAMES, "graph_agent.messages"),
    **dict.fromkeys(_AGENT_NAMES, "graph_agent.agent"),
    **dict.fromkeys(
        ("AsyncPostgresSaver", "PostgresSaver", "SqliteSaver"), "graph_agent.checkpoint"
    ),
    **dict.fromkeys(("InMemoryStore", "Item", "PostgresStore", "SqliteStore"), "graph_agent.store"),
    **dict.fromkeys(("Tool", "ToolContext", "Toolkit", "tool"), "graph_agent.tools"),
    "ModelError": "graph_agent.models.errors",
}
"""Public names that load on first use, and the module each comes from: the messages and tools
(pydantic: its first model costs about 19 MB), the agent layer, the SQLite and PostgreSQL
savers and the stores. So ``import graph_agent`` stays light (``benchmarks/footprint.py``)."""


__getattr__ = lazy_names(__name__, _LAZY, keep=globals())
"""A lazy public name (:data:`_LAZY`), imported on first use and kept as an attribute."""


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
