"""Tools defined in a module that defers annotations (string type hints) still work."""

from __future__ import annotations

from pydantic import BaseModel

from graph_agent.tools import ToolContext, tool


class Query(BaseModel):
    text: str
    limit: int = 3


@tool
def search(query: Query, context: ToolContext | None = None) -> list[str]:
    """Search the notes.

    Args:
        query: What to look for.
    """
    return [query.text] * query.limit


def test_string_annotations_are_resolved_for_the_schema() -> None:
    assert search.parameters["properties"]["query"]["properties"]["limit"] == {
        "type": "integer",
        "default": 3,
    }
    assert search.parameters["properties"]["query"]["description"] == "What to look for."


def test_string_annotations_are_resolved_for_the_context_parameter() -> None:
    assert search.wants_context
    assert "context" not in search.parameters["properties"]
    assert search.invoke({"query": {"text": "x", "limit": 2}}) == '["x","x"]'
