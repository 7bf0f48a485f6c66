"""``graph-agent crons list|add|delete``: the crons of a running server (``graph-agent serve``,
or LangGraph Server), over its HTTP API (``--url``, ``--api-key``).

``add ASSISTANT SCHEDULE`` makes a stateless cron (a new thread each run, deleted after it
unless ``--keep-threads``), or one on a thread with ``--thread``; it prints the cron as JSON.
``list`` prints one cron a line: id, schedule (and time zone), assistant, thread, next run.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import httpx

from graph_agent.cli.errors import EXIT_USAGE, CliError
from graph_agent.cli.output import printable, to_json

__all__ = ["DEFAULT_URL", "add_crons_parser", "crons_command"]

DEFAULT_URL = "http://127.0.0.1:8123"
"""Where ``graph-agent serve`` listens by default."""


def add_crons_parser(commands: Any) -> argparse.ArgumentParser:
    """The ``crons`` command and its actions, under ``commands`` (the subparsers)."""
    crons: argparse.ArgumentParser = commands.add_parser(
        "crons",
        help="list, add or delete a server's crons (runs on a schedule)",
        description="The crons of a running server (graph-agent serve, or LangGraph Server).",
    )
    actions = crons.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="the crons, one a line")
    listing.add_argument("--assistant", metavar="ID", help="only this assistant's")
    listing.add_argument("--thread", metavar="ID", help="only those on this thread")
    listing.add_argument("--limit", type=int, default=100, metavar="N", help="default: 100")
    add = actions.add_parser("add", help="schedule runs of an assistant")
    add.add_argument("assistant", metavar="ASSISTANT", help="a served assistant id")
    add.add_argument(
        "schedule", metavar="SCHEDULE", help="5 cron fields, quoted: '0 9 * * 1-5' (UTC)"
    )
    add.add_argument("--input", metavar="JSON", help="the runs' input, e.g. '{\"x\": 1}'")
    add.add_argument("--thread", metavar="ID", help="run on this thread (default: a new one)")
    add.add_argument("--timezone", metavar="TZ", help="read SCHEDULE in this IANA time zone")
    add.add_argument("--end-time", metavar="ISO", help="no run after this time")
    add.add_argument("--metadata", metavar="JSON", help="the cron's metadata, a JSON object")
    add.add_argument(
        "--keep-threads", action="store_true", help="keep each run's new thread (not deleted)"
    )
    delete = actions.add_parser("delete", help="delete a cron")
    delete.add_argument("cron_id", metavar="CRON_ID")
    for action in (listing, add, delete):
        action.add_argument(
            "--url", metavar="URL", default=DEFAULT_URL, help=f"the server (default: {DEFAULT_URL})"
        )
        action.add_argument(
            "--api-key", metavar="KEY", help="the server's API key (default: $GRAPH_AGENT_API_KEY)"
        )
    return crons


def crons_command(args: argparse.Namespace) -> int:
    key = args.api_key or os.environ.get("GRAPH_AGENT_API_KEY")
    headers = {"x-api-key": key} if key else {}
    with httpx.Client(base_url=args.url, headers=headers, timeout=30) as client:
        if args.action == "list":
            body = {"assistant_id": args.assistant, "thread_id": args.thread, "limit": args.limit}
            found = _call(client, "POST", "/runs/crons/search", body)
            for cron in found:
                print(printable(_line(cron)))
            return 0
        if args.action == "delete":
            _call(client, "DELETE", f"/runs/crons/{args.cron_id}")
            print(printable(f"deleted cron {args.cron_id}"))
            return 0
        made = _call(client, "POST", _path(args.thread), _add_body(args))
        print(printable(to_json(made), multiline=True))
        return 0


def _path(thread: str | None) -> str:
    return "/runs/crons" if thread is None else f"/threads/{thread}/runs/crons"


def _add_body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {"assistant_id": args.assistant, "schedule": args.schedule}
    body["input"] = _object(args.input, "--input")
    body["metadata"] = _object(args.metadata, "--metadata")
    body["timezone"] = args.timezone
    body["end_time"] = args.end_time
    if args.thread is None:
        body["on_run_completed"] = "keep" if args.keep_threads else "delete"
    return {key: value for key, value in body.items() if value is not None}


def _object(text: str | None, option: str) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        hint = f"e.g. {option} '{{\"x\": 1}}'"
        raise CliError(f"{option} is no JSON: {exc}", hint, EXIT_USAGE) from None
    if not isinstance(value, dict):
        raise CliError(
            f"{option} must be a JSON object", f"e.g. {option} '{{\"x\": 1}}'", EXIT_USAGE
        )
    return value


def _call(client: httpx.Client, method: str, path: str, body: Any = None) -> Any:
    """The server's answer; a CliError saying what it refused, or that it is not there."""
    try:
        response = client.request(method, path, json=body)
    except httpx.HTTPError as exc:
        raise CliError(
            f"cannot reach the server at {client.base_url}: {exc}",
            "start it (graph-agent serve TARGET) or give its address with --url",
        ) from None
    if response.status_code >= 400:
        try:
            detail = response.json().get("detail", response.text)
        except (ValueError, AttributeError):
            detail = response.text
        hint = "give its key with --api-key" if response.status_code in (401, 403) else ""
        raise CliError(f"the server answered {response.status_code}: {detail}", hint)
    return response.json() if response.content else None


def _line(cron: dict[str, Any]) -> str:
    schedule = cron.get("schedule", "")
    if cron.get("timezone"):
        schedule += f" ({cron['timezone']})"
    where = f"thread {cron['thread_id']}" if cron.get("thread_id") else "new thread"
    state = "" if cron.get("enabled", True) else "  disabled"
    following = cron.get("next_run_date") or "none"
    return (
        f"{cron['cron_id']}  {schedule}  {cron.get('assistant_id')}  {where}  "
        f"next {following}{state}"
    )
