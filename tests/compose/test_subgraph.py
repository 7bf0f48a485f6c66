"""A compiled graph as a node of another graph: state in and out, namespaced checkpoints,
nested interrupts, crashes inside the child, handoff with ``Command.PARENT``."""

from __future__ import annotations

import collections
from typing import Any

import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    Command,
    CompileConfig,
    InvalidUpdateError,
    MemorySaver,
    NodeError,
    ReplaceAll,
    RunnableConfig,
    StateGraph,
    interrupt,
)
from graph_agent.checkpoint.sqlite import SqliteSaver
from graph_agent.graph.task import task_id_for

CFG = RunnableConfig(thread_id="t1")


class Runs:
    """Counts node runs and remembers the namespace each node ran in."""

    def __init__(self) -> None:
        self.count: collections.Counter[str] = collections.Counter()
        self.namespaces: dict[str, str] = {}
        self.fail_once: set[str] = set()

    def node(self, name: str) -> Any:
        def run(state: Any, config: RunnableConfig) -> dict[str, Any]:
            self.count[name] += 1
            self.namespaces[name] = config.checkpoint_ns
            if name in self.fail_once:
                self.fail_once.discard(name)
                raise RuntimeError(f"{name} failed")
            return {"log": name}

        return run


def chain(
    name: str, nodes: list[str], runs: Runs, *, extra: dict[str, Any] | None = None
) -> StateGraph:
    """START -> nodes... -> END, each appending its name to ``log`` (``extra``: nodes to use
    instead of the counting ones)."""
    graph = StateGraph(name, key_strategies={"log": AppendStrategy()})
    for node in nodes:
        graph.add_node(node, (extra or {}).get(node) or runs.node(node))
    previous = START
    for node in nodes:
        graph.add_edge(previous, node)
        previous = node
    graph.add_edge(previous, END)
    return graph


def parent_around(child: Any, runs: Runs, saver: Any = None) -> Any:
    """``prep -> work (the child) -> after``, compiled with ``saver``."""
    graph = chain("parent", ["prep", "work", "after"], runs, extra={"work": child})
    return graph.compile(CompileConfig(saver=saver))


def ask(state: Any) -> dict[str, Any]:
    answer = interrupt({"question": "publish?"})
    return {"log": f"ask:{answer}"}


# state in and out


def test_the_child_sees_every_key_of_the_parent():
    seen: dict[str, Any] = {}
    child = StateGraph("child")
    child.add_node("look", lambda state: seen.update(state.data()))
    child.add_edge(START, "look").add_edge("look", END)
    parent = StateGraph("parent", key_strategies={"log": AppendStrategy()})
    parent.add_node("sub", child.compile()).add_edge(START, "sub").add_edge("sub", END)

    parent.compile().invoke({"log": ["a"], "topic": "graphs", "n": 1})

    assert seen == {"log": ["a"], "topic": "graphs", "n": 1}


def test_only_changed_keys_and_appended_items_come_back_to_the_parent(caller):
    child = StateGraph("child", key_strategies={"log": AppendStrategy()})
    child.add_node("work", lambda state: {"log": "child", "n": state["n"] + 1, "same": "s"})
    child.add_edge(START, "work").add_edge("work", END)
    parent = StateGraph("parent", key_strategies={"log": AppendStrategy()})
    parent.add_node("sub", child.compile()).add_edge(START, "sub").add_edge("sub", END)

    outputs = caller.stream(parent.compile(), {"log": ["a", "b"], "n": 1, "same": "s", "u": 0})

    assert outputs[-1].node == "sub"
    assert outputs[-1].update == {"log": ["child"], "n": 2}
    assert outputs[-1].state.data() == {"log": ["a", "b", "child"], "n": 2, "same": "s", "u": 0}


def test_a_child_that_rewrites_an_append_key_sends_replace_all():
    child = StateGraph("child", key_strategies={"log": AppendStrategy()})
    child.add_node("rewrite", lambda state: {"log": ReplaceAll(["fresh"])})
    child.add_edge(START, "rewrite").add_edge("rewrite", END)
    parent = StateGraph("parent", key_strategies={"log": AppendStrategy()})
    parent.add_node("sub", child.compile()).add_edge(START, "sub").add_edge("sub", END)

    outputs = list(parent.compile().stream({"log": ["a", "b"]}))

    assert outputs[-1].update == {"log": ReplaceAll(["fresh"])}
    assert list(outputs[-1].state["log"]) == ["fresh"]


