"""``PostgresSaver`` and ``AsyncPostgresSaver``: checkpoints in PostgreSQL, shared by many worker
processes and machines serving the same threads.

Same storage model as :mod:`~graph_agent.checkpoint.sqlite` (headers, one blob per changed key,
``full``/``delta`` blobs chained by ``base``, pending writes per task), with these choices:

- **One statement per checkpoint.** ``put`` is a single SQL statement whose data-modifying
  ``WITH`` parts move the thread's head row, insert the blobs and insert the checkpoint: one
  round trip, one transaction, so a checkpoint and its blobs are visible together or not at all.
- **Compare-and-set on a head row.** ``graph_agent_heads`` holds each thread's newest checkpoint.
  A checkpoint continuing the thread moves it with ``UPDATE ... WHERE checkpoint_id = parent``: of
  two writers on the same parent the second waits for the first's row lock, re-reads the row,
  matches nothing, and is refused with :class:`ThreadBusyError`. An explicit fork (metadata
  ``source="fork"``) moves the head unconditionally. Different threads never share a lock, and
  the saver holds no lock of its own around storage calls: throughput scales with the pool.
- **Leases: a row, bound to a live session, with an expiry.** A run's lease is a row in
  ``graph_agent_leases`` naming its owner, process, host and the *session key* of its saver: a
  random key on which the saver's dedicated lease connection holds a session advisory lock. A
  lease binds while that lock is held (the holder's PostgreSQL session is alive) and its expiry
  has not passed; a background heartbeat extends the expiry of the leases the saver holds every
  ``lease_ttl / 3`` seconds, so a node may run far longer than ``lease_ttl``. When a holder
  crashes, its connection closes, PostgreSQL drops the advisory lock and the lease is taken over
  at once; when its host is cut off (the server still thinks the session is alive), the lease is
  taken over once it expires. Why not a session advisory lock per thread: a pooled connection
  is shared by many runs and recycled by the pool, so a lock taken on it would outlive its run
  or vanish with the connection, and unlocking needs that very connection back; taking every
  thread's lock on one dedicated connection instead would funnel all the process's runs through
  it. A row per lease and one advisory lock per saver keep ``acquire`` a single statement on any
  pooled connection, for one extra connection per saver.
- **A run that lost its lease stops at its next step boundary.** A lease session cut off while
  its process lives (a terminated backend, a network blip) frees the lock just as a crash does,
  so another process may take the thread at once. The session's watcher notices at once (its
  socket turns readable), reconnects and locks the same key again: leases nobody took meanwhile
  bind again and their runs go on; those taken (or expired, when no heartbeat reached the server
  for ``lease_ttl``) are recorded as lost, and ``put``/``put_writes`` refuse to write for their
  runs with :class:`ThreadBusyError` (:meth:`PostgresSaver.check_lease`), so the next node never
  runs. That check reads two fields the watcher keeps: no round trip (nor system call) unless
  the session is in doubt. The window that remains: the node running when the lease was lost runs
  to its end, and the process that took the thread may run the same node meanwhile, so its side
  effects can happen twice (only the first of the two checkpoints is stored: history stays
  linear). A node can narrow that window by calling ``check_lease`` right before a side effect.
- **Close a saver when done** (``close()``, or ``with PostgresSaver(...) as saver:``). Its lease
  watcher refers to the saver's lease tables, not to the saver, so one nobody closed is still
  collected: it then warns (``ResourceWarning``, as an unclosed file does) and closes its pool
  and lease session, instead of holding their connections until the server has none left.
- **Connections are checked on checkout** without a round trip: an idle connection the server
  has written to (a terminated backend's last words) or closed is discarded and another taken.
  A connection lost mid-statement raises :class:`CheckpointStoreError`; nothing is half-written
  and the thread stays at its last stored checkpoint, from which the next call resumes.
- **Opaque names are bytes.** Thread ids, namespaces, keys and channels are stored as UTF-8
  ``bytea`` (PostgreSQL ``text`` cannot hold NUL), rows are keyed by the SHA-256 of the thread id
  (an index entry holds at most ~2.7 kB; ids may be longer), and only parameterised SQL is used.
- **Tables** (all prefixed ``graph_agent_``, in the DSN's ``search_path`` schema): ``heads``,
  ``checkpoints``, ``blobs`` (keyed by thread, namespace, key and version: the id of the
  checkpoint that stored it), ``writes`` (pending writes, kept in the order written), ``leases``
  and ``migrations``. Create the saver after forking worker processes, never before: a
  connection must not be shared across a ``fork``. Connect to PostgreSQL directly or through a
  session-mode pooler: the lease session's advisory lock (and prepared statements) need one
  server session per connection.

Every operation is written once, as a *plan*: a generator that yields queries and receives
their rows. :class:`PostgresSaver` runs plans on a ``psycopg_pool.ConnectionPool`` (its async
twins run in a worker thread, so they work from any event loop); :class:`AsyncPostgresSaver`
also runs them natively on an ``AsyncConnectionPool`` bound to the event loop that first uses
it. The plans are in :mod:`~graph_agent.checkpoint.postgres_plans`, the drivers that run them
in :mod:`~graph_agent.checkpoint.postgres_driver`, the lease session in
:mod:`~graph_agent.checkpoint.postgres_leases`.

Needs the ``postgres`` extra: ``pip install 'graph-agent[postgres]'``.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

from graph_agent.checkpoint import postgres_cache as cache_plans
from graph_agent.checkpoint import postgres_plans as plans
from graph_agent.checkpoint.base import Checkpoint, CheckpointSaver, Lease, _show, check_keep_last
from graph_agent.checkpoint.codec import DecodedBlobs, LoadedLists
from graph_agent.checkpoint.postgres_driver import (
    _adrive,
    _drive,
    _first_line,
    _hung_up,
    _import_psycopg,
    _snapshot_open,
    _store_error,
    _where,
    aconfigure,
    configure,
    session_setup,
)
from graph_agent.checkpoint.postgres_leases import _LeaseSession, _reclaim_unclosed
from graph_agent.checkpoint.postgres_plans import SCHEMA_VERSION, Plan, T
from graph_agent.checkpoint.postgres_retention import (
    retain_thread_plan,
    retention_page_plan,
    stored_bytes_plan,
    thread_heads_plan,
    threads_plan,
)
from graph_agent.checkpoint.thread_search import ThreadHeads
from graph_agent.graph.concurrency import to_thread
from graph_agent.graph.errors import CheckpointStoreError

if TYPE_CHECKING:
    from datetime import datetime

    import psycopg
    import psycopg_pool

    from graph_agent.checkpoint.retention import Decide, Outcome

_log = logging.getLogger(__name__)

__all__ = ["SCHEMA_VERSION", "AsyncPostgresSaver", "CheckpointStoreError", "PostgresSaver"]


class PostgresSaver(CheckpointSaver):
    """Checkpoints in PostgreSQL, for several worker processes or machines on the same threads.

    Creates its tables on first use (see :meth:`setup`). Storage calls hold no lock of the
    saver's own: concurrent runs use up to ``pool_size`` connections at once. One run per thread
    across processes: see the module docstring for how leases bind and are taken over.

    The async twins (``aput``, ``aget``, ...) run the sync methods in a worker thread, so they
    work from any event loop; :class:`AsyncPostgresSaver` runs them natively.

    Args:
        dsn: A libpq connection string or URI, e.g. ``"postgresql://app@db:5432/agents"``;
            ``options=-c search_path=...`` selects the schema holding the tables.
        pool_size: Most connections the pool opens (one more is kept for leases).
        lease_ttl: Seconds a lease outlives its holder's last heartbeat when the holder's host
            is unreachable (a crashed process's lease is taken over at once); the holder extends
            it every ``lease_ttl / 3`` seconds, and a run whose lease lapsed and was taken
            stops before its next step.
        pool_timeout: Seconds a call waits for a free connection before failing.
        durability: ``"normal"``: a checkpoint's commit returns once PostgreSQL has it in its
            WAL buffers (``synchronous_commit = off`` on the saver's connections): it survives
            a crash of any application process, and a crash of PostgreSQL itself loses at
            most the last fraction of a second of checkpoints, never one without those before
            it: what ``SqliteSaver``'s default (``synchronous=NORMAL``) promises, at about a
            third of the server's CPU per commit. ``"full"``: each commit waits until it is on
            disk (PostgreSQL's default, and LangGraph's ``PostgresSaver``).

    Example (needs a running server)::

        from graph_agent import CompileConfig
        from graph_agent.checkpoint.postgres import PostgresSaver

        saver = PostgresSaver("postgresql://app@127.0.0.1:5432/agents")
        app = graph.compile(CompileConfig(saver=saver))
    """

    def __init__(
        self,
        dsn: str,
        *,
        pool_size: int = 10,
        lease_ttl: float = 30.0,
        pool_timeout: float = 30.0,
        durability: Literal["normal", "full"] = "normal",
    ) -> None:
        super().__init__()
        pg, pg_pool = _import_psycopg()
        if durability not in ("normal", "full"):
            raise ValueError(f"PostgresSaver(durability={durability!r}): give 'normal' or 'full'")
        if pool_size < 1:
            raise ValueError(f"PostgresSaver(pool_size={pool_size}): pool_size must be 1 or more")
        if lease_ttl <= 0:
            raise ValueError(f"PostgresSaver(lease_ttl={lease_ttl}): lease_ttl must be positive")
        self.conninfo = dsn
        self.pool_size = pool_size
        self.lease_ttl = lease_ttl
        self.pool_timeout = pool_timeout
        self.durability = durability
        self._setup = session_setup(flush_wait=durability == "full")
        self.where = _where(dsn)
        self._loaded = LoadedLists()
        self._session = _LeaseSession(
            dsn, lease_ttl, self._leases, self._lease_lock, self._lost_leases
        )
        try:
            # connect once directly: a wrong DSN or a down server fails here, at once
            with pg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
                self._migrate_on(conn)
        except pg.Error as exc:
            raise CheckpointStoreError(
                f"cannot use {self.where}: {_first_line(exc)}; check the DSN and that the "
                "server is running"
            ) from exc
        self._pool: psycopg_pool.ConnectionPool[Any] = pg_pool.ConnectionPool(
            dsn,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            configure=configure(self._setup),
            timeout=pool_timeout,
            name="graph_agent",
            open=True,
        )
        # a saver nobody closed: its heartbeat must not keep it (and its connections) alive
        self._finalizer = weakref.finalize(
            self, _reclaim_unclosed, self._session, self._pool, self.where
        )
        self._finalizer.atexit = False  # at exit, the process's end closes the connections

    @property
    def lease_holder_answers(self) -> Callable[[], bool] | None:
        """A check the lease heartbeat makes before it extends this saver's leases (``None``,
        the default: none). While it returns False the heartbeat is skipped, so the leases
        lapse ``lease_ttl`` after the last one, as those of a host cut off do, and another
        run may take the threads. For a holder whose runs cannot progress although this
        process (and its heartbeat thread) lives, e.g. an event loop blocked by a node's
        synchronous sleep: ``graph-agent serve`` sets it to "the loop answered lately"."""
        return self._session.holder_answers

    @lease_holder_answers.setter
    def lease_holder_answers(self, check: Callable[[], bool] | None) -> None:
        self._session.holder_answers = check

    # setup
    def setup(self) -> None:
        """Create or upgrade the tables; idempotent, and safe when processes call it at once.

        Migrations are recorded in ``graph_agent_migrations``. The constructor calls it.
        """
        self._run(plans.migrate_plan(self.where), transaction=True, doing="migrating the schema")

    def _migrate_on(self, conn: psycopg.Connection[Any]) -> None:
        with conn.transaction():
            _drive(conn, plans.migrate_plan(self.where))

    def schema_version(self) -> int:
        return self._run(plans.version_plan(), doing="reading the schema version")

    def close(self) -> None:
        """Close the pool and the lease session (further use raises)."""
        self._finalizer.detach()
        self._session.close()
        self._pool.close()

    def __enter__(self) -> PostgresSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # the sync driver
    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection checked without a round trip (see :func:`_hung_up`)."""
        pool = self._pool
        conn = pool.getconn()
        for _ in range(self.pool_size):
            if not _hung_up(conn):
                break
            conn.close()  # the pool replaces it
            pool.putconn(conn)
            conn = pool.getconn()
        try:
            yield conn
        finally:
            pool.putconn(conn)

    def _run(self, plan: Plan[T], *, doing: str, transaction: bool = False) -> T:
        pg = _import_psycopg()[0]
        try:
            with self._connection() as conn:
                if transaction:
                    with conn.transaction():
                        return _drive(conn, plan)
                try:
                    result = _drive(conn, plan)
                except BaseException:
                    if _snapshot_open(conn) and not conn.broken:
                        with contextlib.suppress(pg.Error):  # the error that got here says more
                            conn.execute("ROLLBACK")
                    raise
                if _snapshot_open(conn):
                    conn.execute("COMMIT")
                return result
        except pg.Error as exc:  # pool errors are psycopg errors too
            raise _store_error(exc, doing) from exc
        finally:
            plan.close()

    # storage
    def put(self, checkpoint: Checkpoint) -> None:
        self.check_lease(checkpoint.thread_id, checkpoint.checkpoint_ns)
        if plans.stored_as_it_is(checkpoint):
            self._run(plans.put_plan(checkpoint), doing=_saving(checkpoint))
        else:
            plan = plans.checked_put_plan(checkpoint)
            self._run(plan, doing=_saving(checkpoint), transaction=True)

    def put_releasing(self, checkpoint: Checkpoint, lease: Lease) -> None:
        """``put(checkpoint)`` for a run's last checkpoint, its ``lease``'s row deleted in the
        same statement (one round trip fewer per run: the drivers call it). The lease is still
        held in this process until :meth:`release`, which then has nothing to write. If the
        put fails, the row stays and ``release`` deletes it as usual. A subclass that
        overrides ``put`` gets its ``put`` called instead."""
        if type(self).put is not PostgresSaver.put or not plans.stored_as_it_is(checkpoint):
            self.put(checkpoint)
            return
        self.check_lease(checkpoint.thread_id, checkpoint.checkpoint_ns)
        self._run(plans.put_plan(checkpoint, release=lease), doing=_saving(checkpoint))
        self._released_with_put(lease)

    def _released_with_put(self, lease: Lease) -> None:
        """The lease's row went with a put: :meth:`release` writes nothing, and heartbeats
        skip it (they would take it for lost)."""
        self._rows_gone.add(lease.owner)
        self._session.gave_back(lease.owner)

    def put_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        writes: Sequence[tuple[str, Any]],
    ) -> None:
        self.check_lease(thread_id, checkpoint_ns)
        plan = plans.put_writes_plan(thread_id, checkpoint_ns, checkpoint_id, task_id, writes)
        self._run(plan, doing=_saving_writes(thread_id, checkpoint_id))

    def get(
        self, thread_id: str, checkpoint_id: str | None = None, checkpoint_ns: str = ""
    ) -> Checkpoint | None:
        plan = plans.get_plan(thread_id, checkpoint_id, checkpoint_ns, loaded=self._loaded)
        return self._run(plan, doing=f"loading thread {_show(thread_id)}")

    def list(
        self,
        thread_id: str,
        limit: int | None = None,
        before: str | None = None,
        checkpoint_ns: str = "",
    ) -> Iterator[Checkpoint]:
        doing = f"listing thread {_show(thread_id)}"
        ids = self._run(plans.ids_plan(thread_id, limit, before, checkpoint_ns), doing=doing)
        decoded = DecodedBlobs()
        for checkpoint_id in ids:  # a connection per checkpoint: none is held while paused here
            plan = plans.get_plan(thread_id, checkpoint_id, checkpoint_ns, decoded)
            checkpoint = self._run(plan, doing=doing)
            if checkpoint is not None:  # None: pruned or deleted since the listing began
                yield checkpoint

    def delete_thread(self, thread_id: str) -> None:
        plan = plans.delete_thread_plan(thread_id)
        self._run(plan, doing=f"deleting thread {_show(thread_id)}")

    def copy_thread(self, src_thread_id: str, dst_thread_id: str) -> None:
        plan = plans.copy_thread_plan(src_thread_id, dst_thread_id)
        self._run(plan, doing=_copying(src_thread_id, dst_thread_id), transaction=True)

    def prune(self, thread_id: str, keep_last: int) -> int:
        check_keep_last(keep_last)
        return self._run(
            plans.prune_plan(thread_id, keep_last),
            doing=f"pruning thread {_show(thread_id)}",
            transaction=True,
        )

    def threads(self) -> builtins.list[str]:
        return self._run(threads_plan(), doing="listing threads")

    def _retention_page(
        self, after: Any, limit: int
    ) -> tuple[builtins.list[tuple[str, datetime | None]], Any]:
        return self._run(retention_page_plan(after, limit), doing="sweeping threads")

    def _retain_thread(self, thread_id: str, decide: Decide) -> tuple[Outcome, int]:
        plan = retain_thread_plan(thread_id, decide)
        return self._run(plan, doing=f"sweeping thread {_show(thread_id)}", transaction=True)

    def _thread_heads(self, limit: int, offset: int) -> builtins.list[ThreadHeads]:
        return self._run(thread_heads_plan(limit, offset), doing="searching threads")

    def _cache_read(self, namespace: str, key: str, now: float) -> bytes | None:
        plan = cache_plans.cache_read_plan(namespace, key, now)
        return self._run(plan, doing="reading the node cache")

    def _cache_write(self, namespace: str, key: str, data: bytes, expires_at: float | None) -> None:
        plan = cache_plans.cache_write_plan(namespace, key, data, expires_at)
        self._run(plan, doing="writing the node cache")

    def _cache_delete(self, namespace: str | None) -> None:
        self._run(cache_plans.cache_delete_plan(namespace), doing="clearing the node cache")

    def stored_bytes(self, thread_id: str) -> int:
        """Bytes of checkpoint data stored for a thread (headers, blobs and pending writes)."""
        return self._run(stored_bytes_plan(thread_id), doing="measuring a thread")

    # one run per thread, across processes
    def acquire(self, thread_id: str, checkpoint_ns: str = "") -> Lease:
        lease = CheckpointSaver.acquire(self, thread_id, checkpoint_ns)
        try:
            self._session.ensure()
            for _ in range(2):
                plan = plans.acquire_plan(lease, self._session.key, self.lease_ttl)
                started = time.monotonic()
                if self._run(plan, doing=f"taking thread {_show(thread_id)}"):
                    self._session.took(lease.owner, started)
                    return lease
                self._session.reconnect()
            raise CheckpointStoreError(
                f"could not keep a lease session open on {self.where}; check the server"
            )
        except BaseException:
            CheckpointSaver.release(self, lease)
            raise

    def release(self, lease: Lease) -> None:
        """Give the thread back. Never raises for a lost connection (it runs in ``finally``
        blocks): the lease is then deleted by the next heartbeat, or lapses."""
        try:
            if not self._row_gone(lease):
                plan = plans.release_plan(lease)
                self._run(plan, doing=f"releasing thread {_show(lease.thread_id)}")
        except CheckpointStoreError as exc:
            self._session.forget_later(lease.owner)
            _log.warning("graph_agent: %s", exc)
        finally:
            self._session.gave_back(lease.owner)
            CheckpointSaver.release(self, lease)

    async def aacquire(self, thread_id: str, checkpoint_ns: str = "") -> Lease:
        return await to_thread(self.acquire, thread_id, checkpoint_ns)

    async def arelease(self, lease: Lease) -> None:
        await to_thread(self.release, lease)

    def check_lease(self, thread_id: str, checkpoint_ns: str = "") -> None:
        """Raise :class:`ThreadBusyError` if this saver's lease on the thread was lost.

        ``put`` and ``put_writes`` call it first, so a run that lost its lease stops at its
        next step boundary, before the next node runs. When the lease session is up and the
        last heartbeat is recent (the usual case) it costs no round trip; otherwise it asks the
        server first (reconnecting the session, which revives the lease if nobody took it).

        What remains: a node that was running when the lease was lost runs to its end, and
        another process may run the same node meanwhile (its side effects happen twice);
        only the first of the two checkpoints is stored. A node may call this before a side
        effect to narrow that window (see :meth:`CheckpointSaver.check_lease`).
        """
        if self._lease_in_doubt(thread_id, checkpoint_ns):
            self._session.confirm()
            CheckpointSaver.check_lease(self, thread_id, checkpoint_ns)

    def _lease_in_doubt(self, thread_id: str, checkpoint_ns: str) -> bool:
        """Whether this saver holds the thread's lease and cannot vouch for it without asking
        the server (or already knows it lost it)."""
        if not self._leases:
            return False
        owner = self._leases.get((thread_id, checkpoint_ns))
        if owner is None:
            return False
        return owner in self._lost_leases or not self._session.trusted()


