"""The middleware pack: ready-made hooks and interceptors for agents doing real work.

- :class:`ContextEditingInterceptor`: clears old tool results from requests past a token
  budget, keeping the newest ones (``context_editing``).
- :class:`LLMToolSelectorInterceptor`: a (cheaper) model picks the relevant tools before
  each model call (``tool_selector``).
- :class:`PIIRedactionInterceptor`: emails, phone and card numbers, custom patterns redacted,
  masked, hashed or blocked on input, output and tool results (``pii``).
- :class:`TodoListHook`: a ``write_todos`` tool and a ``todos`` state key (``todos``).
- :class:`TokenBudgetHook`: stops a run once its model calls used a token budget
  (``token_budget``).

Example:
    >>> from graph_agent.agent import ReactAgent
    >>> from graph_agent.models import ScriptedChatModel
    >>> agent = ReactAgent(
    ...     "careful",
    ...     ScriptedChatModel(["ok"]),
    ...     hooks=[TodoListHook(), TokenBudgetHook(run_limit=50_000)],
    ...     model_interceptors=[PIIRedactionInterceptor(strategy="redact")],
    ... )
"""

from graph_agent.agent.middleware.context_editing import (
    CLEARED_PLACEHOLDER,
    ContextEditingInterceptor,
)
from graph_agent.agent.middleware.pii import (
    PIIDetectedError,
    PIIRedactionInterceptor,
    luhn_valid,
)
from graph_agent.agent.middleware.todos import TODOS_KEY, Todo, TodoListHook, format_todos
from graph_agent.agent.middleware.token_budget import TokenBudgetHook
from graph_agent.agent.middleware.tool_selector import (
    LLMToolSelectorInterceptor,
    ToolSelection,
    ToolSelectionError,
)

__all__ = [
    "CLEARED_PLACEHOLDER",
    "TODOS_KEY",
    "ContextEditingInterceptor",
    "LLMToolSelectorInterceptor",
    "PIIDetectedError",
    "PIIRedactionInterceptor",
    "Todo",
    "TodoListHook",
    "TokenBudgetHook",
    "ToolSelection",
    "ToolSelectionError",
    "format_todos",
    "luhn_valid",
]
