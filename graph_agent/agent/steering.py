"""Mid-run steering: user messages queued for a thread, delivered at its next model call.

``agent.steer(config, message)`` puts a user message in the agent's :class:`SteeringQueue`
under the config's thread. The agent's loop entry (its first beforeModel hook, else
``__model__``) takes every message queued there and adds them to the thread's messages, after
the history: the beforeModel hooks, the model interceptors and the model see them like the
rest of the history (a redacting hook or interceptor redacts them too). So a run that is
working through tools hears the user now, not when it ends (AgentScope's realtime steering,
SAA's interrupt with messages). A thread with no run going gets them at the first model call
of its next run, after that run's input; one that arrives while the beforeModel hooks run
waits for the next pass through the loop entry.

**Never lost, never twice.** A message leaves the queue only once the thread is seen to hold
it: a node that takes messages (:func:`take_steering`) writes them with a record of their ids
(:data:`~graph_agent.agent.keys.STEERED_KEY`) and leaves them queued; the next node to take
from the queue drops those the thread's committed state holds (in its messages or that
record: a hook may have removed or rewritten one) and delivers the rest. So when the step
that carried them is discarded (a model timeout, a failed parallel task, a cancelled run, a
checkpoint that could not be stored), the next model call delivers them again, once.

The queue is in-process and bounded: at most ``max_per_thread`` messages wait per thread and
``max_threads`` threads have messages waiting. A message delivered by a run's last model call
stays queued until the thread's next model call; when the queue is full, :meth:`put` first
asks the thread's stored messages (``held``) and drops the messages delivered already, and
only then raises :class:`SteeringQueueFullError` (so a ``put`` to a full queue may read the
checkpoints of the threads with taken messages; should that read fail, the queue counts as
full). It is safe to steer from any thread or event
loop of the process while the run goes on (sync or async).

Example:
    >>> queue = SteeringQueue(max_per_thread=2)
    >>> queued = queue.put("t1", "use metric units")
    >>> [m.text for m in queue.pending("t1")]
    ['use metric units']
    >>> [m.text for m in queue.take("t1", held=())]     # a model call sends it
    ['use metric units']
    >>> queue.take("t1", held={queued.id}), queue.pending("t1")   # the thread holds it now
    ((), ())
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from graph_agent.agent.keys import STEERED_KEY
from graph_agent.graph.errors import GraphAgentError, GraphRuntimeError
from graph_agent.graph.state import OverAllState, ReplaceAll
from graph_agent.graph.types import Command, RunnableConfig
from graph_agent.messages import BaseMessage, UserMessage

log = logging.getLogger(__name__)

HeldIds = Callable[[str], Collection[str]]
"""The ids of the messages a thread's stored state holds (given to :class:`SteeringQueue`)."""


class SteeringQueueFullError(GraphRuntimeError):
    """Too many steering messages wait (for one thread, or threads in all); none was added."""


class SteeringInputError(GraphAgentError, ValueError):
    """``steer`` got something it cannot queue: no thread id, or not a user message."""


