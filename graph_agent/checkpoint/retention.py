"""Retention: how long threads and their checkpoints are kept, and the sweep that applies it.

A :class:`RetentionPolicy` says what goes: a thread idle for ``thread_ttl`` minutes (since its
newest checkpoint) is deleted whole (``strategy="delete"``) or cut to its latest checkpoint
(``"keep_latest"``); ``checkpoint_keep=N`` keeps the N newest checkpoints of every thread.
``saver.sweep(policy)`` applies it on any saver (:meth:`CheckpointSaver.sweep`) and returns a
:class:`SweepResult`.

How a sweep stays safe:

- **Bounded batches.** Threads are read ``batch_size`` at a time, in thread-id order; nothing
  holds the whole list.
- **One transaction per thread.** Each thread is deleted or pruned in one transaction of its
  saver (one critical section of a :class:`MemorySaver`): a sweep killed at any moment leaves
  every thread whole or as the policy wants it, never a checkpoint without its blobs. The kept
  checkpoints load exactly as before (their blobs are rewritten whole first, as ``prune`` does),
  with their pending writes: a thread paused on an interrupt still resumes.
- **Never under a run.** A thread whose lease a run holds (in this process or, for SQLite and
  PostgreSQL, in any other) is skipped and counted in ``threads_busy``; the check and the
  change are in the same transaction, and the thread's age is read again there, so a thread a
  run used since the batch was read is judged on that.
- **Several sweepers at once** (processes on one PostgreSQL database) serialise per thread: the
  second finds the thread already as the policy wants it.

The decision is a pure function (:meth:`RetentionPolicy.keep`); each saver supplies two storage
primitives: a page of threads with their last activity (``_retention_page``) and the atomic
change of one thread (``_retain_thread``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

__all__ = ["RetentionPolicy", "RetentionStrategy", "SweepResult"]

RetentionStrategy = Literal["delete", "keep_latest"]
"""What happens to a thread idle past its TTL: ``delete`` it whole, or ``keep_latest``: keep
its newest checkpoint (whole, with its pending writes) and drop the rest."""

Outcome = Literal["busy", "deleted", "pruned", "kept"]
"""What ``_retain_thread`` did to one thread."""

Decide = Callable[[datetime | None], int | None]
"""Given a thread's last activity: None (leave it), 0 (delete it) or N (keep N checkpoints per
namespace)."""


@dataclass(frozen=True, kw_only=True)
class RetentionPolicy:
    """What a sweep removes.

    Args:
        thread_ttl: Minutes a thread may stay idle (since its newest checkpoint) before
            ``strategy`` applies to it; None: threads never expire.
        strategy: ``"delete"`` (the whole thread goes) or ``"keep_latest"`` (its newest
            checkpoint stays, whole: it can be read, resumed, forked from).
        checkpoint_keep: Keep only the N newest checkpoints of each thread (of each of its
            namespaces), whatever its age; None: keep them all.
        batch_size: Threads read per batch.

    Example:
        >>> from graph_agent.checkpoint import MemorySaver, RetentionPolicy
        >>> saver = MemorySaver()
        >>> policy = RetentionPolicy(thread_ttl=60 * 24 * 30, checkpoint_keep=20)
        >>> saver.sweep(policy).threads_deleted  # threads idle for 30 days: none yet
        0

    Raises:
        ValueError: a TTL that is not a positive number of minutes, an unknown strategy, or a
            ``checkpoint_keep``/``batch_size`` below 1.
    """

    thread_ttl: float | None = None
    strategy: RetentionStrategy = "delete"
    checkpoint_keep: int | None = None
    batch_size: int = 100

    def __post_init__(self) -> None:
        problem = policy_problem(self.thread_ttl, self.strategy, self.checkpoint_keep)
        if problem is None and not (_is_int(self.batch_size) and self.batch_size >= 1):
            problem = f"batch_size must be an integer of 1 or more, not {self.batch_size!r}"
        if problem is not None:
            raise ValueError(f"RetentionPolicy: {problem}")

    def keep(self, last_activity: datetime | None, now: datetime) -> int | None:
        """How a thread last active at ``last_activity`` is swept at ``now``: None (left as
        it is), 0 (deleted) or N (its N newest checkpoints per namespace kept)."""
        if (
            self.thread_ttl is not None
            and last_activity is not None
            and now - last_activity >= timedelta(minutes=self.thread_ttl)
        ):
            return 0 if self.strategy == "delete" else 1
        return self.checkpoint_keep


def policy_problem(ttl: Any, strategy: Any, checkpoint_keep: Any) -> str | None:
    """What is wrong with these policy settings, or None (shared with the server's options)."""
    number = isinstance(ttl, int | float) and not isinstance(ttl, bool)
    if ttl is not None and not (number and math.isfinite(ttl) and ttl > 0):
        return f"thread_ttl must be a positive number of minutes, not {ttl!r}"
    if strategy not in ("delete", "keep_latest"):
        return f"strategy must be 'delete' or 'keep_latest', not {strategy!r}"
    if checkpoint_keep is not None and not (_is_int(checkpoint_keep) and checkpoint_keep >= 1):
        return f"checkpoint_keep must be an integer of 1 or more, not {checkpoint_keep!r}"
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(kw_only=True)
class SweepResult:
    """What a sweep did: threads it looked at, deleted and pruned, checkpoints it removed (those
    of deleted threads too), and threads it left alone because a run held them."""

    threads_seen: int = 0
    threads_deleted: int = 0
    threads_pruned: int = 0
    checkpoints_removed: int = 0
    threads_busy: int = 0

    def count(self, outcome: Outcome, removed: int) -> None:
        """Add one thread's outcome."""
        self.checkpoints_removed += removed
        if outcome == "deleted":
            self.threads_deleted += 1
        elif outcome == "pruned":
            self.threads_pruned += 1
        elif outcome == "busy":
            self.threads_busy += 1


class _Sweepable(Protocol):
    """The storage primitives a sweep uses (``CheckpointSaver`` defines them)."""

    def _retention_page(
        self, after: Any, limit: int
    ) -> tuple[list[tuple[str, datetime | None]], Any]: ...

    def _retain_thread(self, thread_id: str, decide: Decide) -> tuple[Outcome, int]: ...


def sweep(saver: _Sweepable, policy: RetentionPolicy, now: datetime) -> SweepResult:
    """Apply ``policy`` to every thread of ``saver`` as of ``now`` (see the module docstring)."""
    if now.tzinfo is None:
        raise ValueError("sweep(now=...): give an aware datetime, e.g. datetime.now(UTC)")
    result = SweepResult()

    def decide(last_activity: datetime | None) -> int | None:
        return policy.keep(last_activity, now)

    cursor: Any = None
    while True:
        page, cursor = saver._retention_page(cursor, policy.batch_size)
        for thread_id, last_activity in page:
            result.threads_seen += 1
            if decide(last_activity) is None:  # judged again inside the thread's transaction
                continue
            result.count(*saver._retain_thread(thread_id, decide))
        if cursor is None:
            return result
