"""Served graphs get the server's store: a node, or an agent's tool, run by the server uses
the store that ``/store`` serves (as LangGraph Server gives its runs its store), on SQLite and
on PostgreSQL (runs as jobs of the queue, and a worker process without HTTP)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from langgraph_sdk import get_client, get_sync_client

from graph_agent.store import BaseStore, SqliteStore
from graph_agent.store.postgres import PostgresStore
from tests.checkpoint.postgres_db import fresh_schema
from tests.serve.conftest import free_port, wait_until_up
from tests.serve.servers import KINDS, Served, serving
from tests.serve.store_targets import notes, rememberer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=KINDS)
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    with ExitStack() as stack:
        store: BaseStore = (
            SqliteStore(tmp_path / "store.db")
            if request.param == "sqlite"
            else PostgresStore(stack.enter_context(fresh_schema()), pool_size=2)
        )
        stack.callback(store.close)
        targets = [notes(), rememberer()]
        yield stack.enter_context(serving(request.param, tmp_path, targets=targets, store=store))


def test_a_node_writes_what_the_client_reads_and_reads_what_it_put(served: Served) -> None:
    client = get_sync_client(url=served.url)
    client.store.put_item(["inbox", "u1"], key="hint", value={"text": "from the client"})
    thread = client.threads.create()
    state = client.runs.wait(
        thread["thread_id"], "notes", input={"user": "u1", "text": "written by a node"}
    )
    assert state["hint"] == "from the client"
    item = client.store.get_item(["notes", "u1"], key="last")
    assert item["value"] == {"text": "written by a node"}


def test_a_stateless_and_a_background_run_use_it_too(served: Served) -> None:
    async def scenario() -> None:
        client = get_client(url=served.url)
        await client.runs.wait(None, "notes", input={"user": "u2", "text": "stateless"})
        assert (await client.store.get_item(["notes", "u2"], key="last"))["value"] == {
            "text": "stateless"
        }
        thread = await client.threads.create()
        run = await client.runs.create(
            thread["thread_id"], "notes", input={"user": "u3", "text": "background"}
        )
        await client.runs.join(thread["thread_id"], run["run_id"])
        assert (await client.store.get_item(["notes", "u3"], key="last"))["value"] == {
            "text": "background"
        }

    asyncio.run(scenario())


def test_an_agents_tool_remembers_in_the_servers_store(served: Served) -> None:
    client = get_sync_client(url=served.url)
    user = f"u{uuid.uuid4().hex[:6]}"
    client.runs.wait(
        None,
        "rememberer",
        input={"messages": [{"role": "user", "content": "I like green tea"}]},
        context={"user_id": user},
    )
    found = client.store.search_items(["memories", user])["items"]
    assert [item["value"]["text"] for item in found] == ["The user likes green tea."]


def test_a_worker_process_without_http_gives_its_runs_the_store() -> None:
    """``serve --postgres --workers 0`` only serves HTTP; the runs run in a ``--no-http``
    worker process, whose runs write the same PostgreSQL store the HTTP process serves."""
    port = free_port()
    target = "tests/serve/store_targets.py:notes"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with fresh_schema() as dsn, ExitStack() as stack:
        base = [sys.executable, "-m", "graph_agent", "serve", target, "--postgres", dsn]
        for extra in (["--workers", "0", "--port", str(port)], ["--no-http"]):
            process = subprocess.Popen(
                [*base, *extra], cwd=ROOT, env=env, stdout=subprocess.DEVNULL
            )
            stack.callback(process.wait, 15)
            stack.callback(process.terminate)
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url)
        client = get_sync_client(url=url)
        client.store.put_item(["inbox", "w"], key="hint", value={"text": "to the worker"})
        state = client.runs.wait(None, "notes", input={"user": "w", "text": "by the worker"})
        assert state["hint"] == "to the worker"
        assert client.store.get_item(["notes", "w"], key="last")["value"] == {
            "text": "by the worker"
        }
