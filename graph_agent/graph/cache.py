"""Where ``add_node(..., cache=CachePolicy(...))`` keeps node results: the :class:`NodeCache`
protocol, which the checkpoint savers implement (so the cache lives beside the checkpoints: in
memory, in the SQLite file, in PostgreSQL), and :class:`InMemoryCache`, for a graph compiled
without a saver.

A graph uses ``CompileConfig(cache=...)`` when given, else its saver, else an
:class:`InMemoryCache` of its own. Entries are keyed by a namespace (the graph's and the node's
names) and a key (``CachePolicy.key(state)``, or a hash of the node's input: :func:`input_key`),
and expire at a wall-clock time (seconds since the epoch, so that processes sharing a file
agree); :func:`now` is the clock, a seam tests pin.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

try:  # hashlib would also load OpenSSL (3 MB) for this built-in hash
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - another Python implementation
    from hashlib import blake2b

from graph_agent.graph.task import _plain

__all__ = ["CachedValue", "InMemoryCache", "NodeCache", "input_key", "now"]


def now() -> float:
    """The cache's clock: seconds since the epoch (a module function, so tests can pin it)."""
    return time.time()


@dataclass(frozen=True, slots=True)
class CachedValue:
    """A cache hit: the node's result as it was stored (``None`` is a result too)."""

    value: Any


@runtime_checkable
class NodeCache(Protocol):
    """What the engine needs of a node cache. A value is a node's return: a dict of state keys
    or ``None``; a store that writes it out keeps it as a checkpoint keeps state (the savers'
    serializer), so what comes back is an equal copy."""

    def cache_get(self, namespace: str, key: str, now: float) -> CachedValue | None:
        """The entry, unless missing or expired at ``now`` (an expired one may be deleted)."""
        ...

    def cache_put(self, namespace: str, key: str, value: Any, expires_at: float | None) -> None:
        """Store (or replace) an entry; ``expires_at`` ``None``: it never expires."""
        ...

    async def acache_get(self, namespace: str, key: str, now: float) -> CachedValue | None: ...

    async def acache_put(
        self, namespace: str, key: str, value: Any, expires_at: float | None
    ) -> None: ...

    def cache_clear(self, namespace: str | None = None) -> None:
        """Drop the entries of ``namespace`` (a graph's ``"graph:node"``), or all of them."""
        ...


class InMemoryCache:
    """Node results in this process's memory (the cache of a graph without a saver).

    Values are kept as the node returned them: state views are read-only, so a cached update
    is no more shared than the node's own return value."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], tuple[Any, float | None]] = {}
        self._lock = threading.Lock()

    def cache_get(self, namespace: str, key: str, now: float) -> CachedValue | None:
        with self._lock:
            entry = self._entries.get((namespace, key))
            if entry is None:
                return None
            value, expires_at = entry
            if expires_at is not None and expires_at <= now:
                del self._entries[(namespace, key)]
                return None
        return CachedValue(value)

    def cache_put(self, namespace: str, key: str, value: Any, expires_at: float | None) -> None:
        with self._lock:
            self._entries[(namespace, key)] = (value, expires_at)

    async def acache_get(self, namespace: str, key: str, now: float) -> CachedValue | None:
        return self.cache_get(namespace, key, now)

    async def acache_put(
        self, namespace: str, key: str, value: Any, expires_at: float | None
    ) -> None:
        self.cache_put(namespace, key, value, expires_at)

    def cache_clear(self, namespace: str | None = None) -> None:
        with self._lock:
            if namespace is None:
                self._entries.clear()
            else:
                for entry in [k for k in self._entries if k[0] == namespace]:
                    del self._entries[entry]


def input_key(state: Any) -> str:
    """The default cache key: a hash of the node's whole input (its state view, or a Send's
    input) as canonical JSON; models by their JSON dump, other values JSON cannot hold by their
    ``repr``-free description (see ``task._plain``), so equal inputs give equal keys across
    processes."""
    data = {key: state[key] for key in state}
    try:
        text = json.dumps(data, sort_keys=True, default=_plain, separators=(",", ":"))
    except (TypeError, ValueError):  # keys of several types, or a cycle
        text = repr(sorted(map(repr, data.items())))
    return blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
