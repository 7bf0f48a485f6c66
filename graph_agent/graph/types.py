"""The small value types that cross the public API of the runtime."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from graph_agent.graph.values import END, START, Interrupt

if TYPE_CHECKING:
    from graph_agent.graph.saver import Saver
    from graph_agent.graph.state import OverAllState
    from graph_agent.graph.task import TaskContext

__all__ = [
    "END",
    "START",
    "Command",
    "CompileConfig",
    "Interrupt",
    "NodeOutput",
    "RunnableConfig",
    "Send",
    "StateSnapshot",
    "StreamingOutput",
    "TaskSnapshot",
]


class CancelSignal(Protocol):
    """What ``RunnableConfig.cancel`` takes: a ``threading.Event`` or anything with ``is_set``."""

    def is_set(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Command:
    """Returned by a node to update state and route (``goto``), or passed as input to resume.

    ``goto`` names one node, several, or END, or holds :class:`Send` items (a node run with an
    input of its own); its targets must be declared with ``add_node(..., destinations=...)``.
    ``resume`` answers pending interrupts (input only).
    ``graph=Command.PARENT`` hands off: the subgraph (or agent) this node runs in stops, and
    the parent graph applies ``update`` and routes to ``goto``.
    """

    goto: str | Send | Sequence[str | Send] | None = None
    update: Mapping[str, Any] | None = None
    resume: Any = None
    graph: str | None = None

    PARENT: ClassVar[str] = "__parent__"


class Send:
    """A task to run in the next superstep: ``node`` with ``input`` as its whole state view.

    A router (``add_conditional_edges``) or a node's ``Command(goto=...)`` returns Sends, any
    number to one node (map-reduce): each runs as a task of its own, seeing only its ``input``
    (not the shared state), and their writes merge into the shared state by the keys'
    strategies, in Send order. A router declares the nodes it sends to with ``sends=`` (or its
    path_map), a node with ``destinations=``.

    Example:
        >>> from graph_agent import END, START, AppendStrategy, Send, StateGraph
        >>> g = StateGraph("squares", key_strategies={"squares": AppendStrategy()})
        >>> _ = g.add_node("plan", lambda state: None)
        >>> _ = g.add_node("square", lambda item: {"squares": item["n"] ** 2})
        >>> _ = g.add_edge(START, "plan").add_edge("square", END)
        >>> fan_out = lambda state: [Send("square", {"n": n}) for n in state["numbers"]]
        >>> _ = g.add_conditional_edges("plan", fan_out, sends=["square"])
        >>> list(g.compile().invoke({"numbers": [1, 2, 3]})["squares"])
        [1, 4, 9]
    """

    __slots__ = ("input", "node")

    def __init__(self, node: str, input: Mapping[str, Any]) -> None:
        if not isinstance(node, str) or not node:
            raise TypeError(f"Send({node!r}, ...): the first argument is the name of a node")
        if node in (START, END):
            raise ValueError(
                f"Send({node!r}, ...): a Send runs a node with an input of its own, and "
                f"{node} is no node; to end this branch return END (or nothing) instead"
            )
        if type(input) is not dict and not isinstance(input, Mapping):
            raise TypeError(
                f"Send({node!r}, {input!r:.60}): the input must be a dict of state keys, the "
                f"node's whole state view, e.g. Send({node!r}, {{'item': ...}}); got "
                f"{type(input).__name__}"
            )
        for key in input:
            if type(key) is not str and not isinstance(key, str):
                raise TypeError(
                    f"Send({node!r}, ...): the input has the key {key!r}; state keys are strings"
                )
        self.node = node
        self.input = input

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Send):
            return NotImplemented
        return self.node == other.node and self.input == other.input

    def __hash__(self) -> int:
        # by node alone, so that equal Sends hash alike although an input (a dict) cannot
        # hash; a path_map lookup of a Send then finds nothing, without an exception
        return hash(("Send", self.node))

    def __repr__(self) -> str:
        return f"Send(node={self.node!r}, input={self.input!r})"


@dataclass(frozen=True, slots=True)
class RunnableConfig:
    """Per-call settings: which thread, where to start, and the call's limits.

    ``thread_id`` (a non-empty string) names the thread whose checkpoints a saver-backed run
    continues; one run at a time holds a thread.

    ``metadata`` is stored with the call's checkpoints; ``context`` is a per-run mapping nodes,
    hooks and tools can read, and is never stored. Inside a node ``config.task`` is the running
    task's :class:`~graph_agent.graph.task.TaskContext`.

    ``cancel`` (a ``threading.Event``, say) stops the run from outside, e.g. from another
    thread: once it is set, the run raises
    :class:`~graph_agent.graph.errors.GraphCancelledError`, at once. The step running then
    does not finish: a node awaiting something is cancelled (its ``finally`` blocks run); a
    sync node cannot be stopped, so it runs to its end (on its thread, or in the caller's:
    the run lets go of its thread's lease at once), and what it returns is dropped; a sibling
    that had ended before keeps its write. With a
    saver the thread stays at its last checkpoint, so ``invoke(None, config)`` (without the
    set event) runs that step again. Subgraphs and agents run as nodes or tools stop with it.
    A signal that is not a ``threading.Event`` is read between steps and as a step ends.
    """

    thread_id: str | None = None
    checkpoint_id: str | None = None
    max_steps: int = 100
    max_concurrency: int = 32
    metadata: Mapping[str, Any] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
    task: TaskContext | None = field(default=None, compare=False, repr=False)
    checkpoint_ns: str = ""
    """The namespace inside the thread: ``""`` at top level, a subgraph's own otherwise."""
    cancel: CancelSignal | None = field(default=None, compare=False, repr=False)
    store: Any = field(default=None, compare=False, repr=False)
    """The long-term memory store (a ``graph_agent.store.BaseStore``) nodes, hooks and tools
    use: this one when set, else the graph's ``CompileConfig(store=...)``."""

    def __post_init__(self) -> None:
        if self.thread_id is not None and type(self.thread_id) is not str:
            raise TypeError(
                f"RunnableConfig(thread_id={self.thread_id!r}): a thread id is a string, e.g. "
                f"RunnableConfig(thread_id={str(self.thread_id)!r})"
            )
        if not self.thread_id and self.thread_id is not None:
            raise ValueError(
                f"RunnableConfig(thread_id={self.thread_id!r}) names no thread: pass a "
                "non-empty id, e.g. RunnableConfig(thread_id='user-42'), or leave thread_id out "
                "for a run without one"
            )
        if self.max_steps < 1:
            raise ValueError(f"RunnableConfig.max_steps must be >= 1, got {self.max_steps}")
        if self.max_concurrency < 1:
            raise ValueError(
                f"RunnableConfig.max_concurrency must be >= 1, got {self.max_concurrency}"
            )


@dataclass(frozen=True, slots=True)
class CompileConfig:
    """Compile-time settings: the checkpoint saver and the static breakpoints.

    ``cache``: where the results of nodes with a ``CachePolicy`` are kept (a
    ``graph_agent.graph.cache.NodeCache``); by default the saver (its cache lives beside the
    checkpoints), or, without a saver, an in-memory cache of the compiled graph.

    ``listeners``: :class:`~graph_agent.graph.listeners.Listener` objects told of each run,
    node, and (in an agent) model and tool call, of this graph and the graphs it runs.

    ``store``: the long-term memory (a ``graph_agent.store.BaseStore``) shared across threads,
    which nodes, hooks and tools reach as ``config.store``."""

    saver: Saver | None = None
    interrupt_before: Sequence[str] = ()
    interrupt_after: Sequence[str] = ()
    cache: Any = None
    listeners: Sequence[Any] = ()
    store: Any = None


@dataclass(frozen=True, slots=True)
class NodeOutput:
    """One finished node, yielded by ``stream()`` after its superstep merged and checkpointed.

    ``update`` is the node's partial update as returned (``{}`` for ``None``); ``state`` is the
    state after the whole superstep; ``step`` is -1 for the input and 0 for the first superstep.
    """

    node: str
    agent: str
    step: int
    update: Mapping[str, Any]
    state: OverAllState | None
    checkpoint_id: str | None
    usage: Any = None
    interrupts: tuple[Interrupt, ...] = ()
    path: tuple[str, ...] = ()
    """Where a nested graph's output comes from: the parent nodes it runs under (``()`` at top)."""
    send_index: int | None = None
    """For a task started by a :class:`Send`: which of the step's Sends to ``node`` it was (0
    for the first); ``None`` for any other task."""
    attempts: int = 1
    """How many attempts the node took (above 1 only for a node retried by its
    ``RetryPolicy``); on a ``StreamingOutput``, the attempt that emitted the chunk."""


_OUTPUT_FIELDS = (
    "node",
    "agent",
    "step",
    "update",
    "state",
    "checkpoint_id",
    "usage",
    "interrupts",
    "path",
    "send_index",
    "attempts",
)
# node_output() sets every field: a field added to NodeOutput and not here fails at import
if set(NodeOutput.__slots__) != set(_OUTPUT_FIELDS):
    raise TypeError("node_output() must set every field of NodeOutput: update _OUTPUT_FIELDS")
(
    _set_node,
    _set_agent,
    _set_step,
    _set_update,
    _set_state,
    _set_checkpoint_id,
    _set_usage,
    _set_interrupts,
    _set_path,
    _set_send_index,
    _set_attempts,
) = (getattr(NodeOutput, name).__set__ for name in _OUTPUT_FIELDS)


def node_output(
    node: str,
    agent: str,
    step: int,
    update: Mapping[str, Any],
    state: OverAllState | None,
    checkpoint_id: str | None,
    usage: Any = None,
    send_index: int | None = None,
) -> NodeOutput:
    """``NodeOutput(...)`` for the engine, which makes one per streamed node: the frozen
    dataclass's ``__init__`` (an ``object.__setattr__`` per field) costs twice as much."""
    output: NodeOutput = object.__new__(NodeOutput)
    _set_node(output, node)
    _set_agent(output, agent)
    _set_step(output, step)
    _set_update(output, update)
    _set_state(output, state)
    _set_checkpoint_id(output, checkpoint_id)
    _set_usage(output, usage)
    _set_interrupts(output, ())
    _set_path(output, ())
    _set_send_index(output, send_index)
    _set_attempts(output, 1)
    return output


@dataclass(frozen=True, slots=True)
class StreamingOutput(NodeOutput):
    """A chunk a running node emitted with ``emit_chunk``: ``chunk`` is its text."""

    chunk: str = ""
    message: Any = None


@dataclass(frozen=True, slots=True)
class StateSnapshot:
    """A thread's state at one checkpoint, as ``get_state`` and ``get_state_history`` give it.

    ``tasks`` are the tasks of the next step (one per node in ``next``), with what the
    checkpoint knows of each: the interrupts it waits on, the error it failed with, and, from
    ``get_state(config, subgraphs=True)``, the state of the graph it runs inside (a subgraph or
    an agent node), whose ``config`` names the child's namespace for its own
    ``get_state_history``.
    """

    values: dict[str, Any]
    next: tuple[str, ...]
    config: RunnableConfig
    metadata: Mapping[str, Any]
    created_at: datetime | None
    parent_config: RunnableConfig | None
    interrupts: tuple[Interrupt, ...] = ()
    tasks: tuple[TaskSnapshot, ...] = ()


@dataclass(frozen=True, slots=True)
class TaskSnapshot:
    """A task of a snapshot's next step.

    ``error`` is ``"<type>: <message>"`` when the task failed in its last attempt (it runs
    again when the thread carries on); ``state`` is the graph it runs inside, with
    ``subgraphs=True`` and when that graph has stored a checkpoint.
    """

    id: str
    name: str
    interrupts: tuple[Interrupt, ...] = ()
    error: str | None = None
    state: StateSnapshot | None = None
