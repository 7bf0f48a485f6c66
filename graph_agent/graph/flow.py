"""The order of events in one call, written once for both drivers.

:func:`call_flow` is a generator: it decides everything (how the input is treated, which tasks
run, what is stored, when the run pauses) and *yields effects* for a driver to carry out
(:class:`RunTasks`, :class:`SaverCall`, :class:`Emit`), receiving their results back. The sync
driver fulfils them by calling, the async one by awaiting: one implementation, two faces
(like httpx's ``Auth.auth_flow``).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import itertools
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from graph_agent.graph.engine import (
    EMPTY_WRITE,
    GraphSpec,
    Loop,
    NodeSpec,
    Write,
    normalize_return,
)
from graph_agent.graph.errors import (
    GraphCancelledError,
    GraphInterrupted,
    GraphRecursionError,
    InvalidResumeError,
    InvalidUpdateError,
    NodeError,
    exception_text,
)
from graph_agent.graph.pending import (
    BREAKPOINT,
    ERROR,
    INTERRUPT,
    NESTED,
    RESUME,
    SCOPED,
    SUBGRAPH_CONSUMED,
    SUBGRAPH_TASK,
    WRITE,
    Pending,
    thread_start,
)
from graph_agent.graph.runtime import (
    RECORD_PREFIX,
    CallContext,
    ContinueAs,
    FromThread,
    TaskContext,
    ThreadStart,
    derive_id,
    scoped_interrupt_id,
    task_id_for,
)
from graph_agent.graph.state import OverAllState
from graph_agent.graph.types import (
    START,
    Command,
    Interrupt,
    NodeOutput,
    RunnableConfig,
    node_output,
)

_run_counter = itertools.count()
_NO_TASK_IDS: frozenset[str] = frozenset()


@dataclass(slots=True)
class Task:
    """One node to run in the current superstep, and what came of it."""

    node: NodeSpec
    context: TaskContext
    state: OverAllState
    config: RunnableConfig | None
    write: Write | None = None
    error: BaseException | None = None
    engine_error: bool = False
    """The error came from storing the task's result, not from the node's own code."""


@dataclass(slots=True)
class RunTasks:
    """Effect: run these tasks concurrently; call ``on_finish(task, value)`` as each returns
    (it stores ``task.write`` and may return a :class:`SaverCall` to make it durable at once);
    an exception (from the node or ``on_finish``) goes to ``task.error``."""

    tasks: list[Task]
    on_finish: Callable[[Task, Any], SaverCall | None]
    max_concurrency: int


@dataclass(slots=True)
class SaverCall:
    """Effect: call ``saver.<method>(*args)`` (or its async twin) and send back the result."""

    method: str
    args: tuple[Any, ...]


@dataclass(slots=True)
class Emit:
    """Effect: hand these outputs to the caller of ``stream()``."""

    items: list[NodeOutput]


Effect = RunTasks | SaverCall | Emit | NodeOutput
"""A lone NodeOutput is handed to the caller as is: a one-node step's output, the usual one."""


@dataclass(frozen=True, slots=True)
class RunSettings:
    """The compiled graph as the flow sees it."""

    spec: GraphSpec
    saver: Any
    interrupt_before: frozenset[str]
    interrupt_after: frozenset[str]


def call_flow(
    run: RunSettings,
    input: Any,
    config: RunnableConfig,
    *,
    streaming: bool,
    subgraphs: bool = False,
) -> Generator[Effect, Any, OverAllState]:
    """One call of a compiled graph: load, treat the input, run supersteps, store, pause.

    ``subgraphs``: while streaming, graphs running inside nodes stream their outputs too."""
    flow = _Flow(run, config, streaming)
    flow.subgraphs = subgraphs
    return flow.call(input)


def update_flow(
    run: RunSettings, config: RunnableConfig, values: Any, as_node: str | None
) -> Generator[Effect, Any, RunnableConfig]:
    """``update_state``: write ``values`` as if ``as_node`` had, in a new checkpoint."""
    return _Flow(run, config, False).update(values, as_node)


