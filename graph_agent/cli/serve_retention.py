"""``graph-agent serve``'s retention options: ``--thread-ttl``, ``--ttl-strategy``,
``--checkpoint-keep`` and ``--sweep-interval``, and the config file's ``checkpointer.ttl`` (as in
LangGraph's ``langgraph.json``: ``{"strategy", "default_ttl", "sweep_interval_minutes"}``) and
``checkpoint_keep`` (see :mod:`graph_agent.serve.retention`)."""

from __future__ import annotations

import argparse
from typing import Any

from graph_agent.cli.errors import EXIT_USAGE, CliError

__all__ = ["DEFAULTS", "add_retention_options", "read_checkpointer", "retention_of"]

DEFAULTS: dict[str, Any] = {
    "thread_ttl": None,
    "ttl_strategy": "delete",
    "checkpoint_keep": None,
    "sweep_interval": None,
}
"""The options' defaults, when neither the command line nor a config file sets them."""

_EXAMPLE = '"checkpointer": {"ttl": {"strategy": "delete", "default_ttl": 43200}}'
_TTL_KEYS = {
    "strategy": "ttl_strategy",
    "default_ttl": "thread_ttl",
    "sweep_interval_minutes": "sweep_interval",
}


def add_retention_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--thread-ttl",
        type=float,
        metavar="MINUTES",
        help="delete a thread (its runs and checkpoints) idle this long, unless it was created "
        "with a ttl of its own (default: never)",
    )
    parser.add_argument(
        "--ttl-strategy",
        choices=("delete", "keep_latest"),
        help="what --thread-ttl does to an idle thread: delete it (default), or keep_latest: "
        "keep only its latest checkpoint (it can still be read and resumed)",
    )
    parser.add_argument(
        "--checkpoint-keep",
        type=int,
        metavar="N",
        help="keep only the N newest checkpoints of every thread (default: all)",
    )
    parser.add_argument(
        "--sweep-interval",
        type=float,
        metavar="MINUTES",
        help="minutes between two sweeps of expired threads (default: 5)",
    )


def read_checkpointer(path: str, value: Any) -> dict[str, Any]:
    """The options a config file's ``checkpointer`` table sets (its ``ttl``)."""
    if not isinstance(value, dict) or not set(value) <= {"ttl"}:
        raise CliError(f"{path}: checkpointer may only hold ttl", _EXAMPLE, EXIT_USAGE)
    ttl = value.get("ttl", {})
    if not isinstance(ttl, dict) or not set(ttl) <= set(_TTL_KEYS):
        raise CliError(
            f"{path}: checkpointer.ttl takes {', '.join(_TTL_KEYS)}", _EXAMPLE, EXIT_USAGE
        )
    return {_TTL_KEYS[key]: setting for key, setting in ttl.items()}


def retention_of(args: argparse.Namespace) -> Any:
    """The server's :class:`~graph_agent.serve.retention.ServerRetention` from the options (a
    usage error naming the option that makes no sense)."""
    from graph_agent.serve.retention import DEFAULT_SWEEP_MINUTES, ServerRetention

    sweep = args.sweep_interval
    try:
        return ServerRetention(
            thread_ttl=args.thread_ttl,
            strategy=args.ttl_strategy,
            checkpoint_keep=args.checkpoint_keep,
            sweep_minutes=DEFAULT_SWEEP_MINUTES if sweep is None else sweep,
        )
    except (ValueError, TypeError) as exc:
        named = (
            str(exc)
            .replace("thread_ttl", "--thread-ttl (checkpointer.ttl.default_ttl)")
            .replace("strategy", "--ttl-strategy (checkpointer.ttl.strategy)")
            .replace("checkpoint_keep", "--checkpoint-keep")
            .replace("sweep_minutes", "--sweep-interval (checkpointer.ttl.sweep_interval_minutes)")
        )
        raise CliError(named, "e.g. --thread-ttl 43200 --checkpoint-keep 20", EXIT_USAGE) from exc
