"""``MemorySaver``: checkpoints in process memory, the default for agents and tests.

Values are serialized exactly as the durable savers store them, so a value that could not be
saved to SQLite fails here too, and no stored checkpoint ever aliases live state.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from graph_agent.checkpoint.base import (
    Checkpoint,
    CheckpointSaver,
    PendingWrite,
    check_keep_last,
    compare_and_set,
)
from graph_agent.checkpoint.codec import (
    decode_header,
    encode_blob,
    encode_header,
    encode_write,
    rebuild_value,
)
from graph_agent.checkpoint.serde import loads
from graph_agent.graph.engine import Blob


class _StoredBlob(NamedTuple):
    kind: str
    base: str | None
    data: bytes


_new_stored: Callable[[type[_StoredBlob], tuple[str, str | None, bytes]], _StoredBlob]
_new_stored = tuple.__new__  # _StoredBlob(*fields) without its Python-level __new__


class MemorySaver(CheckpointSaver):
    """Keeps checkpoints in a dict; gone when the process ends.

    Example:
        >>> from graph_agent import MemorySaver, CompileConfig
        >>> config = CompileConfig(saver=MemorySaver())
    """

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.RLock()
        self._headers: dict[tuple[str, str], dict[str, bytes]] = {}
        self._heads: dict[tuple[str, str], str] = {}  # the newest checkpoint id per thread
        self._blobs: dict[tuple[str, str, str, str], _StoredBlob] = {}
        self._writes: dict[tuple[str, str, str], dict[tuple[str, str], bytes]] = {}

    def put(self, checkpoint: Checkpoint) -> None:
        thread, ns, checkpoint_id = checkpoint.thread_id, checkpoint.checkpoint_ns, checkpoint.id
        header = encode_header(checkpoint)
        blobs = []  # encoded before anything is stored: a value that fails stores nothing
        for key, blob in checkpoint.blobs.items():
            stored = _new_stored(_StoredBlob, (blob.kind, blob.base, encode_blob(key, blob)))
            blobs.append(((thread, ns, key, checkpoint_id), stored))
        thread_key = (thread, ns)
        with self._lock:
            head = self._heads.get(thread_key)
            if checkpoint.parent_id != head:
                compare_and_set(checkpoint, head)  # raises, unless it is an explicit fork
            self._blobs.update(blobs)
            headers = self._headers.get(thread_key)
            if headers is None:
                headers = self._headers[thread_key] = {}
            headers[checkpoint_id] = header
            if head is None or checkpoint_id > head:
                self._heads[thread_key] = checkpoint_id

    def put_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        writes: Sequence[tuple[str, Any]],
    ) -> None:
        encoded = {(task_id, channel): encode_write(channel, value) for channel, value in writes}
        with self._lock:
            self._writes.setdefault((thread_id, checkpoint_ns, checkpoint_id), {}).update(encoded)

    def get(
        self, thread_id: str, checkpoint_id: str | None = None, checkpoint_ns: str = ""
    ) -> Checkpoint | None:
        with self._lock:
            headers = self._headers.get((thread_id, checkpoint_ns))
            if not headers:
                return None
            if checkpoint_id is None:
                checkpoint_id = self._heads[(thread_id, checkpoint_ns)]
            header = headers.get(checkpoint_id)
            if header is None:
                return None
            return self._load(thread_id, checkpoint_ns, header)

    def list(
        self,
        thread_id: str,
        limit: int | None = None,
        before: str | None = None,
        checkpoint_ns: str = "",
    ) -> Iterator[Checkpoint]:
        with self._lock:
            headers = dict(self._headers.get((thread_id, checkpoint_ns), {}))
        ids = sorted((i for i in headers if before is None or i < before), reverse=True)
        for checkpoint_id in ids[:limit] if limit is not None else ids:
            with self._lock:
                checkpoint = self._load(thread_id, checkpoint_ns, headers[checkpoint_id])
            yield checkpoint  # never while holding the lock: the caller may pause here

    def delete_thread(self, thread_id: str) -> None:
        with self._lock:
            for header_key in [k for k in self._headers if k[0] == thread_id]:
                del self._headers[header_key]
                self._heads.pop(header_key, None)
            for blob_key in [k for k in self._blobs if k[0] == thread_id]:
                del self._blobs[blob_key]
            for write_key in [k for k in self._writes if k[0] == thread_id]:
                del self._writes[write_key]

    def prune(self, thread_id: str, keep_last: int) -> int:
        check_keep_last(keep_last)
        removed = 0
        with self._lock:
            for (thread, ns), headers in list(self._headers.items()):
                if thread != thread_id:
                    continue
                ids = sorted(headers)
                dropped = ids[: max(0, len(ids) - keep_last)]
                if not dropped:
                    continue
                if len(dropped) < len(ids):
                    self._materialize(thread, ns, headers[ids[len(dropped)]])
                for checkpoint_id in dropped:
                    del headers[checkpoint_id]
                    self._writes.pop((thread, ns, checkpoint_id), None)
                if not headers:
                    self._heads.pop((thread, ns), None)
                removed += len(dropped)
                needed = self._needed_blobs(thread, ns, headers.values())
                for key in [k for k in self._blobs if k[:2] == (thread, ns)]:
                    if key not in needed:
                        del self._blobs[key]
        return removed

    def threads(self) -> builtins.list[str]:
        with self._lock:
            return sorted({thread for thread, _ in self._headers if self._headers[(thread, _)]})

    def stored_bytes(self, thread_id: str) -> int:
        with self._lock:
            headers = sum(
                len(data)
                for (thread, _), stored in self._headers.items()
                if thread == thread_id
                for data in stored.values()
            )
            blobs = sum(len(b.data) for key, b in self._blobs.items() if key[0] == thread_id)
            writes = sum(
                len(data)
                for key, stored in self._writes.items()
                if key[0] == thread_id
                for data in stored.values()
            )
        return headers + blobs + writes

    # async twins: nothing blocks here, so no worker thread is needed
    async def aput(self, checkpoint: Checkpoint) -> None:
        self.put(checkpoint)

    async def aput_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        writes: Sequence[tuple[str, Any]],
    ) -> None:
        self.put_writes(thread_id, checkpoint_ns, checkpoint_id, task_id, writes)

    async def aget(
        self, thread_id: str, checkpoint_id: str | None = None, checkpoint_ns: str = ""
    ) -> Checkpoint | None:
        return self.get(thread_id, checkpoint_id, checkpoint_ns)

    async def alist(
        self,
        thread_id: str,
        limit: int | None = None,
        before: str | None = None,
        checkpoint_ns: str = "",
    ) -> builtins.list[Checkpoint]:
        return list(self.list(thread_id, limit, before, checkpoint_ns))

    # loading
    def _load(self, thread: str, ns: str, header: bytes) -> Checkpoint:
        checkpoint = decode_header(header, thread, ns)
        checkpoint.values = {
            key: rebuild_value(key, self._chain(thread, ns, key, version))
            for key, version in checkpoint.versions.items()
        }
        writes = self._writes.get((thread, ns, checkpoint.id), {})
        checkpoint.pending_writes = tuple(
            PendingWrite(task_id, channel, loads(data))
            for (task_id, channel), data in writes.items()
        )
        return checkpoint

    def _chain(
        self, thread: str, ns: str, key: str, version: str
    ) -> builtins.list[tuple[str, bytes]]:
        """The blobs that rebuild ``key`` at ``version``: newest first, ending with a full one."""
        chain = []
        current: str | None = version
        while current is not None:
            blob = self._blobs[(thread, ns, key, current)]
            chain.append((blob.kind, blob.data))
            current = blob.base if blob.kind != "full" else None
        return chain

    def _materialize(self, thread: str, ns: str, header: bytes) -> None:
        """Store every key of this checkpoint whole, so the deltas behind it can go."""
        for key, version in decode_header(header).versions.items():
            if self._blobs[(thread, ns, key, version)].kind == "full":
                continue
            value = rebuild_value(key, self._chain(thread, ns, key, version))
            data = encode_blob(key, Blob("full", value))
            self._blobs[(thread, ns, key, version)] = _StoredBlob("full", None, data)

    def _needed_blobs(self, thread: str, ns: str, headers: Any) -> set[tuple[str, str, str, str]]:
        needed = set()
        for header in headers:
            for key, version in decode_header(header).versions.items():
                current: str | None = version
                while current is not None and (thread, ns, key, current) not in needed:
                    needed.add((thread, ns, key, current))
                    blob = self._blobs[(thread, ns, key, current)]
                    current = blob.base if blob.kind != "full" else None
        return needed
