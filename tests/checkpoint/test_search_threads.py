"""``saver.search_threads``: threads found by their newest checkpoint's metadata, on every
saver (the ``saver`` fixture runs each test on memory, SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

import psycopg
import pytest

from graph_agent import END, START, CompileConfig, RunnableConfig, StateGraph
from graph_agent.checkpoint import ThreadInfo
from graph_agent.checkpoint.postgres import PostgresSaver
from graph_agent.checkpoint.postgres_retention import thread_heads_plan
from graph_agent.checkpoint.sqlite import SqliteSaver
from tests.checkpoint.postgres_db import fresh_schema


def counter(saver):
    g = StateGraph("counter")
    g.add_node("step", lambda s: {"n": s.value("n", 0) + 1})
    g.add_edge(START, "step").add_edge("step", END)
    return g.compile(CompileConfig(saver=saver))


def run(app, thread_id, **metadata):
    app.invoke({"n": 0}, RunnableConfig(thread_id=thread_id, metadata=metadata))


def ids(found):
    return [thread.thread_id for thread in found]


def test_threads_are_found_by_the_metadata_their_run_was_given(saver):
    app = counter(saver)
    run(app, "t-ada", user="ada", plan="pro")
    run(app, "t-bob", user="bob", plan="pro")
    run(app, "t-ada-2", user="ada", plan="free")
    assert ids(saver.search_threads({"user": "ada"})) == ["t-ada-2", "t-ada"]
    assert ids(saver.search_threads({"user": "ada", "plan": "pro"})) == ["t-ada"]
    assert ids(saver.search_threads({"plan": "pro"})) == ["t-bob", "t-ada"]
    assert saver.search_threads({"user": "eve"}) == []
    assert saver.search_threads({"missing": None}) == []


def test_without_metadata_every_thread_comes_newest_updated_first(saver):
    app = counter(saver)
    for thread in ["a", "b", "c"]:
        run(app, thread)
    run(app, "a")  # updated last
    assert ids(saver.search_threads()) == ["a", "c", "b"]
    assert ids(saver.search_threads({})) == ["a", "c", "b"]


def test_a_record_holds_the_newest_checkpoint_and_when_the_thread_began_and_changed(saver):
    app = counter(saver)
    run(app, "t", user="ada")
    first = list(saver.list("t"))[-1]
    run(app, "t", user="ada", turn=2)
    newest = saver.get("t")
    [found] = saver.search_threads({"user": "ada"})
    assert isinstance(found, ThreadInfo)
    assert found.thread_id == "t"
    assert found.checkpoint_id == newest.id
    assert found.metadata == newest.metadata
    assert found.metadata["turn"] == 2 and found.metadata["source"] == "loop"
    assert found.created_at == first.created_at
    assert found.updated_at == newest.created_at


def test_only_the_newest_checkpoints_metadata_counts(saver):
    app = counter(saver)
    run(app, "t", stage="draft")
    run(app, "t", stage="final")
    assert saver.search_threads({"stage": "draft"}) == []
    assert ids(saver.search_threads({"stage": "final"})) == ["t"]


def test_the_engines_own_metadata_is_searchable_too(saver):
    app = counter(saver)
    run(app, "t")
    assert ids(saver.search_threads({"source": "loop", "writers": ["step"]})) == ["t"]


def test_pages_of_a_search_cover_every_matching_thread_once(saver):
    app = counter(saver)
    for number in range(7):
        run(app, f"t{number}", even=number % 2 == 0)
    pages = [saver.search_threads({"even": True}, limit=2, offset=start) for start in (0, 2, 4)]
    assert [ids(page) for page in pages] == [["t6", "t4"], ["t2", "t0"], []]
    assert ids(saver.search_threads(limit=3, offset=5)) == ["t1", "t0"]
    assert saver.search_threads(limit=0) == []


def test_a_limit_or_offset_beyond_any_count_pages_like_a_list_slice(saver):
    app = counter(saver)
    run(app, "a")
    run(app, "b")
    assert ids(saver.search_threads(limit=2**64)) == ["b", "a"]
    assert ids(saver.search_threads({"source": "loop"}, limit=2**64, offset=1)) == ["a"]
    assert saver.search_threads(offset=2**63) == []
    assert saver.search_threads({"source": "loop"}, offset=2**64) == []


def test_a_nested_dict_matches_a_dict_holding_its_entries(saver):
    app = counter(saver)
    run(app, "t", who={"name": "ada", "team": {"id": 7, "size": 3}})
    assert ids(saver.search_threads({"who": {"name": "ada"}})) == ["t"]
    assert ids(saver.search_threads({"who": {"team": {"id": 7}}})) == ["t"]
    assert saver.search_threads({"who": {"name": "bob"}}) == []
    assert saver.search_threads({"who": "ada"}) == []


def test_values_compare_as_json_where_true_is_not_one(saver):
    app = counter(saver)
    run(app, "t", flag=True, count=1, tags=["a", "b"])
    assert ids(saver.search_threads({"flag": True, "count": 1.0})) == ["t"]
    assert saver.search_threads({"flag": 1}) == []
    assert saver.search_threads({"count": True}) == []
    assert saver.search_threads({"tags": ["a"]}) == []
    assert ids(saver.search_threads({"tags": ["a", "b"]})) == ["t"]


@pytest.mark.parametrize(
    "key",
    [
        "user') OR 1=1 --",
        "$.user",
        'user" = "ada" OR "1" = "1',
        "user'; DROP TABLE checkpoints; --",
        "\x00",
    ],
)
def test_a_hostile_metadata_key_matches_nothing_and_harms_nothing(saver, key):
    app = counter(saver)
    run(app, "t", user="ada")
    assert saver.search_threads({key: "ada"}) == []
    assert saver.search_threads({key: {"$ne": 1}}) == []
    assert ids(saver.search_threads({"user": "ada"})) == ["t"]
    assert saver.get("t") is not None


def test_subgraph_checkpoints_do_not_make_threads_of_their_own(saver):
    inner = StateGraph("inner")
    inner.add_node("work", lambda s: {"n": 1})
    inner.add_edge(START, "work").add_edge("work", END)
    outer = StateGraph("outer")
    outer.add_node("child", inner.compile())
    outer.add_edge(START, "child").add_edge("child", END)
    app = outer.compile(CompileConfig(saver=saver))
    app.invoke({"n": 0}, RunnableConfig(thread_id="t", metadata={"user": "ada"}))
    found = saver.search_threads()
    assert ids(found) == ["t"]
    assert found[0].checkpoint_id == saver.get("t").id


def test_a_deleted_thread_is_no_longer_found_and_a_copy_is(saver):
    app = counter(saver)
    run(app, "gone", user="ada")
    run(app, "kept", user="ada")
    saver.copy_thread("kept", "copy")
    saver.delete_thread("gone")
    assert sorted(ids(saver.search_threads({"user": "ada"}))) == ["copy", "kept"]


def test_the_async_twin_finds_what_the_sync_call_finds(saver):
    app = counter(saver)
    run(app, "a", user="ada")
    run(app, "b", user="bob")
    found = asyncio.run(saver.asearch_threads({"user": "ada"}, limit=5))
    assert found == saver.search_threads({"user": "ada"}, limit=5)
    assert ids(found) == ["a"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"metadata": ["user", "ada"]}, "metadata=.*give a dict"),
        ({"metadata": {1: "ada"}}, "metadata keys are strings"),
        ({"limit": -1}, "limit=-1.*>= 0"),
        ({"limit": 2.5}, "limit=2.5"),
        ({"offset": -1}, "offset=-1.*>= 0"),
        ({"offset": True}, "offset=True"),
    ],
)
def test_bad_arguments_are_refused_saying_what_to_give(saver, arguments, message):
    with pytest.raises(ValueError, match=message):
        saver.search_threads(**arguments)


def test_a_filter_pages_through_many_threads_read_in_several_batches(saver):
    app = counter(saver)
    run(app, "seed-ada", user="ada")
    run(app, "seed-bob", user="bob")
    for number in range(150):  # copies share their seed's checkpoint ids: ties go by thread id
        saver.copy_thread("seed-bob" if number % 7 == 0 else "seed-ada", f"t{number:03d}")
    saver.copy_thread("seed-bob", "t\udcff-bob")  # a name UTF-8 cannot encode
    bobs = sorted(["seed-bob", "t\udcff-bob"] + [f"t{n:03d}" for n in range(0, 150, 7)])
    assert ids(saver.search_threads({"user": "bob"}, limit=100)) == bobs
    assert ids(saver.search_threads({"user": "bob"}, limit=5, offset=20)) == bobs[20:25]
    adas = ids(saver.search_threads({"user": "ada"}, limit=200))
    assert len(adas) == 129 and adas[0] == "seed-ada" and adas[-1] == "t149"
    [found] = saver.search_threads({"user": "bob"}, limit=1, offset=len(bobs) - 1)
    assert found.thread_id == "t\udcff-bob"
    assert found.created_at == list(saver.list(found.thread_id))[-1].created_at
    assert found.updated_at == saver.get(found.thread_id).created_at


def _sqlite_with(tmp_path, name: str, checkpoints_each: int) -> SqliteSaver:
    """A SQLite saver holding 40 threads of ``checkpoints_each`` checkpoints each."""
    saver = SqliteSaver(tmp_path / f"{name}.db")
    app = counter(saver)
    for _ in range(checkpoints_each // 2):  # a run writes two checkpoints
        run(app, "seed", user="ada")
    for number in range(39):
        saver.copy_thread("seed", f"t{number:02d}")
    return saver


def _vm_steps(saver: SqliteSaver, search: Callable[[], object]) -> int:
    """The SQLite virtual machine instructions ``search`` runs (what it reads, by the row)."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    saver._conn.set_progress_handler(count, 1)
    try:
        search()
    finally:
        saver._conn.set_progress_handler(None, 0)
    return steps


