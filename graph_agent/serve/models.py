"""The API's bodies as pydantic models: one description that both checks a request and writes
the OpenAPI document (:mod:`graph_agent.serve.openapi`).

Requests (:class:`Body` and its subclasses) are read as LangGraph Server reads them: a field
sent as ``null`` counts as not sent (its default applies), unknown fields are ignored (clients
send more than this server uses), and values are taken as they are (``"10"`` is no integer,
``true`` no count). A request that does not fit is a 422 whose detail names the field
(:func:`read_body`): the field's own :class:`Says` text where it has one, a validator's message,
or ``<field> must be a <JSON type>``.

Responses are built as plain JSON by the handlers (a model per response would cost every
request for nothing); their models here describe them (``mode="serialization"``), and the
fuzz test (``tests/serve/test_openapi.py``) checks the server's answers against them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    RootModel,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

from graph_agent.serve.ids import MAX_COUNT, history_before
from graph_agent.serve.records import RunStatus, ThreadStatus
from graph_agent.serve.runs import MULTITASK_STRATEGIES, STREAM_MODES, MultitaskStrategy, StreamMode

__all__ = [
    "REQUEST_MODELS",
    "RESPONSE_MODELS",
    "Body",
    "BodyProblem",
    "CheckpointRequest",
    "HistoryRequest",
    "RunCreate",
    "Says",
    "StoreDelete",
    "StoreNamespaces",
    "StorePut",
    "StoreSearch",
    "ThreadCreate",
    "ThreadSearch",
    "ThreadStateUpdate",
    "read_body",
]

Object = dict[str, Any]


@dataclass(frozen=True)
class Says:
    """A field's 422 detail: a text formatted with the ``value`` sent (``{value!r}``), or a
    function of it; for any problem of the field, or only for pydantic's error types
    ``only``."""

    text: str | Callable[[Any], str]
    only: tuple[str, ...] = ()

    def detail(self, value: Any) -> str:
        return self.text(value) if callable(self.text) else self.text.format(value=value)


class BodyProblem(ValueError):
    """A request body that does not fit its model; the message names the field."""


class Body(BaseModel):
    """A request body: ``null`` is as absent, unknown fields are ignored, no coercion."""

    model_config = ConfigDict(strict=True, extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {key: item for key, item in value.items() if item is not None}
        return value


def read_body(model: type[Body], body: Mapping[str, Any]) -> Any:
    """``body`` (a JSON object) as ``model``.

    Raises:
        BodyProblem: it does not fit; the message names the first field that does not.
    """
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise BodyProblem(_detail(model, body, exc.errors()[0])) from None


_KINDS = {
    "dict_type": "a JSON object",
    "model_type": "a JSON object",
    "model_attributes_type": "a JSON object",
    "list_type": "a JSON array",
    "string_type": "a string",
    "int_type": "an integer",
    "bool_type": "a boolean",
}


def _detail(model: type[BaseModel], body: Any, error: Any) -> str:
    """The 422 detail of pydantic's ``error``: the deepest :class:`Says` on its path, the
    message of a validator's ValueError, or ``<field> must be <a kind>``."""
    names: list[str] = []
    says: tuple[Says, Any] | None = None
    current: Any = model
    value = body
    for step in error["loc"]:
        fields = getattr(current, "model_fields", None)
        if not isinstance(step, str) or fields is None or step not in fields:
            break
        names.append(step)
        value = value.get(step) if isinstance(value, Mapping) else None
        info = fields[step]
        says = next(
            (
                (m, value)
                for m in info.metadata
                if isinstance(m, Says) and (not m.only or error["type"] in m.only)
            ),
            says,
        )
        current = _model_in(info.annotation)
    if says is not None:
        return says[0].detail(says[1])
    path = ".".join(names) or "the request body"
    if error["type"] == "value_error":
        return str(error["ctx"]["error"])
    kind = _KINDS.get(error["type"])
    return f"{path} must be {kind}" if kind else f"{path}: {error['msg']}"


def _model_in(annotation: Any) -> Any:
    """The model class in ``annotation`` (``M`` or ``M | None``), else None."""
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


_NOT_NEGATIVE = Says("limit and offset must not be negative", only=("greater_than_equal",))
Count = Annotated[int, Field(ge=0), _NOT_NEGATIVE]


_Label = Annotated[str, Field(min_length=1, pattern=r"^[^.]*$")]


