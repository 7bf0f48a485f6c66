"""The serve benchmark runs in quick mode against graph-agent serve alone (no langgraph-cli);
its clients read what a server may answer."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from benchmarks import serve
from benchmarks.harness import GRAPH_AGENT, LANGGRAPH, Row, Settings
from benchmarks.lean_http import RETRIES, Connection, ConnectionDropped


def test_the_serve_benchmark_measures_our_server_in_quick_mode() -> None:
    rows = serve.run(Settings(quick=True, with_langgraph=False), with_postgres=False, clients=(3,))
    assert [row.key for row in rows] == [
        "Serve runs/wait, one client (SQLite)",
        "Serve runs/wait, 3 clients (SQLite)",
    ]
    latency, throughput = rows
    size = serve.sizes(Settings(quick=True))
    assert len(latency.samples[GRAPH_AGENT]) == size.sequential * size.rounds
    assert all(ms > 0 for ms in latency.samples[GRAPH_AGENT])
    assert throughput.samples[GRAPH_AGENT][0] > 0
    # a quick run may cost the server less than one clock tick (10 ms): read, maybe 0
    assert throughput.extra["cpu_ms_per_run_median"] >= 0
    assert throughput.extra["client_cpu_ms_per_run"][GRAPH_AGENT] >= 0
    assert all(LANGGRAPH not in row.samples for row in rows)


def test_the_cpu_time_of_a_process_group_is_read_from_proc() -> None:
    """What ``cpu_ms_per_run_median`` is made of: the CPU time of the server's process group
    (here a process in a group of its own that burns 0.3 s of CPU, then waits: this test's
    own group is shared with whatever else pytest-xdist runs beside it)."""
    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
    burning = subprocess.Popen(
        [sys.executable, "-c", burn + "time.sleep(60)"], start_new_session=True
    )
    try:
        deadline = time.monotonic() + 30
        while (spent := serve._cpu_seconds(serve._Served(url="", pid=burning.pid))) < 0.25:
            assert time.monotonic() < deadline, f"read {spent} s of the group's CPU time"
            time.sleep(0.05)
    finally:
        burning.kill()
        burning.wait()
    assert spent < 5  # its own, not every process's


def test_the_serve_benchmark_measures_a_baseline_tree_beside_ours() -> None:
    """``--baseline TREE`` serves TREE's graph_agent (here this tree) in the same turns."""
    root = Path(serve.__file__).resolve().parent.parent
    rows = serve.run(
        Settings(quick=True, with_langgraph=False),
        with_postgres=False,
        clients=(2,),
        on_threads=True,
        baseline=root,
    )
    assert [row.key for row in rows] == [
        "Serve runs/wait on threads, one client (SQLite)",
        "Serve runs/wait on threads, 2 clients (SQLite)",
        "Serve runs/wait on threads, one client (SQLite, --baseline)",
        "Serve runs/wait on threads, 2 clients (SQLite, --baseline)",
    ]
    assert rows[3].samples[GRAPH_AGENT][0] > 0
    assert rows[3].extra["client_cpu_ms_per_run"][GRAPH_AGENT] >= 0
    lines = serve.targets(rows)
    assert len(lines) == 2 and all("no LangGraph Server to compare" in line for line in lines)


def test_a_baseline_tree_graph_agent_does_not_import_from_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="graph_agent imports from"):
        serve._check_source(tmp_path, {**os.environ, "PYTHONPATH": str(tmp_path)})


