"""A second process on a store: ``python -m tests.store.writer KIND WHERE NAME COUNT``.

Puts ``COUNT`` facts ``{"text": ..., "by": NAME}`` under ``("facts", NAME)`` into the SQLite
file or PostgreSQL DSN ``WHERE``, after printing ``ready`` and reading one line from stdin (so
both processes write at once), then prints every namespace it sees; after one more line, the
keys it sees under ``("facts", "parent")``, and exits.
"""

from __future__ import annotations

import json
import sys

from graph_agent.store import BaseStore, HashEmbeddings
from graph_agent.store.postgres import PostgresStore
from graph_agent.store.sqlite import SqliteStore

INDEX = {"embed": HashEmbeddings(64), "fields": ["text"]}


def open_store(kind: str, where: str) -> BaseStore:
    if kind == "sqlite":
        return SqliteStore(where, index=INDEX)
    return PostgresStore(where, index=INDEX, pool_size=2)


def write_facts(store: BaseStore, name: str, count: int) -> None:
    for number in range(count):
        store.put(("facts", name), f"f{number}", {"text": f"fact {number} from {name}", "by": name})


def main() -> None:
    kind, where, name, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    store = open_store(kind, where)
    print("ready", flush=True)
    sys.stdin.readline()
    write_facts(store, name, count)
    print(json.dumps([list(ns) for ns in store.list_namespaces(("facts",))]), flush=True)
    sys.stdin.readline()
    keys = [item.key for item in store.search(("facts", "parent"), limit=1000)]
    print(json.dumps(sorted(keys)), flush=True)
    store.close()


if __name__ == "__main__":
    main()
