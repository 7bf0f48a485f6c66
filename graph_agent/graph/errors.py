"""The error tree of graph_agent, and the one control signal that is not an error.

::

    GraphAgentError
    ├── GraphSetupError (ValueError)          the graph was built wrong; raised by compile()
    ├── GraphRuntimeError (RuntimeError)      a run went wrong
    │   ├── GraphRecursionError               max_steps supersteps without finishing
    │   ├── NodeError                         user code (a node or a router) raised
    │   ├── InvalidUpdateError                a node returned something the engine cannot merge
    │   ├── NodeTimeoutError                  a node ran past add_node(..., timeout=...)
    │   ├── ThreadBusyError                   another run holds the thread
    │   └── CheckpointStoreError              the checkpoint store failed (connection lost...)
    ├── InvalidResumeError (ValueError)       a resume that answers nothing, or unknown ids
    ├── SerializationError (ValueError)       a value cannot be stored, or stored data is bad
    └── ModelError (RuntimeError)             a chat model call failed (.status_code):
                                              graph_agent.models.errors, with its subclasses

    GraphInterrupted (BaseException)          a run paused for a human: not an error
    ParentCommand (BaseException)             a node handed off to the parent graph

Every message says what was wrong, where (node, key, step) and how to fix it. This module
holds what the engine raises; the chat models' errors live with the models
(:mod:`graph_agent.models.errors`), and ``graph_agent.graph.errors.ModelError`` still names
theirs.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from graph_agent.graph.lazy import lazy_names

if TYPE_CHECKING:
    from graph_agent.graph.values import Interrupt


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, also for an exception whose ``__str__`` raises (then its ``repr``, or at
    least its type): describing a failure must never fail in turn."""
    try:
        return str(exc)
    except Exception:
        pass
    try:
        return repr(exc)
    except Exception:
        return f"<{type(exc).__name__} whose message cannot be shown>"


class GraphAgentError(Exception):
    """Root of every error graph_agent raises on purpose."""


class GraphSetupError(GraphAgentError, ValueError):
    """The graph is malformed: raised while building or compiling it."""


class GraphRuntimeError(GraphAgentError, RuntimeError):
    """A run failed."""


class GraphRecursionError(GraphRuntimeError):
    """A call ran ``max_steps`` supersteps without finishing."""


class NodeError(GraphRuntimeError):
    """User code raised inside a node or a router; the original is the ``__cause__``."""

    def __init__(self, message: str, *, node: str, step: int) -> None:
        super().__init__(message)
        self.node = node
        self.step = step


class InvalidUpdateError(GraphRuntimeError):
    """A node's return value or a router's answer cannot be applied to the state."""

    def __init__(self, message: str, *, node: str, step: int) -> None:
        super().__init__(message)
        self.node = node
        self.step = step


class NodeTimeoutError(GraphRuntimeError):
    """A node ran longer than its ``add_node(..., timeout=seconds)``: an async node was
    cancelled; a sync node cannot be stopped, so it was abandoned on its thread (it runs to its
    end there, and what it returns is discarded)."""

    def __init__(self, message: str, *, node: str, step: int, timeout: float) -> None:
        super().__init__(message)
        self.node = node
        self.step = step
        self.timeout = timeout


class ThreadBusyError(GraphRuntimeError):
    """Another run is in progress on the same thread."""


class GraphCancelledError(GraphRuntimeError):
    """The run stopped because ``RunnableConfig.cancel`` was set; ``step`` is the superstep
    that did not start, or did not finish (nothing it wrote was kept). With a saver the thread
    stays at its last checkpoint, and ``invoke(None, config)`` carries on from there."""

    def __init__(self, message: str, *, step: int) -> None:
        super().__init__(message)
        self.step = step


class CheckpointStoreError(GraphRuntimeError):
    """The checkpoint store failed: the connection to the database was lost or refused, no
    connection was free in time, or the server rejected a statement.

    Nothing is half-written: each checkpoint and each batch of pending writes is one
    transaction, so the thread stays at its last stored checkpoint and calling again resumes
    from there. (Should the connection drop while a commit is in flight, the checkpoint may have
    landed; the next call sees it as the thread's newest and carries on from it.)
    """


class InvalidResumeError(GraphAgentError, ValueError):
    """A resume that answers nothing pending, or names interrupts that do not exist."""


class SerializationError(GraphAgentError, ValueError):
    """A value cannot be serialized, or stored bytes cannot be loaded safely."""


class GraphInterrupted(BaseException):
    """A run paused and waits for input (a human decision, an edit, an answer).

    Not a :class:`GraphAgentError`: it derives from ``BaseException`` so that a tool or node
    wrapping its work in ``except Exception`` cannot swallow it by accident.

    Raised by a graph run inside a node (a subgraph, an agent), it also says which of its
    interrupts came from that nested run (``nested``: their ids derive from the nested graph's
    tasks, not from the node's) and which of those are static breakpoints (``breakpoints``:
    ``invoke(None)`` passes them once, as it does at the top level). ``scopes`` gives, for the
    node's own interrupts raised inside an ``InterruptScope`` (a tool call), the scope's key
    and the interrupt's index in it: what their ids derive from besides the task, so that
    ``update_state`` can derive the ids a re-run will use.
    """

    def __init__(
        self,
        interrupts: Sequence[Interrupt],
        *,
        nested: Collection[str] = (),
        breakpoints: Collection[str] = (),
        scopes: Mapping[str, tuple[str, int]] | None = None,
    ) -> None:
        self.interrupts: tuple[Interrupt, ...] = tuple(interrupts)
        self.nested: frozenset[str] = frozenset(nested)
        self.breakpoints: frozenset[str] = frozenset(breakpoints)
        self.scopes: Mapping[str, tuple[str, int]] = scopes if scopes is not None else {}
        ids = ", ".join(i.id for i in self.interrupts)
        super().__init__(f"run paused on {len(self.interrupts)} interrupt(s): {ids}")


class ParentCommand(BaseException):
    """A node (or a tool) returned ``Command(graph=Command.PARENT, ...)``: the graph it runs in
    stops, and the graph that runs it as a node applies the command instead.

    ``node`` and ``step`` say where it came from (for a tool, the node that ran the tool), so
    that a handoff with no parent graph to go to can be reported there."""

    def __init__(self, command: Any, *, node: str | None = None, step: int = -1) -> None:
        self.command = command
        self.node = node
        self.step = step
        super().__init__(f"handoff to the parent graph: goto={command.goto!r}")


_MOVED = {"ModelError": "graph_agent.models.errors"}
"""Names that lived here and moved out of the engine (issue 34), by the module they live in:
the old import path still gives them, loading that module on first use (the engine itself
never does)."""


__getattr__ = lazy_names(__name__, _MOVED)