def test_the_targets_give_our_runs_per_second_over_langgraph_servers_and_the_cpu_per_run() -> None:
    def row(label: str, ours: float, theirs: float, cpu: float, bound: float) -> Row:
        return Row(
            key=f"Serve runs/wait on threads, 10 clients ({label})",
            unit="runs/s",
            samples={GRAPH_AGENT: [ours, ours * 2, ours / 2], LANGGRAPH: [theirs, theirs / 2]},
            extra={"cpu_ms_per_run_median": cpu, "cpu_ms_per_run_target": bound},
        )

    sqlite, postgres = serve.targets(
        [row("SQLite", 250.0, 40.0, 1.4, 1.5), row("PostgreSQL, 2 workers", 150.0, 40.0, 4.5, 4.0)]
    )
    assert " 8.33 LangGraph's (    met; ×6.25 its best round)" in sqlite
    assert "CPU  1.40 ms/run, ≤ 1.5 (met)" in sqlite
    assert " 5.00 LangGraph's (    met; ×3.75 its best round)" in postgres
    assert "CPU  4.50 ms/run, ≤ 4 (NOT met)" in postgres


Answer = tuple[bytes, ...]
"""What the fake server writes for one request (its parts written one after another)."""


@contextlib.asynccontextmanager
async def _fake_server(answers: list[Answer | None]) -> AsyncIterator[tuple[str, list[bytes]]]:
    """A server answering each request with the next of ``answers`` (None: it closes the
    connection without answering); yields its URL and the requests' bodies."""
    bodies: list[bytes] = []

    async def serve_one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while answers:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(re.search(rb"Content-Length: (\d+)", head)[1])  # type: ignore[index]
                bodies.append(await reader.readexactly(length))
                answer = answers.pop(0)
                if answer is None:
                    break
                for part in answer:
                    writer.write(part)
                    await writer.drain()
        except asyncio.IncompleteReadError:
            pass
        writer.close()

    server = await asyncio.start_server(serve_one, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}", bodies


def _sized(body: bytes, *headers: str) -> bytes:
    head = "".join(f"{header}\r\n" for header in headers)
    return f"HTTP/1.1 200 OK\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


CHUNKED = (
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-type: application/json\r\n\r\n",
    b"2\r\n\n \r\n",  # a heartbeat, as LangGraph Server's runs/wait sends
    b'7\r\n{"x": 3\r\n1;ext=1\r\n}\r\n',
    b"0\r\n\r\n",
)


@pytest.mark.parametrize("kind", sorted(serve.CLIENT_KINDS))
def test_each_client_reads_sized_and_chunked_answers_on_one_connection(kind: str) -> None:
    async def main() -> None:
        answers: list[Answer | None] = [(_sized(b'{"x": 3}'),), CHUNKED, (_sized(b"{}"),)]
        async with _fake_server(answers) as (url, bodies):
            client = serve.CLIENT_KINDS[kind](url, 5)
            try:
                await serve._one(client, "/threads/t/runs/wait")
                await serve._one(client, "/threads/t/runs/wait")
                assert await client.post("/threads", {}) == (200, b"{}")
            finally:
                await client.aclose()
        assert [json.loads(body) for body in bodies] == [serve.BODY, serve.BODY, {}]

    asyncio.run(main())


def test_the_lean_client_sends_again_on_a_new_connection_when_one_drops() -> None:
    async def main() -> None:
        answers: list[Answer | None] = [
            (_sized(b"1", "Connection: close"),),  # then a new connection
            None,  # dropped: sent again
            (_sized(b"2"),),
        ]
        async with _fake_server(answers) as (url, bodies):
            client = Connection(url, 5)
            try:
                assert await client.post("/a", {"n": 1}) == (200, b"1")
                assert await client.post("/b", {"n": 2}) == (200, b"2")
            finally:
                await client.aclose()
        assert bodies == [b'{"n": 1}', b'{"n": 2}', b'{"n": 2}']

    asyncio.run(main())


def test_the_lean_client_gives_up_after_its_retries() -> None:
    async def main() -> None:
        async with _fake_server([None] * (RETRIES + 1)) as (url, bodies):
            client = Connection(url, 5)
            with pytest.raises(ConnectionDropped, match="/a"):
                await client.post("/a", {})
            await client.aclose()
        assert len(bodies) == RETRIES + 1

    asyncio.run(main())
