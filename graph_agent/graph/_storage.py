"""Where a call's checkpoints go: :class:`RunStorage` makes the saver calls of one call (as
effects, see ``_effects.py``) and knows the checkpoint the run stands on."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from graph_agent.graph._effects import Effect, GetCheckpoint, PutCheckpoint, PutWrites
from graph_agent.graph._engine import RunState
from graph_agent.graph.saver import Checkpoint, Saver, new_checkpoint, new_checkpoint_id
from graph_agent.graph.task import RECORD_PREFIX, TaskContext
from graph_agent.graph.types import RunnableConfig


class RunStorage:
    """The storage side of one call: the saver, the thread and namespace, and the checkpoint
    the run stands on (``checkpoint_id``, None before the first)."""

    __slots__ = ("checkpoint_id", "fork", "fork_head", "metadata", "ns", "saver", "thread_id")

    def __init__(self, saver: Saver | None, config: RunnableConfig) -> None:
        self.saver = saver
        self.thread_id = config.thread_id
        self.ns = config.checkpoint_ns
        self.metadata = config.metadata
        self.checkpoint_id: str | None = None
        self.fork = False
        """The next checkpoint forks the thread (the call started from an older checkpoint)."""
        self.fork_head = ""
        """When forking: the thread's newest checkpoint id, which the fork's id sorts after."""

    def load(self, wanted: str | None) -> Generator[Effect, Any, Checkpoint | None]:
        """The checkpoint a call starts from: the newest, or ``wanted``. Starting from an older
        checkpoint forks the thread there (:attr:`fork`: the caller stores the copy)."""
        assert self.thread_id is not None
        saved: Checkpoint | None = yield GetCheckpoint(self.thread_id, wanted, self.ns)
        if saved is None and wanted is not None:
            raise ValueError(
                f"no checkpoint {wanted!r} on this thread; list them with get_state_history(config)"
            )
        if saved is None:
            return None
        self.checkpoint_id = saved.id
        if wanted is not None:
            head = yield GetCheckpoint(self.thread_id, None, self.ns)
            self.fork = head is not None and head.id != wanted
            if head is not None and self.fork:
                self.fork_head = head.id  # the fork's id sorts after it, whatever our clock says
        return saved

    def checkpoint(
        self, run_state: RunState, source: str, writers: list[str]
    ) -> Generator[Effect, Any, None]:
        """Store a new checkpoint of ``run_state`` and stand on it."""
        put = self.put(run_state, source, writers)
        yield put
        self.stand_on(put)

    def put(self, run_state: RunState, source: str, writers: list[str]) -> PutCheckpoint:
        """The saver call storing a new checkpoint of ``run_state``; once it returned, the run
        stands on that checkpoint (:meth:`stand_on`)."""
        after = self.checkpoint_id
        if self.fork and after is not None and self.fork_head > after:
            after = self.fork_head
        checkpoint_id = new_checkpoint_id(after=after)
        metadata = {
            **self.metadata,
            "source": "fork" if self.fork else source,
            "step": run_state.step,
            "writers": writers,
        }
        blobs = run_state.take_blobs(checkpoint_id)  # first: it moves the versions of what changed
        barriers = run_state.barrier_seen
        checkpoint = new_checkpoint(
            checkpoint_id,
            self.thread_id or "",
            self.ns,
            self.checkpoint_id,
            run_state.step,
            run_state.next if not run_state.sends else run_state.next_nodes(),
            dict(run_state.versions),
            {k: tuple(sorted(v)) for k, v in barriers.items()} if barriers else {},
            blobs,
            metadata,
        )
        return PutCheckpoint(checkpoint)

    def stand_on(self, put: PutCheckpoint) -> None:
        self.checkpoint_id = put.checkpoint.id
        self.fork = False

    def put_writes(self, task_id: str, writes: list[tuple[str, Any]]) -> PutWrites:
        """The saver call storing a task's pending writes on the current checkpoint."""
        assert self.thread_id is not None and self.checkpoint_id is not None
        return PutWrites(self.thread_id, self.ns, self.checkpoint_id, task_id, writes)

    def persist_record(self, context: TaskContext, key: str, value: Any) -> None:
        """Commit a task's record (``TaskContext.record``) at once. The one saver call made
        outside the flow: a record is made while its node runs (one tool call of several), and
        must be durable before the node goes on."""
        assert self.saver is not None
        self.put_writes(context.id, [(RECORD_PREFIX + key, value)]).run(self.saver)

    async def apersist_record(self, context: TaskContext, key: str, value: Any) -> None:
        """:meth:`persist_record` through the saver's async API."""
        assert self.saver is not None
        await self.put_writes(context.id, [(RECORD_PREFIX + key, value)]).arun(self.saver)
