"""The spine of a call, one for both drivers: load, treat the input, run supersteps, store, pause.

:func:`call_flow` is a generator: it decides everything and *yields effects* for a driver to
carry out (``_effects.py``), receiving their results back; the sync driver fulfils them by
calling, the async one by awaiting: one implementation, two faces (like httpx's
``Auth.auth_flow``). A superstep, in :meth:`_Flow._supersteps`: make the tasks, pass static
breakpoints (``_pauses.py``), run the tasks and take in each outcome as it comes back, settle
errors and interrupts, merge the writes and route (``_engine.py``), store a checkpoint
(``_storage.py``), stream the outputs.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Generator, Mapping
from typing import Any

from graph_agent.graph._effects import (
    NEXT_OUTCOME,
    Effect,
    Emit,
    Outcome,
    RunSettings,
    RunTasks,
    StepCancelled,
    Task,
)
from graph_agent.graph._engine import NodeSpec, RunState
from graph_agent.graph._failures import (
    cancelled,
    check_next_nodes,
    node_error,
    nothing_to_continue,
    task_label,
    tasks_text,
)
from graph_agent.graph._observed import Watch, flow_call
from graph_agent.graph._pauses import NO_TASK_IDS, Pauses, interrupted
from graph_agent.graph._pending import Pending, thread_start
from graph_agent.graph._policy_node import attempts_of, with_attempts
from graph_agent.graph._sends import once_per_node, send_indexes
from graph_agent.graph._storage import RunStorage
from graph_agent.graph._writes import EMPTY_WRITE, Write, normalize_return, stored_write
from graph_agent.graph.errors import (
    GraphCancelledError,
    GraphRecursionError,
    InvalidResumeError,
    InvalidUpdateError,
    exception_text,
)
from graph_agent.graph.saver import ERROR, WRITE, Checkpoint
from graph_agent.graph.state import OverAllState
from graph_agent.graph.task import (
    CallContext,
    ContinueAs,
    FromThread,
    SendTaskContext,
    TaskContext,
    ThreadStart,
)
from graph_agent.graph.types import START, Command, NodeOutput, RunnableConfig, Send, node_output

_run_counter = itertools.count()


def call_flow(
    run: RunSettings,
    input: Any,
    config: RunnableConfig,
    *,
    streaming: bool,
    subgraphs: bool = False,
    task_events: frozenset[str] = frozenset(),
) -> Generator[Effect, Any, OverAllState]:
    """One call of a compiled graph: load, treat the input, run supersteps, store, pause;
    streaming, graphs in nodes (``subgraphs``) and tasks (``task_events``) stream too."""
    flow = _Flow(run, config, streaming)
    flow.subgraphs = subgraphs
    return flow_call(flow, input, task_events)  # flow.call(input), told to whom it concerns


def update_flow(
    run: RunSettings, config: RunnableConfig, values: Any, as_node: str | None
) -> Generator[Effect, Any, RunnableConfig]:
    """``update_state``: write ``values`` as if ``as_node`` had, in a new checkpoint."""
    return _Flow(run, config, False).update(values, as_node)


class _Flow:
    """One call: the run's state (``run_state``), where it is stored (``storage``), its interrupts
    (``pauses``), and the settings of the call."""

    watch: Watch | None = None  # while listeners watch the call: see _observed.py

    def __init__(self, run: RunSettings, config: RunnableConfig, streaming: bool) -> None:
        self.run = run
        self.spec = run.spec
        self.config = config = run.call_config(config)
        self.streaming = streaming
        self.subgraphs = False
        self.durable = run.saver is not None
        self.run_state = RunState(run.spec)
        self.storage = RunStorage(run.saver, config)
        self.pauses = Pauses(run, self.run_state, self.storage, streaming=streaming)
        self.run_id: str | None = None  # without a saver: makes task ids unique per call
        self.several = False  # the running step has several tasks (their writes go pending)
        self.last_writes: list[tuple[str, Write]] = []
        self.send_step = -2  # the step running Send tasks (their writes are labelled)
        self._config_fields: dict[str, Any] | None = None  # for _task_config, made once needed
        self._shared: CallContext | None = None

    # the call
    def call(self, input: Any) -> Generator[Effect, Any, OverAllState]:
        try:
            if not self.durable:
                self.run_id = f"run-{next(_run_counter)}"
                if isinstance(input, FromThread):  # no thread: it decides on an empty one
                    input = input.decide(ThreadStart(values=self.run_state.state()))
                    input = None if isinstance(input, ContinueAs) else input
                self._check_stateless_input(input)
                self._start(input)
                if self.streaming:
                    yield self._input_output(input)
            else:
                if self.config.thread_id is None:
                    raise ValueError(
                        "this graph has a checkpoint saver, so each call needs a thread: pass "
                        "RunnableConfig(thread_id='...')"
                    )
                saved = yield from self._load_saved()
                if isinstance(input, FromThread):  # decided before a fork: a refusal writes nothing
                    start = thread_start(
                        saved, self.run_state.state(), self.storage.thread_id, self.spec.rank
                    )
                    input = input.decide(start)
                yield from self._fork_if_older()
                paused = yield from self._treat_input(input, saved)
                if paused is not None:
                    return paused
            return (yield from self._supersteps())
        finally:
            # the shared context holds a method of this call's storage: kept, the call's state
            # would be a reference cycle, freed only by the garbage collector (never, with it
            # off)
            self._shared = None

    def update(self, values: Any, as_node: str | None) -> Generator[Effect, Any, RunnableConfig]:
        storage = self.storage
        if not self.durable or storage.thread_id is None:
            raise ValueError(
                "update_state needs a checkpoint saver and RunnableConfig(thread_id=...)"
            )
        self._check_update(values, as_node)
        yield from self._load()
        paused, paused_at = self.pauses.pending, storage.checkpoint_id
        yield from self._write_update(values, as_node)
        if as_node is None and paused_at is not None and not paused.empty:
            yield from self.pauses.carry_over(paused, paused_at)
        return RunnableConfig(
            thread_id=storage.thread_id,
            checkpoint_id=storage.checkpoint_id,
            checkpoint_ns=storage.ns,
        )

    def _check_update(self, values: Any, as_node: str | None) -> None:
        if as_node is not None and as_node != START and as_node not in self.spec.nodes:
            raise ValueError(
                f"update_state(as_node={as_node!r}): not a node of graph {self.spec.name!r} "
                f"(nodes: {', '.join(self.spec.nodes)})"
            )
        if not isinstance(values, Mapping):
            raise InvalidUpdateError(
                f"update_state needs a dict of state keys, got {type(values).__name__}",
                node=as_node or "update_state",
                step=self.run_state.step,
            )

    def _write_update(
        self, values: Mapping[str, Any], as_node: str | None
    ) -> Generator[Effect, Any, None]:
        """Write ``values`` as ``as_node`` in a new checkpoint (its edges route from there)."""
        writer = as_node or "update_state"
        run_state = self.run_state
        run_state.step += 1
        run_state.apply_writes([(writer, dict(values))], run_state.step)
        if as_node == START:
            run_state.route_from_start(self.config)
        elif as_node is not None:
            run_state.drop_sends()
            run_state.route([(as_node, ())], self.config)
        yield from self.storage.checkpoint(run_state, "update", [writer])

    def _check_stateless_input(self, input: Any) -> None:
        if input is None or isinstance(input, Command):
            raise InvalidResumeError(
                "nothing to resume: this graph has no checkpoint saver, so every call starts "
                "from its input; compile with CompileConfig(saver=...) to pause and resume"
            )

    def _start(self, input: Any) -> None:
        if not isinstance(input, Mapping):
            raise InvalidUpdateError(
                f"the input must be a dict of state keys, got {type(input).__name__} "
                f"{input!r:.60}; e.g. app.invoke({{'messages': [...]}})",
                node=START,
                step=self.run_state.step,
            )
        for key in input:
            if not isinstance(key, str):
                raise InvalidUpdateError(
                    f"the input has the key {key!r}: state keys must be strings",
                    node=START,
                    step=self.run_state.step,
                )
        self.run_state.apply_writes([(START, dict(input))], self.run_state.step)
        self.run_state.route_from_start(self.config)

    def _load(self) -> Generator[Effect, Any, Checkpoint | None]:
        """Load the checkpoint the call starts from: the newest, or the one the config names.

        Starting from an older checkpoint forks the thread there: a copy of it becomes the
        thread's newest checkpoint (source ``fork``) and the nodes after it run again (their
        interrupts fire again), so its pending writes are not reused.
        """
        saved = yield from self._load_saved()
        yield from self._fork_if_older()
        return saved

    def _load_saved(self) -> Generator[Effect, Any, Checkpoint | None]:
        """Load the checkpoint the call starts from (``None`` on a new thread)."""
        saved = yield from self.storage.load(self.config.checkpoint_id)
        if saved is not None:
            self.run_state.load(
                saved.values,
                step=saved.step,
                next_nodes=saved.next,
                versions=saved.versions,
                barriers=saved.barriers,
                chains=saved.chains,
            )
            self.pauses.pending = Pending(saved.pending_writes, self.spec.rank)
        if self.watch is not None:
            self.watch.start(self, saved)
        return saved

    def _fork_if_older(self) -> Generator[Effect, Any, None]:
        """Fork the thread at the loaded checkpoint when it is not the newest."""
        if self.storage.fork:
            self.pauses.clear()
            yield from self.storage.checkpoint(self.run_state, "fork", [])

    def _treat_input(
        self, input: Any, saved: Checkpoint | None
    ) -> Generator[Effect, Any, OverAllState | None]:
        """The three cases of DESIGN §3: resume, continue, or a new run on the thread; or what
        a :class:`FromThread` input decided: ``ContinueAs``, an update, then continue."""
        pauses = self.pauses
        if isinstance(input, ContinueAs):
            yield from self._continue_as(input)
            return None
        if (input is None or isinstance(input, Command)) and saved is not None:
            check_next_nodes(saved.next, self.spec, self.storage.thread_id)
        if isinstance(input, Command):
            if input.goto is not None or input.update is not None:
                raise InvalidResumeError(
                    "a Command given as input only carries resume=...; to change state use "
                    "update_state(config, values), to route use a node's Command"
                )
            yield from pauses.answer(input.resume)
            return None
        if input is None:
            run_state = self.run_state
            waiting = run_state.next or run_state.sends or pauses.pending.unanswered()
            if saved is None or not waiting:
                raise nothing_to_continue("no checkpoint" if saved is None else "finished")
            dynamic = pauses.pending.dynamic_waiting()
            if dynamic:  # never answered with None: the same interrupts are raised again
                return (yield from pauses.pause([i for _, i in dynamic], self.run_state.step + 1))
            yield from pauses.answer_static()
            return None
        # a new run on the thread: pending interrupts and writes of the old step are dropped
        pauses.clear()
        self.run_state.step = saved.step + 1 if saved is not None else -1
        self._start(input)
        yield from self.storage.checkpoint(self.run_state, "input", [START])
        if self.streaming:
            yield self._input_output(input)
        return None

    def _continue_as(self, decided: ContinueAs) -> Generator[Effect, Any, None]:
        """``update_state(update, as_node=node)``, then on from the new checkpoint as input
        ``None`` continues (it has no pending writes, so nothing waits to be answered)."""
        self._check_update(decided.update, decided.node)
        yield from self._write_update(decided.update, decided.node)
        self.pauses.clear()
        if not self.run_state.next and not self.run_state.sends:
            raise nothing_to_continue("finished")

    # supersteps
    def _supersteps(self) -> Generator[Effect, Any, OverAllState]:
        run_state, config, run, pauses = self.run_state, self.config, self.run, self.pauses
        durable, cancel = self.durable, config.cancel
        steps = 0
        run_tasks = RunTasks([], config.max_concurrency)  # one for every step
        while run_state.next or run_state.sends:
            tasks = self._tasks()
            if durable and run.interrupt_before:
                paused = yield from pauses.before(tasks)
                if paused is not None:
                    return paused
            if steps >= config.max_steps:
                raise GraphRecursionError(
                    f"graph {self.spec.name!r} ran {steps} supersteps in this call without "
                    f"finishing (max_steps={config.max_steps}); it last ran "
                    f"{', '.join(name for name, _ in self.last_writes)} and would run "
                    f"{tasks_text(tasks)} next. "
                    "Check the routing for a loop that never ends, or raise "
                    "RunnableConfig(max_steps=...); with a saver the run can be continued "
                    "with invoke(None, config)"
                )
            if cancel is not None and cancel.is_set():
                raise self._cancelled(tasks)
            steps += 1
            # nothing pending: every task runs, and a step that does not pause adds nothing
            nothing_pending = not durable or pauses.pending.empty  # (only a saver brings any)
            to_run, blocked = (tasks, NO_TASK_IDS) if nothing_pending else pauses.runnable(tasks)
            if to_run:
                self.several = len(tasks) > 1
                run_tasks.tasks = to_run
                try:  # each outcome taken in as it comes back
                    outcome = yield run_tasks
                    if not self.several:  # the common step: one task, its write not stored alone
                        self._take_in(outcome)
                    elif durable:  # each write is stored as its task ends
                        yield from self._take_outcome(outcome)
                        for _ in range(len(to_run) - 1):
                            yield from self._take_outcome((yield NEXT_OUTCOME))
                    else:  # nothing to store
                        self._take_in(outcome)
                        for _ in range(len(to_run) - 1):
                            self._take_in((yield NEXT_OUTCOME))
                except StepCancelled:  # those running were stopped: nothing of theirs is kept
                    raise self._cancelled(tasks, during=True) from None
                if cancel is not None and cancel.is_set():  # set while nodes that could not
                    raise self._cancelled(tasks, during=True)  # be stopped ran: writes dropped
            if blocked or (
                tasks[0].error is not None
                if len(tasks) == 1
                else any(task.error is not None for task in tasks)
            ):
                paused = yield from self._settle(tasks, blocked)
                if paused is not None:
                    return paused
            writes = self.last_writes = self._merge(tasks)
            if durable:
                writers = [writes[0][0]] if len(writes) == 1 else [name for name, _ in writes]
                storage = self.storage
                put = storage.put(run_state, "loop", writers)
                if self.spec.policies and (attempts := attempts_of(tasks)):
                    put.checkpoint.metadata["attempts"] = attempts
                put.last = not (run_state.next or run_state.sends or run.interrupt_after)
                yield put
                storage.stand_on(put)
            if not nothing_pending:
                pauses.clear()
            if self.streaming:
                outputs = self._step_outputs(tasks, writes)
                yield with_attempts(outputs, tasks) if self.spec.policies else outputs
            if durable and run.interrupt_after:
                paused = yield from pauses.after(tasks)
                if paused is not None:
                    return paused
        return run_state.state()

    def _take_in(self, outcome: Outcome) -> None:
        """Take in how a task ended: its return becomes its write (nothing stored)."""
        task, value, error = outcome
        if error is not None:
            task.error = error
            return
        node = task.node
        try:
            task.write = normalize_return(node.name, task.context.step, value, node.destinations)
        except Exception as exc:
            task.error = exc
            task.engine_error = True

    def _take_outcome(self, outcome: Outcome) -> Generator[Effect, Any, None]:
        """Take in how one task of a step of several ended, with a saver: its return becomes
        its write (:meth:`_take_in`), made durable at once (a crash after it does not run the
        node again)."""
        self._take_in(outcome)
        task = outcome[0]
        write = task.write
        if write is None:  # it failed, or returned what no write can be
            return
        try:
            yield self.storage.put_writes(task.context.id, [(WRITE, stored_write(write))])
        except Exception as exc:  # the saver's error, thrown in here
            task.error = exc
            task.engine_error = True

    def _settle(
        self, tasks: list[Task], blocked: frozenset[str]
    ) -> Generator[Effect, Any, OverAllState | None]:
        """After the tasks ran: raise the first error, or pause on interrupts."""
        failures = [t for t in tasks if t.error is not None and not interrupted(t)]
        if not failures:
            return (yield from self.pauses.after_tasks(tasks, blocked))
        for task in failures:
            yield from self.pauses.refused(task)
        raised = node_error(failures)
        if self.durable:  # shown by get_state's tasks; a resume runs them again
            try:
                for task in failures:
                    failed = task.error
                    assert failed is not None
                    error = f"{type(failed).__name__}: {exception_text(failed)}"[:2000]
                    yield self.storage.put_writes(task.context.id, [(ERROR, error)])
            except Exception as store_error:  # the node's error is what the caller needs
                raised.add_note(f"(its error could not be stored for get_state: {store_error})")
        raise raised

    def _merge(self, tasks: list[Task]) -> list[tuple[str, Write]]:
        """Merge the step's writes (pending ones for tasks not run again), then route."""
        run_state = self.run_state
        done = self.pauses.pending.done
        step = run_state.step + 1
        if len(tasks) == 1 and not done:  # the common step: no per-step lists
            task = tasks[0]
            name, only = task.node.name, task.write or EMPTY_WRITE
            run_state.apply_writes(
                ((name, only.update),) if not only.parts else only.labelled(name), step
            )
            run_state.step = step
            run_state.route(((name, only.goto),), self.config)
            return [(name, only)]
        writes: list[tuple[str, Write]] = []
        for task in tasks:
            write = task.write
            if write is None:
                write = done.get(task.context.id) if done else None
            writes.append((task.node.name, write if write is not None else EMPTY_WRITE))
        if self.send_step == step:  # Sends ran: several tasks of a node, routed once
            labelled = [
                (task_label(task), write) for task, (_, write) in zip(tasks, writes, strict=True)
            ]
            run_state.apply_writes([p for label, w in labelled for p in w.labelled(label)], step)
            run_state.step = step
            run_state.route(once_per_node([(name, w.goto) for name, w in writes]), self.config)
            return writes
        run_state.apply_writes(
            [labelled for name, w in writes for labelled in w.labelled(name)], step
        )
        run_state.step = step
        run_state.route([(name, w.goto) for name, w in writes], self.config)
        return writes

    def _step_outputs(self, tasks: list[Task], writes: list[tuple[str, Write]]) -> Effect:
        run_state, agent, checkpoint_id = self.run_state, self.spec.name, self.storage.checkpoint_id
        state, step = run_state.state(), run_state.step
        if len(tasks) == 1:  # the usual step
            task, update = tasks[0], writes[0][1].update
            return node_output(
                task.node.name,
                agent,
                step,
                self._shown(update) if self.spec.hidden_keys else update,
                state,
                checkpoint_id,
                task.context.usage,
                task.context.send_index if task.context.index else None,
            )
        return Emit(
            [
                node_output(
                    task.node.name,
                    agent,
                    step,
                    self._shown(write.update),
                    state,
                    checkpoint_id,
                    task.context.usage,
                    task.context.send_index,
                )
                for task, (_, write) in zip(tasks, writes, strict=True)
            ]
        )

    def _cancelled(self, tasks: list[Task], *, during: bool = False) -> GraphCancelledError:
        """``during``: the cancel came while the step ran (the step did not finish)."""
        step = self.run_state.step + 1
        thread_id = self.storage.thread_id
        return cancelled(
            self.spec.name, thread_id, step, tasks, durable=self.durable, during=during
        )

    def _tasks(self) -> list[Task]:
        """The tasks of the next superstep, one per triggered node, all seeing one state, and
        one per Send, seeing its input; in merge order (a node's Sends after its own task)."""
        run_state = self.run_state
        state = run_state.state()
        step = run_state.step + 1
        nodes = self.spec.nodes
        if run_state.sends:
            return self._tasks_with_sends(state, step)
        if len(run_state.next) == 1:
            return [self._task(nodes[run_state.next[0]], state, step)]
        return [self._task(nodes[name], state, step) for name in run_state.next]

    def _tasks_with_sends(self, state: OverAllState, step: int) -> list[Task]:
        run_state, nodes, hidden = self.run_state, self.spec.nodes, self.spec.hidden_keys
        tasks = [self._task(nodes[name], state, step) for name in run_state.next]
        self.send_step = step
        for send, index in send_indexes(run_state.take_sends()):
            view = OverAllState(dict(send.input), hidden=hidden)
            tasks.append(self._send_task(nodes[send.node], view, step, send, index + 1))
        if run_state.next:
            tasks.sort(key=lambda task: task.node.index)  # stable: Sends keep their order
        return tasks

    def _call_context(self) -> CallContext:
        """What every task of this call shares, made once."""
        if self._shared is None:
            storage = self.storage
            self._shared = CallContext(
                agent=self.spec.name,
                thread_id=storage.thread_id,
                run_id=self.run_id or self.config.metadata.get("run_id"),  # serve's, with a saver
                saver=storage.saver,
                checkpoint_ns=storage.ns,
                stream_subgraphs=self.subgraphs,
                step_limit=self.run_state.step + 1 + self.config.max_steps,
                persist_record=storage.persist_record if self.durable else None,
                apersist_record=storage.apersist_record if self.durable else None,
            )
            if self.watch is not None:
                self._shared = self.watch.call_context(self, self._shared)
        return self._shared

    def _task(self, node: NodeSpec, state: OverAllState, step: int) -> Task:
        context = TaskContext(
            self._shared or self._call_context(), node.name, step, self.storage.checkpoint_id
        )
        if self.durable:
            pending = self.pauses.pending
            if pending.ids_thread is not None or pending.records or pending.resume:
                self._resume_task(context)
        node_config = self._task_config(context) if node.pass_config else None
        return Task(node, context, state, node_config)

    def _send_task(
        self, node: NodeSpec, state: OverAllState, step: int, send: Send, index: int
    ) -> Task:
        """The task of a Send: ``index`` is its place among the step's Sends to ``node``, plus
        one (a node's own task is 0)."""
        shared = self._shared or self._call_context()
        context = SendTaskContext(shared, send, step, self.storage.checkpoint_id, index)
        if self.durable:
            self._resume_task(context)
        node_config = self._task_config(context) if node.pass_config else None
        return Task(node, context, state, node_config)

    def _resume_task(self, context: TaskContext) -> None:
        """Hand a task what the checkpoint keeps for it: records and resume values (and the
        thread its ids derive from, in a copied thread's step)."""
        pending = self.pauses.pending
        if pending.ids_thread is not None:
            context.ids_thread = pending.ids_thread
        if pending.records or pending.resume:
            task_id = context.id
            context.records = dict(pending.records.get(task_id, {}))
            context._resume = pending.resume.get(task_id, {})

    def _task_config(self, context: TaskContext) -> RunnableConfig:
        """The call's config with ``task`` set: what a node taking ``(state, config)`` gets."""
        fields = self._config_fields
        if fields is None:
            config = self.config
            fields = self._config_fields = {
                f.name: getattr(config, f.name) for f in dataclasses.fields(config)
            }
        return RunnableConfig(**{**fields, "task": context})

    # outputs
    def _shown(self, update: Mapping[str, Any]) -> Mapping[str, Any]:
        """A node's update as streamed: without private or ephemeral keys (``jump_to``)."""
        private = self.spec.hidden_keys
        if private and not private.isdisjoint(update):
            return {k: v for k, v in update.items() if k not in private}
        return update

    def _input_output(self, input: Any) -> NodeOutput:
        run_state = self.run_state
        update = self._shown(dict(input))
        state = run_state.state()
        return node_output(
            START, self.spec.name, run_state.step, update, state, self.storage.checkpoint_id
        )
