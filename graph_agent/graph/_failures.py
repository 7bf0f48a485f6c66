"""What a call raises when a step fails, is cancelled, or there is nothing to continue: the
errors the flow (``_flow.py``) builds, each naming the node (and, for a Send's task, which
Send) and the fix."""

from __future__ import annotations

from collections.abc import Sequence

from graph_agent.graph._effects import Task
from graph_agent.graph._engine import GraphSpec
from graph_agent.graph.errors import (
    GraphCancelledError,
    InvalidResumeError,
    NodeError,
    NodeTimeoutError,
    exception_text,
)


def task_label(task: Task) -> str:
    """How messages name a task: its node, and for a Send's task which Send (``work (Send
    2)``: the third Send to ``work`` in its step)."""
    context = task.context
    if context.index:
        return f"{context.node} (Send {context.index - 1})"
    return context.node


def tasks_text(tasks: list[Task]) -> str:
    """A step's tasks for a message: their nodes, in order, with how many Sends ran each
    (``plan, work ×100``)."""
    counts: dict[str, int] = {}
    for task in tasks:
        counts[task.node.name] = counts.get(task.node.name, 0) + 1
    return ", ".join(name if n == 1 else f"{name} ×{n}" for name, n in counts.items())


def check_next_nodes(next_nodes: Sequence[str], spec: GraphSpec, thread_id: str | None) -> None:
    """A thread that stopped before a node this graph no longer has cannot carry on as it
    is: say so (a silent "finished" would drop the work it was waiting to do)."""
    missing = list(dict.fromkeys(name for name in next_nodes if name not in spec.nodes))
    if missing:
        names = ", ".join(map(repr, missing))
        raise InvalidResumeError(
            f"thread {thread_id!r} stopped before {names}, which graph {spec.name!r} no longer "
            f"has (renamed or removed since the thread was saved; its nodes now: "
            f"{', '.join(map(repr, spec.nodes))}); move the thread on with "
            "update_state(config, values, as_node=...) naming the node whose edges lead where "
            "it should go next, or start a new run with new input"
        )


def nothing_to_continue(state: str) -> InvalidResumeError:
    return InvalidResumeError(
        f"nothing to continue on this thread: it has {state}; call with new input to start a run"
    )


def node_error(failures: list[Task]) -> BaseException:
    """The error a step raises: the first failure in merge order, the others as notes."""
    first, others = failures[0], failures[1:]
    error = first.error
    assert error is not None
    # raised by the engine while storing a result, or a resume the node refused: as they are;
    # anything else came from user code (a subgraph's own NodeError included) and is wrapped;
    # the node's own timeout (add_node(..., timeout=...)) is raised as it is too
    if (
        first.engine_error
        or isinstance(error, InvalidResumeError)
        or (isinstance(error, NodeTimeoutError) and error.node == first.node.name)
    ):
        wrapped: BaseException = error
    elif not isinstance(error, Exception):
        return error
    else:
        node, step = first.node.name, first.context.step
        send = f" (Send {first.context.index - 1})" if first.context.index else ""
        attempts = getattr(first.context, "attempts", 1)  # set by a RetryPolicy that retried
        tries = f", attempt {attempts} of a RetryPolicy" if attempts > 1 else ""
        wrapped = NodeError(
            f"node {node!r}{send} raised {type(error).__name__}: {exception_text(error)} "
            f"(step {step}{tries})",
            node=node,
            step=step,
        )
        wrapped.__cause__ = error
    for other in others:
        assert other.error is not None
        wrapped.add_note(
            f"node {task_label(other)!r} also failed in this step: "
            f"{type(other.error).__name__}: {exception_text(other.error)}"
        )
    return wrapped


def cancelled(
    graph: str,
    thread_id: str | None,
    step: int,
    tasks: list[Task],
    *,
    durable: bool,
    during: bool,
) -> GraphCancelledError:
    """``RunnableConfig.cancel`` was set before (or, ``during``, in) ``step``, which runs
    ``tasks``; caused by the cancel a task raised (a subgraph or agent that stopped with the
    run), if any."""
    where = f"graph {graph!r}" + (f" on thread {thread_id!r}" if thread_id is not None else "")
    if not durable:
        after = "nothing was kept (no saver)"
    else:
        after = (
            "the thread stays at its last checkpoint; invoke(None, config) with a "
            "cancel signal that is not set carries on from there"
        )
    when = "during" if during else "before"
    error = GraphCancelledError(
        f"{where} was cancelled (RunnableConfig.cancel is set) {when} step {step}, which "
        f"{'runs' if during else 'would run'} {tasks_text(tasks)}; {after}",
        step=step,
    )
    stopped = [task.error for task in tasks if isinstance(task.error, GraphCancelledError)]
    if stopped:
        error.__cause__ = stopped[0]
    return error
