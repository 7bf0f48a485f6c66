"""The SQLite saver's memory of each thread's newest checkpoint as this saver last wrote or read
it: its rows (the header, and for each key the blobs it loads from, newest first), so that a
run's start (``acquire_loading``) rebuilds it with the same decoding as a load from the file,
without reading those rows again.

A row kept here is used only while it is exact: the file's newest checkpoint of the thread
(and namespace) must still be the one kept, and no other connection may have committed to the
file since it was kept (``PRAGMA data_version``: another process's run, prune or delete, or
another saver on the same file). Every write of this saver that touches a thread updates or
forgets its rows (a step's checkpoint extends them; pending writes, a prune, a delete, a copy
forget them). Only bytes are kept, decoded afresh by each load, so nothing a run gets back
aliases what is kept (an append key's items may be shared, as :class:`LoadedLists` does).
"""

from __future__ import annotations

import collections
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from graph_agent.checkpoint.codec import (
    Link,
    LoadedLists,
    decode_header,
    follows,
    load_values,
)
from graph_agent.checkpoint.sqlite_sql import _name_of
from graph_agent.graph.saver import Checkpoint

_Chains = dict[str, tuple[Link, ...]]

NEWEST_ID = (
    "SELECT (SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
    "ORDER BY checkpoint_id DESC LIMIT 1), (SELECT data_version FROM pragma_data_version())"
)
"""The thread's newest checkpoint id, and the file's count of other connections' commits."""


@dataclass(slots=True)
class _Head:
    """The rows of a checkpoint: its header and each key's links, newest first, with data."""

    checkpoint_id: str | None  # (None: the thread has no checkpoint yet)
    header: bytes
    chains: _Chains
    data_version: int
    size: int = 0  # the bytes of its links' data


@dataclass(slots=True)
class _Step:
    """A checkpoint this saver committed on ``parent`` (the thread's newest then): its own
    blob rows (as ``put`` wrote them), merged into a :class:`_Head` by the next load."""

    checkpoint_id: str
    parent: _Head | _Step
    versions: dict[str, str]
    header: bytes
    rows: list[tuple[Any, ...]]
    depth: int
    size: int  # the bytes of its rows' data and of those it stands on


MERGE_AFTER = 32
"""Steps kept unmerged at most (a long run merges as it goes: it holds no more rows)."""


