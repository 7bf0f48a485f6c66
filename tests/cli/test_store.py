"""``graph-agent store list|get|search|delete``, and the demo's memory of the user across threads."""

from __future__ import annotations

import json

from graph_agent.agent.memory import memory_id
from graph_agent.store.postgres import PostgresStore
from tests.checkpoint.postgres_db import fresh_schema

NAME_KEY = memory_id("The user's name is Ada.")


def test_the_demo_remembers_the_users_name_on_a_new_thread_and_the_store_shows_it(cli):
    told = cli("demo", "--plain", "--db", "d.db", "Hi, my name is Ada")
    assert told.code == 0, told.err
    asked = cli("demo", "--plain", "--db", "d.db", "What is my name?")
    assert "Your name is Ada." in asked.out
    stranger = cli("demo", "--plain", "--db", "d.db", "--user", "bob", "What is my name?")
    assert "I do not know your name yet." in stranger.out

    listed = cli("store", "list", "--db", "d.db")
    assert listed.code == 0, listed.err
    assert [json.loads(line) for line in listed.out.splitlines()] == [["memories", "me"]]
    found = cli("store", "search", "--db", "d.db", "-n", "memories")
    [item] = [json.loads(line) for line in found.out.splitlines()]
    assert (item["namespace"], item["key"]) == (["memories", "me"], NAME_KEY)
    assert item["value"] == {"text": "The user's name is Ada."}
    shown = cli("store", "get", "--db", "d.db", "-n", "memories", "-n", "me", NAME_KEY)
    assert json.loads(shown.out)["value"]["text"] == "The user's name is Ada."

    deleted = cli("store", "delete", "--db", "d.db", "-n", "memories", "-n", "me", NAME_KEY)
    assert deleted.code == 0, deleted.err
    assert cli("store", "search", "--db", "d.db").out == ""
    again = cli("demo", "--plain", "--db", "d.db", "What is my name?")
    assert "I do not know your name yet." in again.out


def test_search_filters_and_pages_on_postgres(cli):
    with fresh_schema() as dsn:
        with PostgresStore(dsn) as store:
            for number in range(5):
                store.put(("notes", "u1"), f"n{number}", {"kind": "odd" if number % 2 else "even"})
        result = cli(
            "store", "search", "--postgres", dsn, "-n", "notes",
            "--filter", '{"kind": "even"}', "--limit", "2", "--offset", "1",
        )  # fmt: skip
        assert result.code == 0, result.err
        keys = [json.loads(line)["key"] for line in result.out.splitlines()]
        assert len(keys) == 2 and set(keys) <= {"n0", "n2", "n4"}
        depth = cli("store", "list", "--postgres", dsn, "--depth", "1")
        assert depth.out.splitlines() == ['["notes"]']


def test_mistakes_are_one_clear_line(cli):
    assert "no database missing.db" in cli("store", "list", "--db", "missing.db").err
    cli("demo", "--plain", "--db", "d.db", "What is 2 + 2?")
    bad = cli("store", "search", "--db", "d.db", "--filter", "{kind: 1}")
    assert bad.code != 0 and "--filter is not JSON" in bad.err
    absent = cli("store", "get", "--db", "d.db", "-n", "memories", "nope")
    assert absent.code != 0 and "no item 'nope'" in absent.err
    no_namespace = cli("store", "get", "--db", "d.db", "nope")
    assert "an item needs its namespace" in no_namespace.err
