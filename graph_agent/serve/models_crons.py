"""The crons' bodies and answer (:mod:`graph_agent.serve.routes.crons`), as LangGraph
Server's ``client.crons`` sends and reads them; read as every body is
(:class:`~graph_agent.serve.models.Body`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from graph_agent.serve.models import (
    Body,
    Breakpoints,
    Count,
    RunConfig,
    Says,
    _stream_mode_problem,
)
from graph_agent.serve.runs import MULTITASK_STRATEGIES, MultitaskStrategy, StreamMode

__all__ = [
    "CRON_FIELDS",
    "CRON_REQUEST_MODELS",
    "CRON_RESPONSE_MODELS",
    "RUN_FIELDS",
    "Cron",
    "CronCount",
    "CronCreate",
    "CronSearch",
    "CronUpdate",
]

Object = dict[str, Any]
_SCHEDULE = Says("schedule must be a string: a cron expression of 5 fields, e.g. '*/5 * * * *'")
_TIMEZONE = Says("timezone must be a string naming an IANA time zone, e.g. 'Europe/Paris'")
_END_TIME = Says("end_time must be a string: an ISO 8601 date and time")
_ON_RUN_COMPLETED = Says("on_run_completed must be delete or keep, not {value!r:.40}")
_Durability = Literal["sync", "async", "exit"]
CronSortBy = Literal[
    "cron_id", "assistant_id", "thread_id", "created_at", "updated_at", "next_run_date", "end_time"
]
CronField = Literal[
    "cron_id",
    "assistant_id",
    "thread_id",
    "end_time",
    "schedule",
    "timezone",
    "created_at",
    "updated_at",
    "user_id",
    "payload",
    "next_run_date",
    "metadata",
    "on_run_completed",
    "enabled",
]


class _CronRun(Body):
    """What a cron's runs are started with (its ``payload``), as a run's body has it."""

    input: Object | None = Field(None, description="state keys; messages as LangChain-style dicts")
    metadata: Object | None = None
    config: RunConfig | None = None
    context: Object | None = None
    interrupt_before: Breakpoints = None
    interrupt_after: Breakpoints = None
    webhook: Annotated[str | None, Says("webhook must be a string: a URL")] = Field(
        None, description="a URL the server POSTs each run's record to when it ends"
    )
    multitask_strategy: Annotated[
        MultitaskStrategy | None,
        Says(
            "multitask_strategy {value!r} is not supported; use " + ", ".join(MULTITASK_STRATEGIES)
        ),
    ] = None
    stream_mode: Annotated[
        StreamMode | Annotated[list[StreamMode], Field(min_length=1)] | None,
        Says(_stream_mode_problem),
    ] = None
    stream_subgraphs: bool | None = None
    stream_resumable: bool | None = None
    durability: _Durability | None = None
    checkpoint_during: bool | None = None
    on_run_completed: Annotated[Literal["delete", "keep"] | None, _ON_RUN_COMPLETED] = Field(
        None, description="a stateless cron's thread, once its run ended: delete (default) or keep"
    )
    timezone: Annotated[str | None, _TIMEZONE] = Field(
        None, description="the IANA time zone the schedule is read in (default UTC)"
    )
    end_time: Annotated[str | None, _END_TIME] = Field(
        None, description="no run after this time (ISO 8601)"
    )
    enabled: bool | None = None


class CronCreate(_CronRun):
    """A cron to make: ``POST /runs/crons`` (stateless) or ``/threads/{thread_id}/runs/crons``."""

    assistant_id: Annotated[
        str, Says("assistant_id must be a string naming a served graph or agent")
    ] = Field(description="a served graph or agent")
    schedule: Annotated[str, _SCHEDULE] = Field(
        description="5 fields: minute hour day-of-month month day-of-week"
    )


class CronUpdate(_CronRun):
    """What to change of a cron (``PATCH /runs/crons/{cron_id}``); what is not sent stays."""

    schedule: Annotated[str | None, _SCHEDULE] = Field(
        None, description="5 fields: minute hour day-of-month month day-of-week"
    )


class CronCount(Body):
    assistant_id: Annotated[str | None, Says("assistant_id must be a string")] = None
    thread_id: Annotated[str | None, Says("thread_id must be a string")] = None
    metadata: Object = Field(default_factory=dict)


class CronSearch(CronCount):
    enabled: bool | None = None
    limit: Count = 10
    offset: Count = 0
    sort_by: Annotated[CronSortBy, Says("sort_by {value!r:.40} is no field a cron sorts by")] = (
        "created_at"
    )
    sort_order: Annotated[
        Literal["asc", "desc"], Says("sort_order must be asc or desc, not {value!r:.40}")
    ] = "desc"
    select: Annotated[
        list[CronField] | None, Says("select must be a JSON array of a cron's field names")
    ] = None


class Cron(BaseModel):
    """A cron as LangGraph Server answers it (with ``select``, only the fields asked for)."""

    cron_id: str
    assistant_id: str | None = None
    thread_id: str | None = None
    user_id: str | None = None
    schedule: str | None = None
    timezone: str | None = None
    payload: Object = Field(default_factory=dict)
    metadata: Object = Field(default_factory=dict)
    on_run_completed: Literal["delete", "keep"] | None = None
    end_time: str | None = None
    next_run_date: str | None = None
    enabled: bool = True
    created_at: str | None = None
    updated_at: str | None = None


CRON_FIELDS = frozenset({"schedule", "timezone", "end_time", "enabled", "on_run_completed"})
"""The fields of a cron's body that are the cron's own, not its runs'."""
RUN_FIELDS = frozenset(_CronRun.model_fields) - CRON_FIELDS | {"assistant_id"}
"""The fields of a cron's body that its runs are started with (its ``payload``)."""
CRON_REQUEST_MODELS: tuple[type[Body], ...] = (CronCreate, CronUpdate, CronSearch, CronCount)
CRON_RESPONSE_MODELS: tuple[type[BaseModel], ...] = (Cron,)
