"""Running plans on psycopg connections for the PostgreSQL saver (and store): psycopg imported on
first use, the sync and async drivers that feed a plan its rows, a check of an idle connection
without a round trip, and PostgreSQL errors turned into :class:`CheckpointStoreError`.

See :mod:`~graph_agent.checkpoint.postgres` for the storage model and
:mod:`~graph_agent.checkpoint.postgres_plans` for the plans these drivers run.
"""

from __future__ import annotations

import builtins
import select
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from graph_agent.checkpoint import postgres_plans as plans
from graph_agent.checkpoint.postgres_plans import Plan, T
from graph_agent.graph.errors import CheckpointStoreError

if TYPE_CHECKING:
    import psycopg


def _import_psycopg() -> tuple[ModuleType, ModuleType]:
    """psycopg and psycopg_pool, imported on first use (the ``postgres`` extra)."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise ImportError(
            "PostgresSaver needs psycopg 3 and psycopg-pool: pip install 'graph-agent[postgres]'"
        ) from exc
    return psycopg, psycopg_pool


# A plan's snapshot (``SNAPSHOT_BEGIN``) answers nothing it reads: the drivers send it with the
# plan's next statement, in one pipeline (one round trip for both, where each took one).


def _drive(conn: psycopg.Connection[Any], plan: Plan[T]) -> T:
    rows: builtins.list[tuple[Any, ...]] | None = None
    try:
        while True:
            query = plan.send(rows)  # type: ignore[arg-type]
            if query.sql == plans.SNAPSHOT_BEGIN:
                query = plan.send([])
                with conn.pipeline():
                    conn.execute(plans.SNAPSHOT_BEGIN)
                    cursor = conn.execute(query.sql, query.params, binary=True)
            elif query.read is not None:
                read = query.read
                with conn.pipeline():
                    cursor = conn.execute(query.sql, query.params, binary=True)
                    reading = conn.execute(read.sql, read.params, binary=True)
                assert read.read_rows is not None
                read.read_rows.append(reading.fetchall())
            else:
                cursor = conn.execute(query.sql, query.params, binary=True)
            rows = cursor.fetchall() if has_rows(cursor) else []
    except StopIteration as stop:
        result: T = stop.value
        return result


async def _adrive(conn: psycopg.AsyncConnection[Any], plan: Plan[T]) -> T:
    rows: builtins.list[tuple[Any, ...]] | None = None
    try:
        while True:
            query = plan.send(rows)  # type: ignore[arg-type]
            if query.sql == plans.SNAPSHOT_BEGIN:
                query = plan.send([])
                async with conn.pipeline():
                    await conn.execute(plans.SNAPSHOT_BEGIN)
                    cursor = await conn.execute(query.sql, query.params, binary=True)
            elif query.read is not None:
                read = query.read
                async with conn.pipeline():
                    cursor = await conn.execute(query.sql, query.params, binary=True)
                    reading = await conn.execute(read.sql, read.params, binary=True)
                assert read.read_rows is not None
                read.read_rows.append(await reading.fetchall())
            else:
                cursor = await conn.execute(query.sql, query.params, binary=True)
            rows = await cursor.fetchall() if has_rows(cursor) else []
    except StopIteration as stop:
        result: T = stop.value
        return result


GENERIC_PLANS = "SET plan_cache_mode = force_generic_plan"
"""What a pooled connection of the saver (and of the server's records) runs once: its
statements are planned once per connection, not at each execution. Each one finds its rows by
a key, so the plan does not depend on the values; left to choose, PostgreSQL planned some
anew at every execution (the blob chains' recursive read: about 200 µs of the server's CPU
each time, against 40 µs to run it)."""

NO_FLUSH_WAIT = "SET synchronous_commit = off"
"""What a pooled connection of a saver with ``durability="normal"`` also runs once: a commit
returns once PostgreSQL has it in its WAL buffers, not once it is on disk (about 0.2 ms of the
server's CPU per commit here, and the wait). It survives a crash of any application process;
a crash of PostgreSQL itself loses at most the last fraction of a second of commits, a suffix
of them (never a checkpoint without the ones before it), as a SQLite file in WAL mode with
``synchronous=NORMAL`` does at a power loss. A later commit that waits (the server's record of
a run's end, say) writes every one before it to disk too."""


def session_setup(*, flush_wait: bool) -> str:
    """What a pooled connection of the saver runs once (:data:`GENERIC_PLANS`, and
    :data:`NO_FLUSH_WAIT` without ``flush_wait``), as one text."""
    return GENERIC_PLANS if flush_wait else f"{GENERIC_PLANS}; {NO_FLUSH_WAIT}"


def configure(setup: str) -> Callable[[psycopg.Connection[Any]], None]:
    """A sync pool's ``configure``: runs ``setup`` (:func:`session_setup`) on each new
    connection."""

    def run(conn: psycopg.Connection[Any]) -> None:
        conn.execute(setup)  # no parameters: several statements in one query

    return run


def aconfigure(setup: str) -> Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]]:
    """An async pool's ``configure``, as :func:`configure`."""

    async def run(conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute(setup)

    return run


generic_plans = configure(GENERIC_PLANS)
ageneric_plans = aconfigure(GENERIC_PLANS)


_IDLE = 0  # libpq's PQTRANS_IDLE (psycopg.pq.TransactionStatus.IDLE)
_TUPLES_OK = 2  # libpq's PGRES_TUPLES_OK (psycopg.pq.ExecStatus.TUPLES_OK), as _IDLE above


def has_rows(cursor: psycopg.Cursor[Any] | psycopg.AsyncCursor[Any]) -> bool:
    """Whether the statement just run returned rows (possibly none): what
    ``cursor.description is not None`` tells, without making its ``Column`` objects."""
    result = cursor.pgresult
    return result is not None and result.status == _TUPLES_OK


def _snapshot_open(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether a plan left the snapshot transaction it began (``SNAPSHOT_BEGIN``) open: the
    driver ends it. A local question to libpq, no round trip."""
    return bool(conn.pgconn.transaction_status != _IDLE)


def _hung_up(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether an idle pooled connection is unusable, without a round trip.

    The server never writes to an idle session of ours unless it is ending it
    (``pg_terminate_backend``, a shutdown: an error message, then EOF), so a readable socket
    means a dead connection. (A stray parameter report would also read as dead: the pool then
    opens a new connection, which is harmless.)
    """
    if conn.closed or conn.broken:
        return True
    try:
        fd = conn.fileno()
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            return bool(poller.poll(0))
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _store_error(exc: BaseException, doing: str) -> CheckpointStoreError:
    pg, pg_pool = _import_psycopg()
    if isinstance(exc, pg_pool.PoolClosed):
        return CheckpointStoreError(f"this saver is closed (while {doing}); make a new one")
    if isinstance(exc, pg_pool.PoolTimeout):
        return CheckpointStoreError(
            f"no PostgreSQL connection was free in time while {doing} ({exc}); raise pool_size, "
            "or check for runs that hold connections"
        )
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(exc, pg.OperationalError) and (
        sqlstate is None or sqlstate.startswith(("08", "57P"))  # connection lost or shut down
    ):
        return CheckpointStoreError(
            f"lost the connection to PostgreSQL while {doing} ({_first_line(exc)}). Nothing was "
            "half-written: the thread stays at its last stored checkpoint; call again to "
            "resume from it"
        )
    return CheckpointStoreError(
        f"PostgreSQL failed while {doing}: {_first_line(exc)}. Nothing was half-written: the "
        "thread stays at its last stored checkpoint"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _where(conninfo: str) -> str:
    """The database of a DSN, for messages (never its password)."""
    pg, _ = _import_psycopg()
    try:
        parts = pg.conninfo.conninfo_to_dict(conninfo)
    except pg.ProgrammingError:
        return "the PostgreSQL database"
    host, port, dbname = parts.get("host", ""), parts.get("port", ""), parts.get("dbname", "")
    return f"PostgreSQL database {dbname or '?'} at {host or 'localhost'}:{port or 5432}"
