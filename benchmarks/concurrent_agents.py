"""``python -m benchmarks.concurrent_agents [--runs N] [--delay S] [--stream]``: issue 20's
concurrency row, side by side.

``N`` agent runs at once in one process (``ainvoke``, or ``astream`` with ``--stream``), each
one tool call and an answer, against a local OpenAI-compatible server that answers every
request after ``S`` seconds (plain asyncio on 127.0.0.1, in a process of its own, JSON or SSE as
asked). graph_agent's ``ReactAgent`` with ``OpenAIChatModel``, and LangGraph's
``create_react_agent`` with langchain-openai's ``ChatOpenAI`` (when installed: ``pip install -e
'.[bench]'``), each run in a subprocess of its own, so that each reports its own wall time, peak
OS threads (sampled every millisecond) and peak RSS. The tool is an ``async def``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from typing import Any

TOOL_NAME = "lookup"
ANSWER = "The answer is 42."


def _completion(body: dict[str, Any]) -> dict[str, Any]:
    """The scripted answer: a tool call to a fresh question, the answer once a tool replied."""
    answered = body["messages"][-1].get("role") == "tool"
    if answered:
        message: dict[str, Any] = {"role": "assistant", "content": ANSWER}
        finish = "stop"
    else:
        call = {
            "id": f"call_{os.urandom(6).hex()}",
            "type": "function",
            "function": {"name": TOOL_NAME, "arguments": '{"query": "meaning"}'},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    return {"message": message, "finish_reason": finish}


def _response(body: dict[str, Any]) -> tuple[bytes, str]:
    """The HTTP body and content type answering ``body``."""
    made = _completion(body)
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    head = {"id": "chatcmpl-1", "created": 0, "model": body.get("model", "fake")}
    if not body.get("stream"):
        choice = {"index": 0, **made}
        whole = {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
        return json.dumps(whole).encode(), "application/json"
    message = made["message"]
    delta: dict[str, Any] = {"role": "assistant", "content": message["content"] or ""}
    if "tool_calls" in message:
        delta["tool_calls"] = [{"index": 0, **message["tool_calls"][0]}]
    events = [
        {"index": 0, "delta": delta, "finish_reason": None},
        {"index": 0, "delta": {}, "finish_reason": made["finish_reason"]},
    ]
    lines = [
        json.dumps({**head, "object": "chat.completion.chunk", "choices": [e]}) for e in events
    ]
    lines.append(
        json.dumps({**head, "object": "chat.completion.chunk", "choices": [], "usage": usage})
    )
    text = "".join(f"data: {line}\n\n" for line in lines) + "data: [DONE]\n\n"
    return text.encode(), "text/event-stream"


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """HTTP/1.1 with keep-alive: each POST answered after ``delay`` seconds."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = json.loads(await reader.readexactly(length)) if length else {}
            await asyncio.sleep(delay)
            content, kind = _response(body)
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: " + kind.encode() + b"\r\n"
                b"Content-Length: " + str(len(content)).encode() + b"\r\n\r\n" + content
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def serve(port: int, delay: float) -> None:
    """Run the fake OpenAI-compatible server on 127.0.0.1:``port`` until killed."""

    async def main() -> None:
        server = await asyncio.start_server(
            lambda r, w: _handle(r, w, delay), "127.0.0.1", port, backlog=4096
        )
        async with server:
            await server.serve_forever()

    asyncio.run(main())


class _Peaks:
    """Samples this process's OS thread count every millisecond on a thread of its own (not
    counted)."""

    def __init__(self) -> None:
        self.threads = 0
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            with open("/proc/self/status") as status:
                for line in status:
                    if line.startswith("Threads:"):
                        self.threads = max(self.threads, int(line.split()[1]) - 1)
                        break
            time.sleep(0.001)

    def __enter__(self) -> _Peaks:
        self._sampler.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._sampler.join()


async def _lookup(query: str) -> str:
    """Look up a fact.

    Args:
        query: What to look up.
    """
    await asyncio.sleep(0)
    return f"found {query}"


