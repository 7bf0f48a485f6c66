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
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal, NamedTuple, Self, TypeAlias
from urllib.parse import quote, unquote

import msgpack

from graph_agent.checkpoint.footprint import MOST_PER_BYTE
from graph_agent.checkpoint.serde import (
    FORMAT_VERSION,
    MAX_DECODED_RATIO,
    MAX_PAYLOAD_BYTES,
    default_serializer,
    dumps,
    loads,
)
from graph_agent.graph.concurrency import start_thread, to_thread
from graph_agent.graph.errors import GraphAgentError
from graph_agent.store.embeddings import IndexConfig, check_dims, index_config, texts_at
from graph_agent.store.errors import StoreError, StoreInputError

__all__ = [
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


@dataclass(frozen=True, kw_only=True, slots=True)
class Item:
    """One stored value and where it lives.

    ``score`` is the cosine similarity to the query of a :meth:`BaseStore.search` with
    ``query=`` (``None`` otherwise).
    """

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    score: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class GetOp:
    """Read one item (result: ``Item | None``)."""

    namespace: tuple[str, ...]
    key: str
    refresh_ttl: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class PutOp:
    """Store one item, or delete it with ``value=None`` (result: ``None``).

    ``ttl`` is in minutes; ``index`` is ``None`` (the store's index fields), ``False`` (do
    not embed this item) or the field paths to embed.
    """

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] | None
    ttl: float | None = None
    index: Literal[False] | Sequence[str] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchOp:
    """Items under a namespace prefix (result: ``list[Item]``): ranked by ``query`` when the
    store has an index, else newest first; ``filter`` keeps items whose value matches."""

    namespace_prefix: tuple[str, ...]
    query: str | None = None
    filter: Mapping[str, Any] | None = None
    limit: int = 10
    offset: int = 0
    refresh_ttl: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class ListNamespacesOp:
    """The namespaces under ``prefix``, cut to ``max_depth`` labels (result: a sorted list)."""

    prefix: tuple[str, ...] = ()
    max_depth: int | None = None
    limit: int = 100
    offset: int = 0


Op: TypeAlias = GetOp | PutOp | SearchOp | ListNamespacesOp


class Row(NamedTuple):
    """An item as a backend reads it: encoded namespace, serialized value, epoch seconds (a
    tuple: a search makes one per row it reads)."""

    ns: str
    key: str
    data: bytes
    created_at: float
    updated_at: float
    ttl: float | None = None
    """Minutes: the item's ``expires_at`` moves to now + ttl when it is read."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Write:
    """A put as a backend stores it (``data`` None: delete)."""

    ns: str
    key: str
    data: bytes | None
    at: float
    """When the put was made: the row's ``updated_at`` (and ``created_at`` when new)."""
    expires_at: float | None
    ttl: float | None
    vectors: dict[str, list[float]] = field(default_factory=dict)
    """Each embedded field path's unit vector (empty: the item has no vectors)."""


