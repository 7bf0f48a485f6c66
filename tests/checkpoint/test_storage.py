"""Checkpoint storage grows with the work (O(T)), and every checkpoint loads exactly."""

from __future__ import annotations

from graph_agent import (
    END,
    START,
    AppendStrategy,
    CompileConfig,
    RemoveMessage,
    RunnableConfig,
    StateGraph,
)


def conversation(saver):
    """A chat-shaped loop: each step appends one message until `turns` are done."""
    g = StateGraph("chat", key_strategies={"messages": AppendStrategy()})

    def speak(state):
        n = len(state["messages"])
        return {
            "messages": {"id": f"m{n}", "role": "assistant", "text": f"message number {n} " * 4}
        }

    g.add_node("speak", speak)
    g.add_edge(START, "speak")
    g.add_conditional_edges("speak", lambda s: "speak" if len(s["messages"]) < s["turns"] else END)
    return g.compile(CompileConfig(saver=saver))


def stored_after(saver, turns: int) -> int:
    thread = f"chat-{turns}"
    config = RunnableConfig(thread_id=thread, max_steps=1000)
    conversation(saver).invoke({"turns": turns, "messages": []}, config)
    return saver.stored_bytes(thread)


def test_two_hundred_steps_store_less_than_six_times_fifty_steps(saver):
    fifty, two_hundred = stored_after(saver, 50), stored_after(saver, 200)
    assert two_hundred < 6 * fifty, (fifty, two_hundred)


def test_every_checkpoint_loads_the_state_that_was_live_then(saver):
    app = conversation(saver)
    config = RunnableConfig(thread_id="live", max_steps=1000)
    live = {
        o.checkpoint_id: o.state.data() for o in app.stream({"turns": 150, "messages": []}, config)
    }
    assert len(live) == 151
    for checkpoint_id, state in live.items():
        assert saver.get("live", checkpoint_id).values == state


def test_a_removal_stores_a_full_copy_and_later_loads_stay_exact(saver):
    g = StateGraph("edit", key_strategies={"log": AppendStrategy()})
    g.add_node("add", lambda s: {"log": [{"id": "a"}, {"id": "b"}, {"id": "c"}]})
    g.add_node("drop", lambda s: {"log": RemoveMessage("b")})
    g.add_node("more", lambda s: {"log": {"id": "d"}})
    g.add_edge(START, "add").add_edge("add", "drop").add_edge("drop", "more").add_edge("more", END)
    app = g.compile(CompileConfig(saver=saver))
    config = RunnableConfig(thread_id="edit")
    app.invoke({"log": []}, config)
    history = list(saver.list("edit"))
    assert [[i["id"] for i in cp.values["log"]] for cp in history] == [
        ["a", "c", "d"],
        ["a", "c"],
        ["a", "b", "c"],
        [],
    ]


def parts_behind(saver, thread: str) -> list[int]:
    """For each checkpoint of the thread, oldest first: the appended parts a load of it reads
    after the full copy."""
    return [
        len(cp.chains.get("messages", ((None, 0),))) - 1
        for cp in reversed(list(saver.list(thread)))
    ]


def test_a_long_list_is_stored_whole_again_once_tripled_and_its_parts_merged_as_they_pile_up(
    saver,
):
    config = RunnableConfig(thread_id="long", max_steps=1000)
    conversation(saver).invoke({"turns": 300, "messages": []}, config)

    depths = parts_behind(saver, "long")
    full_copies = [i for i, depth in enumerate(depths) if depth == 0]
    # whole at the input (no items), then at the write that brings the items appended since
    # to 64 once the list has tripled since the last full copy (64 items, then 192)
    assert full_copies == [0, 64, 192]
    # one item per step: 31 parts, then the 32nd takes them in (one part of 32 items), and so
    # on: a load reads at most 31 parts per tier, never one part per step
    assert max(depths) == 34
    for cp in saver.list("long"):
        sizes = [size for _, size in cp.chains.get("messages", ())][1:]
        assert sum(size < 32 for size in sizes) <= 31 and sum(size >= 32 for size in sizes) <= 31
    for cp in saver.list("long", limit=5):  # the chains still load exactly
        assert [m["id"] for m in cp.values["messages"]] == [f"m{i}" for i in range(cp.step + 1)]