class SteeringQueue:
    """User messages waiting for the next model call of each thread (in this process).

    Args:
        max_per_thread: Messages that may wait for one thread.
        max_threads: Threads that may have messages waiting at once.
        held: The ids of the messages a thread's stored state holds; a full queue asks it
            to drop messages delivered already (see the module docstring), so a ``put`` to a
            full queue may read checkpoints. ``None``, or a ``held`` that raises: a full queue
            only raises.
    """

    def __init__(
        self, *, max_per_thread: int = 32, max_threads: int = 1024, held: HeldIds | None = None
    ) -> None:
        if max_per_thread < 1 or max_threads < 1:
            raise ValueError(
                f"SteeringQueue needs max_per_thread >= 1 and max_threads >= 1, got "
                f"{max_per_thread} and {max_threads}"
            )
        self.max_per_thread = max_per_thread
        self.max_threads = max_threads
        self.held = held
        self._waiting: dict[str, list[UserMessage]] = {}
        self._taken: dict[str, set[str]] = {}
        """Ids of waiting messages a node has taken, by thread: maybe delivered already."""
        self._lock = threading.Lock()

    def put(self, thread_id: str, message: str | UserMessage) -> UserMessage:
        """Queue ``message`` (text becomes a :class:`UserMessage`) for ``thread_id``.

        Returns:
            The queued message (its ``id`` is how it appears in the thread).

        Raises:
            SteeringInputError: ``message`` is neither a string nor a ``UserMessage``.
            SteeringQueueFullError: the thread, or the queue, is full (also after dropping
                the messages delivered already).
        """
        if isinstance(message, str):
            message = UserMessage(message)
        if not isinstance(message, UserMessage):
            raise SteeringInputError(
                f"steer takes a string or a UserMessage, got {type(message).__name__}; e.g. "
                "agent.steer(config, 'focus on the summary')"
            )
        if self._added(thread_id, message) is None:
            return message
        self._drop_delivered()  # outside the lock: it reads the threads' stored state
        full = self._added(thread_id, message)
        if full is not None:
            raise SteeringQueueFullError(full)
        return message

    def _added(self, thread_id: str, message: UserMessage) -> str | None:
        """Queue ``message``; when there is no room, say why (and queue nothing)."""
        with self._lock:
            waiting = self._waiting.get(thread_id)
            if waiting is None:
                if len(self._waiting) >= self.max_threads:
                    return (
                        f"steering messages wait for {len(self._waiting)} threads already (the "
                        f"limit, max_threads={self.max_threads}); run those threads, or raise "
                        "the limit"
                    )
                waiting = self._waiting[thread_id] = []
            if len(waiting) >= self.max_per_thread:
                return (
                    f"{len(waiting)} steering messages already wait for thread {thread_id!r} "
                    f"(the limit, max_per_thread={self.max_per_thread}); they are delivered "
                    "at the thread's next model call"
                )
            waiting.append(message)
        return None

    def _drop_delivered(self, thread_id: str | None = None) -> None:
        """Drop the taken messages (of ``thread_id``, else of every thread) that their
        threads' stored state holds."""
        if self.held is None:
            return
        with self._lock:
            taken = {
                thread: set(ids)
                for thread, ids in self._taken.items()
                if thread_id is None or thread == thread_id
            }
        for thread, ids in taken.items():
            try:
                held = self.held(thread)
            except Exception:  # a saver or graph error: the messages stay, the queue is full
                log.debug("steering: cannot read what thread %r holds", thread, exc_info=True)
                continue
            self.delivered(thread, ids.intersection(held))

    def pending(self, thread_id: str | None) -> tuple[UserMessage, ...]:
        """The messages waiting for ``thread_id``, oldest first (they stay queued); those
        the thread's stored state holds already are dropped first (see ``held``)."""
        if thread_id is None:
            return ()
        self._drop_delivered(thread_id)
        return self.queued(thread_id)

    def queued(self, thread_id: str) -> tuple[UserMessage, ...]:
        """The messages queued for ``thread_id``, also those a node took (maybe delivered:
        :meth:`take` tells), with no look at the thread's state."""
        if thread_id not in self._waiting:  # the usual case, on every model loop: no lock
            return ()
        with self._lock:
            return tuple(self._waiting.get(thread_id, ()))

    def take(self, thread_id: str, held: Collection[str]) -> tuple[UserMessage, ...]:
        """The messages to deliver to ``thread_id`` now: those waiting whose ids are not in
        ``held`` (what the thread's committed state holds, see :func:`held_ids`). The held
        ones leave the queue; the others stay queued (marked taken) until a later call sees
        the thread hold them."""
        with self._lock:
            waiting = self._waiting.get(thread_id)
            if waiting is None:
                return ()
            if held:
                self._drop(thread_id, held)
                waiting = self._waiting.get(thread_id, [])
            if waiting:
                self._taken.setdefault(thread_id, set()).update(m.id for m in waiting)
            return tuple(waiting)

    def delivered(self, thread_id: str | None, ids: Iterable[str]) -> None:
        """Drop the messages of ``thread_id`` with these ids: the thread holds them."""
        gone = set(ids)
        if thread_id is None or not gone:
            return
        with self._lock:
            self._drop(thread_id, gone)

    def _drop(self, thread_id: str, gone: Collection[str]) -> None:
        waiting = self._waiting.get(thread_id)
        if waiting is None:
            return
        kept = [m for m in waiting if m.id not in gone]
        taken = self._taken.get(thread_id, set()).difference(gone)
        if kept:
            self._waiting[thread_id] = kept
            self._taken[thread_id] = taken
        else:
            del self._waiting[thread_id]
            self._taken.pop(thread_id, None)

    def clear(self, thread_id: str | None) -> tuple[UserMessage, ...]:
        """Drop every message waiting for ``thread_id`` (e.g. one that makes each model call
        fail, such as a message a PII hook blocks) and return them."""
        if thread_id is None:
            return ()
        with self._lock:
            self._taken.pop(thread_id, None)
            return tuple(self._waiting.pop(thread_id, ()))

    def __len__(self) -> int:
        """How many messages are queued, over all threads, as the queue knows it (no look at
        the threads' state: some may be delivered already, see :meth:`pending`)."""
        with self._lock:
            return sum(len(waiting) for waiting in self._waiting.values())

    def __repr__(self) -> str:
        with self._lock:
            waiting = sum(len(messages) for messages in self._waiting.values())
            return f"SteeringQueue(waiting={waiting}, threads={len(self._waiting)})"


