"""Stream modes: what ``stream(..., stream_mode=...)`` yields, in LangGraph's shapes.

Without a ``stream_mode`` a stream yields graph_agent's own items (:class:`NodeOutput` per
finished node, :class:`StreamingOutput` per emitted chunk). With one, it yields what that mode
of LangGraph's ``stream`` yields; with a list of them, ``(mode, payload)`` tuples:

- ``"values"``: the state after each step (the input's first), as a dict; at a pause, with the
  pending interrupts under ``"__interrupt__"``.
- ``"updates"``: ``{node: update}`` per finished node; at a pause ``{"__interrupt__": ...}``.
- ``"custom"``: what a node emitted with ``emit_chunk`` that is not a model's token.
- ``"messages"``: ``(AssistantMessageChunk, metadata)`` per model token, ``metadata`` naming
  the node and step (``langgraph_node``, ``langgraph_step``).
- ``"tasks"``: a task's start (:class:`TaskPayload`: its id, node, input and triggers), told
  before the node runs, and its result (:class:`TaskResultPayload`: its update, its error or
  its interrupts), told when it ends; the tasks of one step start together.
- ``"checkpoints"``: each checkpoint as it is saved (:class:`CheckpointPayload`, what
  ``get_state`` gives for it: its config, values, metadata and next tasks); none without a
  saver. A call that resumes a thread first yields the checkpoint it resumes from, its tasks
  with what they did so far (a result, an error, interrupts), as LangGraph does.
- ``"debug"``: both of these, each wrapped in a :class:`DebugPayload` typed ``"task"``,
  ``"task_result"`` or ``"checkpoint"`` with its step and a timestamp.

The payloads hold graph_agent's own values (messages, :class:`RunnableConfig`,
:class:`Interrupt`, the exception a node raised); ``graph-agent serve`` sends them as
LangGraph's JSON. Graphs running inside nodes stream nothing of their own in a mode (as
LangGraph's ``subgraphs=False``).

The engine tells the task starts, results and checkpoints as :class:`TaskEvent` items among
its NodeOutputs when a stream asks for them (``stream(..., task_events=True)``, or only some
types of them: ``task_events={"checkpoint"}``); the modes are made from that stream by
:class:`ModeItems`, which ``graph-agent serve`` runs too (it only turns the items into JSON).

Example:
    >>> from graph_agent import StateGraph, START, END
    >>> g = StateGraph("inc")
    >>> _ = g.add_node("inc", lambda state: {"x": state["x"] + 1})
    >>> _ = g.add_edge(START, "inc").add_edge("inc", END)
    >>> for mode, payload in g.compile().stream({"x": 1}, stream_mode=["tasks", "updates"]):
    ...     print(mode, payload.get("name"), payload.get("result", payload.get("inc")))
    tasks inc None
    tasks inc {'x': 2}
    updates None {'x': 2}
"""

from __future__ import annotations

import contextlib
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Collection,
    Generator,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import (
    Any,
    Literal,
    NotRequired,
    Protocol,
    TypeAlias,
    TypedDict,
    TypeGuard,
    get_args,
    runtime_checkable,
)

from graph_agent.graph.types import (
    START,
    Interrupt,
    NodeOutput,
    RunnableConfig,
    StreamingOutput,
)

StreamMode = Literal["values", "updates", "custom", "messages", "tasks", "checkpoints", "debug"]
STREAM_MODES: tuple[StreamMode, ...] = get_args(StreamMode)
StreamModes: TypeAlias = StreamMode | Sequence[StreamMode]
"""What ``stream_mode`` takes: a mode, or a list of them."""
TaskEventType = Literal["task", "task_result", "checkpoint"]
TASK_EVENT_TYPES: tuple[TaskEventType, ...] = get_args(TaskEventType)
TaskEvents: TypeAlias = bool | Collection[TaskEventType]
"""What ``task_events`` takes: all of them (``True``), none, or those of the types given."""
TaskEventTypes: TypeAlias = frozenset[TaskEventType]
NO_TASK_EVENTS: TaskEventTypes = frozenset()
TASK_EVENTS_OF_MODE: Mapping[StreamMode, TaskEventTypes] = {
    "tasks": frozenset({"task", "task_result"}),
    "checkpoints": frozenset({"checkpoint"}),
    "debug": frozenset(TASK_EVENT_TYPES),
}
"""The stream modes made of task events, each with the types of those it needs (the only
place that says so: the library's stream and the server's both ask :func:`task_events_for`)."""


@runtime_checkable
class MessageChunk(Protocol):
    """A piece of a model's streamed answer (an ``AssistantMessageChunk``: the engine does not
    import messages): what ``"messages"`` streams; anything else emitted is ``"custom"``."""

    id: str
    content: str
    tool_call_deltas: Any


