"""Toolkit: tools by name, no duplicates, one copy per agent."""

from __future__ import annotations

import pytest

from graph_agent.graph.errors import GraphSetupError
from graph_agent.tools import Tool, Toolkit, tool


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


@tool
def echo(text: str) -> str:
    """Repeat the text."""
    return text


def test_a_toolkit_finds_tools_by_name_in_the_order_added() -> None:
    kit = Toolkit([ping, echo])
    assert kit["echo"] is echo
    assert kit.names == ("ping", "echo")
    assert list(kit) == [ping, echo]
    assert len(kit) == 2
    assert "ping" in kit and "nope" not in kit


def test_a_plain_function_added_becomes_a_tool() -> None:
    def shout(text: str) -> str:
        """Shout the text."""
        return text.upper()

    added = Toolkit().add(shout)
    assert isinstance(added, Tool)
    assert added.invoke({"text": "hi"}) == "HI"


def test_two_tools_with_one_name_are_refused_naming_both() -> None:
    def other_ping() -> str:
        """Another ping."""
        return "other"

    kit = Toolkit([ping])
    with pytest.raises(GraphSetupError, match="two tools are named 'ping'") as caught:
        kit.add(tool(name="ping")(other_ping))
    assert "other_ping" in str(caught.value)
    assert "distinct name" in str(caught.value)


def test_an_unknown_name_lists_the_known_tools() -> None:
    with pytest.raises(KeyError, match="known tools: ping, echo"):
        Toolkit([ping, echo])["pong"]
    assert Toolkit([ping]).get("pong") is None


def test_a_copy_is_independent_of_the_original() -> None:
    shared = Toolkit([ping])
    for_agent = shared.copy()
    for_agent.add(echo)
    for_agent.remove("ping")
    assert shared.names == ("ping",)
    assert for_agent.names == ("echo",)


def test_a_toolkit_can_be_built_from_another_toolkit() -> None:
    assert Toolkit(Toolkit([ping, echo])).names == ("ping", "echo")
