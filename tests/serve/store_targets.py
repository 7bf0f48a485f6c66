"""What the store tests serve: a graph whose node uses the run's store, an agent remembering
through its tools, and a deterministic local embedder (no network) for a config's
``store.index.embed``."""

from __future__ import annotations

from graph_agent import END, START, StateGraph
from graph_agent.agent.memory import memory_tools
from graph_agent.agent.react import ReactAgent
from graph_agent.messages import AssistantMessage, ToolCall
from graph_agent.models.scripted import ScriptedChatModel
from graph_agent.store import HashEmbeddings

_EMBED = HashEmbeddings(32)


def embed(texts: list[str]) -> list[list[float]]:
    """A hashed bag of words of 32 numbers per text: same text, same vector, anywhere."""
    return _EMBED(texts)


def notes() -> StateGraph:
    """``note``: reads ``("inbox", user)``/``"hint"`` from the run's store (what a client put)
    into ``hint``, and writes the state's ``text`` at ``("notes", user)``/``"last"``."""
    graph = StateGraph("notes")

    def note(state, config):
        where = ("notes", state["user"])
        config.store.put(where, "last", {"text": state["text"]})
        hint = config.store.get(("inbox", state["user"]), "hint")
        return {"hint": None if hint is None else hint.value["text"]}

    graph.add_node("note", note)
    graph.add_edge(START, "note").add_edge("note", END)
    return graph


def rememberer() -> ReactAgent:
    """An agent that remembers a fact with its ``remember`` tool (in the run's store, under
    ``("memories", context["user_id"])``), then says ``Noted.``."""
    call = ToolCall("c1", "remember", {"fact": "The user likes green tea."})
    model = ScriptedChatModel([AssistantMessage(tool_calls=[call]), "Noted."] * 20)
    return ReactAgent("rememberer", model, tools=memory_tools())
