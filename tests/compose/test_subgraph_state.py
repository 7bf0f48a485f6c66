"""``get_state(config, subgraphs=True)``: a parent shows what its children hold (LangGraph's
shape: the snapshot's tasks carry the child's StateSnapshot), and a child's history is listed
with the config its snapshot names."""

from __future__ import annotations

from typing import Any

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    Command,
    CompileConfig,
    HumanInTheLoopHook,
    MemorySaver,
    NodeError,
    ReactAgent,
    RunnableConfig,
    SqliteSaver,
    StateGraph,
    TaskSnapshot,
    interrupt,
    tool,
)
from graph_agent.messages import AssistantMessage, ToolCall
from graph_agent.models import ScriptedChatModel

CFG = RunnableConfig(thread_id="t1")


def child_graph(name: str, *, ask: bool = False, fail: list[bool] | None = None) -> Any:
    """draft -> review (which asks a human when ``ask``, or fails while ``fail`` holds True)."""
    graph = StateGraph(name, key_strategies={"log": AppendStrategy()})

    def review(state: Any) -> dict[str, Any]:
        if fail and fail.pop(0):
            raise RuntimeError("review broke")
        answer = interrupt("approve?") if ask else "auto"
        return {"log": f"review:{answer}"}

    graph.add_node("draft", lambda s: {"log": "draft"}).add_node("review", review)
    graph.add_edge(START, "draft").add_edge("draft", "review").add_edge("review", END)
    return graph.compile()


def parent_graph(child: Any, saver: Any) -> Any:
    graph = StateGraph("parent", key_strategies={"log": AppendStrategy()})
    graph.add_node("prepare", lambda s: {"log": "prepare"}).add_node("child", child)
    graph.add_edge(START, "prepare").add_edge("prepare", "child").add_edge("child", END)
    return graph.compile(CompileConfig(saver=saver))


