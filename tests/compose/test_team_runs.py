"""Teams that pause and crash: an approval deep inside a team pauses it once and resumes
inside the agent that asked; a crash inside an agent resumes inside it."""

from __future__ import annotations

import collections
from typing import Any

import pytest

from graph_agent import (
    Command,
    GraphInterrupted,
    HumanInTheLoopHook,
    MemorySaver,
    ModelError,
    NodeError,
    ParallelAgent,
    RunnableConfig,
    SequentialAgent,
    tool,
)
from graph_agent.checkpoint.sqlite import SqliteSaver
from tests.compose.agents import calls, echo, scripted, texts

CFG = RunnableConfig(thread_id="t1")
APPROVE = Command(resume={"m1": {"decision": "approve"}})
outbox: list[str] = []
tool_runs: collections.Counter[str] = collections.Counter()


@pytest.fixture(autouse=True)
def clear() -> None:
    outbox.clear()
    tool_runs.clear()


@tool
def send_email(to: str) -> str:
    """Send an email."""
    outbox.append(to)
    return f"sent to {to}"


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    tool_runs[topic] += 1
    return f"notes on {topic}"


def mailer() -> Any:
    return scripted(
        "mailer",
        calls(("m1", "send_email", {"to": "bob"})),
        "Mailed bob.",
        tools=[send_email],
        hooks=[HumanInTheLoopHook(approve={"send_email": "sends mail on your behalf"})],
    )


def test_an_approval_inside_a_sequential_team_pauses_it_once_and_resumes_in_the_agent(caller):
    researcher = scripted("researcher", "Bob wants the news.")
    team = SequentialAgent("team", [researcher, mailer()])

    outputs = caller.stream(team, "Tell Bob.", CFG, subgraphs=True)

    paused = [o for o in outputs if o.interrupts and o.path == ()]
    assert len(paused) == 1 and outputs[-1] is paused[0]
    (pending,) = paused[0].interrupts
    assert pending.value["tool_calls"][0]["id"] == "m1"
    assert team.get_state(CFG).next == ("mailer",)
    assert team.get_state(CFG).interrupts == (pending,)
    assert outbox == []

    final = caller.invoke(team, APPROVE, CFG)

    assert final.interrupts == ()
    assert outbox == ["bob"]
    assert texts(final) == ["Tell Bob.", "Bob wants the news.", "Mailed bob."]
    assert len(researcher.model.requests) == 1


def test_an_approval_two_teams_deep_surfaces_once_and_the_resume_reaches_it(caller):
    researcher = scripted("researcher", "Bob wants the news.")
    reviewer = echo("reviewer")
    team = SequentialAgent("outer", [SequentialAgent("inner", [researcher, mailer()]), reviewer])

    paused = caller.invoke(team, "Tell Bob.", CFG)

    assert len(paused.interrupts) == 1
    assert texts(paused) == ["Tell Bob."]
    final = caller.invoke(team, APPROVE, CFG)
    assert outbox == ["bob"]
    assert texts(final) == ["Tell Bob.", "Mailed bob.", "reviewer: Mailed bob."]
    assert len(researcher.model.requests) == 1
    assert len(reviewer.model.requests) == 1


def test_call_on_a_paused_team_raises_graph_interrupted():
    team = SequentialAgent("team", [mailer()])

    with pytest.raises(GraphInterrupted) as paused:
        team.call("Tell Bob.", CFG)

    assert paused.value.interrupts[0].value["tool_calls"][0]["name"] == "send_email"
    assert team.call(APPROVE, CFG).text == "Mailed bob."


def test_an_approval_inside_a_parallel_team_lets_the_other_agents_finish_first():
    quick = echo("quick")
    team = ParallelAgent("panel", [quick, mailer()])

    paused = team.invoke("Tell Bob.", CFG)

    assert len(paused.interrupts) == 1
    final = team.invoke(APPROVE, CFG)
    assert texts(final) == ["Tell Bob.", "quick: Tell Bob.", "Mailed bob."]
    assert len(quick.model.requests) == 1


@pytest.fixture(params=["memory", "sqlite"])
def saver(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    if request.param == "memory":
        yield MemorySaver()
        return
    sqlite = SqliteSaver(str(tmp_path / "team.db"))
    yield sqlite
    sqlite.close()


def test_a_crash_inside_an_agent_of_a_team_resumes_inside_that_agent(caller, saver):
    researcher = scripted("researcher", "Graphs matter.")
    writer = scripted(
        "writer",
        calls(("w1", "lookup", {"topic": "graphs"})),
        ModelError("the model server went away"),
        lambda request: f"Report: {request.messages[-1].text}",
        tools=[lookup],
    )
    team = SequentialAgent("team", [researcher, writer], saver=saver)

    with pytest.raises(NodeError) as failure:
        caller.invoke(team, "Write a report.", CFG)
    assert failure.value.node == "writer"
    assert team.get_state(CFG).next == ("writer",)

    final = caller.invoke(team, None, CFG)

    assert texts(final) == ["Write a report.", "Graphs matter.", "Report: notes on graphs"]
    assert len(researcher.model.requests) == 1
    assert tool_runs == {"graphs": 1}
    assert len(writer.model.requests) == 3


def test_a_crash_in_one_parallel_agent_reruns_only_that_agent(caller):
    steady = scripted("steady", "Steady answer.")
    flaky = scripted("flaky", ModelError("timeout"), "Flaky answer.")
    team = ParallelAgent("panel", [steady, flaky])

    with pytest.raises(NodeError):
        caller.invoke(team, "Go.", CFG)
    final = caller.invoke(team, None, CFG)

    assert texts(final) == ["Go.", "Steady answer.", "Flaky answer."]
    assert len(steady.model.requests) == 1
    assert len(flaky.model.requests) == 2


def gated_mailer(name: str, to: str) -> Any:
    return scripted(
        name,
        calls((f"m-{name}", "send_email", {"to": to})),
        f"{name} is done",
        tools=[send_email],
        hooks=[HumanInTheLoopHook(approve={"send_email": "sends mail on your behalf"})],
    )


def test_approvals_in_two_parallel_agents_pause_the_team_once_with_both(caller):
    team = ParallelAgent("panel", [gated_mailer("left", "bob"), gated_mailer("right", "eve")])

    paused = caller.invoke(team, "Tell them.", CFG)

    assert [i.value["tool_calls"][0]["id"] for i in paused.interrupts] == ["m-left", "m-right"]
    answers = {
        i.id: {i.value["tool_calls"][0]["id"]: {"decision": "approve"}} for i in paused.interrupts
    }
    final = caller.invoke(team, Command(resume=answers), CFG)
    assert sorted(outbox) == ["bob", "eve"]
    assert texts(final) == ["Tell them.", "left is done", "right is done"]


def test_answering_one_of_two_nested_approvals_keeps_the_team_waiting_on_the_other():
    left, right = gated_mailer("left", "bob"), gated_mailer("right", "eve")
    team = ParallelAgent("panel", [left, right])
    first, second = team.invoke("Tell them.", CFG).interrupts

    still = team.invoke(Command(resume={first.id: {"m-left": {"decision": "approve"}}}), CFG)

    assert still.interrupts == (second,)
    assert outbox == ["bob"]
    rejected = {"m-right": {"decision": "reject", "reason": "Eve is away"}}
    final = team.invoke(Command(resume=rejected), CFG)
    assert outbox == ["bob"]
    assert texts(final) == ["Tell them.", "left is done", "right is done"]
    assert len(left.model.requests) == len(right.model.requests) == 2