def test_the_chain_carries_over_from_call_to_call():
    # short calls on one thread: each starts from the chain its checkpoint was loaded with
    from graph_agent import MemorySaver

    saver = MemorySaver()
    config = RunnableConfig(thread_id="turns", max_steps=1000)
    app = conversation(saver)
    app.invoke({"turns": 10, "messages": []}, config)
    for turns in range(20, 310, 10):
        app.invoke({"turns": turns}, config)

    depths = parts_behind(saver, "turns")
    assert max(depths) == 34
    assert depths.count(0) == 3
    newest = saver.get("turns")
    assert [m["id"] for m in newest.values["messages"]] == [f"m{i}" for i in range(300)]


def test_a_write_that_appends_nothing_stores_nothing(saver):
    g = StateGraph("ticks", key_strategies={"log": AppendStrategy()})
    g.add_node("tick", lambda s: {"log": [], "n": s["n"] + 1})
    g.add_edge(START, "tick")
    g.add_conditional_edges("tick", lambda s: END if s["n"] >= 100 else "tick")
    app = g.compile(CompileConfig(saver=saver))
    config = RunnableConfig(thread_id="ticks", max_steps=1000)

    app.invoke({"log": ["a", "b"], "n": 0}, config)

    newest = saver.get("ticks")
    assert newest.values["log"] == ["a", "b"] and newest.values["n"] == 100
    assert newest.chains == {}  # read from the input's full copy: no empty deltas in between
    assert newest.versions["log"] == list(saver.list("ticks"))[-1].id


def test_a_load_after_a_few_more_steps_decodes_only_the_parts_added_since(saver, monkeypatch):
    from graph_agent.checkpoint import codec

    app = conversation(saver)
    config = RunnableConfig(thread_id="chat", max_steps=1000)
    app.invoke({"turns": 200, "messages": []}, config)
    saver.get("chat")  # the first load of the thread decodes its whole chain
    app.invoke({"turns": 203}, config)  # three more parts

    decoded: list[bytes] = []
    real_loads = codec.loads
    monkeypatch.setattr(codec, "loads", lambda data: decoded.append(data) or real_loads(data))
    newest = saver.get("chat")

    assert [m["id"] for m in newest.values["messages"]] == [f"m{i}" for i in range(203)]
    parts = len(newest.chains["messages"]) - 1
    # the three new parts, the header and the replaced key "turns": not the whole chain
    assert len(decoded) <= 5 < parts


def test_a_loaded_list_is_the_callers_own(saver):
    app = conversation(saver)
    config = RunnableConfig(thread_id="own", max_steps=1000)
    app.invoke({"turns": 40, "messages": []}, config)
    first = saver.get("own")
    first.values["messages"].clear()  # the caller's list: the saver keeps its own

    again = saver.get("own")
    assert len(again.values["messages"]) == 40
    assert again.values["messages"] is not first.values["messages"]


def test_the_lists_a_saver_keeps_stay_within_their_bound():
    from graph_agent.checkpoint.codec import LoadedLists

    kept = LoadedLists(max_items=100)
    for version in range(10):
        kept.keep("t", "", "messages", f"v{version}", (tuple(range(30)), [30]))
    chain = [(f"v{version}", "delta", None, b"") for version in reversed(range(10))]
    found = kept.newest_in("t", "", "messages", chain)
    assert found is not None and found[0] == 0  # the newest is kept
    assert kept.newest_in("t", "", "messages", chain[7:]) is None  # the oldest were dropped
    assert kept._items <= 100


def test_a_thread_pruned_by_another_process_loads_where_this_saver_kept_its_lists(saver, reopen):
    """A prune stores an append key whole nearer its end, so the chain this saver kept the
    list of is shorter now: the next load rebuilds it from the rows (it was a ValueError)."""
    app = conversation(saver)
    config = RunnableConfig(thread_id="pruned", max_steps=1000)
    app.invoke({"turns": 40, "messages": []}, config)
    assert len(saver.get("pruned").values["messages"]) == 40  # its list kept, parts and all

    other = reopen()
    other.prune("pruned", keep_last=1)
    app.invoke({"turns": 43}, config)

    newest = saver.get("pruned")
    assert [m["id"] for m in newest.values["messages"]] == [f"m{i}" for i in range(43)]
    assert newest.values == reopen().get("pruned").values
