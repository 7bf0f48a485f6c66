"""``graph-agent store list|get|search|delete``: the long-term memory a database holds.

A namespace is given label by label (``-n memories -n u42``); the database is a SQLite file
(``--db``, the demo's by default) or PostgreSQL (``--postgres DSN``). Items print as JSON, one
per line.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from graph_agent.cli.errors import CliError
from graph_agent.cli.output import printable, to_json
from graph_agent.store.base import BaseStore, Item

__all__ = ["add_store_parser", "store_command"]


def add_store_parser(commands: Any, default_db: str) -> argparse.ArgumentParser:
    """The ``store`` command and its actions, under ``commands`` (the subparsers)."""
    store: argparse.ArgumentParser = commands.add_parser(
        "store",
        help="list, show, search or delete long-term memory items",
        description="Inspect the long-term memory (store) in a SQLite file or PostgreSQL.",
    )
    actions = store.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="the namespaces under a prefix")
    listing.add_argument("--depth", type=int, metavar="N", help="cut namespaces to N labels")
    get = actions.add_parser("get", help="one item as JSON")
    get.add_argument("key")
    search = actions.add_parser("search", help="items under a namespace prefix, newest first")
    search.add_argument(
        "--filter", metavar="JSON", help='keep items whose value matches, e.g. \'{"kind": "fact"}\''
    )
    search.add_argument("--limit", type=int, default=10, metavar="N", help="default: 10")
    search.add_argument("--offset", type=int, default=0, metavar="N", help="default: 0")
    delete = actions.add_parser("delete", help="delete one item")
    delete.add_argument("key")
    for action in (listing, get, search, delete):
        action.add_argument(
            "-n",
            "--namespace",
            action="append",
            default=[],
            metavar="LABEL",
            help="a label of the namespace (or prefix), repeated in order: -n memories -n u42",
        )
        where = action.add_mutually_exclusive_group()
        where.add_argument(
            "--db", metavar="PATH", default=default_db, help=f"SQLite file (default: {default_db})"
        )
        where.add_argument("--postgres", metavar="DSN", help="a PostgreSQL database instead")
    return store


def store_command(args: argparse.Namespace) -> int:
    store = _open(args)
    namespace = tuple(args.namespace)
    try:
        if args.action == "list":
            for found in store.list_namespaces(namespace, args.depth, limit=1_000_000):
                print(printable(json.dumps(list(found), ensure_ascii=False)))
            return 0
        if not namespace and args.action != "search":
            raise CliError(
                "an item needs its namespace", "give it label by label: -n memories -n u42"
            )
        if args.action == "get":
            item = store.get(namespace, args.key, refresh_ttl=False)
            if item is None:
                raise CliError(f"no item {args.key!r} in namespace {list(namespace)}")
            print(printable(to_json(_shown(item)), multiline=True))
            return 0
        if args.action == "search":
            items = store.search(
                namespace,
                filter=_filter(args.filter),
                limit=args.limit,
                offset=args.offset,
                refresh_ttl=False,
            )
            for item in items:
                print(printable(to_json(_shown(item), indent=None)))
            return 0
        if store.get(namespace, args.key, refresh_ttl=False) is None:
            raise CliError(f"no item {args.key!r} in namespace {list(namespace)}")
        store.delete(namespace, args.key)
        print(printable(f"deleted {args.key!r} from {list(namespace)}"))
        return 0
    finally:
        store.close()


def _open(args: argparse.Namespace) -> BaseStore:
    if args.postgres:
        from graph_agent.store.postgres import PostgresStore

        return PostgresStore(args.postgres, pool_size=1)
    if not Path(args.db).exists():
        raise CliError(f"no database {args.db}", "give an existing SQLite file with --db")
    from graph_agent.store.sqlite import SqliteStore

    return SqliteStore(args.db)


def _filter(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        found = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"--filter is not JSON: {exc}", 'e.g. --filter \'{"kind": "fact"}\''
        ) from exc
    if not isinstance(found, dict):
        raise CliError("--filter must be a JSON object", 'e.g. --filter \'{"kind": "fact"}\'')
    return found


def _shown(item: Item) -> dict[str, Any]:
    return {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }
