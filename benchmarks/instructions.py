"""``python -m benchmarks.instructions WORKLOAD RUNS``: run one workload RUNS times, for
instruction counts under valgrind (wall-clock time is noise on a shared machine; the number
of instructions a run executes is not).

Measure the work of the runs alone by subtracting a run of 0 from a run of N, each counted as

    PYTHONHASHSEED=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python -m benchmarks.instructions w1 200

(the total is printed as "Collected : <n>"). Workloads: ``w1`` (the 100-node chain), ``w2``
(the ReAct loop without a saver), ``w2-memory`` (with an in-memory saver), ``w5`` (W2
streamed), ``w2-plain`` and ``w5-plain`` (the plain loops they are compared with), ``w2-listener``,
``w2-otel-noop``, ``w2-otel-sdk`` (W2 observed, see ``OBSERVED``), ``w3`` (50 branches and a
join), ``w3-send`` (50 items through Send); served runs of the serve benchmark's 3-node chain,
each a ``POST`` through the server's ASGI app in this process (no socket, no uvicorn): ``serve``
(a stateless ``/runs/wait`` on the SQLite default's path), ``serve-pg`` (the same in PostgreSQL
mode, as a process of ``--workers`` runs it) and ``serve-pg-thread``
(``/threads/{id}/runs/wait`` on one thread: a durable run, its checkpoints and records in
PostgreSQL; a fresh schema of the test server, dropped at exit).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

OBSERVED = {
    "w2-listener": "idle",
    "w2-otel-noop": "otel-noop",
    "w2-otel-sdk": "otel-sdk",
}
"""W2 with one listener: one that overrides nothing, OpenTelemetry's on a no-op tracer, on
an SDK tracer exporting nowhere (``observability.py``)."""


def workload(name: str) -> Callable[[], Any]:
    """One run of the workload ``name``, its graph compiled beforehand."""
    from benchmarks import chain, fanout, react

    if name == "w1":
        app = chain.graph_agent_chain()
        return lambda: app.invoke({"x": 0})
    if name in ("w2", "w2-memory"):
        saver = react.graph_agent_saver("memory" if name == "w2-memory" else "none", Path("."))
        app = react.graph_agent_react(react.ITERATIONS, saver)
        invoke = react.graph_agent_invoke(app, react.ITERATIONS)
        messages = react.history(0)
        return lambda: invoke(messages)
    if name in ("w5", "w2-plain", "w5-plain"):
        return _react(name)
    if name in OBSERVED:
        from benchmarks import observability

        app = react.graph_agent_react(react.ITERATIONS)
        app = observability.with_listeners(app, [observability.listener(OBSERVED[name])])
        invoke = react.graph_agent_invoke(app, react.ITERATIONS)
        messages = react.history(0)
        return lambda: invoke(messages)
    if name == "w3":
        app = fanout.graph_agent_fanout()
        return lambda: app.invoke({"items": []})
    if name == "w3-send":
        from benchmarks import send

        app = send.graph_agent_send()
        return lambda: app.invoke({"items": send.ITEMS})
    if name in ("serve", "serve-pg", "serve-pg-thread"):
        return _served(name)
    raise SystemExit(
        f"unknown workload {name!r}: w1, w2, w2-memory, w2-plain, w5, w5-plain, "
        f"{', '.join(OBSERVED)}, w3, w3-send, "
        "serve, serve-pg or serve-pg-thread"
    )


def _react(name: str) -> Callable[[], Any]:
    """W5 (W2 streamed), and the plain loop of W2 and of W5: the floors of the ratios."""
    from benchmarks import react

    messages, iterations = react.history(0), react.ITERATIONS
    if name == "w2-plain":
        return lambda: react.plain_react(messages, iterations)
    if name == "w5-plain":
        return lambda: sum(1 for _ in react.plain_react_stream(messages, iterations))
    stream = react.graph_agent_stream(react.graph_agent_react(iterations), iterations)
    return lambda: stream(messages)


def _served(name: str) -> Callable[[], Any]:
    """One served run of workload ``name`` (see the module docstring)."""
    import asyncio
    import contextlib

    import httpx

    from benchmarks.serve import ANSWER, BODY, OURS
    from graph_agent.serve import create_app

    schema = contextlib.ExitStack()
    scope: dict[str, Any] = {}
    exec(compile(OURS, "ga_chain.py", "exec"), scope)  # the benchmark's own chain
    options: dict[str, Any] = {}
    if name != "serve":
        from benchmarks.postgres import fresh_schema
        from graph_agent.checkpoint.postgres import AsyncPostgresSaver
        from graph_agent.serve.pg_records import PostgresRecords

        dsn = schema.enter_context(fresh_schema("bench_serve"))
        saver = AsyncPostgresSaver(dsn, pool_size=16)
        options = {"saver": saver, "records": PostgresRecords(dsn)}
        schema.callback(options["records"].close)
    app = create_app([scope["chain"]()], **options)
    loop = asyncio.new_event_loop()
    lifespan = app.router.lifespan_context(app)
    loop.run_until_complete(lifespan.__aenter__())
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost")
    path = "/runs/wait"
    if name == "serve-pg-thread":
        thread = loop.run_until_complete(client.post("/threads", json={}))
        path = f"/threads/{thread.json()['thread_id']}/runs/wait"

    def one() -> None:
        answer = loop.run_until_complete(client.post(path, json=BODY))
        if answer.json() != ANSWER:
            raise RuntimeError(f"{path} answered {answer.status_code}: {answer.text[:300]}")

    def end() -> None:
        loop.run_until_complete(client.aclose())
        loop.run_until_complete(lifespan.__aexit__(None, None, None))
        if "saver" in options:
            loop.run_until_complete(options["saver"].aclose())
        loop.close()
        schema.close()

    one.close = end  # type: ignore[attr-defined]
    return one


def main(argv: list[str]) -> int:
    name, runs = argv[0], int(argv[1])
    run = workload(name)
    for _ in range(runs):
        run()
    close = getattr(run, "close", None)  # a served workload's server and schema
    if close is not None:
        close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
