"""Todo list: a ``write_todos`` tool the model plans with, kept in the ``todos`` state key.

For a task of several steps, a model that writes its plan down and ticks it off keeps track
better, and the user sees where it is. :class:`TodoListHook` brings the tool (hooks may
contribute tools) and the state key; it adds no node to the graph. Each call of the tool
replaces the whole list; the result the model reads is the list as now stored. The
``graph-agent`` command shows the list whenever a step changes it.

The state holds plain dicts, ``{"content": str, "status": "pending" | "in_progress" |
"completed"}``, so it is stored by every saver and read back as it was.

Example:
    >>> from graph_agent.agent import ReactAgent
    >>> from graph_agent.models import ScriptedChatModel
    >>> agent = ReactAgent("planner", ScriptedChatModel(["done"]), hooks=[TodoListHook()])
    >>> agent.toolkit.names
    ('write_todos',)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel

from graph_agent.agent.hooks import Hook
from graph_agent.graph.state import KeyStrategy, ReplaceStrategy
from graph_agent.graph.types import Command
from graph_agent.messages import ToolResponseMessage
from graph_agent.tools import Tool, ToolContext

TODOS_KEY = "todos"
"""The state key the todo list is kept in."""
TodoStatus = Literal["pending", "in_progress", "completed"]
WRITE_TODOS_DESCRIPTION = (
    "Write your todo list for the current task: the whole list each time (it replaces the "
    "last one). Use it for tasks of three steps or more: list the steps as 'pending', mark "
    "the one you work on 'in_progress' (one at a time), and mark each 'completed' as soon as "
    "it is done. Skip it for simple questions."
)
_MARKS: Mapping[str, str] = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


class Todo(BaseModel):
    """One item of the todo list."""

    content: str
    status: TodoStatus = "pending"


def format_todos(todos: Sequence[Mapping[str, Any]]) -> str:
    """The list as lines ``[x] done``, ``[~] under way``, ``[ ] to do``.

    Example:
        >>> print(format_todos([{"content": "read", "status": "completed"},
        ...                     {"content": "write", "status": "in_progress"}]))
        [x] read
        [~] write
    """
    return "\n".join(
        f"{_MARKS.get(str(item.get('status')), '[?]')} {item.get('content', '')}" for item in todos
    )


def _write_todos(todos: list[Todo], context: ToolContext) -> Command:
    stored = [item.model_dump() for item in todos]
    text = f"Todo list updated:\n{format_todos(stored)}" if stored else "Todo list cleared."
    result = ToolResponseMessage(tool_call_id=context.call_id, name="write_todos", content=text)
    return Command(update={TODOS_KEY: stored, "messages": [result]})


class TodoListHook(Hook):
    """Gives the agent a ``write_todos`` tool and a ``todos`` state key (see the module).

    Args:
        description: The tool's description, which tells the model when and how to use it.
        name: The hook's name, to tell two apart.
    """

    name = "todo_list"
    state_keys: ClassVar[Mapping[str, KeyStrategy]] = {TODOS_KEY: ReplaceStrategy()}

    def __init__(self, description: str = WRITE_TODOS_DESCRIPTION, name: str | None = None) -> None:
        self.tools = (Tool(_write_todos, name="write_todos", description=description),)
        if name:
            self.name = name