def _labels(field: str) -> Says:
    """The 422 of a namespace as sent: a list of labels, non-empty and without periods (a GET
    names the namespace with its labels joined by periods)."""
    return Says(
        f"{field} must be a JSON array of non-empty labels without periods, not {{value!r:.60}}"
    )


# requests


class ThreadTTL(Body):
    """A thread's time to live (:mod:`graph_agent.serve.retention`), as langgraph-sdk sends it."""

    ttl: Annotated[float, Field(gt=0), Says("ttl.ttl must be a positive number of minutes")] = (
        Field(description="minutes the thread may stay idle")
    )
    strategy: Annotated[
        Literal["delete", "keep_latest"],
        Says("ttl.strategy must be 'delete' or 'keep_latest', not {value!r:.40}"),
    ] = "delete"


class ThreadCreate(Body):
    thread_id: str | None = None
    metadata: Object = Field(default_factory=dict)
    if_exists: Annotated[
        Literal["raise", "do_nothing"],
        Says("if_exists must be raise or do_nothing, not {value!r:.40}"),
    ] = "raise"
    ttl: Annotated[
        ThreadTTL | None,
        Says(
            'ttl must be a JSON object {{"ttl": minutes, "strategy": "delete" or "keep_latest"}}',
            only=("model_type", "model_attributes_type", "dict_type"),
        ),
    ] = None


class ThreadSearch(Body):
    metadata: Object = Field(default_factory=dict)
    status: ThreadStatus | None = None
    ids: Annotated[list[str] | None, Says("ids must be a JSON array of thread ids")] = None
    limit: Count = 10
    offset: Count = 0


class CheckpointRef(Body):
    """A checkpoint as a client names one (the rest of a checkpoint object is ignored)."""

    model_config = ConfigDict(extra="allow")
    checkpoint_id: Annotated[str | None, Says("checkpoint_id must be a string")] = None


class CheckpointRequest(Body):
    checkpoint_id: Annotated[str | None, Says("checkpoint_id must be a string")] = None
    checkpoint: CheckpointRef = Field(default_factory=CheckpointRef)

    def target(self) -> str | None:
        """The checkpoint asked for: ``checkpoint_id``, else ``checkpoint.checkpoint_id``."""
        return self.checkpoint_id or self.checkpoint.checkpoint_id


class ThreadStateUpdate(CheckpointRequest):
    values: Object | None = Field(
        None, description="state keys to write, merged by the keys' strategies"
    )
    as_node: str | None = None


class HistoryRequest(Body):
    limit: Annotated[
        int, Field(ge=0, le=MAX_COUNT), Says(f"limit must be an integer from 0 to {MAX_COUNT}")
    ] = 10
    before: Annotated[
        str | None,
        BeforeValidator(history_before),
        WithJsonSchema(
            {
                "anyOf": [
                    {"type": "string"},
                    {"type": "object", "properties": {"checkpoint_id": {"type": "string"}}},
                ],
                "description": "a checkpoint id, a checkpoint, or a config holding one",
            }
        ),
    ] = None


class RunCommand(Body):
    """What to do instead of taking an input: resume an interrupt, write state, go to nodes."""

    # its parts are checked by wire.command_from_json, which names what is wrong

    model_config = ConfigDict(extra="allow")
    resume: Any = Field(None, description="the answer to a pending interrupt")
    update: Annotated[Any, WithJsonSchema({"type": ["object", "array", "null"]})] = Field(
        None, description="state keys to write: an object, or a list of [key, value]"
    )
    goto: Annotated[
        Any, WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "array"}, {"type": "object"}]})
    ] = Field(None, description="the node(s) to go to next")


class RunConfig(Body):
    model_config = ConfigDict(extra="allow")
    recursion_limit: Annotated[
        int | None, Field(ge=1), Says("config.recursion_limit must be a positive integer")
    ] = None


def _stream_mode_problem(value: Any) -> str:
    modes = [value] if isinstance(value, str) else value
    if not isinstance(modes, list) or not modes:
        return "stream_mode must be a mode or a list of modes"
    bad = next((mode for mode in modes if mode not in STREAM_MODES), modes[0])
    return f"stream_mode {bad!r} is not supported; use {', '.join(STREAM_MODES)}"


def _breakpoint_problem(value: Any) -> str:
    return "interrupt_before and interrupt_after must be '*' or a list of node names"


Breakpoints = Annotated[
    Literal["*"] | list[str] | None,
    Says(_breakpoint_problem),
    Field(description="pause before (after) these nodes of the graph; '*': every node"),
]


