"""The todo list of TodoListHook, shown by ``graph-agent run`` and ``chat`` as it changes."""

from __future__ import annotations

PLANNER = """
from graph_agent import ReactAgent
from graph_agent.agent.middleware import TodoListHook
from graph_agent.messages import AssistantMessage, ToolCall
from graph_agent.models import ScriptedChatModel

todos = [
    {"content": "find the flights", "status": "completed"},
    {"content": "compare prices", "status": "in_progress"},
]
model = ScriptedChatModel([
    AssistantMessage(tool_calls=[ToolCall("c1", "write_todos", {"todos": todos})]),
    "comparing prices now",
])
agent = ReactAgent("planner", model, hooks=[TodoListHook()])
"""


def test_run_shows_the_todo_list_when_a_step_writes_it(cli, tmp_path):
    (tmp_path / "planner.py").write_text(PLANNER)

    result = cli("run", f"{tmp_path / 'planner.py'}:agent", "plan", "--stream", "--plain")

    assert result.code == 0, result.err
    assert "__tool__: 1 result, todo list" in result.out
    assert "    [x] find the flights\n    [~] compare prices\n" in result.out


def test_chat_shows_the_todo_list_too(cli, tmp_path):
    (tmp_path / "planner.py").write_text(PLANNER)

    result = cli("chat", "--plain", f"{tmp_path / 'planner.py'}:agent", stdin="plan a trip\n")

    assert result.code == 0, result.err
    assert "[~] compare prices" in result.out