@pytest.fixture(params=["memory", "sqlite"])
def saver(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    return MemorySaver() if request.param == "memory" else SqliteSaver(tmp_path / "db")


def test_a_paused_child_shows_its_state_in_the_parents_snapshot(saver):
    app = parent_graph(child_graph("inner", ask=True), saver)
    app.invoke({}, CFG)

    snapshot = app.get_state(CFG, subgraphs=True)

    (task,) = snapshot.tasks
    assert isinstance(task, TaskSnapshot) and task.name == "child"
    assert [i.value for i in task.interrupts] == ["approve?"]
    child = task.state
    assert child is not None
    assert child.values == {"log": ["prepare", "draft"]}
    assert child.next == ("review",)
    assert [i.value for i in child.interrupts] == ["approve?"]
    assert child.config.checkpoint_ns.startswith("child:")


def test_without_subgraphs_the_tasks_are_listed_without_the_childs_state(saver):
    app = parent_graph(child_graph("inner", ask=True), saver)
    app.invoke({}, CFG)

    (task,) = app.get_state(CFG).tasks

    assert task.name == "child" and task.state is None
    assert [i.value for i in task.interrupts] == ["approve?"]


def test_a_childs_history_is_listed_with_the_config_its_snapshot_names(saver):
    app = parent_graph(child_graph("inner", ask=True), saver)
    app.invoke({}, CFG)
    child = app.get_state(CFG, subgraphs=True).tasks[0].state
    assert child is not None

    history = list(app.get_state_history(child.config))

    assert [s.next for s in history] == [("review",), ("draft",)]
    assert history[0].values == child.values


def test_children_nest_as_deep_as_they_go(saver):
    inner = parent_graph(child_graph("innermost", ask=True), None)
    graph = StateGraph("outer", key_strategies={"log": AppendStrategy()})
    graph.add_node("middle", inner).add_edge(START, "middle").add_edge("middle", END)
    app = graph.compile(CompileConfig(saver=saver))
    app.invoke({}, CFG)

    middle = app.get_state(CFG, subgraphs=True).tasks[0]
    assert middle.name == "middle" and middle.state is not None
    (child,) = middle.state.tasks
    assert child.name == "child" and child.state is not None
    assert child.state.next == ("review",)
    assert child.state.config.checkpoint_ns.count("|") == 1  # middle:<id>|child:<id>


def test_a_resumed_child_that_finished_leaves_no_task(saver):
    app = parent_graph(child_graph("inner", ask=True), saver)
    app.invoke({}, CFG)
    app.invoke(Command(resume="yes"), CFG)

    snapshot = app.get_state(CFG, subgraphs=True)

    assert snapshot.tasks == () and snapshot.next == ()
    assert snapshot.values["log"] == ["prepare", "draft", "review:yes"]


def test_a_failed_task_shows_its_error_and_the_childs_state_where_it_stopped(saver):
    app = parent_graph(child_graph("inner", fail=[True, False]), saver)
    with pytest.raises(NodeError):
        app.invoke({}, CFG)

    (task,) = app.get_state(CFG, subgraphs=True).tasks

    assert task.name == "child" and "review broke" in (task.error or "")
    assert task.state is not None and task.state.next == ("review",)
    assert "RuntimeError: review broke" in (task.state.tasks[0].error or "")
    app.invoke(None, CFG)  # the error is shown, never acted on: the task runs again
    assert app.get_state(CFG).values["log"] == ["prepare", "draft", "review:auto"]


@tool
def send_email(to: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def test_an_agent_node_waiting_for_approval_shows_its_conversation():
    model = ScriptedChatModel(
        [AssistantMessage(tool_calls=[ToolCall("c1", "send_email", {"to": "ada"})]), "Sent."]
    )
    agent = ReactAgent(
        "mailer",
        model,
        tools=[send_email],
        hooks=[HumanInTheLoopHook(approve={"send_email": "sends mail"})],
    )
    graph = StateGraph("desk", key_strategies={"messages": AppendStrategy()})
    graph.add_node("mailer", agent).add_edge(START, "mailer").add_edge("mailer", END)
    app = graph.compile(CompileConfig(saver=MemorySaver()))
    app.invoke({"messages": "mail ada"}, CFG)

    (task,) = app.get_state(CFG, subgraphs=True).tasks

    assert task.state is not None
    assert task.state.values["messages"][-1].tool_calls[0].name == "send_email"
    assert task.interrupts[0].value["tool_calls"][0]["id"] == "c1"
    assert agent.get_state(CFG, subgraphs=True).tasks == ()  # the agent's own thread is empty
    # the child's history read through the parent shows the child as its own snapshots do
    newest = next(app.get_state_history(task.state.config))
    assert newest.values.keys() == task.state.values.keys() == {"messages"}
    assert [t.name for t in newest.tasks] == [t.name for t in task.state.tasks]
    assert app.get_state(task.state.config).values.keys() == {"messages"}


def test_a_task_that_failed_then_paused_shows_its_interrupt_not_the_old_error(saver):
    attempts = []

    def flaky(state: Any) -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("api down")
        return {"log": f"ok:{interrupt('go on?')}"}

    graph = StateGraph("flaky", key_strategies={"log": AppendStrategy()})
    graph.add_node("flaky", flaky).add_edge(START, "flaky").add_edge("flaky", END)
    app = graph.compile(CompileConfig(saver=saver))
    with pytest.raises(NodeError):
        app.invoke({}, CFG)
    assert "api down" in (app.get_state(CFG).tasks[0].error or "")

    app.invoke(None, CFG)

    (task,) = app.get_state(CFG).tasks
    assert [i.value for i in task.interrupts] == ["go on?"] and task.error is None


class ErrorsCannotBeStored(MemorySaver):
    """A store that fails exactly when the engine keeps a failed task's error."""

    def put_writes(self, thread_id, checkpoint_ns, checkpoint_id, task_id, writes):
        if any(channel == "__error__" for channel, _ in writes):
            raise OSError("disk full")
        super().put_writes(thread_id, checkpoint_ns, checkpoint_id, task_id, writes)


def test_a_store_failing_to_keep_a_nodes_error_never_hides_that_error(caller):
    def broken(state: Any) -> dict[str, Any]:
        raise ValueError("the real problem")

    graph = StateGraph("broken")
    graph.add_node("broken", broken).add_edge(START, "broken").add_edge("broken", END)
    app = graph.compile(CompileConfig(saver=ErrorsCannotBeStored()))

    with pytest.raises(NodeError) as caught:
        caller.invoke(app, {}, CFG)

    assert isinstance(caught.value.__cause__, ValueError)
    assert any(
        "could not be stored" in note and "disk full" in note for note in caught.value.__notes__
    )
