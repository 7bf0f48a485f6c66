"""Two processes on one database see the same facts (SQLite file, PostgreSQL schema)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.checkpoint.postgres_db import fresh_schema
from tests.store.writer import open_store, write_facts

ROOT = Path(__file__).resolve().parents[2]
COUNT = 40


@contextlib.contextmanager
def database(kind: str, tmp_path: Path) -> Iterator[str]:
    if kind == "postgres":
        with fresh_schema() as dsn:
            yield dsn
    else:
        yield str(tmp_path / "shared.db")


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_facts_written_by_two_processes_at_once_are_seen_by_both(kind, tmp_path):
    with database(kind, tmp_path) as where:
        ours = open_store(kind, where)
        other = subprocess.Popen(
            [sys.executable, "-m", "tests.store.writer", kind, where, "other", str(COUNT)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert other.stdout.readline().strip() == "ready"
            other.stdin.write("go\n")
            other.stdin.flush()
            write_facts(ours, "parent", COUNT)
            seen_by_other = json.loads(other.stdout.readline())
            other.stdin.write("again\n")
            other.stdin.flush()
            parents_seen_by_other = json.loads(other.stdout.readline())
            assert other.wait(timeout=60) == 0
        finally:
            if other.poll() is None:
                other.kill()
        assert ["facts", "other"] in seen_by_other
        assert parents_seen_by_other == sorted(f"f{n}" for n in range(COUNT))
        assert sorted(ours.list_namespaces(("facts",))) == [("facts", "other"), ("facts", "parent")]
        theirs = ours.search(("facts", "other"), limit=100)
        assert sorted(item.key for item in theirs) == sorted(f"f{n}" for n in range(COUNT))
        assert {item.value["by"] for item in theirs} == {"other"}
        assert ours.get(("facts", "other"), "f7").value["text"] == "fact 7 from other"
        ranked = ours.search(("facts",), query="fact 7 from other", limit=1)
        assert (ranked[0].namespace, ranked[0].key) == (("facts", "other"), "f7")
        ours.close()