def test_a_subgraph_runs_without_any_saver():
    runs = Runs()
    app = parent_around(chain("child", ["a", "b"], runs).compile(), runs)

    assert list(app.invoke({"log": []})["log"]) == ["prep", "a", "b", "after"]
    assert runs.namespaces["a"] == ""


# checkpoints under a namespace


@pytest.fixture(params=["memory", "sqlite"])
def saver(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    if request.param == "memory":
        yield MemorySaver()
        return
    sqlite = SqliteSaver(str(tmp_path / "threads.db"))
    yield sqlite
    sqlite.close()


def test_the_child_keeps_its_checkpoints_under_its_namespace_in_the_parent_thread(saver):
    runs = Runs()
    child = chain("child", ["a", "b"], runs).compile()
    app = parent_around(child, runs, saver)
    app.invoke({"log": []}, CFG)

    namespace = runs.namespaces["a"]
    (work_step,) = [s for s in app.get_state_history(CFG) if s.next == ("work",)]
    assert namespace == f"work:{_task_id(work_step)}"
    inside = child.with_saver(saver).get_state(
        RunnableConfig(thread_id="t1", checkpoint_ns=namespace)
    )
    assert inside.values == {"log": ["prep", "a", "b"]}
    assert inside.next == ()
    assert inside.config.checkpoint_ns == namespace
    assert [s.metadata["writers"] for s in app.get_state_history(inside.config)][:2] == [
        ["b"],
        ["a"],
    ]
    assert app.get_state(CFG).values == {"log": ["prep", "a", "b", "after"]}


def test_deleting_the_thread_removes_the_childs_checkpoints_too(saver):
    runs = Runs()
    app = parent_around(chain("child", ["a"], runs).compile(), runs, saver)
    app.invoke({"log": []}, CFG)
    inside = RunnableConfig(thread_id="t1", checkpoint_ns=runs.namespaces["a"])
    assert app.get_state(inside).values

    saver.delete_thread("t1")

    assert app.get_state(inside).values == {}
    assert app.get_state(CFG).values == {}


def test_a_grandchild_namespace_nests_in_its_parents_namespace():
    runs = Runs()
    inner = chain("inner", ["deep"], runs).compile()
    middle = chain("middle", ["mid", "inner"], runs, extra={"inner": inner}).compile()
    app = parent_around(middle, runs, MemorySaver())
    app.invoke({"log": []}, CFG)

    outer_ns, deep_ns = runs.namespaces["mid"], runs.namespaces["deep"]
    assert outer_ns.startswith("work:")
    assert deep_ns.startswith(outer_ns + "|inner:")
    snapshot = app.get_state(RunnableConfig(thread_id="t1", checkpoint_ns=deep_ns))
    assert snapshot.values == {"log": ["prep", "mid", "deep"]}


def _task_id(snapshot: Any) -> str:
    """The id of the task that ran ``work`` in the step after ``snapshot``."""
    return task_id_for("t1", snapshot.config.checkpoint_id, "work")


# interrupts inside the child


def test_an_interrupt_in_a_child_pauses_the_parent_once_and_resume_reaches_the_child(caller):
    runs = Runs()
    child = chain("child", ["before", "ask", "after_ask"], runs, extra={"ask": ask}).compile()
    app = parent_around(child, runs, MemorySaver())

    paused = caller.invoke(app, {"log": []}, CFG)

    (pending,) = paused.interrupts
    assert pending.value == {"question": "publish?"}
    assert app.get_state(CFG).next == ("work",)
    assert app.get_state(CFG).interrupts == (pending,)
    final = caller.invoke(app, Command(resume="yes"), CFG)
    assert final.interrupts == ()
    assert list(final["log"]) == ["prep", "before", "ask:yes", "after_ask", "after"]
    assert runs.count == {"prep": 1, "before": 1, "after_ask": 1, "after": 1}


def test_an_interrupt_two_levels_down_surfaces_once_at_the_top_of_the_stream(caller):
    runs = Runs()
    inner = chain("inner", ["deep", "ask"], runs, extra={"ask": ask}).compile()
    middle = chain("middle", ["mid", "inner"], runs, extra={"inner": inner}).compile()
    app = parent_around(middle, runs, MemorySaver())

    outputs = caller.stream(app, {"log": []}, CFG, subgraphs=True)

    top = [o for o in outputs if o.path == () and o.interrupts]
    assert len(top) == 1 and outputs[-1] is top[0]
    assert len(top[0].interrupts) == 1
    assert [o.path for o in outputs if o.interrupts] == [("work", "inner"), ("work",), ()]
    final = caller.invoke(app, Command(resume="no"), CFG)
    assert list(final["log"]) == ["prep", "mid", "deep", "ask:no", "after"]
    assert runs.count == {"prep": 1, "mid": 1, "deep": 1, "after": 1}
    assert final.interrupts == ()


def test_resuming_with_none_asks_the_same_nested_question_again():
    runs = Runs()
    child = chain("child", ["ask"], runs, extra={"ask": ask}).compile()
    app = parent_around(child, runs, MemorySaver())
    (first,) = app.invoke({"log": []}, CFG).interrupts

    (again,) = app.invoke(None, CFG).interrupts

    assert again == first


# crashes inside the child


def test_a_crash_inside_the_child_resumes_inside_it(tmp_path):
    saver = SqliteSaver(str(tmp_path / "crash.db"))
    runs = Runs()
    runs.fail_once.add("b")
    app = parent_around(chain("child", ["a", "b", "c"], runs).compile(), runs, saver)

    with pytest.raises(NodeError) as failure:
        app.invoke({"log": []}, CFG)
    assert failure.value.node == "work"
    assert isinstance(failure.value.__cause__, NodeError) and failure.value.__cause__.node == "b"
    assert app.get_state(CFG).next == ("work",)
    final = app.invoke(None, CFG)

    assert list(final["log"]) == ["prep", "a", "b", "c", "after"]
    assert runs.count == {"prep": 1, "a": 1, "b": 2, "c": 1, "after": 1}
    saver.close()


class LosesTheParentsNextCommit(MemorySaver):
    """Fails the parent's first checkpoint written after ``work`` ran: the child had finished
    and stored its last checkpoint, the parent never recorded it."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = True

    def put(self, checkpoint: Any) -> None:
        if (
            self.armed
            and checkpoint.checkpoint_ns == ""
            and "work" in checkpoint.metadata.get("writers", ())
        ):
            self.armed = False
            raise OSError("disk detached")
        super().put(checkpoint)


def test_a_child_that_finished_is_not_run_again_when_the_parent_lost_its_step():
    runs = Runs()
    saver = LosesTheParentsNextCommit()
    app = parent_around(chain("child", ["a", "b"], runs).compile(), runs, saver)
    with pytest.raises(OSError, match="disk detached"):
        app.invoke({"log": []}, CFG)
    assert app.get_state(CFG).next == ("work",)

    final = app.invoke(None, CFG)

    assert list(final["log"]) == ["prep", "a", "b", "after"]
    assert runs.count == {"prep": 1, "a": 1, "b": 1, "after": 1}


def test_time_travel_to_before_the_child_runs_it_again_on_the_forked_state():
    runs = Runs()
    app = parent_around(chain("child", ["a", "b"], runs).compile(), runs, MemorySaver())
    app.invoke({"log": []}, CFG)
    (before_work,) = [s for s in app.get_state_history(CFG) if s.next == ("work",)]

    edited = app.update_state(before_work.config, {"log": ["edited"]})
    final = app.invoke(None, edited)

    assert list(final["log"]) == ["prep", "edited", "a", "b", "after"]
    assert runs.count == {"prep": 1, "a": 2, "b": 2, "after": 2}


# interrupts inside the child, as a flat graph has them


def test_a_child_failing_after_it_took_the_answer_leaves_nothing_pending_and_none_retries(
    caller,
):
    runs = Runs()
    runs.fail_once.add("check")
    child = chain("child", ["ask", "check"], runs, extra={"ask": ask}).compile()
    app = parent_around(child, runs, MemorySaver())
    caller.invoke(app, {"log": []}, CFG)

    with pytest.raises(NodeError):
        caller.invoke(app, Command(resume="yes"), CFG)

    assert app.get_state(CFG).interrupts == ()
    final = caller.invoke(app, None, CFG)
    assert final.interrupts == ()
    assert list(final["log"]) == ["prep", "ask:yes", "check", "after"]
    assert runs.count == {"prep": 1, "check": 2, "after": 1}


def test_a_child_refusing_its_answer_leaves_the_question_pending_in_the_parent():
    def picky(state: Any) -> dict[str, Any]:
        answer = interrupt("yes or no?")
        if answer not in ("yes", "no"):
            raise ValueError(f"not an answer: {answer!r}")
        return {"log": f"picky:{answer}"}

    runs = Runs()
    child = chain("child", ["picky"], runs, extra={"picky": picky}).compile()
    app = parent_around(child, runs, MemorySaver())
    (question,) = app.invoke({"log": []}, CFG).interrupts

    with pytest.raises(NodeError):
        app.invoke(Command(resume="maybe"), CFG)

    assert app.get_state(CFG).interrupts == (question,)
    final = app.invoke(Command(resume="no"), CFG)
    assert list(final["log"]) == ["prep", "picky:no", "after"]


def test_an_answer_after_update_state_reaches_the_child_waiting_for_it(caller):
    runs = Runs()
    child = chain("child", ["before", "ask"], runs, extra={"ask": ask}).compile()
    app = parent_around(child, runs, MemorySaver())
    (question,) = caller.invoke(app, {"log": []}, CFG).interrupts

    app.update_state(CFG, {"note": "first"})
    app.update_state(CFG, {"note": "second"})

    assert app.get_state(CFG).interrupts == (question,)
    final = caller.invoke(app, Command(resume={question.id: "yes"}), CFG)
    assert final.interrupts == ()
    assert list(final["log"]) == ["prep", "before", "ask:yes", "after"]
    assert final["note"] == "second"
    assert runs.count == {"prep": 1, "before": 1, "after": 1}


def test_a_resumed_child_hands_back_no_key_it_left_alone_after_update_state(caller):
    runs = Runs()
    child = chain("child", ["before", "ask"], runs, extra={"ask": ask}).compile()
    app = parent_around(child, runs, MemorySaver())
    caller.invoke(app, {"log": [], "x": 0}, CFG)

    app.update_state(CFG, {"x": 1})

    final = caller.invoke(app, Command(resume="yes"), CFG)
    assert final.data() == {"log": ["prep", "before", "ask:yes", "after"], "x": 1}


def test_a_resumed_child_hands_back_only_the_items_it_appended_after_update_state(caller):
    runs = Runs()
    child = chain("child", ["before", "ask"], runs, extra={"ask": ask}).compile()
    app = parent_around(child, runs, MemorySaver())
    caller.invoke(app, {"log": []}, CFG)  # the child changes every key it was given

    app.update_state(CFG, {"log": "note"})

    final = caller.invoke(app, Command(resume="yes"), CFG)
    assert list(final["log"]) == ["prep", "note", "before", "ask:yes", "after"]


def test_none_passes_a_static_breakpoint_of_the_child_once(caller):
    runs = Runs()
    child = chain("child", ["a", "b"], runs).compile(
        CompileConfig(saver=MemorySaver(), interrupt_before=["b"])
    )
    app = parent_around(child, runs, MemorySaver())
    (breakpoint_,) = caller.invoke(app, {"log": []}, CFG).interrupts
    assert (breakpoint_.node, breakpoint_.value) == ("b", "interrupt_before")
    assert app.get_state(CFG).interrupts == (breakpoint_,)

    final = caller.invoke(app, None, CFG)

    assert final.interrupts == ()
    assert list(final["log"]) == ["prep", "a", "b", "after"]
    assert runs.count == {"prep": 1, "a": 1, "b": 1, "after": 1}


def test_interrupts_keep_one_order_when_one_is_raised_in_a_child(caller):
    def side_by_side() -> Any:
        child = StateGraph("child")
        child.add_node("inner", lambda state: {"c": interrupt("child?")})
        child.add_edge(START, "inner").add_edge("inner", END)
        graph = StateGraph("parent")
        graph.add_node("sub", child.compile())  # added first: its interrupt comes first
        graph.add_node("ask", lambda state: {"p": interrupt("parent?")})
        graph.add_edge(START, "sub").add_edge(START, "ask")
        graph.add_edge("sub", END).add_edge("ask", END)
        return graph.compile(CompileConfig(saver=MemorySaver()))

    app = side_by_side()
    invoked = caller.invoke(app, {}, CFG).interrupts
    streamed = caller.stream(side_by_side(), {}, CFG)[-1].interrupts

    assert [i.value for i in invoked] == ["child?", "parent?"]
    assert [i.value for i in streamed] == ["child?", "parent?"]
    assert app.get_state(CFG).interrupts == invoked
    assert caller.invoke(app, None, CFG).interrupts == invoked


# handoff


def handoff_desk(
    child: Any, *, destinations: tuple[str, ...] = ("billing", "support")
) -> StateGraph:
    desk = StateGraph("desk", key_strategies={"log": AppendStrategy()})
    desk.add_node("triage", child, destinations=destinations)
    desk.add_node("billing", lambda state: {"log": f"billing:{state['topic']}"})
    desk.add_node("support", lambda state: {"log": "support"})
    desk.add_edge(START, "triage").add_edge("billing", END).add_edge("support", END)
    return desk


def test_a_child_node_hands_off_to_a_node_of_the_parent_with_an_update(caller):
    ran: list[str] = []
    child = StateGraph("triage_graph", key_strategies={"log": AppendStrategy()})
    child.add_node(
        "classify",
        lambda state: Command(goto="billing", graph=Command.PARENT, update={"topic": "refund"}),
    )
    child.add_node("never", lambda state: ran.append("never"))
    child.add_edge(START, "classify").add_edge("classify", "never").add_edge("never", END)
    app = handoff_desk(child.compile()).compile(CompileConfig(saver=MemorySaver()))

    final = caller.invoke(app, {"log": []}, CFG)

    assert final.data() == {"log": ["billing:refund"], "topic": "refund"}
    assert ran == []
    assert [s.next for s in app.get_state_history(CFG)][:2] == [(), ("billing",)]


def test_a_handoff_to_an_undeclared_parent_node_is_an_error_naming_the_fix():
    child = StateGraph("triage_graph")
    child.add_node("classify", lambda state: Command(goto="billing", graph=Command.PARENT))
    child.add_edge(START, "classify").add_edge("classify", END)
    desk = handoff_desk(child.compile(), destinations=("support",))
    desk.add_edge("support", "billing")  # billing is reachable, but not from triage

    with pytest.raises(
        InvalidUpdateError, match=r"did not declare.*destinations=\(\.\.\., 'billing'\)"
    ):
        desk.compile().invoke({"log": []})


def test_command_parent_at_the_top_level_is_an_invalid_update_naming_the_node():
    graph = StateGraph("top")
    graph.add_node("a", lambda state: Command(goto="b", graph=Command.PARENT))
    graph.add_node("b", lambda state: None)
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)

    with pytest.raises(InvalidUpdateError) as error:
        graph.compile().invoke({})

    assert str(error.value) == (
        "node 'a' (step 0) of graph 'top' handed off with Command(graph=Command.PARENT), but "
        "the graph is not running inside another graph; return Command(goto=...) to route here"
    )
    assert (error.value.node, error.value.step) == ("a", 0)


def test_a_command_addressed_to_another_graph_is_refused():
    graph = StateGraph("top")
    graph.add_node("a", lambda state: Command(goto="b", graph="elsewhere"))
    graph.add_edge(START, "a").add_edge("a", END)

    with pytest.raises(
        InvalidUpdateError, match=r"only graph a node can address is Command\.PARENT"
    ):
        graph.compile().invoke({})
