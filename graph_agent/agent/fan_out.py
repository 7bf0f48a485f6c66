"""Running a step's jobs side by side (the tool node's calls): on the shared worker pool or
as tasks of the caller's event loop, a bounded number at a time, errors and pauses raised
together once every job has finished."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from graph_agent.graph.concurrency import shared_pool, wait_delivering
from graph_agent.graph.errors import GraphInterrupted, ParentCommand


def in_parallel(jobs: Sequence[Any], limit: int) -> list[Any]:
    """Run ``jobs`` (no-argument callables) on the shared pool, ``limit`` at a time, in order.

    A job that raises (a handoff, a pause, a bug) lets the running ones finish before the
    error is raised, so none is left running behind the caller's back; after a handoff no new
    job starts. Pauses of several jobs are raised together, as one, which keeps what each
    says of its interrupts (raised by a nested graph, static breakpoints, their scopes).
    """
    results: list[Any] = [None] * len(jobs)
    errors: dict[int, BaseException] = {}
    pool = shared_pool()
    pending: dict[Future[Any], int] = {}
    index = 0
    while index < len(jobs) or pending:
        handed_off = any(isinstance(e, ParentCommand) for e in errors.values())
        while index < len(jobs) and len(pending) < limit and not handed_off:
            context = contextvars.copy_context()
            pending[pool.submit(context.run, jobs[index])] = index
            index += 1
        if not pending:
            break
        done, _ = wait_delivering(pending)  # what tools emit meanwhile streams out live
        for future in done:
            position = pending.pop(future)
            try:
                results[position] = future.result()
            except BaseException as exc:
                errors[position] = exc
    if errors:
        _raise_together(errors)
    return results


async def ain_parallel(jobs: Sequence[Callable[[], Awaitable[Any]]], limit: int) -> list[Any]:
    """:func:`in_parallel` on the event loop: each job (a coroutine function) a task of its
    own (its own context), ``limit`` at a time; the same rules for errors and handoffs. When
    the caller is cancelled, so are the jobs running."""
    results: list[Any] = [None] * len(jobs)
    errors: dict[int, BaseException] = {}
    pending: dict[asyncio.Future[Any], int] = {}
    index = 0
    try:
        while index < len(jobs) or pending:
            handed_off = any(isinstance(e, ParentCommand) for e in errors.values())
            while index < len(jobs) and len(pending) < limit and not handed_off:
                pending[asyncio.ensure_future(jobs[index]())] = index
                index += 1
            if not pending:
                break
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                position = pending.pop(future)
                try:
                    results[position] = future.result()
                except BaseException as exc:
                    errors[position] = exc
    finally:
        for future in pending:
            future.cancel()
    if errors:
        _raise_together(errors)
    return results


def _raise_together(errors: Mapping[int, BaseException]) -> None:
    """Raise what parallel jobs raised: their pauses together as one (keeping what each says
    of its interrupts: raised by a nested graph, static breakpoints, their scopes), else the
    first error that is not a pause."""
    raised = [errors[position] for position in sorted(errors)]
    pauses = [e for e in raised if isinstance(e, GraphInterrupted)]
    if len(pauses) == len(raised):
        raise GraphInterrupted(
            [i for pause in pauses for i in pause.interrupts],
            nested=frozenset().union(*(pause.nested for pause in pauses)),
            breakpoints=frozenset().union(*(pause.breakpoints for pause in pauses)),
            scopes={k: v for pause in pauses for k, v in pause.scopes.items()},
        )
    raise next(e for e in raised if not isinstance(e, GraphInterrupted))
