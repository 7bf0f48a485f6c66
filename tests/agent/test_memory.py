"""Long-term memory in agents and graphs: config.store in nodes, ToolContext.store in tools, the
memory hook and the remember/forget tools, across threads and users."""

from __future__ import annotations

import pytest

from graph_agent import (
    END,
    START,
    CompileConfig,
    ReactAgent,
    RunnableConfig,
    StateGraph,
    SystemMessage,
    ToolContext,
    tool,
)
from graph_agent.agent.memory import MEMORIES_ID, MemoryHook, memory_id, memory_tools
from graph_agent.demo import build_agent
from graph_agent.messages import AssistantMessage, ToolCall
from graph_agent.models import ScriptedChatModel
from graph_agent.store import HashEmbeddings, InMemoryStore, SqliteStore


def _user(user_id: str, thread: str) -> RunnableConfig:
    return RunnableConfig(thread_id=thread, context={"user_id": user_id})


def test_a_node_reads_and_writes_the_compiled_store_through_its_config(caller):
    store = InMemoryStore()
    store.put(("counts",), "seen", {"n": 41})

    def count(state, config):
        seen = config.store.get(("counts",), "seen").value["n"] + 1
        config.store.put(("counts",), "seen", {"n": seen})
        return {"n": seen}

    g = StateGraph("count")
    g.add_node("count", count)
    g.add_edge(START, "count").add_edge("count", END)
    app = g.compile(CompileConfig(store=store))
    assert caller.invoke(app, {"n": 0})["n"] == 42
    assert store.get(("counts",), "seen").value == {"n": 42}


def test_a_store_in_the_call_config_wins_and_reaches_subgraphs(caller):
    compiled_store, call_store = InMemoryStore(), InMemoryStore()

    def inner(state, config):
        config.store.put(("where",), "inner", {"ok": True})
        return {"n": 1}

    child = StateGraph("child")
    child.add_node("inner", inner)
    child.add_edge(START, "inner").add_edge("inner", END)
    parent = StateGraph("parent")
    parent.add_node("child", child.compile())
    parent.add_edge(START, "child").add_edge("child", END)
    app = parent.compile(CompileConfig(store=compiled_store))
    caller.invoke(app, {"n": 0}, RunnableConfig(store=call_store))
    assert call_store.get(("where",), "inner") is not None
    assert compiled_store.get(("where",), "inner") is None
    caller.invoke(app, {"n": 0})
    assert compiled_store.get(("where",), "inner") is not None


def test_a_tool_reaches_the_agents_store_through_its_context():
    @tool
    def save_note(text: str, ctx: ToolContext) -> str:
        """Save a note for the user."""
        ctx.store.put(("notes", ctx.config.context["user_id"]), "last", {"text": text})
        return "saved"

    store = InMemoryStore()
    model = ScriptedChatModel(
        [AssistantMessage(tool_calls=[ToolCall("c1", "save_note", {"text": "buy milk"})]), "ok"]
    )
    agent = ReactAgent("notes", model, tools=[save_note], store=store)
    agent.call("remember to buy milk", _user("u1", "t1"))
    assert store.get(("notes", "u1"), "last").value == {"text": "buy milk"}
    assert ToolContext().store is None


def test_a_fact_learned_on_one_thread_is_recalled_on_another_for_the_same_user_only():
    remember = AssistantMessage(
        tool_calls=[ToolCall("c1", "remember", {"fact": "The user is allergic to peanuts."})]
    )
    model = ScriptedChatModel([remember, "Noted.", "Careful: peanuts.", "Anything goes."])
    store = InMemoryStore()
    agent = ReactAgent("chef", model, tools=memory_tools(), hooks=[MemoryHook()], store=store)
    agent.call("I am allergic to peanuts", _user("ada", "thread-a"))
    assert [item.value for item in store.search(("memories", "ada"))] == [
        {"text": "The user is allergic to peanuts."}
    ]
    agent.call("suggest a snack", _user("ada", "thread-b"))
    recalled = _memories_message(model.requests[-1].messages)
    assert recalled is not None and "allergic to peanuts" in recalled.text
    agent.call("suggest a snack", _user("bob", "thread-c"))
    assert _memories_message(model.requests[-1].messages) is None


def _memories_message(messages):
    return next((m for m in messages if m.id == MEMORIES_ID), None)


def test_the_demo_agent_remembers_the_users_name_across_threads_in_a_sqlite_file(tmp_path):
    store = SqliteStore(tmp_path / "demo.db")
    agent = build_agent(store=store)
    told = agent.call("Hi! My name is Ada.", _user("u1", "first")).text
    assert "remember" in told.lower()
    store.close()
    store = SqliteStore(tmp_path / "demo.db")  # a later process
    agent = build_agent(store=store)
    assert agent.call("What is my name?", _user("u1", "second")).text == "Your name is Ada."
    assert agent.call("What is my name?", _user("u2", "third")).text == (
        "I do not know your name yet."
    )
    forgot = agent.call("Please forget my name", _user("u1", "fourth")).text
    assert memory_id("The user's name is Ada.") in forgot
    assert agent.call("What is my name?", _user("u1", "fifth")).text == (
        "I do not know your name yet."
    )
    store.close()


def test_the_hook_recalls_the_memories_most_like_the_question_when_the_store_ranks():
    store = InMemoryStore(index={"embed": HashEmbeddings(128), "fields": ["text"]})
    for fact in (
        "The user has a cat called Miso.",
        "The user works in Berlin.",
        "The user plays chess.",
    ):
        store.put(("memories", "u1"), memory_id(fact), {"text": fact})
    model = ScriptedChatModel(["ok", "ok"])
    agent = ReactAgent("a", model, hooks=[MemoryHook(limit=1)], store=store)
    agent.call("what is my cat called?", _user("u1", "t"))
    assert "Miso" in _memories_message(model.requests[-1].messages).text
    agent.call("any chess club in Berlin where I work?", _user("u1", "t"))
    shown = [m for m in model.requests[-1].messages if m.id == MEMORIES_ID]
    assert len(shown) == 1  # replaced in place, not added again
    assert "Miso" not in shown[0].text


def test_forget_removes_a_memory_and_says_so_for_an_unknown_id():
    store = InMemoryStore()
    store.put(("memories", "u1"), "m-1", {"text": "likes tea"})
    forget = next(t for t in memory_tools() if t.name == "forget")
    ctx = ToolContext(config=RunnableConfig(context={"user_id": "u1"}, store=store))
    assert forget.invoke({"memory_id": "m-1"}, ctx) == "Forgot [m-1]."
    assert store.get(("memories", "u1"), "m-1") is None
    assert "no memory 'm-1'" in forget.invoke({"memory_id": "m-1"}, ctx)


def test_a_memory_tool_without_a_user_or_a_store_tells_the_model_what_is_missing():
    remember = next(t for t in memory_tools() if t.name == "remember")
    no_user = ToolContext(config=RunnableConfig(store=InMemoryStore()))
    with pytest.raises(ValueError, match="needs 'user_id' in the run's context"):
        remember("x", no_user)
    no_store = ToolContext(config=RunnableConfig(context={"user_id": "u1"}))
    with pytest.raises(ValueError, match="needs a store"):
        remember("x", no_store)


def test_the_hook_does_nothing_for_a_run_that_names_no_user():
    store = InMemoryStore()
    store.put(("memories", "u1"), "m", {"text": "secret"})
    model = ScriptedChatModel(["ok"])
    ReactAgent("a", model, hooks=[MemoryHook()], store=store).call("hi")
    assert all(not isinstance(m, SystemMessage) for m in model.requests[-1].messages)
