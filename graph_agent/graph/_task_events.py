"""A call that tells its tasks' starts and results and each checkpoint it saves, for a stream
that asked (``stream(..., task_events=True)``; the ``tasks``, ``checkpoints`` and ``debug``
stream modes of ``stream_modes.py``).

:func:`told_call` sits between a call's flow (``_flow.py``) and its driver (``_drive.py``),
passing every effect and reply through, and adds :class:`~graph_agent.graph._effects.Emit`
effects of :class:`~graph_agent.graph.stream_modes.TaskEvent` items: a step's task starts
before its ``RunTasks`` (so they reach the caller before any of its nodes runs, all together),
a task's result once the flow took in its outcome, a checkpoint once the saver stored it. A
call that resumes a thread (it stores no input checkpoint) first tells the checkpoint it
resumes from, with what its tasks did so far (their results, errors and interrupts), as
LangGraph does. Nothing of this runs for a call that did not ask, and only the types of events
asked for are made: a checkpoint's payload (its values, its next tasks) only for the
``checkpoints`` and ``debug`` modes, a task's input only for ``tasks`` and ``debug``.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any, Protocol

from graph_agent.graph._effects import (
    Effect,
    Emit,
    GetCheckpoint,
    NextOutcome,
    PutCheckpoint,
    RunSettings,
    RunTasks,
    SaverCall,
    Task,
)
from graph_agent.graph._engine import RunState
from graph_agent.graph._pending import Pending
from graph_agent.graph._sends import plain_next, send_indexes
from graph_agent.graph.errors import GraphInterrupted
from graph_agent.graph.saver import Checkpoint
from graph_agent.graph.state import OverAllState
from graph_agent.graph.stream_modes import (
    CheckpointPayload,
    CheckpointTask,
    TaskEvent,
    TaskEventType,
    TaskPayload,
    TaskResultPayload,
    timestamp,
)
from graph_agent.graph.task import send_key, task_id_for
from graph_agent.graph.types import Interrupt, RunnableConfig

PUSH_TRIGGER = "__pregel_push"
"""What triggered a Send's task, as LangGraph names it."""


class _Flow(Protocol):
    """What this module reads of a call's flow (``_flow._Flow``)."""

    run: RunSettings
    run_state: RunState


def told_call(
    flow: _Flow, call: Generator[Effect, Any, OverAllState], types: frozenset[str]
) -> Generator[Effect, Any, OverAllState]:
    """``call`` (the flow of one call), its task starts, task results and saved checkpoints
    told as TaskEvents, those of ``types`` (see the module docstring)."""
    starts, results, checkpoints = "task" in types, "task_result" in types, "checkpoint" in types
    reply: Any = None
    thrown: BaseException | None = None
    ended: Task | None = None  # the task whose outcome the flow was just sent (results told)
    loading = checkpoints  # until the call loaded the checkpoint it starts from
    resumed: Checkpoint | None = None  # that checkpoint, until the call stores one or goes on
    while True:
        try:
            effect = call.send(reply) if thrown is None else call.throw(thrown)
        except StopIteration as stop:
            if ended is not None:
                yield Emit([task_result(flow, ended)])
            result: OverAllState = stop.value
            return result
        except BaseException:
            if ended is not None:  # it took the outcome in, and raised (the task failed, say)
                yield Emit([task_result(flow, ended)])
            raise
        if ended is not None:
            yield Emit([task_result(flow, ended)])
            ended = None
        if resumed is not None and not isinstance(effect, SaverCall):  # it resumes from it
            yield Emit([checkpoint_resumed(flow, resumed)])
            resumed = None
        if starts and type(effect) is RunTasks:
            yield Emit([task_start(flow, task) for task in effect.tasks])
        try:
            reply = yield effect
        except GeneratorExit:
            call.close()
            raise
        except BaseException as exc:  # a saver call failed: the flow that made it decides
            thrown, reply = exc, None
            continue
        thrown = None
        if type(effect) is RunTasks or type(effect) is NextOutcome:
            if results:
                ended = reply[0]  # an Outcome: (task, returned, raised)
        elif checkpoints and type(effect) is PutCheckpoint:
            resumed, loading = None, False
            yield Emit([checkpoint_saved(flow, effect.checkpoint)])
        elif loading and type(effect) is GetCheckpoint:
            resumed, loading = reply, False


def task_start(flow: _Flow, task: Task) -> TaskEvent:
    """The event of ``task`` starting, with the input its node gets."""
    context = task.context
    payload: TaskPayload = {
        "id": context.id,
        "name": context.node,
        "input": task.state.data(),
        "triggers": [PUSH_TRIGGER if context.index else f"branch:to:{context.node}"],
    }
    return _event(flow, task, "task", payload)