class RunCreate(Body):
    """A run to start: on a thread, or (POST /runs/...) on a thread of its own."""

    assistant_id: Annotated[
        str, Says("assistant_id must be a string naming a served graph or agent")
    ] = Field(description="a served graph or agent")
    input: Object | None = Field(None, description="state keys; messages as LangChain-style dicts")
    command: RunCommand | None = None
    stream_mode: Annotated[
        StreamMode | Annotated[list[StreamMode], Field(min_length=1)],
        Says(_stream_mode_problem),
    ] = "values"
    interrupt_before: Breakpoints = None
    interrupt_after: Breakpoints = None
    multitask_strategy: Annotated[
        MultitaskStrategy,
        Says(
            "multitask_strategy {value!r} is not supported; use " + ", ".join(MULTITASK_STRATEGIES)
        ),
    ] = "reject"
    config: RunConfig = Field(default_factory=RunConfig)
    checkpoint_id: Annotated[str | None, Says("checkpoint_id must be a string")] = None
    checkpoint: CheckpointRef = Field(default_factory=CheckpointRef)
    metadata: Object = Field(default_factory=dict)
    context: Object = Field(default_factory=dict)
    if_not_exists: Literal["create", "reject"] | None = None
    on_completion: Literal["delete", "keep"] = "delete"
    stream_resumable: bool = False
    stream_subgraphs: bool = Field(
        False, description="also stream the graphs the nodes run, as <mode>|<namespace> events"
    )
    webhook: Annotated[str | None, Says("webhook must be a URL string")] = Field(
        None, description="POST the run's final record here when it ends (hosts: --webhook-allow)"
    )

    def breakpoints(self) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
        """``interrupt_before`` and ``interrupt_after`` as the runner takes them (None: the
        graph's own)."""
        before, after = self.interrupt_before, self.interrupt_after
        return (
            None if before is None else tuple([before] if isinstance(before, str) else before),
            None if after is None else tuple([after] if isinstance(after, str) else after),
        )

    def modes(self) -> tuple[StreamMode, ...]:
        mode = self.stream_mode
        return (mode,) if isinstance(mode, str) else tuple(mode)

    def target(self) -> str | None:
        """The checkpoint to start from: ``checkpoint_id``, else ``checkpoint.checkpoint_id``."""
        return self.checkpoint_id or self.checkpoint.checkpoint_id


class StorePut(Body):
    namespace: Annotated[list[_Label], _labels("namespace")] = Field(
        description="the item's namespace: labels without periods"
    )
    key: Annotated[str, Says("key must be a non-empty string")] = Field(min_length=1)
    value: Annotated[Object, Says("value must be a JSON object")]
    index: Annotated[
        Literal[False] | list[str] | None,
        Says("index must be false or a JSON array of field paths"),
    ] = Field(None, description="the fields to embed (default: the store's; false: none)")
    ttl: Annotated[float | None, Field(gt=0), Says("ttl must be a positive number of minutes")] = (
        Field(None, description="minutes the item lives after it was last written or read")
    )


class StoreDelete(Body):
    namespace: Annotated[list[_Label], _labels("namespace")]
    key: Annotated[str, Says("key must be a non-empty string")] = Field(min_length=1)


class StoreSearch(Body):
    namespace_prefix: Annotated[list[_Label], _labels("namespace_prefix")] = Field(
        default_factory=list
    )
    filter: Object | None = Field(
        None, description='keep items whose value matches: {"field": value} or {"$gt": 3}...'
    )
    limit: Count = 10
    offset: Count = 0
    query: str | None = Field(None, description="rank by meaning (the store needs an index)")
    refresh_ttl: bool | None = None


class StoreNamespaces(Body):
    prefix: Annotated[list[_Label], _labels("prefix")] = Field(default_factory=list)
    suffix: Annotated[list[_Label], _labels("suffix")] = Field(default_factory=list)
    max_depth: Annotated[int | None, Field(ge=1), Says("max_depth must be a positive integer")] = (
        None
    )
    limit: Count = 100
    offset: Count = 0


# responses


class Error(BaseModel):
    detail: str = Field(description="what was wrong and how to fix it")
    code: str = Field(description="a stable word, e.g. not_found")


class Ok(BaseModel):
    ok: bool
    worker: str = Field("", description="PostgreSQL mode: this process's worker key")


class InfoFlags(BaseModel):
    assistants: bool = Field(description="the served graphs and agents are assistants")
    crons: bool = Field(description="false: this server runs no cron jobs")
    langsmith: bool = Field(description="false: no traces are sent to LangSmith")
    langsmith_tracing_replicas: bool = False


