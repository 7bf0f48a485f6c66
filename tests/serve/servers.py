"""A served app on either kind of records, for tests that must hold on both: SQLite files (as
conftest's ``Server``) or PostgreSQL (a fresh schema; runs are jobs of the in-process queue)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.checkpoint.postgres import PostgresSaver
from graph_agent.checkpoint.sqlite import SqliteSaver
from graph_agent.serve import Records, create_app
from graph_agent.serve.pg_records import PostgresRecords
from tests.checkpoint.postgres_db import fresh_schema
from tests.serve.conftest import free_port, wait_until_up
from tests.serve.graphs import agent, approval, chain, slow

KINDS = ("sqlite", "postgres")
"""The records a test runs on (``postgres`` marks it as needing PostgreSQL)."""


class Served:
    """``create_app`` on ``saver`` and ``records`` under uvicorn on a free port (both closed at
    the end); ``options`` go to ``create_app``."""

    def __init__(
        self,
        saver: CheckpointSaver,
        records: Records | PostgresRecords,
        targets: list[Any] | None = None,
        **options: Any,
    ) -> None:
        self.saver = saver
        self.records = records
        served = targets if targets is not None else [chain(), approval(), slow(), agent()]
        app = create_app(served, saver=saver, records=records, **options)
        self.app = app
        self.url = f"http://127.0.0.1:{free_port()}"
        port = int(self.url.rsplit(":", 1)[1])
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        wait_until_up(self.url)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.should_exit = True
        self.thread.join(20)
        self.records.close()
        self.saver.close()


@contextmanager
def serving(
    kind: str,
    folder: Path,
    *,
    records: type[Records] | type[PostgresRecords] | None = None,
    **options: Any,
) -> Iterator[Served]:
    """A running server on ``kind`` records (see :data:`KINDS`), in ``folder`` for SQLite;
    ``records``: the records' class (a subclass, to make them fail)."""
    with ExitStack() as stack:
        if kind == "postgres":
            dsn = stack.enter_context(fresh_schema())
            saver: CheckpointSaver = PostgresSaver(dsn)
            kept: Records | PostgresRecords = (records or PostgresRecords)(dsn)
        else:
            saver = SqliteSaver(str(folder / "serve.db"))
            kept = (records or Records)(str(folder / "records.db"))
        yield stack.enter_context(Served(saver, kept, **options))