def task_result(flow: _Flow, task: Task) -> TaskEvent:
    """The event of ``task`` ending: its update as streamed (private keys left out), or what
    it raised, or the interrupts it paused on."""
    error, interrupts = task.error, []
    if isinstance(error, GraphInterrupted):  # it paused: no error
        interrupts = list(error.interrupts)
        error = None
    write = task.write
    update = _shown(flow, write.update) if write is not None and task.error is None else {}
    payload: TaskResultPayload = {
        "id": task.context.id,
        "name": task.context.node,
        "error": error,
        "result": update,
        "interrupts": interrupts,
    }
    return _event(flow, task, "task_result", payload, update, tuple(interrupts))


def checkpoint_saved(flow: _Flow, checkpoint: Checkpoint) -> TaskEvent:
    """The event of ``checkpoint`` saved: what ``get_state`` shows of it, read from the run
    (it stands on that checkpoint), its next tasks as they will run."""
    return _checkpoint_event(flow, checkpoint, None)


def checkpoint_resumed(flow: _Flow, checkpoint: Checkpoint) -> TaskEvent:
    """The event of the checkpoint a call resumes from (as loaded: the run stands on it), its
    tasks with what they did so far."""
    return _checkpoint_event(flow, checkpoint, Pending(checkpoint.pending_writes))


def _checkpoint_event(flow: _Flow, checkpoint: Checkpoint, pending: Pending | None) -> TaskEvent:
    thread_id, ns, parent = checkpoint.thread_id, checkpoint.checkpoint_ns, checkpoint.parent_id
    state = flow.run_state.state()
    payload: CheckpointPayload = {
        "config": RunnableConfig(
            thread_id=thread_id, checkpoint_id=checkpoint.id, checkpoint_ns=ns
        ),
        "parent_config": (
            RunnableConfig(thread_id=thread_id, checkpoint_id=parent, checkpoint_ns=ns)
            if parent
            else None
        ),
        "values": state.data(),
        "metadata": dict(checkpoint.metadata),
        "next": list(checkpoint.next),
        "tasks": _next_tasks(flow, checkpoint, pending),
    }
    return TaskEvent(
        node="",
        agent=flow.run.spec.name,
        step=checkpoint.step,
        update={},
        state=state,
        checkpoint_id=checkpoint.id,
        type="checkpoint",
        timestamp=timestamp(),
        payload=payload,
    )


def _next_tasks(
    flow: _Flow, checkpoint: Checkpoint, pending: Pending | None
) -> list[CheckpointTask]:
    """The tasks of the step after ``checkpoint``, with the ids they run under and, from its
    ``pending`` writes, what they did so far."""
    checkpoint_id, sends = checkpoint.id, flow.run_state.sends
    ids_thread = (pending.ids_thread if pending is not None else None) or checkpoint.thread_id
    named = [
        (node, task_id_for(ids_thread, checkpoint_id, node))
        for node in plain_next(checkpoint.next, sends)
    ]
    for send, index in send_indexes(sends):
        key = send_key(send.input)
        named.append((send.node, task_id_for(ids_thread, checkpoint_id, send.node, index + 1, key)))
    return [_checkpoint_task(flow, task_id, node, pending) for node, task_id in named]


def _checkpoint_task(
    flow: _Flow, task_id: str, node: str, pending: Pending | None
) -> CheckpointTask:
    """A checkpoint's task as LangGraph tells it: with its ``error`` (and no interrupts) when
    its last attempt failed, with its ``result`` when it finished with one, else pending."""
    if pending is None:
        return {"id": task_id, "name": node, "interrupts": (), "state": None}
    interrupts = tuple(pending.interrupts.get(task_id, ()))  # those it raised, answered or not
    done = pending.done.get(task_id)
    error = pending.errors.get(task_id)
    if error is not None and done is None and not interrupts:
        return {"id": task_id, "name": node, "error": error, "state": None}
    result = _shown(flow, done.update) if done is not None else None
    if result:
        return {
            "id": task_id,
            "name": node,
            "result": result,
            "interrupts": interrupts,
            "state": None,
        }
    return {"id": task_id, "name": node, "interrupts": interrupts, "state": None}


def _event(
    flow: _Flow,
    task: Task,
    kind: TaskEventType,
    payload: TaskPayload | TaskResultPayload,
    update: Mapping[str, Any] | None = None,
    interrupts: tuple[Interrupt, ...] = (),
) -> TaskEvent:
    context = task.context
    return TaskEvent(
        node=context.node,
        agent=flow.run.spec.name,
        step=context.step,
        update=update if update is not None else {},
        state=None,
        checkpoint_id=context.checkpoint_id,
        interrupts=interrupts,
        send_index=context.send_index,
        type=kind,
        timestamp=timestamp(),
        payload=payload,
    )


def _shown(flow: _Flow, update: Mapping[str, Any]) -> dict[str, Any]:
    """A task's update as streamed: without the graph's private and ephemeral keys."""
    hidden = flow.run.spec.hidden_keys
    return {key: value for key, value in update.items() if key not in hidden}