@pytest.mark.parametrize("metadata", [None, {"user": "eve"}], ids=["page", "filter"])
def test_a_sqlite_search_reads_each_threads_newest_checkpoint_not_every_checkpoint(
    tmp_path, metadata
):
    few, many = _sqlite_with(tmp_path, "few", 2), _sqlite_with(tmp_path, "many", 40)
    reading_few = _vm_steps(few, lambda: few.search_threads(metadata))
    reading_many = _vm_steps(many, lambda: many.search_threads(metadata))
    assert reading_many < 1.5 * reading_few  # twenty times the checkpoints, the same reads


def test_a_sqlite_search_finds_threads_and_checkpoints_by_the_primary_key_alone(tmp_path):
    saver = _sqlite_with(tmp_path, "few", 4)
    statements: list[str] = []
    saver._conn.set_trace_callback(statements.append)
    saver.search_threads(limit=10)
    saver.search_threads({"user": "eve"})
    saver._conn.set_trace_callback(None)
    plans = [
        detail
        for sql in statements
        if "checkpoints" in sql
        for *_, detail in saver._conn.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall()
    ]
    assert any("USING PRIMARY KEY" in detail for detail in plans)
    # no full scan of the checkpoints table (named as itself, or as c, n or o)
    assert not [d for d in plans if re.match(r"SCAN (checkpoints|[cno])\b", d)], plans


def _nodes(plan: dict) -> list[tuple[str, str | None]]:
    """Every node of a PostgreSQL JSON plan: its type and the table it reads."""
    nodes = [(plan["Node Type"], plan.get("Relation Name"))]
    for child in plan.get("Plans", ()):
        nodes.extend(_nodes(child))
    return nodes


def test_a_postgres_page_of_threads_reads_only_its_threads_checkpoints_by_index():
    with fresh_schema() as dsn, PostgresSaver(dsn, pool_size=2) as saver:
        app = counter(saver)
        for _ in range(10):
            run(app, "seed", user="ada")
        for number in range(40):
            saver.copy_thread("seed", f"t{number:02d}")
        query = next(thread_heads_plan(10, 0))
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("ANALYZE")
            [explained] = conn.execute(f"EXPLAIN (FORMAT JSON) {query.sql}", query.params)
        plan = explained[0][0]["Plan"]
        reads = [node for node in _nodes(plan) if node[1] == "graph_agent_checkpoints"]
        assert reads and all(kind == "Index Scan" for kind, _ in reads), reads
