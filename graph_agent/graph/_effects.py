"""What a call's flow asks its driver to do (effects), what comes back, and what the driver
hands the flow (:class:`RunSettings`).

The flow (``_flow.py``) is a generator that decides everything and *yields effects*; the sync
driver carries them out by calling, the async one by awaiting (``_drive.py``), and each sends
the result back into the flow. A superstep's tasks come back the same way: the reply to
:class:`RunTasks` is the first task's :data:`Outcome`, and each :data:`NEXT_OUTCOME` asks for
the next one, so a task's result reaches the flow one way only, and whatever the flow stores
for it is one more effect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

from graph_agent.graph._engine import GraphSpec, NodeSpec
from graph_agent.graph._writes import Write
from graph_agent.graph.saver import Checkpoint, Saver
from graph_agent.graph.state import OverAllState
from graph_agent.graph.task import TaskContext
from graph_agent.graph.types import NodeOutput, RunnableConfig


@dataclass(frozen=True, slots=True)
class RunSettings:
    """The compiled graph as a call's flow sees it."""

    spec: GraphSpec
    saver: Saver | None
    interrupt_before: frozenset[str]
    interrupt_after: frozenset[str]
    listeners: tuple[Any, ...] = ()
    """``CompileConfig.listeners``: see ``listeners.py``."""
    store: Any = None
    """``CompileConfig.store``: the long-term memory a call gets unless its config brings one."""

    def call_config(self, config: RunnableConfig) -> RunnableConfig:
        """``config`` with the graph's store when the call brings none."""
        if self.store is None or config.store is not None:
            return config
        return replace(config, store=self.store)


@dataclass(slots=True)
class Task:
    """One node to run in the current superstep, and what the flow made of its outcome.

    ``key`` (node, index) tells apart the tasks of one step: a node runs at most once per step
    today, at index 0."""

    node: NodeSpec
    context: TaskContext
    state: OverAllState
    config: RunnableConfig | None
    write: Write | None = None
    error: BaseException | None = None
    engine_error: bool = False
    """The error came from taking in the task's result (a bad return, storing it), not from
    the node's own code."""

    @property
    def key(self) -> tuple[str, int]:
        return self.node.name, self.context.index


Outcome: TypeAlias = tuple[Task, Any, BaseException | None]
"""How a task ended, as a driver sends it back: the task, what it returned, and what it raised
(``None`` when it returned). A plain tuple: one is made per task."""


@dataclass(slots=True)
class RunTasks:
    """Effect: start these tasks, at most ``max_concurrency`` at once, and reply with the first
    :data:`Outcome`; the flow then yields :data:`NEXT_OUTCOME` once per remaining task."""

    tasks: list[Task]
    max_concurrency: int


class NextOutcome:
    """Effect: reply with the :data:`Outcome` of the next task of the running
    :class:`RunTasks` to end (chunks its nodes emit meanwhile go to the caller)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NEXT_OUTCOME"


NEXT_OUTCOME = NextOutcome()


class StepCancelled(Exception):
    """What a driver throws into the flow instead of replying to :class:`RunTasks` or
    :data:`NEXT_OUTCOME`: the call's cancel signal was set while the step's tasks ran, and
    those still running were stopped (an awaited node cancelled, and waited for) or abandoned
    (a sync node on its thread: nothing it returns is taken in)."""


class SaverCall:
    """Effect: a call of the saver; the driver replies with what it returned, or throws what it
    raised into the flow."""

    __slots__ = ()

    def run(self, saver: Saver) -> Any:
        raise NotImplementedError

    async def arun(self, saver: Saver) -> Any:
        raise NotImplementedError


@dataclass(slots=True)
class GetCheckpoint(SaverCall):
    """``saver.get(...)``: the newest checkpoint, or the one ``checkpoint_id`` names."""

    thread_id: str
    checkpoint_id: str | None
    checkpoint_ns: str

    def run(self, saver: Saver) -> Checkpoint | None:
        return saver.get(self.thread_id, self.checkpoint_id, self.checkpoint_ns)

    async def arun(self, saver: Saver) -> Checkpoint | None:
        return await saver.aget(self.thread_id, self.checkpoint_id, self.checkpoint_ns)


@dataclass(slots=True)
class PutCheckpoint(SaverCall):
    """``saver.put(checkpoint)``: once it returned, the run stands on ``checkpoint``. ``last``:
    the call's last write (its run ends after it, whatever it yields meanwhile): a driver
    holding the thread's lease may have the saver let go of it in the same commit."""

    checkpoint: Checkpoint
    last: bool = False

    def run(self, saver: Saver) -> None:
        saver.put(self.checkpoint)

    async def arun(self, saver: Saver) -> None:
        await saver.aput(self.checkpoint)


@dataclass(slots=True)
class PutWrites(SaverCall):
    """``saver.put_writes(...)``: a task's pending writes on the checkpoint the run stands on."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    task_id: str
    writes: Sequence[tuple[str, Any]]

    def run(self, saver: Saver) -> None:
        saver.put_writes(
            self.thread_id, self.checkpoint_ns, self.checkpoint_id, self.task_id, self.writes
        )

    async def arun(self, saver: Saver) -> None:
        await saver.aput_writes(
            self.thread_id, self.checkpoint_ns, self.checkpoint_id, self.task_id, self.writes
        )


@dataclass(slots=True)
class Emit:
    """Effect: hand these outputs to the caller of ``stream()``."""

    items: list[NodeOutput]


Effect: TypeAlias = RunTasks | NextOutcome | SaverCall | Emit | NodeOutput
"""A lone NodeOutput is handed to the caller as is: a one-node step's output, the usual one."""
