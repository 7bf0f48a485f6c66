"""The public API: what `import graph_agent` offers, kept sorted and importable."""

from __future__ import annotations

import graph_agent

EXPECTED = {
    "END",
    "START",
    "AppendStrategy",
    "Command",
    "CompileConfig",
    "CompiledGraph",
    "GraphAgentError",
    "GraphCancelledError",
    "GraphInterrupted",
    "GraphRecursionError",
    "GraphRuntimeError",
    "GraphSetupError",
    "Interrupt",
    "InvalidResumeError",
    "InvalidUpdateError",
    "KeyStrategy",
    "Listener",
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
    "Send",
    "SerializationError",
    "SqliteSaver",
    "StateGraph",
    "StateSnapshot",
    "StreamingOutput",
    "TaskContext",
    "TaskSnapshot",
    "ThreadBusyError",
    "emit_chunk",
    "interrupt",
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
    "Tool",
    "ToolContext",
    "Toolkit",
    "tool",
    "ReactAgent",
    "JumpTo",
    "AgentHook",
    "ModelHook",
    "MessagesAgentHook",
    "MessagesModelHook",
    "AgentCommand",
    "HumanInTheLoopHook",
    "ModelInterceptor",
    "ToolInterceptor",
    "ModelRetryInterceptor",
    "ModelFallbackInterceptor",
    "ToolRetryInterceptor",
    "ToolEmulatorInterceptor",
    "ModelCallLimitHook",
    "ToolCallLimitHook",
    "SummarizationHook",
    "ToolCallRequest",
    "InMemoryStore",
    "SqliteStore",
    "PostgresStore",
    "Item",
}


def test_all_is_sorted_like_isort_constants_classes_functions():
    names = graph_agent.__all__
    constants = [n for n in names if n.isupper()]
    classes = [n for n in names if n[0].isupper() and not n.isupper()]
    functions = [n for n in names if n[0].islower()]
    assert names == sorted(constants) + sorted(classes) + sorted(functions)


def test_all_lists_the_public_api_and_every_name_exists():
    assert set(graph_agent.__all__) >= EXPECTED
    for name in graph_agent.__all__:
        assert hasattr(graph_agent, name), name


def test_the_error_tree_has_one_root_and_builtin_bases():
    assert issubclass(graph_agent.GraphSetupError, graph_agent.GraphAgentError)
    assert issubclass(graph_agent.GraphSetupError, ValueError)
    for error in (
        graph_agent.GraphRecursionError,
        graph_agent.GraphCancelledError,
        graph_agent.NodeError,
        graph_agent.InvalidUpdateError,
        graph_agent.ThreadBusyError,
    ):
        assert issubclass(error, graph_agent.GraphRuntimeError)
        assert issubclass(error, RuntimeError)
    assert issubclass(graph_agent.InvalidResumeError, ValueError)
    assert issubclass(graph_agent.SerializationError, ValueError)
    assert issubclass(graph_agent.ModelError, RuntimeError)
    assert not issubclass(graph_agent.GraphInterrupted, graph_agent.GraphAgentError)
    assert not issubclass(graph_agent.GraphInterrupted, Exception)
