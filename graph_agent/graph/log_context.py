"""Run and thread ids on the library's log records.

The library logs with the standard :mod:`logging` module under the ``graph_agent`` logger (and
loggers below it) and prints nothing itself. :class:`RunContextFilter` gives each record the
ids of the run it was logged in (``thread_id``, ``run_id``, ``checkpoint_ns``, ``node``,
``step``; ``None`` outside a node), read from the running task: nothing is set per step. It
is on the library's own loggers; add it to a handler to have the ids on any library's records::

    handler.addFilter(RunContextFilter())
    handler.setFormatter(logging.Formatter("%(run_id)s %(thread_id)s %(node)s %(message)s"))
"""

from __future__ import annotations

import logging

from graph_agent.graph.task import _current_task

RECORD_FIELDS = ("thread_id", "run_id", "checkpoint_ns", "node", "step")

LIBRARY_LOGGERS = (
    "graph_agent",
    "graph_agent.agent",
    "graph_agent.agent.steering",
    "graph_agent.models",
    "graph_agent.models.openai",
    "graph_agent.models.anthropic",
    "graph_agent.mcp.toolset",
    "graph_agent.mcp.transports",
    "graph_agent.mcp.stdio",
    "graph_agent.serve.app",
    "graph_agent.serve.runs",
    "graph_agent.serve.queue",
    "graph_agent.serve.notify",
    "graph_agent.serve.pg_records",
    "graph_agent.serve.tasks",
    "graph_agent.serve.crons",
    "graph_agent.serve.auth_custom",
    "graph_agent.serve.mcp_mount",
    "graph_agent.serve.retention",
    "graph_agent.serve.routes.runs",
    "graph_agent.serve.webhooks",
    "graph_agent.checkpoint.postgres",
)
"""Every logger the library logs on (a test checks the source names no other)."""


class RunContextFilter(logging.Filter):
    """Sets the run's ids on each record it sees (never drops one); a field a record already
    has (given with ``extra=``) is kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        task = _current_task.get()
        if task is None:
            values: tuple[object, ...] = (None, None, None, None, None)
        else:
            call = task._call
            run = call.run_event
            run_id = run.run_id if run is not None else call.run_id
            values = (call.thread_id, run_id, call.checkpoint_ns, task.node, task.step)
        fields = record.__dict__
        for name, value in zip(RECORD_FIELDS, values, strict=True):
            fields.setdefault(name, value)
        return True


RUN_CONTEXT = RunContextFilter()


def install() -> None:
    """Put :data:`RUN_CONTEXT` on the library's loggers (once)."""
    for name in LIBRARY_LOGGERS:
        named = logging.getLogger(name)
        if RUN_CONTEXT not in named.filters:
            named.addFilter(RUN_CONTEXT)
