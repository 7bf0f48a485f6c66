"""A flow agent's ``store=``: its sub-agents' tools read it as ``ToolContext.store``, nested
teams pass it down, and it takes the place of a sub-agent's own store."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from graph_agent import (
    LlmRoutingAgent,
    LoopAgent,
    ParallelAgent,
    ReactAgent,
    RunnableConfig,
    SequentialAgent,
    ToolContext,
    tool,
)
from graph_agent.agent.flows import FlowAgent
from graph_agent.messages import AssistantMessage, ToolCall
from graph_agent.models import ScriptedChatModel
from graph_agent.store import InMemoryStore


@tool
def save_note(text: str, ctx: ToolContext) -> str:
    """Save a note for the user."""
    ctx.store.put(("notes", ctx.config.context["user_id"]), text, {"text": text})
    return "saved"


def scribe(name: str = "scribe", *, runs: int = 1, **options) -> ReactAgent:
    """An agent that saves one note per run through its tool: ``"<name> <run>"``."""
    script: list[AssistantMessage | str] = []
    for run in range(runs):
        call = ToolCall(f"c{run}", "save_note", {"text": f"{name} {run}"})
        script += [AssistantMessage(tool_calls=[call]), "Saved."]
    return ReactAgent(name, ScriptedChatModel(script), tools=[save_note], **options)


TEAMS: dict[str, Callable[..., FlowAgent]] = {
    "sequential": lambda **o: SequentialAgent("team", [scribe()], **o),
    "parallel": lambda **o: ParallelAgent("team", [scribe()], **o),
    "loop": lambda **o: LoopAgent("team", scribe(runs=2), times=2, **o),
    "routing": lambda **o: LlmRoutingAgent(
        "team", ScriptedChatModel(['{"agents": ["scribe"]}']), [scribe()], **o
    ),
}


def _user(user_id: str) -> RunnableConfig:
    return RunnableConfig(context={"user_id": user_id})


@pytest.mark.parametrize("kind", list(TEAMS))
def test_a_sub_agents_tool_reads_the_teams_store(kind, caller):
    store = InMemoryStore()
    team = TEAMS[kind](store=store)
    caller.invoke(team, "take a note", _user("ada"))
    notes = [item.key for item in store.search(("notes", "ada"))]
    assert sorted(notes) == (["scribe 0", "scribe 1"] if kind == "loop" else ["scribe 0"])


def test_a_nested_team_passes_the_outer_teams_store_down(caller):
    store = InMemoryStore()
    inner = ParallelAgent("inner", [scribe("left"), scribe("right")])
    team = SequentialAgent("outer", [inner], store=store)
    caller.invoke(team, "take notes", _user("ada"))
    assert sorted(item.key for item in store.search(("notes", "ada"))) == ["left 0", "right 0"]


def test_the_teams_store_takes_the_place_of_a_sub_agents_own(caller):
    own, teams = InMemoryStore(), InMemoryStore()
    caller.invoke(SequentialAgent("t1", [scribe(store=own)]), "note", _user("ada"))
    assert [item.key for item in own.search(("notes", "ada"))] == ["scribe 0"]
    team = SequentialAgent("t2", [scribe(store=own)], store=teams)
    caller.invoke(team, "note", _user("bob"))
    assert own.search(("notes", "bob")) == []
    assert [item.key for item in teams.search(("notes", "bob"))] == ["scribe 0"]
