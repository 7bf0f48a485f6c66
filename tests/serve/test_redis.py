"""graph-agent serve --postgres DSN --redis URL: the processes tell each other of runs and
events over Redis pub/sub (the Redis on 127.0.0.1:6379) instead of LISTEN/NOTIFY.

Each test has a fresh PostgreSQL schema, and so a channel of its own: the channel is named
after the schema, so tests (and servers) sharing the Redis never hear each other.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from langgraph_sdk import get_sync_client

from graph_agent.cli.main import main
from graph_agent.serve.notify import NotifierUnreachable, RedisNotifier, redis_where
from graph_agent.serve.pg_records import CHANNEL
from tests.checkpoint.postgres_db import fresh_schema
from tests.serve.conftest import free_port, wait_until_up
from tests.serve.redis_db import URL
from tests.serve.test_events import _sse

ROOT = Path(__file__).resolve().parents[2]
REDIS = URL
TARGETS = ["tests/serve/graphs.py:slow", "tests/serve/graphs.py:chain"]


def channel_of(dsn: str) -> str:
    """The channel of the servers on ``dsn``'s schema (PostgresRecords.channel)."""
    schema = dsn.split("search_path=")[1].split("'")[0].split()[0]
    return f"{CHANNEL}_{hashlib.sha256(schema.encode()).hexdigest()[:12]}"


class Heard:
    """Every payload published on a channel, heard by a subscriber of the test's own."""

    def __init__(self, channel: str) -> None:
        self.payloads: list[str] = []
        self._pubsub = redis.Redis.from_url(REDIS).pubsub(ignore_subscribe_messages=True)
        self._pubsub.subscribe(**{channel: lambda message: self.payloads.append(message["data"])})
        self._thread = self._pubsub.run_in_thread(sleep_time=0.01, daemon=True)

    def close(self) -> None:
        self._thread.stop()
        self._thread.join(5)  # it reads the connection until it stops
        self._pubsub.close()


@pytest.fixture
def dsn() -> Iterator[str]:
    with fresh_schema() as schema_dsn:
        yield schema_dsn


def test_a_payload_published_reaches_every_subscriber_of_the_channel() -> None:
    channel = f"graph_agent_test_{os.getpid()}_{time.monotonic_ns()}"

    async def round_trip() -> list[str]:
        heard: list[str] = []
        publisher, listener = RedisNotifier(REDIS), RedisNotifier(REDIS)
        listening = asyncio.Event()
        task = asyncio.create_task(listener.listen(channel, heard.append, listening))
        await asyncio.wait_for(listening.wait(), 5)
        await publisher.publish(channel, ["q", "e:run-1"])
        for _ in range(100):
            if len(heard) == 3:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await publisher.aclose()
        await listener.aclose()
        return heard

    assert asyncio.run(round_trip()) == ["", "q", "e:run-1"]  # "": subscribed (catch up)


def test_an_unreachable_redis_is_named_without_its_password() -> None:
    url = "redis://:s3cret@127.0.0.1:1/2"
    assert redis_where(url) == "127.0.0.1:1/2"

    async def check() -> None:
        notifier = RedisNotifier(url)
        try:
            await notifier.check()
        finally:
            await notifier.aclose()

    with pytest.raises(NotifierUnreachable, match=r"cannot reach Redis at 127\.0\.0\.1:1/2") as err:
        asyncio.run(check())
    assert "s3cret" not in str(err.value)


def test_serve_with_an_unreachable_redis_fails_at_start_and_says_so(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    command = ["serve", "tests/serve/graphs.py:chain", "--postgres", dsn]
    assert main([*command, "--redis", "redis://:s3cret@127.0.0.1:1/0"]) != 0
    err = capsys.readouterr().err
    assert "cannot reach Redis at 127.0.0.1:1/0" in err and "s3cret" not in err


def test_redis_without_postgres_says_what_to_add(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "tests/serve/graphs.py:chain", "--redis", REDIS]) != 0
    assert "--redis needs --postgres" in capsys.readouterr().err


def test_a_client_of_one_process_streams_a_run_executing_on_another_over_redis(dsn: str) -> None:
    heard = Heard(channel_of(dsn))
    api, worker = _Server(dsn, workers=0), _Server(dsn, workers=1)
    try:
        wait_until_up(api.url)
        wait_until_up(worker.url)
        client = get_sync_client(url=api.url)  # it serves HTTP only: the run is elsewhere
        thread_id = client.threads.create()["thread_id"]
        parts = list(
            client.runs.stream(thread_id, "chain", input={"x": 1}, stream_mode=["values", "custom"])
        )
        events = ["metadata", "values", "custom", "custom", "values", "values"]
        assert [p.event for p in parts] == events
        assert parts[-1].data == {"x": 12}
        run_id = parts[0].data["run_id"]
        # the news went over Redis: a run to claim, its end, and the follower's ask for its
        # events (sent as it starts following a run it has not seen end, claimed or not; this
        # quick run may end before or after that)
        news = {b"q", f"d:{run_id}".encode(), f"f:{run_id}".encode()}
        deadline = time.monotonic() + 5
        while not news <= set(heard.payloads) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert news <= set(heard.payloads)
    finally:
        heard.close()
        api.stop()
        worker.stop()


def test_sse_reconnect_over_redis_loses_no_event(dsn: str) -> None:
    api, worker = _Server(dsn, workers=0), _Server(dsn, workers=1)
    try:
        wait_until_up(api.url)
        wait_until_up(worker.url)
        client = get_sync_client(url=api.url)
        thread_id = client.threads.create()["thread_id"]
        run = client.runs.create(thread_id, "slow", input={"n": 0}, stream_mode="values")
        path = f"/threads/{thread_id}/runs/{run['run_id']}/stream"
        with httpx.stream("GET", api.url + path, timeout=10) as response:
            first = _sse(response, limit=3)
        last = {"Last-Event-ID": str(first[-1][0])}
        with httpx.stream("GET", worker.url + path, headers=last, timeout=10) as response:
            rest = _sse(response)
        seen = first + rest
        assert [number for number, _, _ in seen] == list(range(12))
        assert [data for _, _, data in seen[1:]] == [f'{{"n":{n}}}' for n in range(11)]
    finally:
        api.stop()
        worker.stop()


class _Server:
    def __init__(self, dsn: str, workers: int) -> None:
        port = free_port()
        command = [sys.executable, "-m", "graph_agent", "serve", *TARGETS, "--port", str(port)]
        command += ["--postgres", dsn, "--redis", REDIS, "--workers", str(workers)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(20)
