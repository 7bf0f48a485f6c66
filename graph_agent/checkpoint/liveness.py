"""Whether the process that holds a SQLite lease still lives, never judged from its PID.

A PID is reused: a restarted container's app is PID 1 again on the same hostname, and an
unreaped (zombie) process still answers ``kill(pid, 0)``. A start time read from ``/proc`` does
not help across PID namespaces either: a process on the host reading ``/proc/1`` about a
container's PID 1 sees its own init. So a process that takes leases on a database holds a
*liveness lock*: a POSIX record lock on one byte, at a random offset, of the database's
``-lease`` file, and names that offset in its lease rows. The kernel drops the lock when the
process ends, however it ends (``kill -9``, OOM; a zombie holds no locks), and every process
sharing the file sees it, in any PID namespace or container of the machine. Another process
tests the byte: locked means the holder lives, free means it is gone.

Where the lock cannot be taken (no ``fcntl``, as on Windows; a file system without locks) a
lease names a random token instead, and only its expiry (and a PID that no process has) says
it is gone.
"""

from __future__ import annotations

import os
import secrets
import threading
from dataclasses import dataclass
from typing import Literal

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

Alive = Literal["alive", "dead", "unknown"]

_LOCK_PREFIX = "lock:"
_OFFSETS = 1 << 62  # lock offsets are drawn below this (off_t is 64 bits)


@dataclass(slots=True)
class _LivenessLock:
    """This process's lock on one ``-lease`` file, shared by its savers of that database."""

    fd: int
    identity: str
    users: int


_locks: dict[tuple[int, int], _LivenessLock] = {}
"""By the ``-lease`` file's (device, inode): never two descriptors of one file in a process,
since closing any descriptor of a file drops every POSIX lock the process holds on it."""
_locks_guard = threading.Lock()


def hold(lease_file: str) -> tuple[tuple[int, int] | None, str]:
    """Take (or share) this process's liveness lock on ``lease_file``; returns the key to give
    to :func:`let_go` (None when nothing was held) and the identity to write in lease rows:
    ``"lock:<offset>"``, or ``"token:<random>"`` where no lock can be taken."""
    if fcntl is None:
        return None, process_token()
    with _locks_guard:
        _settle()
        try:
            key = _file_key(lease_file)
            lock = _locks.get(key) if key is not None else None
            if lock is None:
                lock = _take(lease_file)
                key = _file_key_of(lock.fd)
                _locks[key] = lock
        except OSError:
            return None, process_token()
        lock.users += 1
        _settle()  # releases a finalizer queued meanwhile (not this lock's: it has a user)
        return key, lock.identity


def let_go(key: tuple[int, int]) -> None:
    """A saver that :func:`hold` a lock is done: the last one closes the file (dropping it).

    Often called by a finalizer, which the garbage collector may run in the middle of
    :func:`hold` on this very thread: then (or while another thread holds the guard) the
    release is queued and done by whoever holds the guard next, never waited for."""
    _let_go_later.append(key)
    if _locks_guard.acquire(blocking=False):
        try:
            _settle()
        finally:
            _locks_guard.release()


def _settle() -> None:
    """Carry out the queued releases (the guard is held)."""
    while _let_go_later:
        key = _let_go_later.pop()
        lock = _locks.get(key)
        if lock is None:
            continue
        lock.users -= 1
        if lock.users <= 0:
            del _locks[key]
            os.close(lock.fd)


_let_go_later: list[tuple[int, int]] = []
"""Releases :func:`let_go` could not do at once (appending to a list is atomic)."""


def holder_alive(key: tuple[int, int] | None, identity: str, pid: int) -> Alive:
    """Whether the process that wrote ``identity`` and ``pid`` into a lease of this host lives,
    as seen by a process holding the liveness lock ``key`` (from :func:`hold`) on the same file.

    ``"unknown"`` when the lease names no lock (a token, or a row from before locks) and some
    process has its PID: its expiry decides.
    """
    lock = _locks.get(key) if key is not None else None
    if identity == process_token() or (lock is not None and identity == lock.identity):
        return "alive"
    if lock is not None and identity.startswith(_LOCK_PREFIX):
        offset = int(identity[len(_LOCK_PREFIX) :])
        return "alive" if _locked_by_another(lock.fd, offset) else "dead"
    if _no_such_process(pid):
        return "dead"
    return "unknown"


def _take(lease_file: str) -> _LivenessLock:
    assert fcntl is not None
    fd = os.open(lease_file, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        for _ in range(8):  # another process drew the same offset: draw again
            offset = secrets.randbelow(_OFFSETS)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
            except BlockingIOError:
                continue
            except PermissionError:  # EACCES: locked, on some systems
                continue
            return _LivenessLock(fd=fd, identity=f"{_LOCK_PREFIX}{offset}", users=0)
        raise OSError("no free offset for a liveness lock")
    except BaseException:
        os.close(fd)
        raise


def _locked_by_another(fd: int, offset: int) -> bool:
    """Whether another process holds the byte at ``offset`` (taken and given back at once when
    free; a process never conflicts with its own POSIX locks)."""
    assert fcntl is not None
    try:
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, offset)
    except (BlockingIOError, PermissionError):
        return True
    fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)
    return False


def _file_key(path: str) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


def _file_key_of(fd: int) -> tuple[int, int]:
    stat = os.fstat(fd)
    return stat.st_dev, stat.st_ino


def process_token() -> str:
    """This process's random token, for leases that name no lock (made on first use)."""
    global _token
    if not _token:
        _token = f"token:{secrets.token_hex(8)}"
    return _token


_token = ""


def _no_such_process(pid: int) -> bool:
    """True when no process has this PID (POSIX ``kill(pid, 0)``; never tried on Windows,
    where ``os.kill`` would terminate the process)."""
    if os.name != "posix" or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # EPERM: it exists, owned by someone else
        return False
    return False


def _after_fork_in_child() -> None:
    """A forked child holds none of its parent's locks (POSIX locks are per process): it
    forgets them, closing its copies of the files, and takes its own when it needs them."""
    global _locks_guard, _token
    _locks_guard = threading.Lock()
    _token = ""
    for lock in _locks.values():
        os.close(lock.fd)
    _locks.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