class TaskPayload(TypedDict):
    """A task's start: its id, its node, the input it runs on, what triggered it (LangGraph's
    channel names: ``branch:to:<node>`` for an edge, ``__pregel_push`` for a Send)."""

    id: str
    name: str
    input: Any
    triggers: list[str]


class TaskResultPayload(TypedDict):
    """How a task ended: ``result`` is its update (``{}`` when it failed or paused),
    ``error`` what it raised, ``interrupts`` what it paused on."""

    id: str
    name: str
    error: BaseException | None
    result: dict[str, Any]
    interrupts: list[Interrupt]


class CheckpointTask(TypedDict):
    """A task of the step after a checkpoint, in LangGraph's three shapes: pending (``id``,
    ``name``, ``interrupts``, ``state``, as every task of a checkpoint just saved); failed
    (``error``, ``"<type>: <message>"`` of its last attempt, and no ``interrupts``); finished
    (``result``, its update, beside ``interrupts``). The last two only in the checkpoint a
    resumed call starts from. ``interrupts`` are those the task raised, answered or not."""

    id: str
    name: str
    error: NotRequired[str]
    result: NotRequired[dict[str, Any]]
    interrupts: NotRequired[tuple[Interrupt, ...]]
    state: None


class CheckpointPayload(TypedDict):
    """A saved checkpoint: where it is (``config``, for ``get_state`` or a fork), where its
    parent is, the state's values, its metadata, and the tasks of the step after it."""

    config: RunnableConfig
    parent_config: RunnableConfig | None
    values: dict[str, Any]
    metadata: dict[str, Any]
    next: list[str]
    tasks: list[CheckpointTask]


class DebugPayload(TypedDict):
    """A ``"debug"`` item: a task start, a task result or a checkpoint, typed, with the step
    it belongs to and when it happened (ISO 8601, UTC)."""

    type: TaskEventType
    timestamp: str
    step: int
    payload: TaskPayload | TaskResultPayload | CheckpointPayload


@dataclass(frozen=True, slots=True)
class TaskEvent(NodeOutput):
    """What the engine tells a stream that asked for task events: a task started
    (``type="task"``), a task ended (``"task_result"``) or a checkpoint was saved
    (``"checkpoint"``). ``payload`` is the ``"tasks"`` or ``"checkpoints"`` mode's payload;
    ``node`` is the task's node (``""`` for a checkpoint), ``state`` a checkpoint's state."""

    type: TaskEventType = "task"
    timestamp: str = ""
    payload: Any = None

    @property
    def mode(self) -> Literal["tasks", "checkpoints"]:
        """The stream mode whose payload this is."""
        return "checkpoints" if self.type == "checkpoint" else "tasks"

    def debug(self) -> DebugPayload:
        """The ``"debug"`` mode's item for this event."""
        return {
            "type": self.type,
            "timestamp": self.timestamp,
            "step": self.step,
            "payload": self.payload,
        }


def timestamp() -> str:
    """Now, as a debug item's timestamp (a module function: tests may pin it)."""
    return datetime.now(UTC).isoformat()


def check_stream_mode(stream_mode: Any, *, subgraphs: bool = False) -> tuple[StreamMode, ...]:
    """The modes ``stream_mode`` (a mode, or a list of them) names, checked; a ValueError
    names what was wrong and the valid modes.

    Example:
        >>> check_stream_mode(["tasks", "updates", "tasks"])
        ('tasks', 'updates')
    """
    given = [stream_mode] if isinstance(stream_mode, str) else stream_mode
    valid = ", ".join(map(repr, STREAM_MODES))
    if not isinstance(given, Sequence) or not given:
        raise ValueError(
            f"stream_mode must be a mode or a non-empty list of modes, got {stream_mode!r:.60}; "
            f"the modes: {valid}"
        )
    for mode in given:
        if not _is_mode(mode):
            raise ValueError(f"stream_mode {mode!r:.60} is not a stream mode; use one of {valid}")
    if subgraphs:
        raise ValueError(
            "stream_mode cannot be combined with subgraphs=True yet: stream without a "
            "stream_mode to get the nested graphs' NodeOutputs (their .path says where)"
        )
    return tuple(dict.fromkeys(given))


def _is_mode(mode: Any) -> TypeGuard[StreamMode]:
    return isinstance(mode, str) and mode in STREAM_MODES


def task_events_for(modes: Iterable[StreamMode]) -> TaskEventTypes:
    """The task events the engine must tell for ``modes`` (none for most streams): a
    checkpoint's payload is built only for ``"checkpoints"`` and ``"debug"``.

    Example:
        >>> sorted(task_events_for(["tasks", "values"]))
        ['task', 'task_result']
    """
    types = NO_TASK_EVENTS
    for mode in modes:
        types = types | TASK_EVENTS_OF_MODE.get(mode, NO_TASK_EVENTS)
    return types


