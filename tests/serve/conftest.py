"""A real uvicorn server on 127.0.0.1, on a free port, serving the test graphs and an agent."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from graph_agent.checkpoint.sqlite import SqliteSaver
from graph_agent.serve import Records, create_app
from tests.serve.graphs import agent, approval, chain, slow


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until_up(url: str, timeout: float = 60.0) -> None:
    """Return once the server at ``url`` answers ``GET /ok``; raise if it does not in time.

    The wait is long because it only bounds a failure: a server process importing the package
    on a loaded 2-core machine took over 15 s once, and a ready server is seen within 20 ms."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/ok").status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.02)
    raise RuntimeError(f"the server at {url} did not start within {timeout} s")


class Server:
    """``create_app`` on ``db`` under uvicorn, on ``port`` (a free one when not given);
    ``options`` go to ``create_app``."""

    def __init__(
        self, db: Path, targets: list[Any] | None = None, *, port: int = 0, **options: Any
    ) -> None:
        self.db = db
        self.saver = SqliteSaver(str(db))
        self.records = Records(str(db.with_name("records.db")))
        served = targets if targets is not None else [chain(), approval(), slow(), agent()]
        app = create_app(served, saver=self.saver, records=self.records, **options)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        wait_until_up(self.url)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.records.close()
        self.saver.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with Server(tmp_path_factory.mktemp("serve") / "serve.db") as running:
        yield running
