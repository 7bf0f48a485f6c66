"""``InMemoryStore``: a store in process memory, for tests and single-process agents."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from graph_agent.store.base import BaseStore
from graph_agent.store.items import Op, Row, Write
from graph_agent.store.values import prefix_end

__all__ = ["InMemoryStore"]


class InMemoryStore(BaseStore):
    """Items in a dict of this process (gone when it ends); values are stored serialized, so
    what comes back never aliases what was put, and what one backend refuses they all refuse.

    Args:
        index: See :class:`~graph_agent.store.base.BaseStore`.
        sweep_interval: See :class:`~graph_agent.store.base.BaseStore`.
        default_ttl: See :class:`~graph_agent.store.base.BaseStore`.
        refresh_on_read: See :class:`~graph_agent.store.base.BaseStore`.

    Example:
        >>> store = InMemoryStore()
        >>> store.put(("prefs", "u1"), "tea", {"kind": "green"})
        >>> store.list_namespaces()
        [('prefs', 'u1')]
    """

    def __init__(
        self,
        *,
        index: Mapping[str, Any] | None = None,
        sweep_interval: float | None = None,
        default_ttl: float | None = None,
        refresh_on_read: bool = True,
    ) -> None:
        super().__init__(
            index=index,
            sweep_interval=sweep_interval,
            default_ttl=default_ttl,
            refresh_on_read=refresh_on_read,
        )
        self._rows: dict[tuple[str, str], tuple[Row, float | None]] = {}
        self._vectors_of: dict[tuple[str, str], dict[str, list[float]]] = {}
        self._namespaces_sorted: list[str] = []
        """The namespaces holding rows (expired ones too, until swept), sorted."""
        self._rows_in: dict[str, int] = {}
        """How many rows each namespace holds: at 0 it leaves ``_namespaces_sorted``."""
        self._lock = threading.RLock()
        self._start_sweeper()

    async def abatch(self, ops: Iterable[Op]) -> list[Any]:
        if self.index is None:
            return self.batch(ops)  # no I/O: answered inline
        return await super().abatch(ops)  # the embedder may block (an HTTP request)

    def _live(self, key: tuple[str, str], at: float) -> Row | None:
        found = self._rows.get(key)
        if found is None or (found[1] is not None and found[1] <= at):
            return None
        return found[0]

    def _read(self, ns: str, key: str, at: float) -> Row | None:
        with self._lock:
            return self._live((ns, key), at)

    def _write(self, writes: Sequence[Write]) -> None:
        with self._lock:
            for write in writes:
                key = (write.ns, write.key)
                if write.data is None:
                    if self._rows.pop(key, None) is not None:
                        self._vectors_of.pop(key, None)
                        self._drop_row_of(write.ns)
                    continue
                earlier = self._rows.get(key)
                created = earlier[0].created_at if earlier is not None else write.at
                row = Row(
                    ns=write.ns,
                    key=write.key,
                    data=write.data,
                    created_at=created,
                    updated_at=write.at,
                    ttl=write.ttl,
                )
                self._rows[key] = (row, write.expires_at)
                self._vectors_of[key] = dict(write.vectors)
                if earlier is None:
                    self._add_row_of(write.ns)

    def _add_row_of(self, ns: str) -> None:
        held = self._rows_in.get(ns, 0)
        self._rows_in[ns] = held + 1
        if not held:
            bisect.insort(self._namespaces_sorted, ns)

    def _drop_row_of(self, ns: str) -> None:
        """One row of ``ns`` is gone; the last one takes the namespace with it, so deleted
        namespaces cost no memory (nor time in :meth:`_under`)."""
        held = self._rows_in[ns] - 1
        if held:
            self._rows_in[ns] = held
            return
        del self._rows_in[ns]
        del self._namespaces_sorted[bisect.bisect_left(self._namespaces_sorted, ns)]

    def _under(self, prefix: str) -> list[str]:
        """The namespaces holding rows under ``prefix`` (some may hold only expired ones)."""
        names = self._namespaces_sorted
        first = bisect.bisect_left(names, prefix)
        last = bisect.bisect_left(names, prefix_end(prefix))
        return names[first:last]

    def _scan(
        self,
        prefix: str,
        at: float,
        limit: int | None,
        offset: int,
        needles: Sequence[bytes] = (),
    ) -> Sequence[Row]:
        with self._lock:
            namespaces = set(self._under(prefix))
            rows = [
                row
                for (ns, key), (row, expires) in self._rows.items()
                if ns in namespaces
                and (expires is None or expires > at)
                and all(needle in row.data for needle in needles)
            ]
        rows.sort(key=lambda row: (-row.updated_at, row.ns, row.key))
        return rows[offset:] if limit is None else rows[offset : offset + limit]

    def _vectors(self, prefix: str, at: float) -> Iterable[tuple[str, str, Sequence[float]]]:
        with self._lock:
            namespaces = set(self._under(prefix))
            return [
                (ns, key, vector)
                for (ns, key), fields in self._vectors_of.items()
                if ns in namespaces and self._live((ns, key), at) is not None
                for vector in fields.values()
            ]

    def _namespaces(self, prefix: str, at: float) -> Iterable[str]:
        with self._lock:
            namespaces = set(self._under(prefix))
            return {
                ns
                for (ns, _), (_, expires) in self._rows.items()
                if ns in namespaces and (expires is None or expires > at)
            }

    def _refresh(self, rows: Sequence[tuple[str, str, float]], at: float) -> None:
        with self._lock:
            for ns, key, ttl in rows:
                found = self._rows.get((ns, key))
                if found is not None:
                    self._rows[(ns, key)] = (found[0], at + ttl * 60)

    def _sweep(self, at: float) -> int:
        with self._lock:
            expired = [
                key
                for key, (_, expires) in self._rows.items()
                if expires is not None and expires <= at
            ]
            for key in expired:
                del self._rows[key]
                self._vectors_of.pop(key, None)
                self._drop_row_of(key[0])
            return len(expired)
