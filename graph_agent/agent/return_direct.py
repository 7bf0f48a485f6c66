"""Tools whose result is the answer (``@tool(return_direct=True)``): when a tool step ends the
run, and the answer it ends with.

A step ends the run when every call in it went to a ``return_direct`` tool and none failed
(an error, a rejection or a call over the limit goes back to the model, which may try again);
as in LangChain, one call to another tool keeps the loop going. The run then ends without
another model call: the tool node appends an :class:`AssistantMessage` holding the result
(several results joined by a blank line), with ``finish_reason="return_direct"``, so
``agent.call()``, teams and clients read the answer where they always do, and stores its text
at ``output_key`` (with an ``output_schema``: the validated object, when the result is JSON
that matches it). afterAgent hooks still run.

Example:
    >>> from graph_agent.messages import ToolCall, ToolResponseMessage
    >>> from graph_agent.tools import Toolkit, tool
    >>> @tool(return_direct=True)
    ... def lookup(key: str) -> str:
    ...     '''Look a value up.'''
    ...     return "42"
    >>> call = ToolCall("c1", "lookup", {"key": "answer"})
    >>> result = ToolResponseMessage(tool_call_id="c1", name="lookup", content="42")
    >>> direct_answer(Toolkit([lookup]), [call], [result]).text
    '42'
"""

from __future__ import annotations

from collections.abc import Sequence

from graph_agent.messages import (
    AssistantMessage,
    ContentPart,
    MessageContent,
    TextPart,
    ToolCall,
    ToolResponseMessage,
)
from graph_agent.tools import Toolkit

RETURN_DIRECT = "return_direct"
"""The ``finish_reason`` of the answer a return_direct step ends the run with."""
_BETWEEN = "\n\n"


def direct_answer(
    toolkit: Toolkit, calls: Sequence[ToolCall], results: Sequence[ToolResponseMessage]
) -> AssistantMessage | None:
    """The answer that ends the run after this tool step, or ``None`` when the model goes on.

    ``results`` are the step's results in the order of ``calls``.
    """
    if not calls:
        return None
    for call, result in zip(calls, results, strict=True):
        tool = toolkit.get(call.name)
        if tool is None or not tool.return_direct or result.is_error:
            return None
    return AssistantMessage(_joined([r.content for r in results]), finish_reason=RETURN_DIRECT)


def _joined(contents: list[MessageContent]) -> MessageContent:
    if all(isinstance(content, str) for content in contents):
        return _BETWEEN.join(content for content in contents if isinstance(content, str))
    parts: list[ContentPart] = []
    for index, content in enumerate(contents):
        if index:
            parts.append(TextPart(_BETWEEN))
        parts.extend([TextPart(content)] if isinstance(content, str) else content)
    return parts
