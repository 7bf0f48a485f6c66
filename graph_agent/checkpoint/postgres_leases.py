"""The PostgreSQL saver's lease session: one connection outside the pool holding a session
advisory lock, and a watcher thread that extends the saver's leases and notices at once when
that connection dies.

See the module docstring of :mod:`~graph_agent.checkpoint.postgres` for how leases bind, are
extended and are taken over.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import secrets
import select
import socket
import threading
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from graph_agent.checkpoint import postgres_plans as plans
from graph_agent.checkpoint.postgres_driver import _hung_up, _import_psycopg, _store_error
from graph_agent.graph.concurrency import start_thread
from graph_agent.graph.errors import CheckpointStoreError

if TYPE_CHECKING:
    import psycopg

# the saver's logger: one name for everything the PostgreSQL saver logs
_log = logging.getLogger("graph_agent.checkpoint.postgres")


class _LeaseSession:
    """The saver's lease liveness: one connection outside the pool holding a session advisory
    lock on a random key, and a watcher thread that extends the saver's leases every
    ``lease_ttl / 3`` seconds and wakes at once when that connection dies.

    Leases name the key; while this connection lives the lock is held and the leases bind. If
    the process dies, PostgreSQL ends the session and frees the lock, so other processes take
    the leases over at once. If the connection is lost while the process lives, the watcher
    reconnects at once and locks the same key again, which revives the leases nobody took
    meanwhile; those taken (or lapsed and taken: no heartbeat reached the server for
    ``lease_ttl``) are recorded as lost, and their runs stop at their next write
    (:meth:`PostgresSaver.check_lease`).

    It refers to the saver's lease tables, never to the saver, so that a saver nobody closed
    can still be collected (and its finalizer closes this session).
    """

    def __init__(
        self,
        conninfo: str,
        lease_ttl: float,
        leases: dict[tuple[str, str], str],
        leases_lock: threading.Lock,
        lost: dict[str, str],
    ) -> None:
        self.conninfo = conninfo
        self.lease_ttl = lease_ttl
        self._leases, self._leases_lock, self._lost = leases, leases_lock, lost
        self.key = secrets.randbits(63)
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._wake: tuple[socket.socket, socket.socket] | None = None
        self._forget: set[str] = set()  # owners whose release failed: deleted on the next beat
        # owners whose lease row is written (under leases_lock): what a heartbeat extends and
        # checks; a lease being acquired is in ``leases`` before its row exists
        self._confirmed: set[str] = set()
        self._suspect = False  # the connection was seen dead: the leases are in doubt
        self._deadline = 0.0  # monotonic time until which every held lease surely has not expired
        self.holder_answers: Callable[[], bool] | None = None
        """See :attr:`PostgresSaver.lease_holder_answers`."""

    @property
    def ready(self) -> bool:
        conn = self._conn
        return conn is not None and not _hung_up(conn)

    def trusted(self) -> bool:
        """Whether the held leases surely still bind, known without a round trip or a system
        call: the watcher has not seen the session die, and no lease can have expired since
        the last heartbeat. False means: :meth:`confirm` with the server."""
        return not self._suspect and self._conn is not None and time.monotonic() < self._deadline

    def ensure(self) -> None:
        """Connect and lock the key, if not done or if the connection was lost."""
        if self._watcher is not None and self.ready:
            return  # the usual case, without the lock (ready is checked again under it)
        with self._lock:
            if self._stop.is_set():
                raise CheckpointStoreError("the PostgresSaver is closed; make a new one")
            if self._conn is None or _hung_up(self._conn):
                self._connect()
            if self._watcher is None:
                self._wake = socket.socketpair()
                self._watcher = start_thread(self._watch, name="graph_agent-postgres-leases")

    def reconnect(self) -> None:
        """Reconnect the session, which an acquire found without its lock, unless the watcher
        did meanwhile: a session of ours that answers holds its lock (it is taken on connect
        and never given back), and closing it would free the saver's leases for a moment."""
        pg, _ = _import_psycopg()
        with self._lock:
            if self._conn is not None and not _hung_up(self._conn):
                try:
                    self._conn.execute("SELECT 1")
                    return
                except pg.Error:
                    pass
            self._connect()

    def took(self, owner: str, started: float) -> None:
        """``owner``'s lease was taken by a statement sent at ``started`` (monotonic): it
        expires ``lease_ttl`` later (before the last heartbeat's deadline if that heartbeat
        started after this statement, and so did not extend it)."""
        expires = started + self.lease_ttl
        with self._leases_lock:
            first = not self._confirmed
            self._confirmed.add(owner)
            self._deadline = expires if first else min(self._deadline, expires)

    def gave_back(self, owner: str) -> None:
        """``owner``'s lease was released (or is to be forgotten): heartbeats skip it."""
        with self._leases_lock:
            self._confirmed.discard(owner)

    def confirm(self) -> None:
        """Check the held leases with the server now: reconnect if the session was lost
        (locking the same key revives the leases nobody took), extend them, and record those
        found taken as lost.

        Raises:
            CheckpointStoreError: the server cannot be reached (nothing is known then).
        """
        with self._lock:
            if self._stop.is_set():
                raise CheckpointStoreError("the PostgresSaver is closed; make a new one")
            self._beat()

    def forget_later(self, owner: str) -> None:
        with self._lock:
            self._forget.add(owner)

    def close(self) -> None:
        self._stop.set()
        watcher, wake = self._watcher, self._wake
        if wake is not None:
            with contextlib.suppress(OSError):
                wake[1].send(b"x")
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join(timeout=10)
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if wake is not None:
                wake[0].close()
                wake[1].close()

    def _connect(self) -> None:
        pg, _ = _import_psycopg()
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        try:
            conn = pg.connect(self.conninfo, autocommit=True, connect_timeout=10)
            # the lock of a just-died session of ours may still be held for a moment
            for _ in range(100):
                locked = conn.execute(
                    "SELECT pg_try_advisory_lock(%s::bigint)", (self.key,)
                ).fetchone()
                if locked is not None and locked[0]:
                    break
                if self._stop.wait(0.05):
                    conn.close()
                    raise CheckpointStoreError("the PostgresSaver is closed; make a new one")
            else:  # the old session still lives (cut off from us): move our leases to a new key
                old, self.key = self.key, secrets.randbits(63)
                conn.execute("SELECT pg_advisory_lock(%s::bigint)", (self.key,))
                owners = self._held()
                conn.execute(plans.MOVE_LEASES, {"old": old, "new": self.key, "owners": owners})
        except pg.Error as exc:
            raise _store_error(exc, "opening the lease session") from exc
        self._conn = conn

    def _held(self) -> builtins.list[str]:
        """The leases this session holds: those being acquired are not written yet (a
        heartbeat would find them missing and take them for lost)."""
        with self._leases_lock:
            return sorted(self._confirmed.intersection(self._leases.values()))

    def _watch(self) -> None:
        """The watcher thread: a heartbeat every ``lease_ttl / 3`` seconds, and one at once
        when the session's connection dies (its socket turns readable: see :func:`_hung_up`)."""
        interval = self.lease_ttl / 3
        due = time.monotonic() + interval
        while True:
            readable = self._wait(due - time.monotonic())
            if self._stop.is_set():
                return
            if readable:
                self._suspect = True  # writes stop trusting the leases until the next beat
            elif time.monotonic() < due:
                continue
            answers = self.holder_answers
            if answers is not None and not answers():
                # the runs' holder is stuck: no heartbeat, so their leases lapse after
                # lease_ttl as a silent host's do; asked again soon
                self._stop.wait(min(interval, 1.0))
                due = time.monotonic()
                continue
            try:
                with self._lock:
                    if self._stop.is_set():
                        return
                    if time.monotonic() < due and self.ready:
                        self._suspect = False  # that was the reply to another thread's beat
                        continue
                    self._beat()
                due = time.monotonic() + interval
            except Exception as exc:  # retried soon; the leases bind until they expire
                _log.warning("graph_agent: could not extend PostgreSQL leases: %s", exc)
                due = time.monotonic() + min(interval, 1.0)

    def _wait(self, timeout: float) -> bool:
        """Sleep until ``timeout`` passes, :meth:`close` wakes us, or the session's socket
        turns readable (then True)."""
        assert self._wake is not None
        waker = self._wake[0]
        watched: builtins.list[Any] = [waker]
        conn = self._conn
        if conn is not None:
            try:
                watched.append(conn.fileno())
            except Exception:  # closed meanwhile
                return True
        try:
            readable, _, _ = select.select(watched, [], [], max(0.0, timeout))
        except (OSError, ValueError):  # a descriptor closed meanwhile
            return True
        return any(item is not waker for item in readable)

    def _beat(self) -> None:
        """Reconnect if needed, extend the held leases, record those found taken; under
        ``self._lock``."""
        reconnected = self._conn is None or _hung_up(self._conn)
        if reconnected:
            self._suspect = True
            self._connect()
        assert self._conn is not None
        owners, forget = self._held(), sorted(self._forget)
        started = time.monotonic()
        try:
            if owners:
                rows = self._conn.execute(
                    plans.HEARTBEAT,
                    {"ttl": self.lease_ttl, "session": self.key, "owners": owners},
                ).fetchall()
                self._record_lost(set(owners) - {owner for (owner,) in rows}, reconnected)
            if forget:
                self._conn.execute(plans.FORGET, {"session": self.key, "owners": forget})
        except Exception:
            self._conn.close()
            self._conn = None
            raise
        self._forget.difference_update(forget)
        with self._leases_lock:
            # a lease written meanwhile was not extended: it keeps the deadline ``took`` gave
            unextended = not self._confirmed.issubset(owners)
            expires = started + self.lease_ttl
            self._deadline = min(expires, self._deadline) if unextended else expires
        self._suspect = False

    def _record_lost(self, owners: set[str], reconnected: bool) -> None:
        """Leases found taken by another run (or released meanwhile: those are gone from the
        table of held leases, and ignored)."""
        if not owners:
            return
        how = (
            "its PostgreSQL lease session was cut off, and another run took the thread before "
            "it reconnected"
            if reconnected
            else f"no heartbeat reached PostgreSQL for lease_ttl={self.lease_ttl} s, so its "
            "lease expired and another run took the thread"
        )
        with self._leases_lock:
            held = set(self._leases.values())
            for owner in owners & held:
                self._lost[owner] = how


def _reclaim_unclosed(session: _LeaseSession, pool: Any, where: str) -> None:
    """The finalizer of a :class:`PostgresSaver` collected without ``close()``: warn, as an
    unclosed file does, and close its lease session and pool (on a thread of their own: a
    collection may happen on any thread, one of the pool's included, and closing joins
    threads)."""
    warnings.warn(
        f"a PostgresSaver on {where} was never closed; its connections are closed now. Call "
        "close() when done with it, or use it as a context manager (with PostgresSaver(...) "
        "as saver: ...)",
        ResourceWarning,
        stacklevel=2,
    )

    def close_both() -> None:
        with contextlib.suppress(Exception):
            session.close()
        with contextlib.suppress(Exception):
            pool.close()

    with contextlib.suppress(RuntimeError):  # at shutdown, the process's end closes them
        start_thread(close_both, name="graph_agent-reclaim")
