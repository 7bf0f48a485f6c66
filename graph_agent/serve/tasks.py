"""Stopping the server's background tasks, and waiting in them, without losing a cancel: for
the in-process runner (:mod:`graph_agent.serve.runs`), the queue's workers
(:mod:`graph_agent.serve.queue`) and the app alike; a module of its own, as ``runs`` cannot
import ``queue`` (which imports it)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

__all__ = [
    "CANCEL_AGAIN_SECONDS",
    "Periodic",
    "cancel_and_await",
    "run_periodically",
    "wait_at_most",
]

_log = logging.getLogger(__name__)

CANCEL_AGAIN_SECONDS = 0.5
"""How long closing waits for a cancelled task before it cancels it again (see
:func:`cancel_and_await`)."""


async def cancel_and_await(tasks: Collection[asyncio.Task[None]]) -> None:
    """Cancel ``tasks`` and await their end, cancelling again every
    :data:`CANCEL_AGAIN_SECONDS` those that go on. A cancel can be lost: on Python 3.11,
    ``asyncio.wait_for`` returns what it awaited when that completes in the moment it is
    cancelled, and psycopg_pool waits for a free connection with it (psycopg/psycopg#1345).
    A worker's loop cancelled once as its upkeep got a connection went on forever, and closing
    the worker waited on it forever.

    A task that ended with an error (before it was cancelled, as a listener whose connection
    died) has it logged here, naming the task: closing goes on with the others, but the error
    is not lost."""
    pending = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=CANCEL_AGAIN_SECONDS)
    for task in tasks:
        error = None if task.cancelled() else task.exception()
        if error is not None:
            _log.error(
                "graph-agent serve: task %s had failed before it was stopped",
                task.get_name(),
                exc_info=error,
            )


async def wait_at_most(event: asyncio.Event, seconds: float) -> bool:
    """Whether ``event`` was set within ``seconds``. Not ``asyncio.wait_for``: on Python 3.11
    it returns normally when it is cancelled just as what it awaits completes, and the cancel
    is lost (see :func:`cancel_and_await`); ``asyncio.timeout`` waits in the caller's task, whose
    cancel is never lost so."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()
    return event.is_set()


@dataclass(frozen=True)
class Periodic:
    """A job the server runs in the background every ``every`` seconds while it serves (the
    crons' scheduler, retention's sweeper, webhook deliveries...): ``Api.add_periodic``.

    ``job`` is awaited on the server's loop; a job that raises has its error logged, naming
    ``name``, and runs again at its next turn (a bad round never stops the server's upkeep).
    A job that blocks should hand its blocking work to a thread (``concurrency.to_thread``)."""

    name: str
    every: float
    job: Callable[[], Awaitable[None]]


async def run_periodically(periodic: Periodic, wake: asyncio.Event | None = None) -> None:
    """Run ``periodic.job`` now and then every ``periodic.every`` seconds, until cancelled;
    setting ``wake`` runs it at once (then clears it)."""
    while True:
        try:
            await periodic.job()
        except asyncio.CancelledError:
            raise
        except Exception:
            _log.exception(
                "graph-agent serve: background job %s failed; it runs again in %.0f s",
                periodic.name,
                periodic.every,
            )
        if wake is None:
            await asyncio.sleep(periodic.every)
        else:
            await wait_at_most(wake, periodic.every)
            wake.clear()