def steering_thread(config: RunnableConfig | None) -> str:
    """The thread a ``steer`` call names.

    Raises:
        SteeringInputError: the config has no ``thread_id``.
    """
    thread_id = config.thread_id if isinstance(config, RunnableConfig) else None
    if not thread_id:
        raise SteeringInputError(
            "steer needs the config of the thread to steer, with its thread_id, e.g. "
            "agent.steer(RunnableConfig(thread_id='t1'), 'focus on costs')"
        )
    return thread_id


def held_ids(state: OverAllState, waiting: Sequence[BaseMessage]) -> set[str]:
    """The ids of ``waiting`` that ``state`` holds: in its messages, or recorded as delivered
    (under :data:`~graph_agent.agent.keys.STEERED_KEY`) by a step that carried them."""
    ids = {m.id for m in waiting}
    held = ids.intersection(state.value(STEERED_KEY) or ())
    if len(held) < len(ids):
        held.update(m.id for m in state.value("messages", ()) if m.id in ids)
    return held


def take_steering(
    queue: SteeringQueue | None, state: OverAllState, config: RunnableConfig
) -> tuple[UserMessage, ...]:
    """The messages ``queue`` (an agent's ``steering``) holds for the config's thread that
    ``state`` does not (see :meth:`SteeringQueue.take`). Costs a dict look-up when none wait."""
    thread_id = config.thread_id
    if queue is None or thread_id is None:
        return ()
    waiting = queue.queued(thread_id)
    if not waiting:
        return ()
    return queue.take(thread_id, held_ids(state, waiting))


def with_steered(state: OverAllState, steered: Sequence[UserMessage]) -> OverAllState:
    """``state`` as a hook sees it once ``steered`` is delivered: after the other messages."""
    return state.with_values({"messages": [*state.value("messages", ()), *steered]})


def steered_update(update: Any, steered: Sequence[UserMessage]) -> Any:
    """A node's ``update`` that also delivers ``steered``: the messages before the node's own
    (unless it replaced the whole list: a hook that saw them kept what it wanted), and the
    record of their ids."""
    if isinstance(update, Command):
        return dataclasses.replace(update, update=steered_update(update.update, steered))
    if update is None:
        update = {}
    if not isinstance(update, Mapping):
        return update  # not an update: the engine says what is wrong with it
    merged = dict(update)
    own = merged.get("messages")
    if not isinstance(own, ReplaceAll):
        own_list = [] if own is None else [own] if not isinstance(own, Sequence) else list(own)
        merged["messages"] = [*steered, *own_list]
    merged[STEERED_KEY] = tuple(m.id for m in steered)
    return merged