_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


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
    ) -> None:
        self.index: IndexConfig | None = index_config(index) if index is not None else None
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
    def get(self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool = True) -> Item | None:
        """The item at ``namespace`` and ``key``, or None (also once it expired)."""
        _check_place(namespace, key)
        return self._get(namespace, key, refresh_ttl, now())  # no GetOp: a get is that cheaper

    def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        ttl: float | None = None,
        *,
        index: Literal[False] | Sequence[str] | None = None,
    ) -> None:
        """Store ``value`` (a dict) at ``namespace`` and ``key``, replacing what was there.

        Args:
            ttl: Minutes the item lives after it was last written or read; None: forever.
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
        refresh_ttl: bool = True,
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
        """
        # no SearchOp and no batch: a search is that cheaper (what batch adds is for puts)
        _check_search(namespace_prefix, filter, limit, offset)
        return self._search(namespace_prefix, query, filter, limit, offset, refresh_ttl, now())

    def list_namespaces(
        self,
        prefix: tuple[str, ...] = (),
        max_depth: int | None = None,
        *,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        """The namespaces holding items under ``prefix``, sorted; with ``max_depth``, each cut
        to its first ``max_depth`` labels (and listed once)."""
        op = ListNamespacesOp(prefix=prefix, max_depth=max_depth, limit=limit, offset=offset)
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
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool = True
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
        ttl: float | None = None,
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
        refresh_ttl: bool = True,
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
        prefix: tuple[str, ...] = (),
        max_depth: int | None = None,
        *,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        op = ListNamespacesOp(prefix=prefix, max_depth=max_depth, limit=limit, offset=offset)
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
            expires_at = at + op.ttl * 60 if op.ttl is not None else None
            writes.append(
                Write(ns=ns, key=op.key, data=data, at=at, expires_at=expires_at, ttl=op.ttl)
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
        self, namespace: tuple[str, ...], key: str, refresh_ttl: bool, at: float
    ) -> Item | None:
        row = self._read(encode_namespace(namespace), key, at)
        if row is None:
            return None
        if refresh_ttl and row.ttl is not None:
            self._refresh([(row.ns, row.key, row.ttl)], at)
        return _item(row, load_value(row.data), None, namespace)

    def _search(
        self,
        namespace_prefix: tuple[str, ...],
        query: str | None,
        filter: Mapping[str, Any] | None,
        limit: int,
        offset: int,
        refresh_ttl: bool,
        at: float,
    ) -> list[Item]:
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
        found = {decode_namespace(ns) for ns in self._namespaces(encode_namespace(op.prefix), at)}
        if op.max_depth is not None:
            found = {ns[: op.max_depth] for ns in found}
        return sorted(found)[op.offset : op.offset + op.limit]

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


@functools.lru_cache(maxsize=4096)
def encode_namespace(namespace: tuple[str, ...]) -> str:
    """A namespace (or prefix) as stored: each label percent-encoded, then ``/``; the items
    under a prefix are the rows whose text starts with the prefix's."""
    return "".join(quote(label, safe="", errors="surrogatepass") + "/" for label in namespace)


@functools.lru_cache(maxsize=4096)
def decode_namespace(stored: str) -> tuple[str, ...]:
    return tuple(unquote(label, errors="surrogatepass") for label in stored.split("/")[:-1])


class _Typed(Exception):
    """Raised by :func:`load_value`'s msgpack hook: the data holds an ext type."""


def _no_ext(code: int, data: bytes) -> Any:
    raise _Typed


_PLAIN_MAX: Final = 1 << 16
"""The largest stored value :func:`load_value` decodes itself: far below what makes
:func:`~graph_agent.checkpoint.serde.loads` count containers or measure the memory a load
takes (those checks apply to larger data, which goes to it)."""
if (
    _PLAIN_MAX * MOST_PER_BYTE > MAX_DECODED_RATIO * (MAX_PAYLOAD_BYTES >> 2)
    or default_serializer.max_containers < _PLAIN_MAX
):
    raise ValueError("_PLAIN_MAX must stay below the sizes serde.loads checks further")


def load_value(data: Any) -> Any:
    """A stored value: what :func:`~graph_agent.checkpoint.serde.loads` returns, faster for
    the usual value, a small JSON-like dict.

    Such a value is stored by ``dumps`` as the format byte and plain msgpack (no ext types),
    so one ``msgpack.unpackb`` that refuses every ext type, and string keys only, builds
    exactly what ``loads`` would (no hook of it runs on such data). Anything else (a
    registered type, a msgpack Timestamp, which needs a ``0xff`` byte, a non-string key,
    large or corrupt data, another format version) goes to ``loads``, which decodes it with
    the registry or raises its :class:`~graph_agent.graph.errors.SerializationError`."""
    if (
        type(data) is bytes
        and 2 <= len(data) <= _PLAIN_MAX
        and data[0] == FORMAT_VERSION
        and b"\xff" not in data  # (data[0] is the format byte, never 0xff)
    ):
        try:
            return msgpack.unpackb(data[1:], ext_hook=_no_ext)  # a copy: faster than a view
        except Exception:  # loads decodes it, or raises the precise error
            pass
    return loads(data)


def prefix_end(prefix: str) -> str:
    """The smallest text after every text starting with ``prefix`` (which ends with ``/`` or
    is empty): ``ns >= prefix AND ns < prefix_end(prefix)`` selects exactly those under it."""
    return prefix[:-1] + "0" if prefix else "\U0010ffff"  # "0" follows "/" in ASCII


def other_lengths(query: int, stored: int) -> StoreInputError:
    """The error of a query vector of ``query`` dimensions met by a stored one of ``stored``
    (every backend raises it, wherever it compares them)."""
    return StoreInputError(
        f"the query's vector has {query} dimensions and a stored one {stored}: the store holds "
        "vectors of another embedder; use the same index as when the items were put"
    )


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    """The dot product (the cosine similarity of two unit vectors)."""
    if len(a) != len(b):
        raise other_lengths(len(a), len(b))
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def _item(
    row: Row, value: Any, score: float | None = None, namespace: tuple[str, ...] | None = None
) -> Item:
    updated_at = datetime.fromtimestamp(row.updated_at, UTC)
    created = row.created_at
    item: Item = object.__new__(Item)  # a search makes one per row: skip the frozen __init__
    _set_namespace(item, decode_namespace(row.ns) if namespace is None else namespace)
    _set_key(item, row.key)
    _set_value(item, value)
    _set_created_at(item, updated_at if created == row.updated_at else _utc(created))
    _set_updated_at(item, updated_at)
    _set_score(item, score)
    return item


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


_set_namespace, _set_key, _set_value, _set_created_at, _set_updated_at, _set_score = (
    getattr(Item, name).__set__
    for name in ("namespace", "key", "value", "created_at", "updated_at", "score")
)
if set(Item.__slots__) != {"namespace", "key", "value", "created_at", "updated_at", "score"}:
    raise TypeError("_item() must set every field of Item")


_Hit: TypeAlias = tuple[Row, float | None, Any]
"""A row found by a search, its score, and its decoded value."""


def _needles(filter: Mapping[str, Any]) -> list[bytes]:
    """Bytes that the stored value of every item matching ``filter`` holds, so a backend can
    pass over most others without decoding them (the filter is still applied to what it
    returns). A field equal to a string holds that string's msgpack bytes wherever it sits
    (msgpack has one form for a string), also a ``StrEnum`` member stored through its codec
    (its text follows the ext marker, so not right after the key's bytes: the key is no part
    of the needle); other values have several forms (``1 == 1.0 == True``), and give none."""
    needles = []
    for wanted in filter.values():
        if isinstance(wanted, dict) and set(wanted) == {"$eq"}:
            wanted = wanted["$eq"]
        if type(wanted) is str:
            needle = _needle(wanted)
            if needle is not None:
                needles.append(needle)
    return needles


@functools.lru_cache(maxsize=1024)
def _needle(wanted: str) -> bytes | None:
    try:
        needle: bytes = msgpack.packb(wanted)
    except UnicodeEncodeError:  # a lone surrogate: serde stores it otherwise
        return None
    return needle


def _matching(
    found: Iterable[tuple[Row, float | None]], filter: Mapping[str, Any], limit: int, offset: int
) -> list[_Hit]:
    """The page (``offset``, ``limit``) of the rows whose value matches ``filter``, each row
    decoded once."""
    equal: list[tuple[str, Any]] = []  # top-level fields equal to a value: tested inline
    tests: list[tuple[list[str], Callable[[Any], bool]]] = []
    for name, wanted in filter.items():
        if "." not in name and not _has_operators(wanted):
            equal.append((name, wanted))
        else:
            tests.append((name.split("."), _condition(name, wanted)))
    page: list[_Hit] = []
    seen = 0
    wanted = offset + limit
    if not wanted:
        return page
    for row, score in found:
        value = load_value(row[2])
        if not isinstance(value, dict):  # no field of it can match
            continue
        for name, equal_to in equal:
            field = value.get(name, _ABSENT)
            if field is _ABSENT or not field == equal_to:  # noqa: SIM201 (as the other tests)
                break
        else:
            for path, test in tests:
                field = _lookup(value, path)
                if field is _ABSENT or not test(field):
                    break
            else:
                if seen >= offset:
                    page.append((row, score, value))
                seen += 1
                if seen >= wanted:  # stop before pulling another row: it may cost another query
                    break
    return page


_ABSENT = object()


def _lookup(value: Any, path: list[str]) -> Any:
    for part in path:
        if not isinstance(value, dict) or part not in value:
            return _ABSENT
        value = value[part]
    return value


def _has_operators(wanted: Any) -> bool:
    """Whether a filter entry's value is operators (``{"$gt": 3}``), not a value to equal."""
    return (
        isinstance(wanted, dict)
        and bool(wanted)
        and all(isinstance(k, str) and k.startswith("$") for k in wanted)
    )


def _condition(path: str, wanted: Any) -> Callable[[Any], bool]:
    if not _has_operators(wanted):
        return lambda found: bool(found == wanted)
    tests = [_comparison(path, operator, operand) for operator, operand in wanted.items()]
    return lambda found: all(test(found) for test in tests)


def _comparison(path: str, operator: str, operand: Any) -> Callable[[Any], bool]:
    if operator == "$eq":
        return lambda found: bool(found == operand)
    if operator == "$ne":
        return lambda found: bool(found != operand)
    compare = {
        "$gt": lambda a, b: a > b,
        "$gte": lambda a, b: a >= b,
        "$lt": lambda a, b: a < b,
        "$lte": lambda a, b: a <= b,
    }.get(operator)
    if compare is None:
        raise StoreInputError(
            f"filter[{path!r}] uses the operator {operator!r}; use one of {', '.join(_OPERATORS)}"
            f", e.g. {{{path!r}: {{'$gte': 3}}}}"
        )

    def ordered(found: Any) -> bool:
        try:
            return bool(compare(found, operand))
        except TypeError:  # a string field compared with a number: not a match
            return False

    return ordered


def _checked(op: Op) -> Op:
    """``op`` once its namespace, key and options are known good."""
    if isinstance(op, GetOp | PutOp):
        _check_place(op.namespace, op.key)
    if isinstance(op, PutOp):
        if op.value is not None and not isinstance(op.value, dict):
            raise StoreInputError(
                f"put(..., key={op.key!r}, value={op.value!r:.60}): a value is a dict, e.g. "
                "{'text': 'likes tea'}"
            )
        if op.ttl is not None and (not isinstance(op.ttl, int | float) or not op.ttl > 0):
            raise StoreInputError(f"ttl={op.ttl!r}: give minutes (> 0), or None to keep the item")
        if (
            op.index is not None
            and op.index is not False
            and (isinstance(op.index, str) or not all(isinstance(p, str) for p in op.index))
        ):
            raise StoreInputError(f"index={op.index!r}: give a list of field paths, or False")
    elif isinstance(op, SearchOp):
        _check_search(op.namespace_prefix, op.filter, op.limit, op.offset)
    elif isinstance(op, ListNamespacesOp):
        _check_namespace(op.prefix, "prefix", empty_ok=True)
        _check_page(op.limit, op.offset)
        if op.max_depth is not None and (type(op.max_depth) is not int or op.max_depth < 1):
            raise StoreInputError(
                f"max_depth={op.max_depth!r}: give a number of labels (>= 1) or None"
            )
    return op


def _check_search(namespace_prefix: Any, filter: Any, limit: Any, offset: Any) -> None:
    _check_namespace(namespace_prefix, "namespace_prefix", empty_ok=True)
    _check_page(limit, offset)
    if filter is not None and not isinstance(filter, Mapping):
        raise StoreInputError(f"filter={filter!r}: give a dict, e.g. {{'kind': 'fact'}}")
    for path, wanted in (filter or {}).items():
        if type(path) is not str:
            raise StoreInputError(
                f"filter names the field {path!r}: a field is a string (a dotted one "
                "reads a nested field), e.g. {'kind': 'fact'} or {'profile.age': {'$gte': 18}}"
            )
        if isinstance(wanted, dict):
            _condition(path, wanted)  # names an unknown operator now, not at the first row


def _check_place(namespace: Any, key: Any) -> None:
    _check_namespace(namespace, "namespace", empty_ok=False)
    if type(key) is not str or not key:
        raise StoreInputError(f"key={key!r}: a key is a non-empty string, e.g. 'profile'")


def _check_namespace(namespace: Any, name: str, *, empty_ok: bool) -> None:
    if not _labels(namespace):
        raise StoreInputError(
            f"{name}={namespace!r}: a namespace is a tuple of non-empty strings, e.g. "
            "('memories', 'user-42')"
        )
    if not namespace and not empty_ok:
        raise StoreInputError(f"{name}=(): an item needs a namespace, e.g. ('memories', 'user-42')")


def _labels(namespace: Any) -> bool:
    """Whether ``namespace`` is a tuple of non-empty strings (a loop: every call checks one,
    and ``all()`` over a generator costs more than the check)."""
    if not isinstance(namespace, tuple):
        return False
    for label in namespace:  # noqa: SIM110 (the point: no generator)
        if not isinstance(label, str) or not label:
            return False
    return True


def _check_page(limit: Any, offset: Any) -> None:
    if type(limit) is not int or limit < 0:
        raise StoreInputError(f"limit={limit!r}: give a number of items (>= 0)")
    if type(offset) is not int or offset < 0:
        raise StoreInputError(f"offset={offset!r}: give a number of items to skip (>= 0)")
