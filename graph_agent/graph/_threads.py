"""The one owner of the threads graph_agent starts: every module of the package starts its
threads with :func:`start_thread` (worker pools, event loops of its own, a store's sweeper, a
server's watchers), which names them and keeps them in a registry, so that
:func:`package_threads` lists what the package runs and a test can count it. (The savers in
``checkpoint/`` still hop with ``asyncio.to_thread``, and PostgreSQL's lease watcher starts its
own thread: the next to move here.)

The registry holds weak references: a thread that ended is dropped with its object. A forked
child starts with an empty registry (its parent's threads are not in it)."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

PREFIXES = ("graph-agent", "graph_agent", "tool:", "mcp:")
"""How the names of the package's threads begin (the names tell a thread dump who runs what)."""

_started: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
_lock = threading.Lock()


def start_thread(
    target: Callable[..., object],
    *,
    name: str,
    args: Iterable[Any] = (),
    daemon: bool = True,
) -> threading.Thread:
    """Start ``target(*args)`` on a new thread called ``name`` (a daemon by default: an
    abandoned call never keeps the interpreter from exiting), known to :func:`package_threads`.

    Raises:
        RuntimeError: The thread could not be started ("can't start new thread").
    """
    thread = threading.Thread(target=target, args=tuple(args), name=name, daemon=daemon)
    with _lock:
        _started.add(thread)
    try:
        thread.start()
    except BaseException:
        with _lock:
            _started.discard(thread)
        raise
    return thread


def package_threads() -> list[threading.Thread]:
    """The live threads graph_agent started (see :func:`start_thread`)."""
    with _lock:
        threads = list(_started)
    return [thread for thread in threads if thread.is_alive()]


def is_package_thread(thread: threading.Thread) -> bool:
    """Whether ``thread`` was started by :func:`start_thread`."""
    with _lock:
        return thread in _started


def _forget_threads() -> None:
    global _started, _lock
    _started, _lock = weakref.WeakSet(), threading.Lock()


os.register_at_fork(after_in_child=_forget_threads)
