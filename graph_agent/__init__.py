"""graph_agent: a small, fast, durable graph runtime for ReAct agents.

The public API is re-exported here; everything else is internal.
"""

from graph_agent.checkpoint import Checkpoint, CheckpointSaver, MemorySaver, SqliteSaver
from graph_agent.graph.builder import StateGraph
from graph_agent.graph.errors import (
    GraphAgentError,
    GraphInterrupted,
    GraphRecursionError,
    GraphRuntimeError,
    GraphSetupError,
    InvalidResumeError,
    InvalidUpdateError,
    ModelError,
    NodeError,
    SerializationError,
    ThreadBusyError,
)
from graph_agent.graph.runner import CompiledGraph
from graph_agent.graph.runtime import TaskContext, emit_chunk, interrupt
from graph_agent.graph.state import (
    AppendStrategy,
    KeyStrategy,
    MergeStrategy,
    OverAllState,
    RemoveMessage,
    ReplaceAll,
    ReplaceStrategy,
)
from graph_agent.graph.types import (
    END,
    START,
    Command,
    CompileConfig,
    Interrupt,
    NodeOutput,
    RunnableConfig,
    StateSnapshot,
    StreamingOutput,
)
from graph_agent.messages import (
    AssistantMessage,
    AssistantMessageChunk,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from graph_agent.tools import Tool, ToolContext, Toolkit, tool

__all__ = [
    "END",
    "START",
    "AppendStrategy",
    "AssistantMessage",
    "AssistantMessageChunk",
    "Checkpoint",
    "CheckpointSaver",
    "Command",
    "CompileConfig",
    "CompiledGraph",
    "GraphAgentError",
    "GraphInterrupted",
    "GraphRecursionError",
    "GraphRuntimeError",
    "GraphSetupError",
    "Interrupt",
    "InvalidResumeError",
    "InvalidUpdateError",
    "KeyStrategy",
    "MemorySaver",
    "MergeStrategy",
    "ModelError",
    "NodeError",
    "NodeOutput",
    "OverAllState",
    "RemoveMessage",
    "ReplaceAll",
    "ReplaceStrategy",
    "RunnableConfig",
    "SerializationError",
    "SqliteSaver",
    "StateGraph",
    "StateSnapshot",
    "StreamingOutput",
    "SystemMessage",
    "TaskContext",
    "ThreadBusyError",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolResponseMessage",
    "Toolkit",
    "Usage",
    "UserMessage",
    "emit_chunk",
    "interrupt",
    "tool",
]
