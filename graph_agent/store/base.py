"""The base class of the stores: long-term memory shared across threads, written once.

A store keeps JSON-like ``dict`` values under a *namespace* (a tuple of strings, e.g.
``("memories", "user-42")``) and a key. Every backend shares the logic here: checking input,
serializing values (the checkpoints' safe serializer, with its size and depth limits), TTLs,
filters, pagination, the embedding of indexed fields and ranking by cosine similarity. A backend
only says how rows are read and written (:class:`BaseStore`'s ``_``-methods).

Namespaces are stored as text no label can fool: each label percent-encoded (so it holds no
``/``), each followed by ``/``. The items under the prefix ``("a", "b")`` are exactly the rows
whose text starts with ``a/b/``, found by a range comparison (never ``LIKE``): a label holding
``%``, ``_``, ``.``, ``/`` or any other character matches only itself.

The pieces this class puts together: :mod:`~graph_agent.store.items` (the item, the
operations, a backend's rows), :mod:`~graph_agent.store.values` (namespaces as text, stored
values), :mod:`~graph_agent.store.filters` and :mod:`~graph_agent.store.checks` (input).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, Literal, Self

from graph_agent.checkpoint.serde import dumps
from graph_agent.graph.concurrency import start_thread, to_thread
from graph_agent.graph.errors import GraphAgentError
from graph_agent.store.checks import (
    _check_place,
    _check_search,
    _check_ttl_settings,
    _checked,
)
from graph_agent.store.embeddings import IndexConfig, check_dims, index_config, texts_at
from graph_agent.store.errors import StoreError, StoreInputError
from graph_agent.store.filters import _Hit, _matching, _needles
from graph_agent.store.items import (
    NOT_PROVIDED,
    GetOp,
    Item,
    ListNamespacesOp,
    NotProvided,
    Op,
    PutOp,
    Row,
    SearchOp,
    Write,
)
from graph_agent.store.values import (
    _item,
    decode_namespace,
    dot,
    encode_namespace,
    literal_head,
    load_value,
    namespace_matches,
)

__all__ = [
    "NOT_PROVIDED",
    "BaseStore",
    "GetOp",
    "Item",
    "ListNamespacesOp",
    "PutOp",
    "SearchOp",
    "StoreError",
    "StoreInputError",
    "now",
]


MOST_ROWS: Final = 2**63 - 1
"""The most rows a search can skip or return: the largest integer SQLite and PostgreSQL take
(``LIMIT``/``OFFSET`` are 64-bit). A larger ``limit`` or ``offset`` is valid and means the same
page: no store holds that many rows (an offset past them all gives an empty page)."""


def now() -> float:
    """The store's clock (seconds since the epoch): a seam tests pin to move time on."""
    return time.time()


