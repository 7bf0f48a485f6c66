"""The agent's two working nodes, ``__model__`` and ``__tool__``, and what reads a run.

The code lives in :mod:`graph_agent.agent.turns` (the run's counters, answer and pending
calls), :mod:`graph_agent.agent.model_node`, :mod:`graph_agent.agent.tool_node` and
:mod:`graph_agent.agent.fan_out`; this module keeps the names importable from here.
"""

from __future__ import annotations

from graph_agent.agent.model_node import FinalAnswerTool, ModelNode, StructuredOutputError
from graph_agent.agent.tool_node import ToolNode
from graph_agent.agent.turns import (
    FINAL_ANSWER_TOOL,
    INSTRUCTION_ID,
    INTERRUPTED_RESULT,
    SUMMARIZE_PROMPT,
    TOOL_RECORD,
    TOOL_UPDATE_RECORD,
    counters,
    error_response,
    last_assistant,
    messages_of,
    pending_tool_calls,
    rejected_calls,
    rejection_response,
    run_answer,
    run_start,
    tokens_used,
    unique_call_ids,
)

__all__ = [
    "FINAL_ANSWER_TOOL",
    "INSTRUCTION_ID",
    "INTERRUPTED_RESULT",
    "SUMMARIZE_PROMPT",
    "TOOL_RECORD",
    "TOOL_UPDATE_RECORD",
    "FinalAnswerTool",
    "ModelNode",
    "StructuredOutputError",
    "ToolNode",
    "counters",
    "error_response",
    "last_assistant",
    "messages_of",
    "pending_tool_calls",
    "rejected_calls",
    "rejection_response",
    "run_answer",
    "run_start",
    "tokens_used",
    "unique_call_ids",
]
