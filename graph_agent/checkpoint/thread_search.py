"""``saver.search_threads``: find threads by the metadata of their newest checkpoint.

What LangGraph users do with ``BaseCheckpointSaver.list(None, filter={...})``, one record per
thread rather than every checkpoint: the threads whose newest top-level checkpoint has
metadata matching a filter, most recently updated first, a page at a time. A checkpoint's
metadata holds what the run's ``RunnableConfig.metadata`` gave, plus the engine's ``source``,
``step`` and ``writers``.

The savers store metadata inside the serialized checkpoint header, so the filter is applied
here, in Python, to decoded metadata: no filter key or value ever becomes SQL text (LangGraph's
SQLite saver put filter keys into its SQL: CVE-2025-67644). Each saver only reads its threads'
newest checkpoints in order: a page at a time (:data:`ReadHeads`), or for a filter, all of
them in one pass as the filter consumes them (:data:`ScanHeads`), never every checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from graph_agent.graph.saver import Checkpoint

__all__ = [
    "MOST_ROWS",
    "ThreadHeads",
    "ThreadInfo",
    "check_search",
    "matches",
    "read_in_batches",
    "search_page",
]

MOST_ROWS: Final = 2**63 - 1
"""The largest ``LIMIT``/``OFFSET`` SQLite and PostgreSQL take; a larger ``limit`` or
``offset`` means the same page (no saver holds that many threads)."""

_FIRST_READ: Final = 64
"""Threads read at once while a filter looks for its page (doubling from there; at least
twice the threads the page reaches)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ThreadInfo:
    """A thread found by ``search_threads``.

    Attributes:
        thread_id: The thread's id.
        checkpoint_id: Its newest (top-level) checkpoint's id.
        metadata: That checkpoint's metadata: the run's ``RunnableConfig.metadata`` and the
            engine's ``source``, ``step`` and ``writers``.
        created_at: When its oldest stored checkpoint was made (its first, unless pruned).
        updated_at: When its newest checkpoint was made.
    """

    thread_id: str
    checkpoint_id: str
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime


class ThreadHeads:
    """A thread as a saver reads it for a search: its id and the headers (no values) of its
    newest and oldest top-level checkpoints. The oldest may be given as a function that reads
    it, called at most once, when first asked for: a filter needs only the newest, and the
    oldest only of the threads on its page."""

    __slots__ = ("_oldest", "newest", "thread_id")

    def __init__(
        self, thread_id: str, newest: Checkpoint, oldest: Checkpoint | Callable[[], Checkpoint]
    ) -> None:
        self.thread_id = thread_id
        self.newest = newest
        self._oldest = oldest

    @property
    def oldest(self) -> Checkpoint:
        if not isinstance(self._oldest, Checkpoint):
            self._oldest = self._oldest()
        return self._oldest


ReadHeads = Callable[[int, int], Sequence[ThreadHeads]]
"""``read(limit, offset)``: threads with a top-level checkpoint, newest checkpoint first (ties
by thread id), from ``offset`` on, at most ``limit``."""

ScanHeads = Callable[[int], Iterator[ThreadHeads]]
"""``scan(batch)``: every thread :data:`ReadHeads` gives, in its order, read as it is consumed,
``batch`` or more at a time (a thread changed meanwhile may come with its new head, at the
place of its old one)."""


def check_search(metadata: Any, limit: Any, offset: Any) -> tuple[int, int]:
    """``(limit, offset)`` once the arguments are known good, both within :data:`MOST_ROWS`.

    Raises:
        ValueError: naming the argument that is wrong and what to give instead.
    """
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            raise ValueError(
                f"search_threads(metadata={metadata!r:.60}): give a dict of metadata values "
                "to match, e.g. {'user': 'ada'}, or None for every thread"
            )
        for key in metadata:
            if type(key) is not str:
                raise ValueError(
                    f"search_threads(metadata=...) names the key {key!r}: metadata keys are "
                    "strings, e.g. {'user': 'ada'}"
                )
    if type(limit) is not int or limit < 0:
        raise ValueError(f"search_threads(limit={limit!r}): give a number of threads (>= 0)")
    if type(offset) is not int or offset < 0:
        raise ValueError(
            f"search_threads(offset={offset!r}): give a number of threads to skip (>= 0)"
        )
    offset = min(offset, MOST_ROWS)
    return min(limit, MOST_ROWS - offset), offset


def search_page(
    read: ReadHeads,
    scan: ScanHeads,
    metadata: Mapping[str, Any] | None,
    limit: int,
    offset: int,
) -> list[ThreadInfo]:
    """The page (``offset``, ``limit``) of the threads whose newest metadata :func:`matches`
    ``metadata``. Without a filter the saver pages (``read``); with one, the threads are
    ``scan``-ned, newest first, until the page is full. (A search is not a snapshot: a thread
    updated meanwhile may be seen at its old place with its new head.)"""
    if not limit:
        return []
    if not metadata:
        return [_info(heads) for heads in read(limit, offset)]
    found: list[ThreadInfo] = []
    seen = 0
    for heads in scan(min(max(_FIRST_READ, 2 * (offset + limit)), MOST_ROWS)):
        if not matches(heads.newest.metadata, metadata):
            continue
        if seen >= offset:
            found.append(_info(heads))
            if len(found) == limit:
                break
        seen += 1
    return found


def read_in_batches(read: ReadHeads, batch: int) -> Iterator[ThreadHeads]:
    """:data:`ScanHeads` made of ``read``: a query per batch, each twice as large as the last
    (for a saver that cannot do better: each query orders every thread again)."""
    start, size = 0, batch
    while True:
        heads = read(size, start)
        yield from heads
        if len(heads) < size:
            return
        start, size = start + size, min(2 * size, MOST_ROWS)


def matches(metadata: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether ``metadata`` has every key of ``wanted`` with a matching value: JSON equality
    (``True`` is not ``1``, ``1`` is ``1.0``; a list matches an equal list), except that a dict
    matches any dict holding its entries, recursively (PostgreSQL's ``jsonb @>``, as
    LangGraph's PostgreSQL saver filters)."""
    return all(key in metadata and _match(metadata[key], value) for key, value in wanted.items())


def _match(found: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        return isinstance(found, Mapping) and matches(found, wanted)
    if isinstance(wanted, list | tuple):
        return (
            isinstance(found, list | tuple)
            and len(found) == len(wanted)
            and all(_match(a, b) for a, b in zip(found, wanted, strict=True))
        )
    if isinstance(wanted, bool) or isinstance(found, bool):
        return type(found) is type(wanted) and found == wanted
    try:
        return bool(found == wanted)
    except Exception:  # a stored value whose __eq__ fails does not match
        return False


def _info(heads: ThreadHeads) -> ThreadInfo:
    return ThreadInfo(
        thread_id=heads.thread_id,
        checkpoint_id=heads.newest.id,
        metadata=heads.newest.metadata,
        created_at=heads.oldest.created_at,
        updated_at=heads.newest.created_at,
    )
