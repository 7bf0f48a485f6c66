"""A copy of a thread that stopped in the middle of a step (paused, or a node failed) goes on in
the copy exactly as the source would: the same pending interrupts answer the same resume, the
nodes that had finished are not run again, a child graph resumes where it waits; and the
source goes on apart."""

from __future__ import annotations

import collections
from typing import Any

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    Command,
    CompileConfig,
    HumanInTheLoopHook,
    NodeError,
    ReactAgent,
    RunnableConfig,
    StateGraph,
    interrupt,
    tool,
)
from graph_agent.messages import AssistantMessage, ToolCall
from graph_agent.models import ScriptedChatModel

SOURCE = RunnableConfig(thread_id="source")
COPY = RunnableConfig(thread_id="copy")


def asking_graph(saver: Any, runs: collections.Counter[str], **options: Any) -> Any:
    """start, then ask (interrupt()) and tally (beside it), then done."""
    graph = StateGraph("ask", key_strategies={"log": AppendStrategy()})

    def node(name: str) -> Any:
        def run(state: Any) -> dict[str, Any]:
            runs[name] += 1
            if name == "ask":
                if runs[name] == 1 and options.get("fail_ask"):
                    raise RuntimeError("ask broke")
                return {"log": f"ask:{interrupt('ok?')}"}
            return {"log": name}

        return run

    for name in ("start", "ask", "tally", "done"):
        graph.add_node(name, node(name))
    graph.add_edge(START, "start").add_edge("start", "ask").add_edge("start", "tally")
    graph.add_edge(["ask", "tally"], "done").add_edge("done", END)
    return graph.compile(CompileConfig(saver=saver))


def test_a_copy_of_a_paused_thread_shows_and_answers_the_same_interrupts(saver, caller):
    runs: collections.Counter[str] = collections.Counter()
    app = asking_graph(saver, runs)
    paused = caller.invoke(app, {}, SOURCE)
    saver.copy_thread("source", "copy")

    pending = app.get_state(COPY).interrupts
    assert pending == paused.interrupts  # same ids: an answer meant for the source fits
    final = caller.invoke(app, Command(resume={pending[0].id: "yes"}), COPY)

    assert sorted(final["log"]) == sorted(["start", "ask:yes", "tally", "done"])
    assert runs == {"start": 1, "ask": 2, "tally": 1, "done": 1}  # tally had finished
    assert app.get_state(SOURCE).interrupts == paused.interrupts  # the source still waits
    assert caller.invoke(app, Command(resume="no"), SOURCE)["log"][-1] == "done"


def test_a_copy_of_a_thread_whose_step_failed_runs_only_the_unfinished_nodes(saver, caller):
    runs: collections.Counter[str] = collections.Counter()
    app = asking_graph(saver, runs, fail_ask=True)
    with pytest.raises(NodeError, match="ask broke"):
        caller.invoke(app, {}, SOURCE)
    saver.copy_thread("source", "copy")

    paused = caller.invoke(app, None, COPY)  # ask runs again (and asks); tally had finished
    assert [i.value for i in paused.interrupts] == ["ok?"]
    final = caller.invoke(app, Command(resume="yes"), COPY)
    assert final["log"][-1] == "done"
    assert runs == {"start": 1, "ask": 3, "tally": 1, "done": 1}


def test_a_copy_of_a_copy_still_answers_the_interrupts_of_the_first(saver):
    runs: collections.Counter[str] = collections.Counter()
    app = asking_graph(saver, runs)
    paused = app.invoke({}, SOURCE)
    saver.copy_thread("source", "copy")
    saver.copy_thread("copy", "copy2")

    copy2 = RunnableConfig(thread_id="copy2")
    assert app.get_state(copy2).interrupts == paused.interrupts
    assert app.invoke(Command(resume="yes"), copy2)["log"][-1] == "done"
    assert runs["tally"] == 1


def test_update_state_on_a_paused_copy_keeps_its_interrupt_answerable(saver):
    runs: collections.Counter[str] = collections.Counter()
    app = asking_graph(saver, runs)
    app.invoke({}, SOURCE)
    saver.copy_thread("source", "copy")

    app.update_state(COPY, {"log": "note"})
    (pending,) = app.get_state(COPY).interrupts
    final = app.invoke(Command(resume={pending.id: "yes"}), COPY)

    assert "note" in final["log"] and final["log"][-1] == "done"
    assert runs["tally"] == 1


def test_a_copy_of_a_parent_paused_in_its_child_resumes_inside_the_child(saver):
    runs: collections.Counter[str] = collections.Counter()
    child = asking_graph(None, runs)
    parent = StateGraph("parent", key_strategies={"log": AppendStrategy()})
    parent.add_node("child", child).add_edge(START, "child").add_edge("child", END)
    app = parent.compile(CompileConfig(saver=saver))
    paused = app.invoke({}, SOURCE)
    saver.copy_thread("source", "copy")

    assert app.get_state(COPY).interrupts == paused.interrupts
    final = app.invoke(Command(resume="yes"), COPY)

    assert final["log"][-1] == "done"
    assert runs == {"start": 1, "ask": 2, "tally": 1, "done": 1}


def test_a_copy_of_an_agent_waiting_for_approval_runs_the_approved_call_once(saver):
    sent: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        sent.append(to)
        return f"sent to {to}"

    model = ScriptedChatModel(
        [AssistantMessage(tool_calls=[ToolCall("c1", "send_email", {"to": "ada"})]), "Sent."] * 2
    )
    agent = ReactAgent(
        "mailer",
        model,
        tools=[send_email],
        hooks=[HumanInTheLoopHook(approve={"send_email": "sends mail"})],
        saver=saver,
    )
    paused = agent.invoke("mail ada", SOURCE)
    saver.copy_thread("source", "copy")

    (pending,) = agent.get_state(COPY).interrupts
    assert pending == paused.interrupts[0]
    final = agent.invoke(Command(resume={"c1": {"decision": "approve"}}), COPY)

    assert final["messages"][-1].text == "Sent."
    assert sent == ["ada"]


def test_only_the_copied_step_keeps_the_source_threads_ids(saver):
    """A copy stopped after a failed one-node step (its only pending write is the error):
    the step that runs again derives its ids from the source, every later step from the copy."""
    seen: dict[str, str | None] = {}
    failures = [True]

    def node(name: str) -> Any:
        def run(state: Any, config: RunnableConfig) -> dict[str, Any]:
            seen[name] = config.task.id_thread
            if name == "b" and failures and failures.pop():
                raise RuntimeError("b broke")
            return {"log": name}

        return run

    graph = StateGraph("chain", key_strategies={"log": AppendStrategy()})
    for name in "abc":
        graph.add_node(name, node(name))
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", END)
    app = graph.compile(CompileConfig(saver=saver))
    with pytest.raises(NodeError):
        app.invoke({}, SOURCE)
    saver.copy_thread("source", "copy")

    assert app.invoke(None, COPY)["log"] == ["a", "b", "c"]
    assert seen == {"a": "source", "b": "source", "c": "copy"}
