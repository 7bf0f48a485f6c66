"""TodoListHook: the write_todos tool, the todos key (stored and reloaded), the CLI view."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from graph_agent import NodeOutput, RunnableConfig, SqliteSaver
from graph_agent.agent import ReactAgent
from graph_agent.agent.middleware import TodoListHook, format_todos
from graph_agent.cli.output import PlainReporter, RichReporter, describe_node
from graph_agent.messages import AssistantMessage, ToolCall, ToolResponseMessage
from graph_agent.models import ScriptedChatModel

CFG = RunnableConfig(thread_id="t1")
PLAN = [
    {"content": "find the flights", "status": "completed"},
    {"content": "compare prices", "status": "in_progress"},
    {"content": "book", "status": "pending"},
]


def writes(todos: list[dict], call_id: str = "c1") -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCall(call_id, "write_todos", {"todos": todos})])


def test_write_todos_stores_the_list_and_answers_with_it():
    model = ScriptedChatModel([writes(PLAN), "on it"])
    agent = ReactAgent("planner", model, hooks=[TodoListHook()])
    state = agent.invoke("book me a trip", CFG)
    assert state["todos"] == PLAN
    result = next(m for m in state["messages"] if isinstance(m, ToolResponseMessage))
    assert result.content == f"Todo list updated:\n{format_todos(PLAN)}"
    assert "[~] compare prices" in model.requests[1].messages[-1].text


def test_each_write_replaces_the_whole_list():
    done = [{**item, "status": "completed"} for item in PLAN]
    model = ScriptedChatModel([writes(PLAN), writes(done, "c2"), "booked"])
    agent = ReactAgent("planner", model, hooks=[TodoListHook()])
    assert agent.invoke("book me a trip", CFG)["todos"] == done


def test_a_status_outside_the_three_is_an_error_the_model_reads():
    model = ScriptedChatModel([writes([{"content": "x", "status": "someday"}]), "sorry"])
    state = ReactAgent("planner", model, hooks=[TodoListHook()]).invoke("plan", CFG)
    result = next(m for m in state["messages"] if isinstance(m, ToolResponseMessage))
    assert result.is_error and "status" in result.content
    assert "todos" not in state.data()


def test_the_list_survives_a_checkpoint_round_trip(tmp_path):
    path = str(tmp_path / "todos.db")
    model = ScriptedChatModel([writes(PLAN), "on it"])
    writer = SqliteSaver(path)
    ReactAgent("planner", model, hooks=[TodoListHook()], saver=writer).invoke("plan", CFG)
    writer.close()
    reader = SqliteSaver(path)
    reloaded = ReactAgent("planner", ScriptedChatModel([]), hooks=[TodoListHook()], saver=reader)
    assert reloaded.get_state(CFG).values["todos"] == PLAN
    reader.close()


def test_the_hook_adds_no_node_to_the_graph():
    agent = ReactAgent("planner", ScriptedChatModel([]), hooks=[TodoListHook()])
    assert "TodoListHook" not in agent.get_graph("mermaid")


def _tool_step() -> NodeOutput:
    agent = ReactAgent("planner", ScriptedChatModel([writes(PLAN), "ok"]), hooks=[TodoListHook()])
    return next(o for o in agent.stream("plan", CFG) if o.node == "__tool__")


def test_the_cli_shows_the_list_when_a_step_changes_it():
    summary, lines = describe_node(_tool_step())
    assert "todo list" in summary
    assert [(line.kind, line.text) for line in lines if line.kind == "todo"] == [
        ("todo", "[x] find the flights"),
        ("todo", "[~] compare prices"),
        ("todo", "[ ] book"),
    ]
    assert not [line for line in lines if line.kind == "update"]  # not again as raw JSON


@pytest.mark.parametrize("compact", [False, True])
def test_plain_and_rich_views_print_the_list_also_in_chat(compact):
    output = _tool_step()
    plain = io.StringIO()
    PlainReporter(plain, compact=compact).node(output)
    assert "[~] compare prices" in plain.getvalue()
    screen = io.StringIO()
    RichReporter(Console(file=screen, width=120), compact=compact).node(output)
    assert "[~] compare prices" in screen.getvalue()
