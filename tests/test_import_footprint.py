"""``import graph_agent`` loads the engine only: pydantic (the messages, tools and agents),
OpenSSL's hashlib, the stores, serving, MCP and observability load when first used, and every
public name still imports as before (issue 34: import ≤ +20 MB RSS over the interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import graph_agent

OPTIONAL = (
    "pydantic",
    "_hashlib",
    "graph_agent.messages",
    "graph_agent.tools",
    "graph_agent.agent",
    "graph_agent.store",
    "graph_agent.serve",
    "graph_agent.mcp",
    "graph_agent.observability",
    "graph_agent.checkpoint.sqlite",
    "graph_agent.checkpoint.postgres",
    "networkx",
)


def fresh(code: str) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter; it prints one JSON value, returned here."""
    output = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True
    ).stdout
    result: dict[str, object] = json.loads(output)
    return result


def test_import_graph_agent_loads_no_optional_layer():
    loaded = fresh(
        f"""
        import json, sys
        import graph_agent
        print(json.dumps({{name: name in sys.modules for name in {OPTIONAL!r}}}))
        """
    )
    assert loaded == dict.fromkeys(OPTIONAL, False)


def test_building_and_running_a_graph_loads_no_pydantic():
    loaded = fresh(
        """
        import json, sys
        from graph_agent import END, START, MemorySaver, StateGraph, RunnableConfig
        g = StateGraph("probe")
        g.add_node("a", lambda state: {"x": state["x"] + 1})
        g.add_edge(START, "a")
        g.add_edge("a", END)
        app = g.compile()
        assert app.invoke({"x": 1}) == {"x": 2}
        print(json.dumps({"pydantic": "pydantic" in sys.modules}))
        """
    )
    assert loaded == {"pydantic": False}


def test_a_lazy_name_is_the_object_of_its_module_and_is_kept():
    from graph_agent import AssistantMessage, ReactAgent, SqliteSaver, tool
    from graph_agent.agent import ReactAgent as agent_react
    from graph_agent.checkpoint.sqlite import SqliteSaver as sqlite_saver
    from graph_agent.messages import AssistantMessage as message
    from graph_agent.tools import tool as tool_decorator

    assert AssistantMessage is message
    assert ReactAgent is agent_react
    assert SqliteSaver is sqlite_saver
    assert tool is tool_decorator
    assert "AssistantMessage" in vars(graph_agent)  # looked up once, then a plain attribute
    assert set(graph_agent.__all__) <= set(dir(graph_agent))


def test_an_unknown_name_is_still_an_attribute_error():
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        _ = graph_agent.NoSuchName  # type: ignore[attr-defined]
    with pytest.raises(ImportError):
        exec("from graph_agent import NoSuchName")


def test_stored_messages_load_in_a_process_that_never_imported_the_messages():
    from graph_agent.checkpoint.serde import dumps
    from graph_agent.messages import AssistantMessage, ToolCall

    stored = dumps({"messages": [AssistantMessage("hi", tool_calls=[ToolCall("c1", "add", {})])]})
    loaded = fresh(
        f"""
        import json, sys
        from graph_agent.checkpoint.serde import loads
        before = "graph_agent.messages" in sys.modules
        value = loads({stored!r})
        message = value["messages"][0]
        print(json.dumps({{
            "before": before,
            "type": type(message).__name__,
            "content": message.content,
            "call": message.tool_calls[0].name,
        }}))
        """
    )
    assert loaded == {"before": False, "type": "AssistantMessage", "content": "hi", "call": "add"}


def test_a_serializer_of_its_own_still_refuses_message_codes_it_never_registered():
    import pytest

    from graph_agent.checkpoint.serde import Serializer, dumps
    from graph_agent.graph.errors import SerializationError
    from graph_agent.messages import UserMessage

    with pytest.raises(SerializationError, match="ext code 17"):
        Serializer().loads(dumps(UserMessage("hi")))