class InfoHost(BaseModel):
    kind: str = "self-hosted"
    project_id: str | None = None
    host_revision_id: str | None = None
    revision_id: str | None = None
    tenant_id: str | None = None


class Info(BaseModel):
    """What LangGraph Server's ``/info`` answers, for this server."""

    version: str = Field(description="graph-agent's version")
    langgraph_py_version: str | None = Field(None, description="null: no langgraph inside")
    flags: InfoFlags
    host: InfoHost
    server: str = Field("graph-agent", description="which server this is")


class AssistantVersion(BaseModel):
    assistant_id: str
    graph_id: str
    name: str
    description: str | None = None
    config: Object = {}
    context: Object = {}
    metadata: Object = {}
    version: int = 1
    created_at: str


class Assistant(AssistantVersion):
    updated_at: str = ""


class NodeData(BaseModel):
    id: list[str]
    name: str = ""


class GraphNode(BaseModel):
    id: str
    type: Literal["runnable", "schema", "unknown"]
    data: str | NodeData = Field(
        description="a runnable's kind and name; the start's or end's name"
    )
    metadata: Object = {}


class GraphEdge(BaseModel):
    source: str
    target: str
    conditional: bool = False
    data: str = ""


class Graph(BaseModel):
    nodes: list[GraphNode]
    edges: list[GraphEdge]


class GraphSchemaNoId(BaseModel):
    input_schema: Object
    output_schema: Object
    state_schema: Object
    config_schema: Object = {}
    context_schema: Object = {}


class GraphSchema(GraphSchemaNoId):
    graph_id: str


class Subgraphs(RootModel[dict[str, GraphSchemaNoId]]):
    """Each subgraph's schemas by namespace (node, node|child)."""


class Checkpoint(BaseModel):
    thread_id: str = ""
    checkpoint_ns: str = ""
    checkpoint_id: str | None = None
    checkpoint_map: Object | None = None


class Interrupt(BaseModel):
    value: Any = None
    id: str = ""
    node: str | None = None


class Thread(BaseModel):
    thread_id: str
    created_at: str
    updated_at: str
    metadata: Object
    status: ThreadStatus
    values: Object = {}
    interrupts: dict[str, list[Interrupt]] = {}


class ThreadState(BaseModel):
    values: Object
    next: list[str]
    checkpoint: Checkpoint | None
    metadata: Object
    created_at: str | None = None
    parent_checkpoint: Checkpoint | None = None
    tasks: list[Object]
    interrupts: list[Interrupt] = []


class ThreadStateUpdated(BaseModel):
    checkpoint: Checkpoint


class Run(BaseModel):
    run_id: str
    thread_id: str
    assistant_id: str
    created_at: str = ""
    updated_at: str = ""
    status: RunStatus
    metadata: Object = {}
    multitask_strategy: str = "reject"
    kwargs: Object = {}


class RunResult(RootModel[Object]):
    """The thread's values when the run ended; __interrupt__ lists pending interrupts,
    __error__ says why a run failed."""


class StreamEvent(BaseModel):
    """One server-sent event of a run."""

    event: str = Field(
        description="metadata first, then a stream mode's name (messages/partial, "
        "messages/metadata for messages), or error"
    )
    data: str = Field(description="the event's JSON")
    id: str = Field("", description="its number: send as Last-Event-ID")


class StoreItem(BaseModel):
    namespace: list[str]
    key: str
    value: Object
    created_at: str
    updated_at: str


class SearchItem(StoreItem):
    score: float | None = Field(None, description="the similarity to the query, if any")


class StoreItems(BaseModel):
    items: list[SearchItem]


class Namespaces(BaseModel):
    namespaces: list[list[str]]


REQUEST_MODELS: tuple[type[Body], ...] = (
    ThreadCreate,
    ThreadSearch,
    CheckpointRequest,
    ThreadStateUpdate,
    HistoryRequest,
    RunCreate,
    StorePut,
    StoreDelete,
    StoreSearch,
    StoreNamespaces,
)
RESPONSE_MODELS: tuple[type[BaseModel], ...] = (
    Error,
    Ok,
    Info,
    Assistant,
    Graph,
    GraphSchema,
    Subgraphs,
    Thread,
    ThreadState,
    ThreadStateUpdated,
    Run,
    RunResult,
    StreamEvent,
    StoreItem,
    StoreItems,
    Namespaces,
)
