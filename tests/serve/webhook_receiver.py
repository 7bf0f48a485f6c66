"""A webhook receiver on 127.0.0.1 for the tests: an ``http.server`` in a thread that keeps each
POST it gets (headers and JSON body) and answers the statuses it is told to, in order."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Receiver:
    """What the receiver got, and what it answers next (``statuses``, then ``200`` for ever,
    or ``always``)."""

    url: str
    statuses: list[int] = field(default_factory=list)
    always: int | None = None
    got: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_status(self) -> int:
        with self.lock:
            if self.always is not None:
                return self.always
            return self.statuses.pop(0) if self.statuses else 200

    def wait_for(self, count: int, timeout: float = 20.0) -> list[Received]:
        """The first ``count`` requests, once they came."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.got) >= count:
                    return list(self.got)
            time.sleep(0.05)
        raise AssertionError(f"the receiver got {len(self.got)} requests, not {count}")

    def for_run(self, run_id: str) -> list[Received]:
        with self.lock:
            return [item for item in self.got if item.body.get("run_id") == run_id]


@contextmanager
def receiving() -> Iterator[Receiver]:
    """A receiver listening on 127.0.0.1 (a free port) until the block ends."""
    receiver: Receiver

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            size = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(size) or b"{}")
            with receiver.lock:
                receiver.got.append(
                    Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
            status = receiver.next_status()
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver = Receiver(url=f"http://127.0.0.1:{server.server_address[1]}/hook")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
