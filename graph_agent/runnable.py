"""The one edge everything runnable shares: :class:`Runnable`.

A compiled graph, an agent, a team of agents and a :class:`~graph_agent.client.RemoteGraph`
all run the same way, keep their threads the same way and draw themselves the same way. The
server, ``graph-agent mcp serve``, the CLI and composition take any object with these methods
and type against this protocol, so none of them asks which kind of object it was given::

    def serve_one(target: Runnable, saver: CheckpointSaver) -> Runnable:
        return target.with_saver(saver)  # a copy: ``target`` is left as it was

It is a :class:`typing.Protocol` and runtime-checkable: ``isinstance(x, Runnable)`` says
whether ``x`` has every method (not their signatures).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from graph_agent.graph.types import RunnableConfig, StateSnapshot

__all__ = ["Runnable"]


@runtime_checkable
class Runnable(Protocol):
    """What a graph, an agent, a team and a remote graph all offer.

    ``with_saver`` returns a new object keeping its threads in ``saver`` (``None``: in none)
    and never changes the one it is called on. The async methods are the sync ones' twins;
    for the in-memory and PostgreSQL savers they do their I/O on the caller's loop.
    """

    @property
    def name(self) -> str:
        """The name it is known by (a served assistant's id unless another is given)."""
        ...

    def invoke(self, input: Any, config: RunnableConfig | None = None) -> Any:
        """Run to the end (or to a pause) and return the state."""
        ...

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None) -> Any:
        """Async twin of :meth:`invoke`."""
        ...

    def stream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
        stream_mode: Any = None,
        task_events: Any = False,
    ) -> Iterator[Any]:
        """Run, yielding what happens (``NodeOutput`` items, or a ``stream_mode``'s)."""
        ...

    def astream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
        stream_mode: Any = None,
        task_events: Any = False,
    ) -> AsyncIterator[Any]:
        """Async twin of :meth:`stream`."""
        ...

    def get_state(self, config: RunnableConfig, *, subgraphs: bool = False) -> StateSnapshot:
        """The thread's state at its newest checkpoint (or at ``config.checkpoint_id``)."""
        ...

    async def aget_state(self, config: RunnableConfig, *, subgraphs: bool = False) -> StateSnapshot:
        """Async twin of :meth:`get_state`."""
        ...

    def get_state_history(
        self,
        config: RunnableConfig,
        limit: int | None = None,
        before: str | RunnableConfig | None = None,
    ) -> Iterator[StateSnapshot]:
        """The thread's checkpoints, newest first."""
        ...

    def aget_state_history(
        self,
        config: RunnableConfig,
        limit: int | None = None,
        before: str | RunnableConfig | None = None,
    ) -> AsyncIterator[StateSnapshot]:
        """Async twin of :meth:`get_state_history`."""
        ...

    def update_state(
        self, config: RunnableConfig, values: Any, as_node: str | None = None
    ) -> RunnableConfig:
        """Write ``values`` into the thread in a new checkpoint; returns its config."""
        ...

    async def aupdate_state(
        self, config: RunnableConfig, values: Any, as_node: str | None = None
    ) -> RunnableConfig:
        """Async twin of :meth:`update_state`."""
        ...

    def get_graph(self, fmt: str = "mermaid", *, xray: bool = False) -> str:
        """The graph drawn as ``mermaid``, ``plantuml``, ``dot`` or ``ascii``."""
        ...

    def with_saver(self, saver: Any) -> Runnable:
        """A copy keeping its threads in ``saver``; this object is left unchanged."""
        ...


if TYPE_CHECKING:  # mypy checks that each implementation has every method, signatures included
    from graph_agent.client import RemoteGraph
    from graph_agent.graph.compiled import CompiledGraph

    def _implementations(graph: CompiledGraph, remote: RemoteGraph) -> tuple[Runnable, ...]:
        return graph, remote