class AsyncPostgresSaver(PostgresSaver):
    """A :class:`PostgresSaver` whose async methods are natively async.

    ``aput``, ``aput_writes``, ``aget``, ``alist``, ``acopy_thread``, ``aacquire`` and
    ``arelease`` run on an ``AsyncConnectionPool`` opened in the event loop that first calls one
    of them, and bound to it: make the saver inside the loop that serves your runs (a
    server's), e.g. in ``async with``. The sync methods (``get_state``, a node's
    ``task.record``, ``prune``...) keep using the sync pool and work from any thread.

    Example (needs a running server)::

        async def serve(dsn):
            async with AsyncPostgresSaver(dsn) as saver:
                app = graph.compile(CompileConfig(saver=saver))
                await app.ainvoke({"topic": "x"}, RunnableConfig(thread_id="t1"))
    """

    def __init__(
        self,
        dsn: str,
        *,
        pool_size: int = 10,
        lease_ttl: float = 30.0,
        pool_timeout: float = 30.0,
        durability: Literal["normal", "full"] = "normal",
    ) -> None:
        super().__init__(
            dsn,
            pool_size=pool_size,
            lease_ttl=lease_ttl,
            pool_timeout=pool_timeout,
            durability=durability,
        )
        self._apool: psycopg_pool.AsyncConnectionPool[Any] | None = None
        self._aloop: asyncio.AbstractEventLoop | None = None
        self._aopening: asyncio.Task[None] | None = None
        # the newest header of each thread whose lease aacquire just took, read with the lease
        # (one round trip for both): the run's first aget starts from it. Anything else the run
        # asks of the thread drops it, so it is never used after a write
        self._heads: dict[tuple[str, str], builtins.list[tuple[Any, ...]]] = {}

    async def __aenter__(self) -> AsyncPostgresSaver:
        await self._async_pool()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the async pool, then the sync pool and the lease session."""
        if self._apool is not None and self._aloop is asyncio.get_running_loop():
            await self._apool.close()
        await to_thread(self.close)

    async def _async_pool(self) -> psycopg_pool.AsyncConnectionPool[Any]:
        loop = asyncio.get_running_loop()
        if self._aopening is None:
            _, pg_pool = _import_psycopg()
            pool = pg_pool.AsyncConnectionPool(
                self.conninfo,
                min_size=1,
                max_size=self.pool_size,
                kwargs={"autocommit": True},
                configure=aconfigure(self._setup),
                timeout=self.pool_timeout,
                name="graph_agent-async",
                open=False,
            )
            self._apool, self._aloop = pool, loop
            self._aopening = loop.create_task(pool.open())
        elif self._aloop is not loop:
            raise CheckpointStoreError(
                "this AsyncPostgresSaver is bound to the event loop that first used it; make "
                "one per event loop, or use PostgresSaver, whose async methods work from any loop"
            )
        if not self._aopening.done():  # once open, no future per call
            await asyncio.shield(self._aopening)
        self._aopening.result()  # the opening's error, if it failed
        assert self._apool is not None
        return self._apool

    async def _arun(self, plan: Plan[T], *, doing: str, transaction: bool = False) -> T:
        pg = _import_psycopg()[0]
        try:
            pool = await self._async_pool()
            conn = await pool.getconn()
            try:
                for _ in range(self.pool_size):
                    if not _hung_up(conn):
                        break
                    await conn.close()
                    await pool.putconn(conn)
                    conn = await pool.getconn()
                if transaction:
                    async with conn.transaction():
                        return await _adrive(conn, plan)
                try:
                    result = await _adrive(conn, plan)
                except BaseException:
                    if _snapshot_open(conn) and not conn.broken:
                        with contextlib.suppress(pg.Error):  # the error that got here says more
                            await conn.execute("ROLLBACK")
                    raise
                if _snapshot_open(conn):
                    await conn.execute("COMMIT")
                return result
            finally:
                await pool.putconn(conn)
        except pg.Error as exc:  # pool errors are psycopg errors too
            raise _store_error(exc, doing) from exc
        finally:
            plan.close()

    async def aput(self, checkpoint: Checkpoint) -> None:
        await self._before_write(checkpoint.thread_id, checkpoint.checkpoint_ns)
        if plans.stored_as_it_is(checkpoint):
            await self._arun(plans.put_plan(checkpoint), doing=_saving(checkpoint))
        else:
            plan = plans.checked_put_plan(checkpoint)
            await self._arun(plan, doing=_saving(checkpoint), transaction=True)

    async def aput_releasing(self, checkpoint: Checkpoint, lease: Lease) -> None:
        """:meth:`put_releasing`, natively async."""
        if type(self).aput is not AsyncPostgresSaver.aput or not plans.stored_as_it_is(checkpoint):
            await self.aput(checkpoint)
            return
        await self._before_write(checkpoint.thread_id, checkpoint.checkpoint_ns)
        await self._arun(plans.put_plan(checkpoint, release=lease), doing=_saving(checkpoint))
        self._released_with_put(lease)

    async def _before_write(self, thread_id: str, checkpoint_ns: str) -> None:
        """What every write does first: the header read with the lease is stale once the
        thread is written, and a write of a run whose lease is in doubt is checked first."""
        if self._heads:
            self._heads.pop((thread_id, checkpoint_ns), None)
        if self._lease_in_doubt(thread_id, checkpoint_ns):
            await to_thread(self.check_lease, thread_id, checkpoint_ns)

    async def aput_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        writes: Sequence[tuple[str, Any]],
    ) -> None:
        await self._before_write(thread_id, checkpoint_ns)
        plan = plans.put_writes_plan(thread_id, checkpoint_ns, checkpoint_id, task_id, writes)
        await self._arun(plan, doing=_saving_writes(thread_id, checkpoint_id))

    async def aget(
        self, thread_id: str, checkpoint_id: str | None = None, checkpoint_ns: str = ""
    ) -> Checkpoint | None:
        read = self._heads.pop((thread_id, checkpoint_ns), None) if self._heads else None
        if checkpoint_id is not None:
            read = None
        plan = plans.get_plan(
            thread_id, checkpoint_id, checkpoint_ns, loaded=self._loaded, read=read
        )
        return await self._arun(plan, doing=f"loading thread {_show(thread_id)}")

    async def alist(
        self,
        thread_id: str,
        limit: int | None = None,
        before: str | None = None,
        checkpoint_ns: str = "",
    ) -> builtins.list[Checkpoint]:
        plan = plans.list_plan(thread_id, limit, before, checkpoint_ns)
        return await self._arun(plan, doing=f"listing thread {_show(thread_id)}")

    async def acopy_thread(self, src_thread_id: str, dst_thread_id: str) -> None:
        plan = plans.copy_thread_plan(src_thread_id, dst_thread_id)
        await self._arun(plan, doing=_copying(src_thread_id, dst_thread_id), transaction=True)

    async def aacquire(self, thread_id: str, checkpoint_ns: str = "") -> Lease:
        lease = CheckpointSaver.acquire(self, thread_id, checkpoint_ns)
        try:
            if not self._session.ready:
                await to_thread(self._session.ensure)
            head = plans.head_read(thread_id, checkpoint_ns)
            for _ in range(2):
                plan = plans.acquire_plan(lease, self._session.key, self.lease_ttl, head)
                started = time.monotonic()
                if await self._arun(plan, doing=f"taking thread {_show(thread_id)}"):
                    self._session.took(lease.owner, started)
                    if head.read_rows:
                        self._heads[(thread_id, checkpoint_ns)] = head.read_rows[-1]
                    return lease
                await to_thread(self._session.reconnect)
            raise CheckpointStoreError(
                f"could not keep a lease session open on {self.where}; check the server"
            )
        except BaseException:
            CheckpointSaver.release(self, lease)
            raise

    async def arelease(self, lease: Lease) -> None:
        if self._heads:
            self._heads.pop((lease.thread_id, lease.checkpoint_ns), None)
        try:
            if not self._row_gone(lease):
                plan = plans.release_plan(lease)
                await self._arun(plan, doing=f"releasing thread {_show(lease.thread_id)}")
        except CheckpointStoreError as exc:
            self._session.forget_later(lease.owner)
            _log.warning("graph_agent: %s", exc)
        finally:
            self._session.gave_back(lease.owner)
            CheckpointSaver.release(self, lease)


def _saving(checkpoint: Checkpoint) -> str:
    return f"saving checkpoint {checkpoint.id} of thread {_show(checkpoint.thread_id)}"


def _copying(src_thread_id: str, dst_thread_id: str) -> str:
    return f"copying thread {_show(src_thread_id)} to {_show(dst_thread_id)}"


def _saving_writes(thread_id: str, checkpoint_id: str) -> str:
    return f"saving pending writes after checkpoint {checkpoint_id} of thread {_show(thread_id)}"
