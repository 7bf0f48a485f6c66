"""Interrupts and resume for one call: :class:`Pauses` holds what is pending on the thread,
takes a resume's answers, fires static breakpoints, and pauses the run.

Every method that stores something yields the saver calls as effects, like the flow it is
part of (``_flow.py``).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

from graph_agent.graph._effects import Effect, Emit, RunSettings, Task
from graph_agent.graph._engine import RunState
from graph_agent.graph._pending import SUBGRAPH_CONSUMED, SUBGRAPH_TASK, Pending
from graph_agent.graph._sends import send_indexes
from graph_agent.graph._storage import RunStorage
from graph_agent.graph._writes import stored_write
from graph_agent.graph.errors import GraphInterrupted, InvalidResumeError
from graph_agent.graph.saver import BREAKPOINT, INTERRUPT, NESTED, RESUME, SCOPED, WRITE
from graph_agent.graph.state import OverAllState
from graph_agent.graph.task import (
    RECORD_PREFIX,
    derive_id,
    scoped_interrupt_id,
    send_key,
    task_id_for,
)
from graph_agent.graph.types import Interrupt, NodeOutput

NO_TASK_IDS: frozenset[str] = frozenset()


def before_interrupt_id(thread_id: str | None, step: int, task_id: str) -> str:
    """The id of the ``interrupt_before`` breakpoint of a task."""
    return derive_id("interrupt", thread_id, step, task_id, "before")


def interrupted(task: Task) -> bool:
    return isinstance(task.error, GraphInterrupted)


class Pauses:
    """The interrupts of one call: ``pending``, what the checkpoint the run stands on holds
    (finished tasks' writes, interrupts, answers, records), and the answers this call gave."""

    __slots__ = ("answered_now", "pending", "run", "run_state", "storage", "streaming")

    def __init__(
        self, run: RunSettings, run_state: RunState, storage: RunStorage, *, streaming: bool
    ) -> None:
        self.run = run
        self.run_state = run_state
        self.storage = storage
        self.streaming = streaming
        self.pending = Pending((), run.spec.rank)
        self.answered_now: dict[str, set[str]] = {}
        """Interrupt ids this call answered, by task."""

    def clear(self) -> None:
        """A step finished (or a new run began): nothing of the old step is pending."""
        self.pending = Pending((), self.run.spec.rank)

    # the input: answers
    def answer(self, resume: Any) -> Generator[Effect, Any, None]:
        """Take ``Command(resume=...)``: one value for the only pending interrupt, or a dict
        of values keyed by interrupt id."""
        unanswered = self.pending.unanswered()
        if not unanswered:
            raise InvalidResumeError(
                "Command(resume=...) answers pending interrupts, and this thread has none; "
                "call with None to continue or with new input to start a run"
            )
        by_id = {item.id: (task_id, item) for task_id, item in unanswered}
        if isinstance(resume, dict) and resume and all(k in by_id for k in resume):
            answers = dict(resume)
        elif len(unanswered) == 1:
            answers = {unanswered[0][1].id: resume}
        else:
            unknown = [k for k in resume] if isinstance(resume, dict) else []
            unknown = [k for k in unknown if k not in by_id]
            detail = f"unknown ids: {', '.join(map(repr, unknown))}; " if unknown else ""
            raise InvalidResumeError(
                f"{len(unanswered)} interrupts are pending, so resume needs a dict keyed by "
                f"their ids; {detail}pending: {', '.join(map(repr, by_id))}"
            )
        by_task: dict[str, dict[str, Any]] = {}
        for interrupt_id, value in answers.items():
            by_task.setdefault(by_id[interrupt_id][0], {})[interrupt_id] = value
        yield from self._store_resume(by_task)

    def answer_static(self) -> Generator[Effect, Any, None]:
        """``invoke(None)``: pass each pending static breakpoint once."""
        by_task: dict[str, dict[str, Any]] = {}
        for task_id, item in self.pending.unanswered():
            by_task.setdefault(task_id, {})[item.id] = None
        yield from self._store_resume(by_task)

    def _store_resume(self, by_task: dict[str, dict[str, Any]]) -> Generator[Effect, Any, None]:
        for task_id, answers in by_task.items():
            resume = self.pending.resume.setdefault(task_id, {})
            resume.update(answers)
            self.answered_now.setdefault(task_id, set()).update(answers)
            yield self.storage.put_writes(task_id, [(RESUME, dict(resume))])

    def carry_over(self, old: Pending, old_checkpoint: str) -> Generator[Effect, Any, None]:
        """After ``update_state`` without ``as_node``, the step the thread was paused in goes on
        from the new checkpoint: finished nodes' writes, records, unanswered ``interrupt()``s
        and a passed-once breakpoint move to the new task ids, each interrupt id re-derived as
        the re-run node will derive it, so the same ``Command(resume=...)`` answers it.

        Interrupts raised inside an ``InterruptScope`` (a tool call) are renamed from their
        scope key and index in it (the :data:`SCOPED` write). Interrupts raised by a graph
        nested in the task keep their ids, and so does the nested graph its namespace (the
        :data:`SUBGRAPH_TASK` record): it resumes where it waits."""
        storage = self.storage
        thread, step = storage.thread_id, self.run_state.step + 1
        for node, old_id, new_id in self._moved_tasks(old.ids_thread or thread, old_checkpoint):
            writes: list[tuple[str, Any]] = []
            done = old.done.get(old_id)
            if done is not None:
                writes.append((WRITE, stored_write(done)))
            records = old.records.get(old_id, {})
            nested_in, nested = old.nested.get(old_id, (node, frozenset()))
            if nested and SUBGRAPH_TASK not in records:
                records = {**records, SUBGRAPH_TASK: old_id}
            writes.extend((RECORD_PREFIX + k, v) for k, v in records.items())
            answered = old.resume.get(old_id, {})
            items = old.interrupts.get(old_id, [])
            static_ids = old.static_ids
            own = [i for i in items if i.id not in static_ids and i.id not in nested]
            scopes = old.scopes.get(old_id, {})
            renamed: dict[str, Interrupt] = {}
            moved_scopes: dict[str, tuple[str, int]] = {}
            index = 0  # interrupts outside a scope are numbered per task, in the order raised
            for item in own:
                scope = scopes.get(item.id)
                if scope is None:
                    new_item_id = derive_id("interrupt", thread, step, new_id, index)
                    index += 1
                else:
                    new_item_id = scoped_interrupt_id(thread, step, new_id, *scope)
                    moved_scopes[new_item_id] = scope
                renamed[item.id] = Interrupt(new_item_id, item.value, item.node)
            kept = [i for i in items if i.id in nested]
            raised = [*renamed.values(), *(i for i in kept if i.id not in static_ids)]
            if raised:
                writes.append((INTERRUPT, raised))
            resume = {renamed[i].id: v for i, v in answered.items() if i in renamed}
            resume.update((i.id, answered[i.id]) for i in kept if i.id in answered)
            if resume:
                writes.append((RESUME, resume))
            breakpoints = [i for i in kept if i.id in static_ids]
            waits = [
                i
                for i in items
                if i.id in static_ids
                and i.id not in nested
                and i.value == "interrupt_before"
                and i.id not in answered
            ]
            if waits:  # paused at a breakpoint: it stays paused there, None passes it once
                before = before_interrupt_id(thread, step, new_id)
                breakpoints.append(Interrupt(before, "interrupt_before", node))
            if breakpoints:
                writes.append((BREAKPOINT, breakpoints))
            if nested:
                writes.append((NESTED, {"node": nested_in, "ids": sorted(nested)}))
            if moved_scopes:
                writes.append((SCOPED, {i: [key, at] for i, (key, at) in moved_scopes.items()}))
            if writes:
                yield storage.put_writes(new_id, writes)

    def _moved_tasks(
        self, old_thread: str | None, old_checkpoint: str
    ) -> Iterator[tuple[str, str, str]]:
        """The paused step's tasks, as (node, id before, id after) an update moved the step
        onto the new checkpoint: a task per next node, and per Send."""
        thread, new_checkpoint = self.storage.thread_id, self.storage.checkpoint_id
        for node in self.run_state.next:
            old_id = task_id_for(old_thread, old_checkpoint, node)
            yield node, old_id, task_id_for(thread, new_checkpoint, node)
        for send, index in send_indexes(self.run_state.sends):
            key = send_key(send.input)
            old_id = task_id_for(old_thread, old_checkpoint, send.node, index + 1, key)
            yield send.node, old_id, task_id_for(thread, new_checkpoint, send.node, index + 1, key)

    # a superstep
    def runnable(self, tasks: list[Task]) -> tuple[list[Task], frozenset[str]]:
        """The tasks to run now, and the ids of those still waiting for an interrupt's answer.

        Tasks whose writes are pending from an earlier attempt of this step are not run again
        (only called when something is pending: otherwise every task runs and no task id has
        to be derived).
        """
        pending = self.pending
        to_run = [t for t in tasks if t.context.id not in pending.done]
        if not pending.interrupts:
            return to_run, NO_TASK_IDS
        waiting = {task_id for task_id, _ in pending.dynamic_waiting()}
        blocked = frozenset(waiting.intersection(t.context.id for t in to_run))
        return [t for t in to_run if t.context.id not in blocked], blocked

    def refused(self, task: Task) -> Generator[Effect, Any, None]:
        """A task failed: if on answers this call gave it (a wrong shape, a refusal), those
        interrupts are pending again; earlier answers stay, and so do answers a nested graph
        took and stored a checkpoint after (a later step of it failed)."""
        task_id = task.context.id
        given = self.answered_now.get(task_id) if self.answered_now else None
        if not given:
            return
        refused = given.difference(task.context.records.get(SUBGRAPH_CONSUMED, ()))
        if refused:
            resume = self.pending.resume[task_id]
            for interrupt_id in refused:
                resume.pop(interrupt_id, None)
            yield self.storage.put_writes(task_id, [(RESUME, dict(resume))])

    def after_tasks(
        self, tasks: list[Task], blocked: frozenset[str]
    ) -> Generator[Effect, Any, OverAllState | None]:
        """After a step's tasks ran without failing: store the interrupts they raised, and
        pause on them and on those still waiting (``blocked``); None when none did."""
        interrupts: list[Interrupt] = []
        waiting_node: str | None = None
        pending = self.pending
        for task in tasks:
            if interrupted(task) or (blocked and task.context.id in blocked):
                waiting_node = waiting_node or task.node.name
            if interrupted(task):
                task_id = task.context.id
                paused = task.error
                assert isinstance(paused, GraphInterrupted)
                # its traceback holds the frame that holds the task that holds it: a reference
                # cycle holding the whole call; no one reads where a pause was raised
                paused.__traceback__ = None
                new = list(paused.interrupts)
                interrupts.extend(new)
                breakpoints = paused.breakpoints
                for item in new:
                    pending.add_interrupt(task_id, item, static=item.id in breakpoints)
                writes = [pending.stored(task_id, static=False)]
                if breakpoints:  # a nested graph's static breakpoints: None passes them once
                    writes.append(pending.stored(task_id, static=True))
                if paused.nested:
                    writes.append(pending.add_nested(task_id, task.node.name, paused.nested))
                if paused.scopes:
                    writes.append(pending.add_scopes(task_id, paused.scopes))
                yield self.storage.put_writes(task_id, writes)
            elif blocked and task.context.id in blocked:
                task_id = task.context.id
                interrupts.extend(i for t, i in pending.unanswered() if t == task_id)
        if interrupts:
            return (yield from self.pause(interrupts, self.run_state.step + 1, waiting_node))
        return None

    # static breakpoints
    def before(self, tasks: list[Task]) -> Generator[Effect, Any, OverAllState | None]:
        """Pause before the tasks of nodes in ``interrupt_before`` (once: None passes)."""
        new = []
        for task in tasks:
            if task.node.name not in self.run.interrupt_before:
                continue
            task_id = task.context.id
            item = Interrupt(
                before_interrupt_id(task.context.id_thread, task.context.step, task_id),
                "interrupt_before",
                task.node.name,
            )
            if item.id in self.pending.resume.get(task_id, {}):
                continue
            new.append(item)
            self.pending.add_interrupt(task_id, item, static=True)
            yield self.storage.put_writes(task_id, [self.pending.stored(task_id, static=True)])
        if not new:
            return None
        return (yield from self.pause(new, self.run_state.step + 1))

    def after(self, tasks: list[Task]) -> Generator[Effect, Any, OverAllState | None]:
        """Pause after the tasks of nodes in ``interrupt_after`` (once per node)."""
        new: list[Interrupt] = []
        storage = self.storage
        for task in tasks:
            name = task.node.name
            if name in self.run.interrupt_after and all(i.node != name for i in new):
                task_id = derive_id("after", storage.thread_id, storage.checkpoint_id, name)
                item = Interrupt(
                    derive_id(
                        "interrupt", storage.thread_id, self.run_state.step, task_id, "after"
                    ),
                    "interrupt_after",
                    name,
                )
                new.append(item)
                self.pending.add_interrupt(task_id, item, static=True)
                yield storage.put_writes(task_id, [self.pending.stored(task_id, static=True)])
        if not new:
            return None
        return (yield from self.pause(new, self.run_state.step))

    # pausing
    def pause(
        self, interrupts: list[Interrupt], step: int, node: str | None = None
    ) -> Generator[Effect, Any, OverAllState]:
        """Pause with every unanswered interrupt; ``step``: the step that is waiting, ``node``:
        the node of this graph that waits (for an interrupt raised in a subgraph, the node
        running it), else the first interrupt's."""
        pending = [i for _, i in self.pending.unanswered()]
        for item in interrupts:
            if item not in pending:
                pending.append(item)
        if self.streaming:
            yield Emit([self._pause_output(pending, step, node or pending[0].node)])
        return OverAllState(self.run_state.values, pending, hidden=self.run.spec.hidden_keys)

    def _pause_output(self, interrupts: list[Interrupt], step: int, node: str) -> NodeOutput:
        return NodeOutput(
            node=node,
            agent=self.run.spec.name,
            step=step,
            update={},
            state=self.run_state.state(),
            checkpoint_id=self.storage.checkpoint_id,
            interrupts=tuple(interrupts),
        )