class BaseStore:
    """Long-term memory: dict values under namespaced keys, shared across threads.

    Subclasses implement the row primitives (``_read``, ``_write``, ``_scan``, ``_vectors``,
    ``_namespaces``, ``_refresh``, ``_sweep``); everything else is here, once. Every method
    has an async twin (``aget``, ``aput``, ...), and :meth:`batch` / :meth:`abatch` run many
    operations in one call.

    Args:
        index: ``{"embed": fn(texts) -> vectors, "fields": ["text"]}`` makes
            ``search(query=...)`` rank items by the cosine similarity of their embedded
            fields (each field path embedded apart; an item scores its best field).
            ``fields`` defaults to ``["$"]``, the whole value. See
            :mod:`graph_agent.store.embeddings` for a local and an OpenAI-compatible embedder.
        sweep_interval: Seconds between background sweeps of expired items (``None``: none;
            expired items are never returned either way, and :meth:`sweep` removes them).
        default_ttl: Minutes an item lives when its put gives no ``ttl`` (``None``: forever;
            a put's ``ttl=None`` is forever whatever this says).
        refresh_on_read: Whether a read (``get``, ``search``) restarts the TTL of the items
            it returns when it does not say (``refresh_ttl=None``).

    Example:
        >>> from graph_agent.store import InMemoryStore
        >>> store = InMemoryStore()
        >>> store.put(("users", "u1"), "name", {"text": "Ada"})
        >>> store.get(("users", "u1"), "name").value
        {'text': 'Ada'}
        >>> [item.key for item in store.search(("users",), filter={"text": "Ada"})]
        ['name']
    """

    def __init__(
        self,
        *,
        index: Mapping[str, Any] | None = None,
        sweep_interval: float | None = None,
        default_ttl: float | None = None,
        refresh_on_read: bool = True,
    ) -> None:
        _check_ttl_settings(default_ttl, refresh_on_read)
        self.index: IndexConfig | None = index_config(index) if index is not None else None
        self.default_ttl = default_ttl
        """Minutes an item lives when its put gives no ``ttl`` (``None``: forever)."""
        self.refresh_on_read = refresh_on_read
        """Whether a read that does not say restarts the TTL of the items it returns."""
        self._sweeper: threading.Thread | None = None
        self._stop_sweeping = threading.Event()
        self._sweep_interval = sweep_interval
        if sweep_interval is not None and sweep_interval <= 0:
            raise StoreInputError(
                f"sweep_interval={sweep_interval!r}: give the seconds between sweeps (> 0), or "
                "None for no background sweep"
            )

    def _start_sweeper(self) -> None:
        """Start the background sweep, if asked for (subclasses call it once set up)."""
        interval = self._sweep_interval
        if interval is None:
            return
        stop = self._stop_sweeping

        def sweep_until_stopped() -> None:
            while not stop.wait(interval):
                try:
                    self.sweep()
                except GraphAgentError:
                    continue  # the next sweep tries again; reads never return expired items

        self._sweeper = start_thread(sweep_until_stopped, name="graph_agent-store-sweep")

    def close(self) -> None:
        """Stop the background sweep (subclasses also close their connections)."""
        self._stop_sweeping.set()
        if self._sweeper is not None and self._sweeper is not threading.current_thread():
            self._sweeper.join()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # the public API
    def get(
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        """The item at ``namespace`` and ``key``, or None (also once it expired); with
        ``refresh_ttl`` (None: the store's ``refresh_on_read``), its TTL restarts."""
        _check_place(namespace, key)
        return self._get(namespace, key, refresh_ttl, now())  # no GetOp: a get is that cheaper

    def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        ttl: float | NotProvided | None = NOT_PROVIDED,
        *,
        index: Literal[False] | Sequence[str] | None = None,
    ) -> None:
        """Store ``value`` (a dict) at ``namespace`` and ``key``, replacing what was there.

        Args:
            ttl: Minutes the item lives after it was last written or read; None: forever;
                not given: the store's ``default_ttl``.
            index: The field paths to embed for this item (None: the store's; False: none).
        """
        self.batch([PutOp(namespace=namespace, key=key, value=value, ttl=ttl, index=index)])

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        """Remove the item (nothing happens when there is none)."""
        self.batch([PutOp(namespace=namespace, key=key, value=None)])

    def search(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> list[Item]:
        """Items whose namespace starts with ``namespace_prefix``.

        Args:
            query: Rank by similarity to this text (needs ``index``); without it items come
                newest first.
            filter: Keep items whose value matches every entry: ``{"field": value}`` (equal),
                or ``{"field": {"$gt": 3}}`` with ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``,
                ``$lte``; a dotted name (``"a.b"``) reads a nested field. An item without the
                field never matches (not even ``$ne``), nor does a value that does not compare
                (``{"$gt": 3}`` and a string).
            limit: At most this many items (an int >= 0, however large).
            offset: Skip this many matching items first (pagination; past the last item the
                page is empty, as a list slice, on every backend).
            refresh_ttl: Restart the TTL of the items found (None: the store's
                ``refresh_on_read``).
        """
        # no SearchOp and no batch: a search is that cheaper (what batch adds is for puts)
        _check_search(namespace_prefix, filter, limit, offset)
        return self._search(namespace_prefix, query, filter, limit, offset, refresh_ttl, now())

    def list_namespaces(
        self,
        prefix: tuple[str, ...] | None = (),
        max_depth: int | None = None,
        *,
        suffix: tuple[str, ...] | None = (),
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        """The namespaces holding items, sorted, as LangGraph's ``list_namespaces`` lists them.

        Args:
            prefix: Only namespaces starting with these labels (``"*"``: any label there).
            max_depth: Each namespace found cut to its first ``max_depth`` labels (and listed
                once): the prefix and suffix are matched on the whole namespace first.
            suffix: Only namespaces ending with these labels (``"*"``: any label there).
            limit: At most this many namespaces.
            offset: Skip this many first.

        Example:
            >>> from graph_agent.store import InMemoryStore
            >>> store = InMemoryStore()
            >>> for user in ("u1", "u2"):
            ...     store.put(("users", user, "prefs"), "k", {})
            >>> store.list_namespaces(("users", "*", "prefs"), max_depth=2)
            [('users', 'u1'), ('users', 'u2')]
        """
        op = _list_op(prefix, suffix, max_depth, limit, offset)
        result: list[tuple[str, ...]] = self.batch([op])[0]
        return result

    def batch(self, ops: Iterable[Op]) -> list[Any]:
        """Run ``ops`` in order; one result per op (see each op's class). Puts in a row are
        written in one transaction, their indexed fields embedded in one call."""
        checked = [_checked(op) for op in ops]
        at = now()
        results: list[Any] = []
        puts: list[PutOp] = []
        for op in checked:
            if isinstance(op, PutOp):
                puts.append(op)
                results.append(None)
                continue
            if puts:
                self._write(self._to_writes(puts, at))
                puts = []
            if isinstance(op, GetOp):
                results.append(self._get(op.namespace, op.key, op.refresh_ttl, at))
            elif isinstance(op, SearchOp):
                results.append(
                    self._search(
                        op.namespace_prefix,
                        op.query,
                        op.filter,
                        op.limit,
                        op.offset,
                        op.refresh_ttl,
                        at,
                    )
                )
            else:
                results.append(self._list(op, at))
        if puts:
            self._write(self._to_writes(puts, at))
        return results

    def sweep(self) -> int:
        """Delete the expired items; how many were deleted."""
        return self._sweep(now())

    # async twins: the same calls on a worker thread (the in-memory store answers inline)
    async def abatch(self, ops: Iterable[Op]) -> list[Any]:
        ops = list(ops)
        return await to_thread(self.batch, ops)

    async def aget(
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        result: Item | None = (
            await self.abatch([GetOp(namespace=namespace, key=key, refresh_ttl=refresh_ttl)])
        )[0]
        return result

    async def aput(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        ttl: float | NotProvided | None = NOT_PROVIDED,
        *,
        index: Literal[False] | Sequence[str] | None = None,
    ) -> None:
        await self.abatch([PutOp(namespace=namespace, key=key, value=value, ttl=ttl, index=index)])

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        await self.abatch([PutOp(namespace=namespace, key=key, value=None)])

    async def asearch(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> list[Item]:
        op = SearchOp(
            namespace_prefix=namespace_prefix,
            query=query,
            filter=filter,
            limit=limit,
            offset=offset,
            refresh_ttl=refresh_ttl,
        )
        result: list[Item] = (await self.abatch([op]))[0]
        return result

    async def alist_namespaces(
        self,
        prefix: tuple[str, ...] | None = (),
        max_depth: int | None = None,
        *,
        suffix: tuple[str, ...] | None = (),
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        op = _list_op(prefix, suffix, max_depth, limit, offset)
        result: list[tuple[str, ...]] = (await self.abatch([op]))[0]
        return result

    async def asweep(self) -> int:
        return await to_thread(self.sweep)

    # the shared logic
    def _to_writes(self, ops: Sequence[PutOp], at: float) -> list[Write]:
        """The rows to write: values serialized, and indexed fields embedded in one call."""
        pending: list[tuple[int, str, str]] = []  # (op index, field path, text)
        writes: list[Write] = []
        for index, op in enumerate(ops):
            ns = encode_namespace(op.namespace)
            if op.value is None:
                writes.append(Write(ns=ns, key=op.key, data=None, at=at, expires_at=None, ttl=None))
                continue
            data = dumps(op.value, root=f"store value {op.key!r}")
            ttl = self.default_ttl if op.ttl is NOT_PROVIDED else op.ttl
            expires_at = at + ttl * 60 if ttl is not None else None
            writes.append(
                Write(ns=ns, key=op.key, data=data, at=at, expires_at=expires_at, ttl=ttl)
            )
            if self.index is not None and op.index is not False:
                fields = self.index.fields if op.index is None else tuple(op.index)
                for path, text in texts_at(op.value, fields):
                    pending.append((index, path, text))
        if pending:
            assert self.index is not None
            vectors = self.index.embed_texts([text for _, _, text in pending])
            first, at_path, _ = pending[0]  # the vectors have one length: checking one will do
            check_dims(
                self.index, vectors[0], lambda: f"field {at_path!r} of item {ops[first].key!r}"
            )
            for (index, path, _), vector in zip(pending, vectors, strict=True):
                writes[index].vectors[path] = vector
        return writes

    def _get(
        self, namespace: tuple[str, ...], key: str, refresh_ttl: bool | None, at: float
    ) -> Item | None:
        row = self._read(encode_namespace(namespace), key, at)
        if row is None:
            return None
        if row.ttl is not None and (self.refresh_on_read if refresh_ttl is None else refresh_ttl):
            self._refresh([(row.ns, row.key, row.ttl)], at)
        return _item(row, load_value(row.data), None, namespace)

    def _search(
        self,
        namespace_prefix: tuple[str, ...],
        query: str | None,
        filter: Mapping[str, Any] | None,
        limit: int,
        offset: int,
        refresh_ttl: bool | None,
        at: float,
    ) -> list[Item]:
        if refresh_ttl is None:
            refresh_ttl = self.refresh_on_read
        prefix = encode_namespace(namespace_prefix)
        if offset + limit > MOST_ROWS:  # past what a database counts: the same page, in range
            offset = min(offset, MOST_ROWS)
            limit = MOST_ROWS - offset
        if query is None and not filter:  # the usual search: a page of the newest rows
            rows = self._scan(prefix, at, limit, offset)
            if refresh_ttl:
                self._refresh_read(rows, at)
            return [_item(row, load_value(row[2])) for row in rows]
        hits: list[_Hit]
        if query is not None:
            if self.index is None:
                raise StoreInputError(
                    f"search(query={query!r}) ranks by meaning, and this store has no "
                    "index: make it with index={'embed': fn, 'fields': [...]} (e.g. "
                    "graph_agent.store.HashEmbeddings()), or search with filter= instead"
                )
            query_vector = self.index.embed_texts([query])[0]
            check_dims(self.index, query_vector, lambda: f"the query {query!r:.80}")
            if filter:
                ranked = self._ranked(prefix, query_vector, at, None, 0)
                hits = _matching(ranked, filter, limit, offset)
            else:
                ranked = self._ranked(prefix, query_vector, at, limit, offset)
                hits = [(row, score, load_value(row.data)) for row, score in ranked]
        else:
            assert filter  # for mypy: the plain search returned above
            hits = _matching(self._pages(prefix, at, filter, limit, offset), filter, limit, offset)
        if refresh_ttl:
            self._refresh_read([row for row, _, _ in hits], at)
        return [_item(row, value, score) for row, score, value in hits]

    def _refresh_read(self, rows: Sequence[Row], at: float) -> None:
        """Move the expiry of the rows just read that have a TTL."""
        expiring = [(row.ns, row.key, row.ttl) for row in rows if row.ttl is not None]
        if expiring:
            self._refresh(expiring, at)

    def _pages(
        self, prefix: str, at: float, filter: Mapping[str, Any], limit: int, offset: int
    ) -> Iterator[tuple[Row, None]]:
        """The rows under ``prefix`` (and no score), newest first, read a page at a time: a
        filtered search reads until it has its matches, not the whole namespace. (Rows written
        meanwhile may shift a page boundary: a search is not a snapshot.)"""
        needles = _needles(filter)
        wanted = offset + limit
        # a needle per filter entry: nearly every row read matches, so read about the page
        size = max(1, wanted) if len(needles) == len(filter) else max(16, 2 * wanted)
        size = min(size, MOST_ROWS)
        start = 0
        while True:
            page = self._scan(prefix, at, size, start, needles)
            for row in page:
                yield row, None
            if len(page) < size:
                return
            start += size
            size = min(2 * size, MOST_ROWS)

    def _ranked(
        self, prefix: str, query: list[float], at: float, limit: int | None, offset: int
    ) -> Iterable[tuple[Row, float | None]]:
        """Rows under ``prefix`` with vectors, best first, scored by cosine similarity, from
        ``offset`` on, at most ``limit`` (None: all): here in Python over :meth:`_vectors`; a
        backend may rank in its database instead."""
        best: dict[tuple[str, str], float] = {}
        for ns, key, vector in self._vectors(prefix, at):
            score = dot(query, vector)
            if score > best.get((ns, key), -math.inf):
                best[(ns, key)] = score
        order = sorted(best.items(), key=lambda pair: (-pair[1], pair[0]))
        if limit is not None:
            order = order[offset : offset + limit]
        elif offset:
            order = order[offset:]
        return self._rows_in_order(order, at)

    def _rows_in_order(
        self, order: Sequence[tuple[tuple[str, str], float]], at: float
    ) -> Iterator[tuple[Row, float | None]]:
        for (ns, key), score in order:
            row = self._read(ns, key, at)
            if row is not None:
                yield row, score

    def _list(self, op: ListNamespacesOp, at: float) -> list[tuple[str, ...]]:
        """The namespaces under the prefix's labels before its first ``"*"`` (read by range),
        matched on the rest of the prefix and on the suffix, then cut to ``max_depth``."""
        literal = literal_head(op.prefix)
        found: Iterable[tuple[str, ...]] = (
            decode_namespace(ns) for ns in self._namespaces(encode_namespace(literal), at)
        )
        if op.suffix or len(literal) < len(op.prefix):
            found = (ns for ns in found if namespace_matches(ns, op.prefix, op.suffix))
        if op.max_depth is not None:
            found = (ns[: op.max_depth] for ns in found)
        return sorted(set(found))[op.offset : op.offset + op.limit]

    # what a backend implements
    def _read(self, ns: str, key: str, at: float) -> Row | None:
        """The live (not expired at ``at``) row, or None."""
        raise NotImplementedError

    def _write(self, writes: Sequence[Write]) -> None:
        """Upsert (or delete) the rows and their vectors, in one transaction."""
        raise NotImplementedError

    def _scan(
        self,
        prefix: str,
        at: float,
        limit: int | None,
        offset: int,
        needles: Sequence[bytes] = (),
    ) -> Sequence[Row]:
        """Live rows whose namespace starts with ``prefix``, newest first (``updated_at``
        descending, then namespace and key); ``limit`` None: all of them. With ``needles``,
        only rows whose stored value holds each of those bytes (see :func:`_needles`)."""
        raise NotImplementedError

    def _vectors(self, prefix: str, at: float) -> Iterable[tuple[str, str, Sequence[float]]]:
        """``(ns, key, unit vector)`` of every embedded field of the live rows under ``prefix``."""
        raise NotImplementedError

    def _namespaces(self, prefix: str, at: float) -> Iterable[str]:
        """The distinct encoded namespaces of live rows under ``prefix``."""
        raise NotImplementedError

    def _refresh(self, rows: Sequence[tuple[str, str, float]], at: float) -> None:
        """Move each ``(ns, key, ttl)`` row's expiry to ``at`` + ttl minutes."""
        raise NotImplementedError

    def _sweep(self, at: float) -> int:
        """Delete the rows expired at ``at``; how many."""
        raise NotImplementedError


def _list_op(
    prefix: tuple[str, ...] | None,
    suffix: tuple[str, ...] | None,
    max_depth: int | None,
    limit: int,
    offset: int,
) -> ListNamespacesOp:
    """The op of a ``list_namespaces`` call (``None`` for a prefix or suffix: none, as
    LangGraph takes it)."""
    return ListNamespacesOp(
        prefix=() if prefix is None else prefix,
        suffix=() if suffix is None else suffix,
        max_depth=max_depth,
        limit=limit,
        offset=offset,
    )