class NewestHeads:
    """The rows of the newest checkpoint of up to ``max_threads`` threads (the least recently
    used forgotten first), each at most ``max_bytes`` of blobs (steps not merged yet count
    whole). Called under the saver's lock.
    """

    def __init__(self, max_threads: int = 1024, max_bytes: int = 256 * 1024) -> None:
        self.max_threads = max_threads
        self.max_bytes = max_bytes
        self._heads: collections.OrderedDict[tuple[str, str], _Head | _Step] = (
            collections.OrderedDict()
        )

    def load(
        self,
        conn: sqlite3.Connection,
        thread: str,
        ns: str,
        where: tuple[Any, Any],
        loaded: LoadedLists,
    ) -> tuple[Checkpoint | None, int] | int:
        """The thread's newest checkpoint rebuilt from the rows kept (``None``: the thread has
        none), with the file's data version; or only that version, when they are not exact
        (``loaded``: the saver's, as its loads from the file use)."""
        newest, version = conn.execute(NEWEST_ID, where).fetchone()
        data_version = int(version)
        if newest is None:  # its first checkpoint will be kept as it is stored
            self._keep(thread, ns, _Head(None, b"", {}, data_version))
            return None, data_version
        kept = self._heads.get((thread, ns))
        if kept is None or kept.checkpoint_id != newest:
            return data_version
        head = kept if isinstance(kept, _Head) else self._merged(thread, ns, kept)
        if head is None or head.data_version != data_version:
            return data_version
        self._heads.move_to_end((thread, ns))
        checkpoint = decode_header(head.header, thread, ns)
        chains = head.chains
        load_values(checkpoint, lambda key, version: list(chains[key]), None, loaded)
        return checkpoint, data_version

    def read(
        self,
        thread: str,
        ns: str,
        header: bytes,
        checkpoint: Checkpoint,
        chains: dict[str, list[Link]],
        data_version: int,
        data_of: Callable[[str, list[str]], dict[str, bytes]],
    ) -> None:
        """Keep the rows a load from the file read (``chains``: each key's links as read,
        their data filled in here where the load did not need it)."""
        if checkpoint.pending_writes:
            self.forget(thread, ns)
            return
        complete: _Chains = {}
        for key, links in chains.items():
            missing = [link[0] for link in links if not link[3]]
            found = data_of(key, missing) if missing else {}
            complete[key] = tuple(
                link if link[3] else (*link[:3], found.get(link[0], b"")) for link in links
            )
        self._keep(thread, ns, _Head(checkpoint.id, header, complete, data_version))

    def stored(self, checkpoint: Checkpoint, header: bytes, rows: list[tuple[Any, ...]]) -> None:
        """A step's checkpoint was committed on its parent, the thread's newest, with its own
        blobs in ``rows`` (as ``put`` wrote them): kept as a step on the parent's rows."""
        key = (checkpoint.thread_id, checkpoint.checkpoint_ns)
        parent = self._heads.get(key)
        if parent is None or parent.checkpoint_id != checkpoint.parent_id:
            self._heads.pop(key, None)
            return
        size = parent.size + sum(len(row[6]) for row in rows)
        if size > self.max_bytes:
            del self._heads[key]
            return
        depth = parent.depth + 1 if isinstance(parent, _Step) else 1
        step = _Step(checkpoint.id, parent, checkpoint.versions, header, rows, depth, size)
        self._heads[key] = step
        if depth >= MERGE_AFTER:
            self._merged(*key, step)

    def _merged(self, thread: str, ns: str, step: _Step) -> _Head | None:
        """The rows of ``step``'s checkpoint, its steps merged into its first parent's (kept in
        their place); None (the thread forgotten) where a key's links cannot be followed."""
        steps: dict[str, _Step] = {}
        base: _Head | _Step = step
        while isinstance(base, _Step):
            steps[base.checkpoint_id] = base
            base = base.parent
        chains: _Chains = {}
        for key, version in step.versions.items():
            links = _links(key, version, steps, base)
            if links is None:
                self.forget(thread, ns)
                return None
            chains[key] = links
        head = _Head(step.checkpoint_id, step.header, chains, base.data_version)
        return head if self._keep(thread, ns, head) else None

    def _keep(self, thread: str, ns: str, head: _Head) -> bool:
        head.size = sum(len(link[3]) for links in head.chains.values() for link in links)
        if head.size > self.max_bytes:
            self.forget(thread, ns)
            return False
        self._heads[(thread, ns)] = head
        self._heads.move_to_end((thread, ns))
        while len(self._heads) > self.max_threads:
            self._heads.popitem(last=False)
        return True

    def forget(self, thread: str, ns: str | None = None) -> None:
        """Forget the thread's rows (in namespace ``ns``; ``None``: in every namespace)."""
        if ns is not None:
            self._heads.pop((thread, ns), None)
            return
        for key in [key for key in self._heads if key[0] == thread]:
            del self._heads[key]


def _links(key: str, version: str, steps: dict[str, _Step], base: _Head) -> tuple[Link, ...] | None:
    """``key``'s links at ``version``, newest first: from the steps' rows back to a full copy,
    or into ``base``'s chain (where a part's base is); None where they cannot be followed."""
    links: list[Link] = []
    at: str | None = version
    while at is not None and at in steps:
        row = next((row for row in steps[at].rows if _name_of(row[2]) == key), None)
        if row is None:
            return None
        links.append((at, row[4], row[5], row[6]))
        at = follows(row[4], row[5], at)
    if at is not None:  # (a part merging several appends to one further back)
        before = base.chains.get(key, ())
        start = next((n for n, link in enumerate(before) if link[0] == at), None)
        if start is None:
            return None
        links.extend(before[start:])
    return tuple(links)