def _before_interrupt(thread_id: str | None, step: int, task_id: str) -> str:
    return derive_id("interrupt", thread_id, step, task_id, "before")


class _Flow:
    def __init__(self, run: RunSettings, config: RunnableConfig, streaming: bool) -> None:
        self.run = run
        self.spec = run.spec
        self.saver = run.saver
        self.config = config
        self.streaming = streaming
        self.loop = Loop(run.spec)
        self.checkpoint_id: str | None = None
        self.pending = Pending((), run.spec.rank)
        self.thread_id = config.thread_id
        self.ns = config.checkpoint_ns
        self.fork = False
        self.fork_head = ""  # when forking: the thread's newest checkpoint id
        self.several = False  # the running step has several tasks (their writes go pending)
        self._config_fields: dict[str, Any] | None = None  # for _task_config, made once needed
        self.answered_now: dict[str, set[str]] = {}  # interrupt ids this call answered, by task
        self.last_writes: list[tuple[str, Write]] = []
        self.run_id: str | None = None  # without a saver: makes task ids unique per call
        self.subgraphs = False
        self._shared: CallContext | None = None

    # the call
    def call(self, input: Any) -> Generator[Effect, Any, OverAllState]:
        try:
            if self.saver is None:
                self.run_id = f"run-{next(_run_counter)}"
                if isinstance(input, FromThread):  # no thread: it decides on an empty one
                    input = input.decide(ThreadStart(values=self.loop.state()))
                    input = None if isinstance(input, ContinueAs) else input
                self._check_stateless_input(input)
                self._start(input)
                if self.streaming:
                    yield self._input_output(input)
            else:
                if self.thread_id is None:
                    raise ValueError(
                        "this graph has a checkpoint saver, so each call needs a thread: pass "
                        "RunnableConfig(thread_id='...')"
                    )
                saved = yield from self._load_saved()
                if isinstance(input, FromThread):  # decided before a fork: a refusal writes nothing
                    thread = thread_start(saved, self.loop.state(), self.thread_id, self.spec.rank)
                    input = input.decide(thread)
                yield from self._fork_if_older(saved)
                paused = yield from self._treat_input(input, saved)
                if paused is not None:
                    return paused
            return (yield from self._supersteps())
        finally:
            # the shared context holds a method of this flow: kept, the call's state would be
            # a reference cycle, freed only by the garbage collector (never, with it off)
            self._shared = None

    def update(self, values: Any, as_node: str | None) -> Generator[Effect, Any, RunnableConfig]:
        if self.saver is None or self.thread_id is None:
            raise ValueError(
                "update_state needs a checkpoint saver and RunnableConfig(thread_id=...)"
            )
        self._check_update(values, as_node)
        yield from self._load_start()
        paused, paused_at = self.pending, self.checkpoint_id
        yield from self._write_update(values, as_node)
        if as_node is None and paused_at is not None and not paused.empty:
            yield from self._carry_over(paused, paused_at)
        return RunnableConfig(
            thread_id=self.thread_id, checkpoint_id=self.checkpoint_id, checkpoint_ns=self.ns
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
                step=self.loop.step,
            )

    def _write_update(
        self, values: Mapping[str, Any], as_node: str | None
    ) -> Generator[Effect, Any, None]:
        """Write ``values`` as ``as_node`` in a new checkpoint (its edges route from there)."""
        writer = as_node or "update_state"
        loop = self.loop
        loop.step += 1
        loop.apply_writes([(writer, dict(values))], loop.step)
        if as_node == START:
            loop.route_from_start(self.config)
        elif as_node is not None:
            loop.route([(as_node, ())], self.config)
        yield from self._checkpoint("update", [writer])

    def _carry_over(self, old: Pending, old_checkpoint: str) -> Generator[Effect, Any, None]:
        """After ``update_state`` without ``as_node``, the step the thread was paused in goes on
        from the new checkpoint: finished nodes' writes, records, unanswered ``interrupt()``s
        and a passed-once breakpoint move to the new task ids, each interrupt id re-derived as
        the re-run node will derive it, so the same ``Command(resume=...)`` answers it.

        Interrupts raised inside an ``InterruptScope`` (a tool call) are renamed from their
        scope key and index in it (the :data:`SCOPED` write). Interrupts raised by a graph
        nested in the task keep their ids, and so does the nested graph its namespace (the
        :data:`SUBGRAPH_TASK` record): it resumes where it waits."""
        thread, step = self.thread_id, self.loop.step + 1
        for node in self.loop.next:
            old_id = task_id_for(old.ids_thread or thread, old_checkpoint, node)
            new_id = task_id_for(thread, self.checkpoint_id, node)
            writes: list[tuple[str, Any]] = []
            done = old.done.get(old_id)
            if done is not None:
                writes.append((WRITE, {"update": dict(done.update), "goto": list(done.goto)}))
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
                before = _before_interrupt(thread, step, new_id)
                breakpoints.append(Interrupt(before, "interrupt_before", node))
            if breakpoints:
                writes.append((BREAKPOINT, breakpoints))
            if nested:
                writes.append((NESTED, {"node": nested_in, "ids": sorted(nested)}))
            if moved_scopes:
                writes.append((SCOPED, {i: [key, at] for i, (key, at) in moved_scopes.items()}))
            if writes:
                yield self._put_writes(new_id, writes)

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
                step=self.loop.step,
            )
        for key in input:
            if not isinstance(key, str):
                raise InvalidUpdateError(
                    f"the input has the key {key!r}: state keys must be strings",
                    node=START,
                    step=self.loop.step,
                )
        self.loop.apply_writes([(START, dict(input))], self.loop.step)
        self.loop.route_from_start(self.config)

    def _load_start(self) -> Generator[Effect, Any, Any]:
        """Load the checkpoint the call starts from: the newest, or the one the config names.

        Starting from an older checkpoint forks the thread there: a copy of it becomes the
        thread's newest checkpoint (source ``fork``) and the nodes after it run again (their
        interrupts fire again), so its pending writes are not reused.
        """
        saved = yield from self._load_saved()
        yield from self._fork_if_older(saved)
        return saved

    def _load_saved(self) -> Generator[Effect, Any, Any]:
        """Load the checkpoint the call starts from (``None`` on a new thread)."""
        wanted = self.config.checkpoint_id
        saved = yield SaverCall("get", (self.thread_id, wanted, self.ns))
        if saved is None and wanted is not None:
            raise ValueError(
                f"no checkpoint {wanted!r} on this thread; list them with get_state_history(config)"
            )
        if saved is not None:
            self._load(saved)
        return saved

    def _fork_if_older(self, saved: Any) -> Generator[Effect, Any, None]:
        """Fork the thread at ``saved`` when it is not the newest checkpoint."""
        wanted = self.config.checkpoint_id
        if saved is None or wanted is None:
            return
        head = yield SaverCall("get", (self.thread_id, None, self.ns))
        self.fork = head is not None and head.id != wanted
        if self.fork:
            assert head is not None
            self.pending = Pending((), self.spec.rank)
            self.fork_head = head.id  # the fork's id sorts after it, whatever our clock says
            yield from self._checkpoint("fork", [])

    def _load(self, saved: Any) -> None:
        self.loop.load(
            saved.values,
            step=saved.step,
            next_nodes=saved.next,
            versions=saved.versions,
            barriers=saved.barriers,
            chains=saved.chains,
        )
        self.checkpoint_id = saved.id
        self.pending = Pending(saved.pending_writes, self.spec.rank)

    def _treat_input(self, input: Any, saved: Any) -> Generator[Effect, Any, OverAllState | None]:
        """The three cases of DESIGN §3: resume, continue, or a new run on the thread; or what
        a :class:`FromThread` input decided: ``ContinueAs``, an update, then continue."""
        if isinstance(input, ContinueAs):
            yield from self._continue_as(input)
            return None
        if (input is None or isinstance(input, Command)) and saved is not None:
            self._check_next_nodes(saved)
        if isinstance(input, Command):
            if input.goto is not None or input.update is not None:
                raise InvalidResumeError(
                    "a Command given as input only carries resume=...; to change state use "
                    "update_state(config, values), to route use a node's Command"
                )
            yield from self._answer(input.resume)
            return None
        if input is None:
            if saved is None or (not self.loop.next and not self.pending.unanswered()):
                raise _nothing_to_continue("no checkpoint" if saved is None else "finished")
            dynamic = self.pending.dynamic_waiting()
            if dynamic:  # never answered with None: the same interrupts are raised again
                return (yield from self._pause([i for _, i in dynamic], self.loop.step + 1))
            yield from self._answer_static()
            return None
        # a new run on the thread: pending interrupts and writes of the old step are dropped
        self.pending = Pending((), self.spec.rank)
        self.loop.step = saved.step + 1 if saved is not None else -1
        self._start(input)
        yield from self._checkpoint("input", [START])
        if self.streaming:
            yield self._input_output(input)
        return None

    def _continue_as(self, decided: ContinueAs) -> Generator[Effect, Any, None]:
        """``update_state(update, as_node=node)``, then on from the new checkpoint as input
        ``None`` continues (it has no pending writes, so nothing waits to be answered)."""
        self._check_update(decided.update, decided.node)
        yield from self._write_update(decided.update, decided.node)
        self.pending = Pending((), self.spec.rank)
        if not self.loop.next:
            raise _nothing_to_continue("finished")

    def _check_next_nodes(self, saved: Any) -> None:
        """A thread that stopped before a node this graph no longer has cannot carry on as
        it is: say so (a silent "finished" would drop the work it was waiting to do)."""
        missing = [name for name in saved.next if name not in self.spec.nodes]
        if missing:
            names = ", ".join(map(repr, missing))
            raise InvalidResumeError(
                f"thread {self.thread_id!r} stopped before {names}, which graph "
                f"{self.spec.name!r} no longer has (renamed or removed since the thread was "
                f"saved; its nodes now: {', '.join(map(repr, self.spec.nodes))}); move the "
                "thread on with update_state(config, values, as_node=...) naming the node whose "
                "edges lead where it should go next, or start a new run with new input"
            )

    def _answer(self, resume: Any) -> Generator[Effect, Any, None]:
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

    def _answer_static(self) -> Generator[Effect, Any, None]:
        by_task: dict[str, dict[str, Any]] = {}
        for task_id, item in self.pending.unanswered():
            by_task.setdefault(task_id, {})[item.id] = None
        yield from self._store_resume(by_task)

    def _store_resume(self, by_task: dict[str, dict[str, Any]]) -> Generator[Effect, Any, None]:
        for task_id, answers in by_task.items():
            resume = self.pending.resume.setdefault(task_id, {})
            resume.update(answers)
            self.answered_now.setdefault(task_id, set()).update(answers)
            yield self._put_writes(task_id, [(RESUME, dict(resume))])

    # supersteps
    def _supersteps(self) -> Generator[Effect, Any, OverAllState]:
        loop, config, run = self.loop, self.config, self.run
        durable = self.saver is not None
        steps = 0
        run_tasks = RunTasks([], self._on_finish, config.max_concurrency)  # one for every step
        while loop.next:
            tasks = self._tasks()
            if durable and run.interrupt_before:
                paused = yield from self._breakpoint_before(tasks)
                if paused is not None:
                    return paused
            if steps >= config.max_steps:
                raise GraphRecursionError(
                    f"graph {self.spec.name!r} ran {steps} supersteps in this call without "
                    f"finishing (max_steps={config.max_steps}); it last ran "
                    f"{', '.join(name for name, _ in self.last_writes)} and would run "
                    f"{', '.join(loop.next)} next. "
                    "Check the routing for a loop that never ends, or raise "
                    "RunnableConfig(max_steps=...); with a saver the run can be continued "
                    "with invoke(None, config)"
                )
            if config.cancel is not None and config.cancel.is_set():
                raise self._cancelled()
            steps += 1
            # nothing pending: every task runs, and a step that does not pause adds nothing
            nothing_pending = not durable or self.pending.empty  # (only a saver brings any)
            to_run, blocked = (tasks, _NO_TASK_IDS) if nothing_pending else self._runnable(tasks)
            if to_run:
                self.several = len(tasks) > 1
                run_tasks.tasks = to_run
                yield run_tasks
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
                put = self._checkpoint_put("loop", writers)
                yield put
                self._checkpointed(put)
            if not nothing_pending:
                self.pending = Pending((), self.spec.rank)
            if self.streaming:
                yield self._step_outputs(tasks, writes)
            if durable and run.interrupt_after:
                paused = yield from self._breakpoint_after(tasks)
                if paused is not None:
                    return paused
        return loop.state()

    def _cancelled(self, *, during: bool = False) -> GraphCancelledError:
        """``during``: a subgraph in the step stopped with this run (the step did not finish)."""
        step = self.loop.step + 1
        where = f"graph {self.spec.name!r}" + (
            f" on thread {self.thread_id!r}" if self.thread_id is not None else ""
        )
        if self.saver is None:
            after = "nothing was kept (no saver)"
        else:
            after = (
                "the thread stays at its last checkpoint; invoke(None, config) with a "
                "cancel signal that is not set carries on from there"
            )
        when = "during" if during else "before"
        return GraphCancelledError(
            f"{where} was cancelled (RunnableConfig.cancel is set) {when} step {step}, which "
            f"{'runs' if during else 'would run'} {', '.join(self.loop.next)}; {after}",
            step=step,
        )

    def _tasks(self) -> list[Task]:
        """The tasks of the next superstep, one per triggered node, all seeing one state."""
        loop = self.loop
        state = loop.state()
        step = loop.step + 1
        nodes = self.spec.nodes
        if len(loop.next) == 1:
            return [self._task(nodes[loop.next[0]], state, step)]
        return [self._task(nodes[name], state, step) for name in loop.next]

    def _call_context(self) -> CallContext:
        """What every task of this call shares, made once."""
        if self._shared is None:
            self._shared = CallContext(
                agent=self.spec.name,
                thread_id=self.thread_id,
                run_id=self.run_id,
                saver=self.saver,
                checkpoint_ns=self.ns,
                stream_subgraphs=self.subgraphs,
                persist_record=self._persist_record if self.saver is not None else None,
            )
        return self._shared

    def _task(self, node: NodeSpec, state: OverAllState, step: int) -> Task:
        context = TaskContext(
            self._shared or self._call_context(), node.name, step, self.checkpoint_id
        )
        if self.saver is not None:
            pending = self.pending
            if pending.ids_thread is not None:
                context.ids_thread = pending.ids_thread
            if pending.records or pending.resume:
                task_id = context.id
                context.records = dict(pending.records.get(task_id, {}))
                context._resume = pending.resume.get(task_id, {})
        node_config = self._task_config(context) if node.pass_config else None
        return Task(node, context, state, node_config)

    def _task_config(self, context: TaskContext) -> RunnableConfig:
        """The call's config with ``task`` set: what a node taking ``(state, config)`` gets."""
        fields = self._config_fields
        if fields is None:
            config = self.config
            fields = self._config_fields = {
                f.name: getattr(config, f.name) for f in dataclasses.fields(config)
            }
        return RunnableConfig(**{**fields, "task": context})

    def _runnable(self, tasks: list[Task]) -> tuple[list[Task], frozenset[str]]:
        """The tasks to run now, and the ids of those still waiting for an interrupt's answer.

        Tasks whose writes are pending from an earlier attempt of this step are not run again
        (only called when something is pending: otherwise every task runs and no task id has
        to be derived).
        """
        pending = self.pending
        to_run = [t for t in tasks if t.context.id not in pending.done]
        if not pending.interrupts:
            return to_run, _NO_TASK_IDS
        waiting = {task_id for task_id, _ in pending.dynamic_waiting()}
        blocked = frozenset(waiting.intersection(t.context.id for t in to_run))
        return [t for t in to_run if t.context.id not in blocked], blocked

    def _on_finish(self, task: Task, value: Any) -> SaverCall | None:
        """Store a task's return as its write; in a step of several nodes with a saver, return
        the pending write that makes it durable at once."""
        node = task.node
        task.write = normalize_return(node.name, task.context.step, value, node.destinations)
        if not self.several or self.saver is None:
            return None
        write = task.write
        stored: dict[str, Any] = {"update": dict(write.update), "goto": list(write.goto)}
        if write.parts:
            stored["parts"] = [[label, dict(part)] for label, part in write.parts]
        return self._put_writes(task.context.id, [(WRITE, stored)])

    def _settle(
        self, tasks: list[Task], blocked: frozenset[str]
    ) -> Generator[Effect, Any, OverAllState | None]:
        """After the tasks ran: raise the first error, or pause on interrupts."""
        failures = [t for t in tasks if t.error is not None and not _interrupted(t)]
        for task in failures:
            task_id = task.context.id
            given = self.answered_now.get(task_id) if self.answered_now else None
            if given:
                # the node failed on the answers this call gave it (a wrong shape, a refusal):
                # those interrupts are pending again, earlier answers stay; so do answers a
                # nested graph took and stored a checkpoint after (a later step of it failed)
                refused = given.difference(task.context.records.get(SUBGRAPH_CONSUMED, ()))
                if refused:
                    resume = self.pending.resume[task_id]
                    for interrupt_id in refused:
                        resume.pop(interrupt_id, None)
                    yield self._put_writes(task_id, [(RESUME, dict(resume))])
        if failures:
            cancel = self.config.cancel
            if cancel is not None and cancel.is_set():
                for task in failures:  # a subgraph or agent that stopped with this run
                    if isinstance(task.error, GraphCancelledError):
                        raise self._cancelled(during=True) from task.error
            raised = _node_error(failures)
            if self.saver is not None:  # shown by get_state's tasks; a resume runs them again
                try:
                    for task in failures:
                        failed = task.error
                        assert failed is not None
                        error = f"{type(failed).__name__}: {exception_text(failed)}"[:2000]
                        yield self._put_writes(task.context.id, [(ERROR, error)])
                except Exception as store_error:  # the node's error is what the caller needs
                    raised.add_note(f"(its error could not be stored for get_state: {store_error})")
            raise raised
        interrupts: list[Interrupt] = []
        waiting_node: str | None = None
        for task in tasks:
            if _interrupted(task) or (blocked and task.context.id in blocked):
                waiting_node = waiting_node or task.node.name
            if _interrupted(task):
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
                    self.pending.add_interrupt(task_id, item, static=item.id in breakpoints)
                writes = [self.pending.stored(task_id, static=False)]
                if breakpoints:  # a nested graph's static breakpoints: None passes them once
                    writes.append(self.pending.stored(task_id, static=True))
                if paused.nested:
                    writes.append(self.pending.add_nested(task_id, task.node.name, paused.nested))
                if paused.scopes:
                    writes.append(self.pending.add_scopes(task_id, paused.scopes))
                yield self._put_writes(task_id, writes)
            elif blocked and task.context.id in blocked:
                task_id = task.context.id
                interrupts.extend(i for t, i in self.pending.unanswered() if t == task_id)
        if interrupts:
            return (yield from self._pause(interrupts, self.loop.step + 1, waiting_node))
        return None

    def _merge(self, tasks: list[Task]) -> list[tuple[str, Write]]:
        """Merge the step's writes (pending ones for tasks not run again), then route."""
        loop = self.loop
        done = self.pending.done
        step = loop.step + 1
        if len(tasks) == 1 and not done:  # the common step: no per-step lists
            task = tasks[0]
            name, only = task.node.name, task.write or EMPTY_WRITE
            loop.apply_writes(
                ((name, only.update),) if not only.parts else only.labelled(name), step
            )
            loop.step = step
            loop.route(((name, only.goto),), self.config)
            return [(name, only)]
        writes: list[tuple[str, Write]] = []
        for task in tasks:
            write = task.write
            if write is None:
                write = done.get(task.context.id) if done else None
            writes.append((task.node.name, write if write is not None else EMPTY_WRITE))
        loop.apply_writes([labelled for name, w in writes for labelled in w.labelled(name)], step)
        loop.step = step
        loop.route([(name, w.goto) for name, w in writes], self.config)
        return writes

    def _step_outputs(self, tasks: list[Task], writes: list[tuple[str, Write]]) -> Effect:
        loop, agent, checkpoint_id = self.loop, self.spec.name, self.checkpoint_id
        state, step = loop.state(), loop.step
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
                )
                for task, (_, write) in zip(tasks, writes, strict=True)
            ]
        )

    # breakpoints and pauses
    def _breakpoint_before(self, tasks: list[Task]) -> Generator[Effect, Any, OverAllState | None]:
        if not self.run.interrupt_before or self.saver is None:
            return None
        new = []
        for task in tasks:
            if task.node.name not in self.run.interrupt_before:
                continue
            task_id = task.context.id
            item = Interrupt(
                _before_interrupt(task.context.id_thread, task.context.step, task_id),
                "interrupt_before",
                task.node.name,
            )
            if item.id in self.pending.resume.get(task_id, {}):
                continue
            new.append(item)
            self.pending.add_interrupt(task_id, item, static=True)
            yield self._put_writes(task_id, [self.pending.stored(task_id, static=True)])
        if not new:
            return None
        return (yield from self._pause(new, self.loop.step + 1))

    def _breakpoint_after(self, tasks: list[Task]) -> Generator[Effect, Any, OverAllState | None]:
        if not self.run.interrupt_after or self.saver is None:
            return None
        new = []
        for task in tasks:
            name = task.node.name
            if name in self.run.interrupt_after:
                task_id = derive_id("after", self.thread_id, self.checkpoint_id, name)
                item = Interrupt(
                    derive_id("interrupt", self.thread_id, self.loop.step, task_id, "after"),
                    "interrupt_after",
                    name,
                )
                new.append(item)
                self.pending.add_interrupt(task_id, item, static=True)
                yield self._put_writes(task_id, [self.pending.stored(task_id, static=True)])
        if not new:
            return None
        return (yield from self._pause(new, self.loop.step))

    def _pause(
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
        return self._paused(pending)

    def _paused(self, interrupts: list[Interrupt]) -> OverAllState:
        return OverAllState(self.loop.values, interrupts, hidden=self.spec.hidden_keys)

    # storage
    def _checkpoint(self, source: str, writers: list[str]) -> Generator[Effect, Any, None]:
        if self.saver is None:
            return
        put = self._checkpoint_put(source, writers)
        yield put
        self._checkpointed(put)

    def _checkpoint_put(self, source: str, writers: list[str]) -> SaverCall:
        """The saver call storing a new checkpoint of the loop; once it returned, the run
        moves on to that checkpoint (:meth:`_checkpointed`)."""
        checkpoints = _checkpoint_base()
        loop = self.loop
        after = self.checkpoint_id
        if self.fork and after is not None and self.fork_head > after:
            after = self.fork_head
        checkpoint_id = checkpoints.new_checkpoint_id(after=after)
        metadata = {
            **self.config.metadata,
            "source": "fork" if self.fork else source,
            "step": loop.step,
            "writers": writers,
        }
        blobs = loop.take_blobs(checkpoint_id)  # first: it moves the versions of what changed
        barriers = loop.barrier_seen
        checkpoint = checkpoints.new_checkpoint(
            checkpoint_id,
            self.thread_id or "",
            self.ns,
            self.checkpoint_id,
            loop.step,
            loop.next,
            dict(loop.versions),
            {k: tuple(sorted(v)) for k, v in barriers.items()} if barriers else {},
            blobs,
            metadata,
        )
        return SaverCall("put", (checkpoint,))

    def _checkpointed(self, put: SaverCall) -> None:
        self.checkpoint_id = put.args[0].id
        self.fork = False

    def _put_writes(self, task_id: str, writes: list[tuple[str, Any]]) -> SaverCall:
        assert self.thread_id is not None and self.checkpoint_id is not None
        return SaverCall(
            "put_writes", (self.thread_id, self.ns, self.checkpoint_id, task_id, writes)
        )

    def _persist_record(self, context: TaskContext, key: str, value: Any) -> None:
        assert self.thread_id is not None and self.checkpoint_id is not None
        self.saver.put_writes(
            self.thread_id, self.ns, self.checkpoint_id, context.id, [(RECORD_PREFIX + key, value)]
        )

    # outputs
    def _shown(self, update: Mapping[str, Any]) -> Mapping[str, Any]:
        """A node's update as streamed: without private or ephemeral keys (``jump_to``)."""
        private = self.spec.hidden_keys
        if private and not private.isdisjoint(update):
            return {k: v for k, v in update.items() if k not in private}
        return update

    def _input_output(self, input: Any) -> NodeOutput:
        loop = self.loop
        update = self._shown(dict(input))
        state = loop.state()
        return node_output(START, self.spec.name, loop.step, update, state, self.checkpoint_id)

    def _pause_output(self, interrupts: list[Interrupt], step: int, node: str) -> NodeOutput:
        return NodeOutput(
            node=node,
            agent=self.spec.name,
            step=step,
            update={},
            state=self.loop.state(),
            checkpoint_id=self.checkpoint_id,
            interrupts=tuple(interrupts),
        )


@functools.cache  # import_module() runs several Python frames: once, not per checkpoint
def _checkpoint_base() -> ModuleType:
    """``graph_agent.checkpoint.base``, imported once a saver needs it."""
    return importlib.import_module("graph_agent.checkpoint.base")


def _nothing_to_continue(state: str) -> InvalidResumeError:
    return InvalidResumeError(
        f"nothing to continue on this thread: it has {state}; call with new input to start a run"
    )


def _interrupted(task: Task) -> bool:
    return isinstance(task.error, GraphInterrupted)


def _node_error(failures: list[Task]) -> BaseException:
    first, others = failures[0], failures[1:]
    error = first.error
    assert error is not None
    # raised by the engine while storing a result, or a resume the node refused: as they are;
    # anything else came from user code (a subgraph's own NodeError included) and is wrapped
    if first.engine_error or isinstance(error, InvalidResumeError):
        wrapped: BaseException = error
    elif not isinstance(error, Exception):
        return error
    else:
        node, step = first.node.name, first.context.step
        wrapped = NodeError(
            f"node {node!r} raised {type(error).__name__}: {exception_text(error)} (step {step})",
            node=node,
            step=step,
        )
        wrapped.__cause__ = error
    for other in others:
        assert other.error is not None
        wrapped.add_note(
            f"node {other.node.name!r} also failed in this step: "
            f"{type(other.error).__name__}: {exception_text(other.error)}"
        )
    return wrapped
