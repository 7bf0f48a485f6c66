"""Chat models: the :class:`ChatModel` protocol, the OpenAI-compatible and Anthropic clients,
test models.

Example:
    >>> from graph_agent.messages import UserMessage
    >>> from graph_agent.models import ScriptedChatModel, fold_chunks
    >>> model = ScriptedChatModel(["Hello!", "Hello again!"])
    >>> model.generate([UserMessage("hi")]).text
    'Hello!'
    >>> fold_chunks(model.stream([UserMessage("hi")])).text
    'Hello again!'
"""

import importlib
from typing import TYPE_CHECKING, Any

from graph_agent.models.base import (
    ChatModel,
    ChunkAccumulator,
    ModelRequest,
    ToolDefinition,
    ToolLike,
    as_tool_definitions,
    fold_chunks,
    message_to_chunks,
    parse_tool_arguments,
)
from graph_agent.models.errors import (
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelConnectionError,
    ModelContextLengthError,
    ModelError,
    ModelNotFoundError,
    ModelRateLimitError,
    ModelResponseError,
    ModelServerError,
    ModelStreamCutError,
    ModelTimeoutError,
    UnrecordedRequestError,
)
from graph_agent.models.scripted import ScriptedChatModel, ScriptedResponse

if TYPE_CHECKING:
    from graph_agent.models.anthropic import AnthropicChatModel
    from graph_agent.models.openai import OpenAIChatModel
    from graph_agent.models.recording import (
        RecordingChatModel,
        ReplayChatModel,
        request_fingerprint,
    )
    from graph_agent.models.retry import RetryPolicy

# The HTTP client (httpx) is imported on first use, so `import graph_agent` stays light.
_LAZY = {
    "AnthropicChatModel": "graph_agent.models.anthropic",
    "OpenAIChatModel": "graph_agent.models.openai",
    "RecordingChatModel": "graph_agent.models.recording",
    "ReplayChatModel": "graph_agent.models.recording",
    "request_fingerprint": "graph_agent.models.recording",
    "RetryPolicy": "graph_agent.models.retry",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'graph_agent.models' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "AnthropicChatModel",
    "ChatModel",
    "ChunkAccumulator",
    "ModelAuthenticationError",
    "ModelBadRequestError",
    "ModelConnectionError",
    "ModelContextLengthError",
    "ModelError",
    "ModelNotFoundError",
    "ModelRateLimitError",
    "ModelRequest",
    "ModelResponseError",
    "ModelServerError",
    "ModelStreamCutError",
    "ModelTimeoutError",
    "OpenAIChatModel",
    "RecordingChatModel",
    "ReplayChatModel",
    "RetryPolicy",
    "ScriptedChatModel",
    "ScriptedResponse",
    "ToolDefinition",
    "ToolLike",
    "UnrecordedRequestError",
    "as_tool_definitions",
    "fold_chunks",
    "message_to_chunks",
    "parse_tool_arguments",
    "request_fingerprint",
]