def check_task_events(task_events: TaskEvents) -> TaskEventTypes:
    """The types of task events ``task_events`` (``stream``'s argument) asks for, checked; a
    ValueError names what was wrong and the valid types."""
    if task_events is False:
        return NO_TASK_EVENTS
    if task_events is True:
        return frozenset(TASK_EVENT_TYPES)
    given: Any = [task_events] if isinstance(task_events, str) else task_events
    if isinstance(given, Collection) and all(map(_is_task_event_type, given)):
        return frozenset(given)
    raise ValueError(
        f"task_events must be True, False or a set of task event types, got "
        f"{task_events!r:.60}; the types: {', '.join(map(repr, TASK_EVENT_TYPES))}"
    )


def _is_task_event_type(kind: Any) -> TypeGuard[TaskEventType]:
    return isinstance(kind, str) and kind in TASK_EVENT_TYPES


class ModeItems:
    """Turns a stream of NodeOutputs and TaskEvents into the items of ``modes``: payloads, or
    ``(mode, payload)`` tuples when ``tuples`` (a list of modes was asked for)."""

    __slots__ = (
        "_last_state",
        "custom",
        "debug",
        "messages",
        "modes",
        "tuples",
        "updates",
        "values",
    )

    def __init__(self, modes: tuple[StreamMode, ...], *, tuples: bool) -> None:
        self.modes = frozenset(modes)
        self.tuples = tuples
        # each mode's flag: read for every item, faster than a look-up in modes
        self.values, self.updates = "values" in modes, "updates" in modes
        self.messages, self.custom, self.debug = (
            "messages" in modes,
            "custom" in modes,
            "debug" in modes,
        )
        self._last_state: Any = None  # the state "values" last yielded (one per step)

    def stream(self, items: Generator[NodeOutput, None, Any]) -> Iterator[Any]:
        """The items of ``items``, a run's stream; closed with it (the run ends, its thread is
        released), also when the caller stops early."""
        try:
            for item in items:
                yield from self(item)
        finally:
            items.close()

    async def astream(self, items: AsyncGenerator[NodeOutput, None]) -> AsyncIterator[Any]:
        """Async :meth:`stream`."""
        try:
            async for item in items:
                for part in self(item):
                    yield part
        finally:
            with contextlib.suppress(RuntimeError):  # already closing
                await items.aclose()

    def __call__(self, item: NodeOutput) -> list[Any]:
        """The items of the asked modes that ``item`` makes (often none)."""
        if type(item) is StreamingOutput:  # the most frequent (a token each): checked first
            parts = self._chunk(item) if not item.path else []
        elif type(item) is TaskEvent:
            parts = []
            if item.mode in self.modes:
                parts.append((item.mode, item.payload))
            if self.debug:
                parts.append(("debug", item.debug()))
        elif item.path:  # a nested graph's (only its chunks reach a stream without subgraphs)
            return []
        elif isinstance(item, StreamingOutput):
            parts = self._chunk(item)
        elif item.interrupts:
            parts = self._pause(item)
        else:
            parts = self._finished(item)
        if self.tuples:
            return parts
        return [payload for _, payload in parts]

    def _chunk(self, item: StreamingOutput) -> list[tuple[StreamMode, Any]]:
        message = item.message
        chunk = _chunk_types.get(type(message))  # per streamed token: no call to find out
        if chunk is None:
            chunk = _is_message_chunk(message)
        if chunk:
            if self.messages:
                metadata = {"langgraph_node": item.node, "langgraph_step": item.step}
                return [("messages", (message, metadata))]
        elif self.custom:
            return [("custom", message if message is not None else item.chunk)]
        return []

    def _pause(self, item: NodeOutput) -> list[tuple[StreamMode, Any]]:
        parts: list[tuple[StreamMode, Any]] = []
        if self.updates:
            parts.append(("updates", {"__interrupt__": item.interrupts}))
        if self.values and item.state is not None:
            parts.append(("values", {**item.state.data(), "__interrupt__": item.interrupts}))
        return parts

    def _finished(self, item: NodeOutput) -> list[tuple[StreamMode, Any]]:
        parts: list[tuple[StreamMode, Any]] = []
        if self.updates and item.node != START:
            parts.append(("updates", {item.node: item.update}))
        state = item.state
        if self.values and state is not None and state is not self._last_state:
            self._last_state = state  # the outputs of one step share their state
            parts.append(("values", state.data()))
        return parts


_chunk_types: dict[type, bool] = {type(None): False}
"""Whether each type emitted is a :class:`MessageChunk` (a protocol's isinstance is slow: one
per streamed token would cost more than the rest of the token's way)."""


def _is_message_chunk(message: Any) -> bool:
    """Whether ``message`` is a :class:`MessageChunk`, found out once per type."""
    known = _chunk_types[type(message)] = isinstance(message, MessageChunk)
    return known
