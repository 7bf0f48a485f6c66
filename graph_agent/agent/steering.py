"""Mid-run steering: user messages queued for a thread, delivered at its next model call.

``agent.steer(config, message)`` puts a user message in the agent's :class:`SteeringQueue`
under the config's thread. The model node of that agent, before each model call on the
thread, takes every message queued there, sends them after the history, and adds them to the
thread's messages (before the model's reply) — so a run that is working through tools hears
the user now, not when it ends (AgentScope's realtime steering, SAA's interrupt with
messages). A thread with no run going gets them at the first model call of its next run,
after that run's input.

The queue is in-process and bounded: at most ``max_per_thread`` messages wait per thread and
``max_threads`` threads have messages waiting; past either, :meth:`SteeringQueue.put` raises
:class:`SteeringQueueFullError`. Messages leave the queue only once the model call that
carried them has answered: a call that fails (and is retried, or ends the run) leaves them
queued for the next one, so none is lost and none is delivered twice. It is safe to steer
from any thread or event loop of the process while the run goes on (sync or async).

Example:
    >>> queue = SteeringQueue(max_per_thread=2)
    >>> queued = queue.put("t1", "use metric units")
    >>> [m.text for m in queue.pending("t1")]
    ['use metric units']
    >>> queue.delivered("t1", [queued.id]); queue.pending("t1")
    ()
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from graph_agent.graph.errors import GraphAgentError, GraphRuntimeError
from graph_agent.graph.types import RunnableConfig
from graph_agent.messages import UserMessage


class SteeringQueueFullError(GraphRuntimeError):
    """Too many steering messages wait (for one thread, or threads in all); none was added."""


class SteeringInputError(GraphAgentError, ValueError):
    """``steer`` got something it cannot queue: no thread id, or not a user message."""


class SteeringQueue:
    """User messages waiting for the next model call of each thread (in this process).

    Args:
        max_per_thread: Messages that may wait for one thread.
        max_threads: Threads that may have messages waiting at once.
    """

    def __init__(self, *, max_per_thread: int = 32, max_threads: int = 1024) -> None:
        if max_per_thread < 1 or max_threads < 1:
            raise ValueError(
                f"SteeringQueue needs max_per_thread >= 1 and max_threads >= 1, got "
                f"{max_per_thread} and {max_threads}"
            )
        self.max_per_thread = max_per_thread
        self.max_threads = max_threads
        self._waiting: dict[str, list[UserMessage]] = {}
        self._lock = threading.Lock()

    def put(self, thread_id: str, message: str | UserMessage) -> UserMessage:
        """Queue ``message`` (text becomes a :class:`UserMessage`) for ``thread_id``.

        Returns:
            The queued message (its ``id`` is how it appears in the thread).

        Raises:
            SteeringInputError: ``message`` is neither a string nor a ``UserMessage``.
            SteeringQueueFullError: the thread, or the queue, is full.
        """
        if isinstance(message, str):
            message = UserMessage(message)
        if not isinstance(message, UserMessage):
            raise SteeringInputError(
                f"steer takes a string or a UserMessage, got {type(message).__name__}; e.g. "
                "agent.steer(config, 'focus on the summary')"
            )
        with self._lock:
            waiting = self._waiting.get(thread_id)
            if waiting is None:
                if len(self._waiting) >= self.max_threads:
                    raise SteeringQueueFullError(
                        f"steering messages wait for {len(self._waiting)} threads already (the "
                        f"limit, max_threads={self.max_threads}); run those threads, or raise "
                        "the limit"
                    )
                waiting = self._waiting[thread_id] = []
            if len(waiting) >= self.max_per_thread:
                raise SteeringQueueFullError(
                    f"{len(waiting)} steering messages already wait for thread {thread_id!r} "
                    f"(the limit, max_per_thread={self.max_per_thread}); they are delivered at "
                    "the thread's next model call"
                )
            waiting.append(message)
        return message

    def pending(self, thread_id: str | None) -> tuple[UserMessage, ...]:
        """The messages waiting for ``thread_id``, oldest first (they stay queued)."""
        if thread_id is None:
            return ()
        with self._lock:
            return tuple(self._waiting.get(thread_id, ()))

    def delivered(self, thread_id: str | None, ids: Iterable[str]) -> None:
        """Drop the messages of ``thread_id`` with these ids: a model call has carried them."""
        gone = set(ids)
        if thread_id is None or not gone:
            return
        with self._lock:
            waiting = self._waiting.get(thread_id)
            if waiting is None:
                return
            kept = [m for m in waiting if m.id not in gone]
            if kept:
                self._waiting[thread_id] = kept
            else:
                del self._waiting[thread_id]

    def clear(self, thread_id: str | None) -> tuple[UserMessage, ...]:
        """Drop every message waiting for ``thread_id`` (e.g. one that makes each model call
        fail, such as a message a PII hook blocks) and return them."""
        if thread_id is None:
            return ()
        with self._lock:
            return tuple(self._waiting.pop(thread_id, ()))

    def __len__(self) -> int:
        """How many messages wait, over all threads."""
        with self._lock:
            return sum(len(waiting) for waiting in self._waiting.values())

    def __repr__(self) -> str:
        return f"SteeringQueue(waiting={len(self)}, threads={len(self._waiting)})"


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
