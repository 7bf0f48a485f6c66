"""The bodies of the assistant routes (:mod:`graph_agent.serve.routes.assistants`), as
LangGraph's clients send them, and the ``AssistantVersion`` they answer."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field

from graph_agent.serve.models import Body, Count, Object, Says

__all__ = [
    "AssistantCount",
    "AssistantCreate",
    "AssistantLatest",
    "AssistantPatch",
    "AssistantSearch",
    "AssistantVersionSearch",
]

_GRAPH = Says("graph_id must be a string naming a served graph or agent")
SortBy = Literal["assistant_id", "graph_id", "name", "created_at", "updated_at"]


class AssistantCreate(Body):
    """A new assistant: a served graph or agent with its own settings."""

    graph_id: Annotated[str, _GRAPH] = Field(description="the served graph or agent it runs")
    assistant_id: Annotated[str | None, Says("assistant_id must be a string")] = Field(
        None, description="its id (default: a new UUID)"
    )
    config: Object = Field(
        default_factory=dict, description="configurable (merged under each run's), recursion_limit"
    )
    context: Object = Field(
        default_factory=dict, description="merged under each run's context (config.context)"
    )
    metadata: Object = Field(default_factory=dict)
    if_exists: Annotated[
        Literal["raise", "do_nothing"],
        Says("if_exists must be raise or do_nothing, not {value!r:.40}"),
    ] = Field("raise", description="when the id is taken: 409, or answer the one there")
    name: Annotated[str | None, Says("name must be a string")] = None
    description: Annotated[str | None, Says("description must be a string")] = None


class AssistantPatch(Body):
    """An assistant's next version: what is sent replaces what it had (metadata is merged)."""

    graph_id: Annotated[str | None, _GRAPH] = None
    config: Object | None = None
    context: Object | None = None
    metadata: Object | None = Field(None, description="merged into the assistant's")
    name: Annotated[str | None, Says("name must be a string")] = None
    description: Annotated[str | None, Says("description must be a string")] = None


class AssistantCount(Body):
    metadata: Object = Field(default_factory=dict)
    graph_id: Annotated[str | None, _GRAPH] = None
    name: Annotated[str | None, Says("name must be a string")] = Field(
        None, description="a part of the name, in any case"
    )


class AssistantSearch(AssistantCount):
    limit: Count = 10
    offset: Count = 0
    sort_by: Annotated[
        SortBy | None,
        Says("sort_by must be one of " + ", ".join(get_args(SortBy))),
    ] = Field(None, description="default: created_at")
    sort_order: Annotated[Literal["asc", "desc"] | None, Says("sort_order must be asc or desc")] = (
        Field(None, description="default: desc")
    )


class AssistantVersionSearch(Body):
    metadata: Object = Field(default_factory=dict)
    limit: Count = 10
    offset: Count = 0


class AssistantLatest(Body):
    version: Annotated[int, Field(ge=1), Says("version must be a positive integer")]
