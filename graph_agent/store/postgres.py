"""``PostgresStore``: a store in PostgreSQL, shared by many processes and machines (the same
database, and DSN, as :class:`~graph_agent.checkpoint.postgres.PostgresSaver` is fine).

Every call is one statement (or one transaction) on a pooled autocommit connection: no lock of
the store's own, so concurrent calls use up to ``pool_size`` connections. Only parameterised
SQL; namespaces are matched by range over their encoded text (``COLLATE "C"``), never by
``LIKE``; keys are stored as UTF-8 ``bytea`` (``text`` cannot hold NUL).

Ranking happens in SQL. With the ``pgvector`` extension available when the tables are made,
vectors are ``vector`` columns ranked by ``<#>`` (inner product); otherwise they are
``float8[]`` and the dot product of unit vectors is computed in SQL over ``unnest``. Expired
items are deleted by :meth:`~graph_agent.store.base.BaseStore.sweep` (their vectors go with
them: ``ON DELETE CASCADE``) and never returned before.

Needs the ``postgres`` extra: ``pip install 'graph-agent[postgres]'``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from graph_agent.checkpoint.postgres_driver import _first_line, _hung_up, _import_psycopg, _where
from graph_agent.checkpoint.postgres_plans import _LOCK_SPACE
from graph_agent.store.base import BaseStore, StoreError, StoreInputError
from graph_agent.store.items import Row, Write
from graph_agent.store.values import other_lengths, prefix_end

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresStore"]

_STORE_LOCK = 2  # second key of the advisory lock taken while the store's tables are made

_ITEMS = """CREATE TABLE IF NOT EXISTS graph_agent_store_items (
    namespace text COLLATE "C" NOT NULL, key bytea NOT NULL, value bytea NOT NULL,
    created_at float8 NOT NULL, updated_at float8 NOT NULL, expires_at float8, ttl float8,
    PRIMARY KEY (namespace, key))"""
_EXPIRY_INDEX = (
    "CREATE INDEX IF NOT EXISTS graph_agent_store_items_expiry ON graph_agent_store_items "
    "(expires_at) WHERE expires_at IS NOT NULL"
)
_RECENT_INDEX = (
    "CREATE INDEX IF NOT EXISTS graph_agent_store_items_recent ON graph_agent_store_items "
    "(namespace, updated_at DESC, key)"
)
_VECTORS = """CREATE TABLE IF NOT EXISTS graph_agent_store_vectors (
    namespace text COLLATE "C" NOT NULL, key bytea NOT NULL, field text NOT NULL,
    embedding {kind} NOT NULL, PRIMARY KEY (namespace, key, field),
    FOREIGN KEY (namespace, key) REFERENCES graph_agent_store_items ON DELETE CASCADE)"""
_VECTOR_KIND = (
    "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
    "WHERE attrelid = to_regclass('graph_agent_store_vectors') AND attname = 'embedding'"
)

_LIVE = "(expires_at IS NULL OR expires_at > %s)"
_COLUMNS = "namespace, key, value, created_at, updated_at, ttl"
_GET = (
    f"SELECT {_COLUMNS} FROM graph_agent_store_items WHERE namespace = %s AND key = %s AND {_LIVE}"
)
_UPSERT = (
    "INSERT INTO graph_agent_store_items (namespace, key, value, created_at, updated_at, "
    "expires_at, ttl) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (namespace, key) DO UPDATE "
    "SET value = excluded.value, updated_at = excluded.updated_at, "
    "expires_at = excluded.expires_at, ttl = excluded.ttl"
)
_SCAN = (
    # The items of the prefix's own namespace come newest first from the recent index, the
    # first offset + limit of them only; those of deeper namespaces (usually none) are sorted,
    # and the two are merged. (Without the limit inside, PostgreSQL reads every row of the
    # namespace, each on its own page when the items were written over time, and sorts them.)
    f"(SELECT {_COLUMNS} FROM graph_agent_store_items "
    f"WHERE namespace = %(ns)s AND {_LIVE.replace('%s', '%(at)s')}{{holding}} "
    "ORDER BY updated_at DESC, key LIMIT %(wanted)s) UNION ALL "
    f"(SELECT {_COLUMNS} FROM graph_agent_store_items "
    f"WHERE namespace > %(ns)s AND namespace < %(end)s AND {_LIVE.replace('%s', '%(at)s')}"
    "{holding} ORDER BY updated_at DESC, namespace, key LIMIT %(wanted)s) "
    "ORDER BY updated_at DESC, namespace, key LIMIT %(limit)s OFFSET %(offset)s"
)
_SCORES = {
    # the dot product of two unit vectors, in SQL; NULL for a stored vector of another length
    # (unnest would pad the shorter with NULLs, and pgvector would raise)
    "array": "CASE WHEN cardinality(v.embedding) = %(dims)s THEN "
    "(SELECT sum(a * b) FROM unnest(v.embedding, %(query)s::float8[]) AS t(a, b)) END",
    # (``<#>`` is the negative inner product: a zero vector scores 0, as in the other stores,
    # where the cosine distance ``<=>`` would give NaN, which sorts first)
    "pgvector": "CASE WHEN vector_dims(v.embedding) = %(dims)s THEN "
    "(v.embedding <#> %(query)s::vector) * -1 END",
}
_DIMS = {"array": "cardinality(v.embedding)", "pgvector": "vector_dims(v.embedding)"}
_RANK = (
    # ``s``: each live item under the prefix with vectors, its best score, and the length of a
    # stored vector unlike the query's, if it has one; referenced twice, so PostgreSQL computes
    # it once. ``m`` (one row) says whether any item has such a vector, whatever the page: the
    # page is joined to it, so the answer always has a row (its item columns NULL when the page
    # is empty), and items are read for the page's rows only.
    "WITH s AS (SELECT v.namespace, v.key, max({score}) AS score, "
    "max(NULLIF({dims}, %(dims)s)) AS other "
    "FROM graph_agent_store_vectors AS v "
    "JOIN graph_agent_store_items AS l ON l.namespace = v.namespace AND l.key = v.key "
    "WHERE v.namespace >= %(ns)s AND v.namespace < %(end)s "
    "AND (l.expires_at IS NULL OR l.expires_at > %(at)s) GROUP BY v.namespace, v.key) "
    "SELECT i.namespace, i.key, i.value, i.created_at, i.updated_at, i.ttl, p.score, m.other "
    "FROM (SELECT max(other) AS other FROM s) AS m "
    "LEFT JOIN (SELECT namespace, key, score FROM s "
    "ORDER BY score DESC NULLS LAST, namespace, key LIMIT %(limit)s OFFSET %(offset)s) AS p "
    "ON true "
    "LEFT JOIN graph_agent_store_items AS i ON i.namespace = p.namespace AND i.key = p.key "
    "ORDER BY p.score DESC NULLS LAST, p.namespace, p.key"
)


class PostgresStore(BaseStore):
    """Items in PostgreSQL, for many worker processes or machines.

    Creates its tables on first use (safe when processes start at once).

    Args:
        dsn: A libpq connection string or URI; ``options=-c search_path=...`` picks the schema.
        index: See :class:`~graph_agent.store.base.BaseStore`.
        vectors: How vectors are stored when the tables are made: ``"auto"`` (pgvector when the
            server has it, else ``float8[]``), ``"pgvector"`` or ``"array"``. Tables made
            before keep their kind.
        durability: ``"normal"``: a write returns once PostgreSQL has it in its WAL buffers
            (``synchronous_commit = off``): it survives a crash of any application process,
            and a crash of the server loses at most the last fraction of a second of writes,
            never consistency (as a SQLite file in WAL mode with ``synchronous=NORMAL``).
            ``"full"``: a write returns once flushed to disk (the server's default).
        pool_size: Most connections open at once.
        pool_timeout: Seconds a call waits for a free connection.
        sweep_interval: See :class:`~graph_agent.store.base.BaseStore`.
        default_ttl: See :class:`~graph_agent.store.base.BaseStore`.
        refresh_on_read: See :class:`~graph_agent.store.base.BaseStore`.

    Example (needs a running server)::

        store = PostgresStore("postgresql://app@127.0.0.1:5432/agents")
        store.put(("users", "u1"), "name", {"text": "Ada"})
    """

    def __init__(
        self,
        dsn: str,
        *,
        index: Mapping[str, Any] | None = None,
        vectors: Literal["auto", "pgvector", "array"] = "auto",
        durability: Literal["normal", "full"] = "normal",
        pool_size: int = 10,
        pool_timeout: float = 30.0,
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
        if vectors not in ("auto", "pgvector", "array"):
            raise StoreInputError(f"vectors={vectors!r}: give 'auto', 'pgvector' or 'array'")
        if durability not in ("normal", "full"):
            raise StoreInputError(f"durability={durability!r}: give 'normal' or 'full'")
        pg, pg_pool = _import_psycopg()
        self.where = _where(dsn)
        try:
            with pg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
                self.vector_kind = _setup(conn, vectors)
        except pg.Error as exc:
            raise StoreError(
                f"cannot use {self.where} for a store: {_first_line(exc)}; check the DSN and "
                "that the server is running"
            ) from exc
        self._score = _SCORES[self.vector_kind]
        self._pool = pg_pool.ConnectionPool(
            dsn,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            configure=_no_flush_wait if durability == "normal" else None,
            timeout=pool_timeout,
            name="graph_agent-store",
            open=True,
        )
        self._start_sweeper()

    def close(self) -> None:
        """Stop the sweep and close the pool (further use raises)."""
        super().close()
        self._pool.close()

    @contextlib.contextmanager
    def _using(self, doing: str, *, write: bool = False) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection (a hung-up one is replaced); with ``write``, in a transaction.
        PostgreSQL's failures become :class:`StoreError`."""
        pg = _import_psycopg()[0]
        try:
            pool = self._pool
            conn = pool.getconn()
            while _hung_up(conn):
                conn.close()
                pool.putconn(conn)
                conn = pool.getconn()
            try:
                if write:
                    with conn.transaction():
                        yield conn
                else:
                    yield conn
            finally:
                pool.putconn(conn)
        except pg.Error as exc:  # pool errors are psycopg errors too
            raise StoreError(
                f"PostgreSQL failed while {doing} ({self.where}): {_first_line(exc)}. Nothing "
                "was half-written; try again"
            ) from exc

    def _read(self, ns: str, key: str, at: float) -> Row | None:
        with self._using("reading an item") as conn:
            found = conn.execute(_GET, (ns, _bytes(key), at), binary=True).fetchone()
        return _row(found) if found is not None else None

    def _write(self, writes: Sequence[Write]) -> None:
        single = (
            len(writes) == 1
            and not writes[0].vectors
            and writes[0].data is not None
            and self.index is None
        )
        # one item, and no vectors to write or replace: one statement, no transaction round
        # trips (with an index, a put that stores no vectors must still delete the old ones)
        with self._using("writing items", write=not single) as conn:
            for write in writes:
                key = _bytes(write.key)
                if write.data is None:
                    conn.execute(
                        "DELETE FROM graph_agent_store_items WHERE namespace = %s AND key = %s",
                        (write.ns, key),
                    )
                    continue
                conn.execute(
                    _UPSERT,
                    (write.ns, key, write.data, write.at, write.at, write.expires_at, write.ttl),
                    binary=True,
                )
                if single:
                    continue
                conn.execute(
                    "DELETE FROM graph_agent_store_vectors WHERE namespace = %s AND key = %s",
                    (write.ns, key),
                )
                for field, vector in write.vectors.items():
                    conn.execute(
                        "INSERT INTO graph_agent_store_vectors (namespace, key, field, embedding) "
                        f"VALUES (%s, %s, %s, %s::{_CAST[self.vector_kind]})",
                        (write.ns, key, field, _vector_param(self.vector_kind, vector)),
                    )

    def _scan(
        self,
        prefix: str,
        at: float,
        limit: int | None,
        offset: int,
        needles: Sequence[bytes] = (),
    ) -> Sequence[Row]:
        holding = "".join(
            f" AND position(%(n{n})s::bytea IN value) > 0" for n in range(len(needles))
        )
        sql = _SCAN.format(holding=holding)
        params = {
            "ns": prefix,
            "end": prefix_end(prefix),
            "at": at,
            "limit": limit,
            "offset": offset,
            "wanted": None if limit is None else offset + limit,
        }
        params.update((f"n{n}", needle) for n, needle in enumerate(needles))
        with self._using("searching items") as conn:
            rows = conn.execute(sql, params, binary=True).fetchall()
        return [_row(found) for found in rows]

    def _ranked(
        self, prefix: str, query: list[float], at: float, limit: int | None, offset: int
    ) -> Iterable[tuple[Row, float | None]]:
        sql = _RANK.format(score=self._score, dims=_DIMS[self.vector_kind])
        params = {
            "query": _vector_param(self.vector_kind, query),
            "dims": len(query),
            "ns": prefix,
            "end": prefix_end(prefix),
            "at": at,
            "limit": limit,
            "offset": offset,
        }
        with self._using("ranking items") as conn:
            rows = conn.execute(sql, params).fetchall()
        if rows and rows[0][7] is not None:
            raise other_lengths(len(query), rows[0][7])
        # (a row with no item: the page is empty)
        return [(_row(found[:6]), float(found[6])) for found in rows if found[0] is not None]

    def _namespaces(self, prefix: str, at: float) -> Iterable[str]:
        with self._using("listing namespaces") as conn:
            rows = conn.execute(
                "SELECT DISTINCT namespace FROM graph_agent_store_items "
                f"WHERE namespace >= %s AND namespace < %s AND {_LIVE}",
                (prefix, prefix_end(prefix), at),
            ).fetchall()
        return [ns for (ns,) in rows]

    def _refresh(self, rows: Sequence[tuple[str, str, float]], at: float) -> None:
        with self._using("refreshing TTLs") as conn:
            conn.cursor().executemany(
                "UPDATE graph_agent_store_items SET expires_at = %s "
                "WHERE namespace = %s AND key = %s",
                [(at + ttl * 60, ns, _bytes(key)) for ns, key, ttl in rows],
            )

    def _sweep(self, at: float) -> int:
        with self._using("sweeping expired items") as conn:
            return conn.execute(
                "DELETE FROM graph_agent_store_items WHERE expires_at <= %s", (at,)
            ).rowcount


_CAST = {"array": "float8[]", "pgvector": "vector"}


def _no_flush_wait(conn: psycopg.Connection[Any]) -> None:
    """A new pooled connection's commits return without waiting for the disk (durability
    ``"normal"``)."""
    conn.execute("SET synchronous_commit = off")


def _setup(conn: psycopg.Connection[Any], wanted: str) -> Literal["pgvector", "array"]:
    """Make the tables (under an advisory lock: processes may start at once); the kind of
    vectors they hold."""
    pg = _import_psycopg()[0]
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_SPACE, _STORE_LOCK))
        conn.execute(_ITEMS)
        conn.execute(_EXPIRY_INDEX)
        conn.execute(_RECENT_INDEX)
        found = conn.execute(_VECTOR_KIND).fetchone()
        if found is not None:
            return "array" if found[0].startswith("double precision") else "pgvector"
        kind: Literal["pgvector", "array"] = "array"
        if wanted != "array":
            available = conn.execute(
                "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
            ).fetchone()
            if available is not None:
                try:
                    with conn.transaction():
                        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                    kind = "pgvector"
                except pg.Error:
                    pass  # no right to create it: arrays
            if wanted == "pgvector" and kind != "pgvector":
                raise StoreInputError(
                    "PostgresStore(vectors='pgvector'): the server has no pgvector extension "
                    "this role can use; install it (CREATE EXTENSION vector) or pass "
                    "vectors='auto'"
                )
        conn.execute(_VECTORS.format(kind=_CAST[kind]))
        return kind


def _vector_param(kind: str, vector: Sequence[float]) -> Any:
    if kind == "pgvector":
        return "[" + ",".join(repr(float(x)) for x in vector) + "]"
    return list(vector)


def _bytes(key: str) -> bytes:
    return key.encode("utf-8", "surrogatepass")


def _row(found: Sequence[Any]) -> Row:
    ns, key, data, created_at, updated_at, ttl = found
    return Row(ns, key.decode("utf-8", "surrogatepass"), data, created_at, updated_at, ttl)