async def _graph_agent_runs(url: str, runs: int, stream: bool) -> list[str]:
    from graph_agent import ReactAgent, tool
    from graph_agent.models import OpenAIChatModel

    model = OpenAIChatModel("fake", base_url=url, api_key="none")
    agent = ReactAgent(name="bench", model=model, tools=[tool(name=TOOL_NAME)(_lookup)])

    async def one(index: int) -> str:
        if stream:
            async for _ in agent.astream(f"question {index}"):
                pass
            return ANSWER
        return (await agent.acall(f"question {index}")).text

    try:
        return await asyncio.gather(*(one(i) for i in range(runs)))
    finally:
        await model.aclose()


async def _langgraph_runs(url: str, runs: int, stream: bool) -> list[str]:
    from langchain_core.tools import tool as lc_tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    model = ChatOpenAI(model="fake", base_url=url, api_key="none", streaming=stream)
    agent = create_react_agent(model, [lc_tool(TOOL_NAME)(_lookup)])

    async def one(index: int) -> str:
        inputs = {"messages": [("user", f"question {index}")]}
        if stream:
            async for _ in agent.astream(inputs, stream_mode=["updates", "messages"]):
                pass
            return ANSWER
        state = await agent.ainvoke(inputs)
        return str(state["messages"][-1].content)

    return await asyncio.gather(*(one(i) for i in range(runs)))


def measure(implementation: str, url: str, runs: int, stream: bool) -> dict[str, Any]:
    """Run ``runs`` agents at once in this process; wall time, peak threads and RSS."""
    body = _graph_agent_runs if implementation == "graph_agent" else _langgraph_runs
    with _Peaks() as peaks:
        started = time.perf_counter()
        answers = asyncio.run(body(url, runs, stream))
        wall = time.perf_counter() - started
    if answers != [ANSWER] * runs:
        raise AssertionError(f"{implementation}: unexpected answers {set(answers)!r}")
    return {
        "implementation": implementation,
        "runs": runs,
        "wall_s": round(wall, 3),
        "peak_threads": peaks.threads,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for(port: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"the fake model server did not start on port {port}")


def langchain_openai_available() -> bool:
    try:
        import langchain_openai  # noqa: F401
        import langgraph.prebuilt  # noqa: F401
    except ImportError:
        return False
    return True


def run(runs: int, delay: float, stream: bool, with_langgraph: bool) -> list[dict[str, Any]]:
    """Each implementation in a subprocess against one fake server; their measurements."""
    port = _free_port()
    me = [sys.executable, "-m", "benchmarks.concurrent_agents"]
    server = subprocess.Popen([*me, "--serve", str(port), "--delay", str(delay)])
    try:
        _wait_for(port)
        url = f"http://127.0.0.1:{port}/v1"
        implementations = ["graph_agent", *(["langgraph"] if with_langgraph else [])]
        rows = []
        for implementation in implementations:
            flags = ["--measure", implementation, "--url", url, "--runs", str(runs)]
            out = subprocess.run(
                [*me, *flags, *(["--stream"] if stream else [])],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
        return rows
    finally:
        server.kill()
        server.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.concurrent_agents", description=__doc__
    )
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--delay", type=float, default=0.1, help="the server's answer time, s")
    parser.add_argument("--stream", action="store_true", help="astream instead of ainvoke")
    parser.add_argument("--without-langgraph", action="store_true")
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.delay)
        return 0
    if args.measure:
        print(json.dumps(measure(args.measure, args.url, args.runs, args.stream)))
        return 0
    with_langgraph = langchain_openai_available() and not args.without_langgraph
    rows = run(args.runs, args.delay, args.stream, with_langgraph)
    mode = "astream" if args.stream else "ainvoke"
    print(
        f"{args.runs} concurrent agent runs ({mode}), model server answering after {args.delay:g} s"
    )
    print(f"{'implementation':<14} {'wall s':>8} {'peak threads':>13} {'peak RSS MB':>12}")
    for row in rows:
        print(
            f"{row['implementation']:<14} {row['wall_s']:>8.2f} {row['peak_threads']:>13}"
            f" {row['peak_rss_mb']:>12.1f}"
        )
    if len(rows) == 2:
        print(f"wall time ratio graph_agent/langgraph: {rows[0]['wall_s'] / rows[1]['wall_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
