"""Flow agents with scripted models: SequentialAgent, ParallelAgent, LlmRoutingAgent, LoopAgent."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from typing import Any

import pytest

from graph_agent import (
    GraphSetupError,
    LlmRoutingAgent,
    LoopAgent,
    NodeError,
    ParallelAgent,
    RunnableConfig,
    SequentialAgent,
    ToolResponseMessage,
    UserMessage,
    tool,
)
from graph_agent.graph.errors import GraphRuntimeError
from graph_agent.models import ScriptedChatModel
from tests.compose.agents import (
    RefusePasswords,
    call_with_config,
    calls,
    echo,
    scripted,
    texts,
)

CFG = RunnableConfig(thread_id="t1")


def meeting_agents(*names: str) -> tuple[list[Any], list[int]]:
    """Agents whose one tool waits at a barrier shared by them all (5 s at most), so they
    can only all finish when they run at the same time; also returns the peak of
    simultaneous tool calls."""
    barrier = threading.Barrier(len(names), timeout=5)
    lock = threading.Lock()
    active, peak = [0], [0]

    @tool
    def meet() -> str:
        """Wait until every agent has arrived."""
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            barrier.wait()
            return "met"
        finally:
            with lock:
                active[0] -= 1

    agents = [
        scripted(
            name,
            calls((f"c-{name}", "meet", {})),
            lambda request, name=name: f"{name}: {request.messages[-1].text}",
            tools=[meet],
        )
        for name in names
    ]
    return agents, peak


def tool_results(state: Any) -> list[str]:
    return [m.content for m in state["messages"] if isinstance(m, ToolResponseMessage)]


# SequentialAgent


def test_a_sequential_team_runs_its_agents_in_order_each_seeing_the_previous_answer(caller):
    writer = scripted("writer", "A draft.")
    editor = echo("editor")
    team = SequentialAgent("pipeline", [writer, editor])

    final = caller.invoke(team, "Write about graphs.")

    assert texts(final) == ["Write about graphs.", "A draft.", "editor: A draft."]
    assert final["outputs"] == {"writer": "A draft.", "editor": "editor: A draft."}
    assert [m.text for m in editor.model.requests[0].messages] == [
        "Write about graphs.",
        "A draft.",
    ]


def test_call_returns_the_last_agents_answer():
    team = SequentialAgent("pipeline", [scripted("writer", "A draft."), echo("editor")])

    assert team.call("Write.").text == "editor: A draft."


def test_call_never_returns_an_earlier_turns_answer_when_the_team_gives_none():
    team = SequentialAgent("pipeline", [echo("guarded", hooks=[RefusePasswords()])])
    assert team.call("Capital of France?", CFG).text == "guarded: Capital of France?"
    with pytest.raises(GraphRuntimeError, match="without an answer"):
        team.call("Tell me the admin password", CFG)
    with pytest.raises(GraphRuntimeError, match="without an answer"):
        team.call({"messages": [], "topic": "passwords"}, CFG)  # input without a message


@pytest.mark.parametrize(
    "method", ["call", "invoke", "stream", "acall", "ainvoke", "astream", "get_state"]
)
def test_a_team_refuses_a_dict_config_naming_the_runnable_config_to_pass(method):
    team = SequentialAgent("pipeline", [echo("first")])
    fix = re.escape("pass RunnableConfig(thread_id='t')")
    with pytest.raises(TypeError, match=rf"{method}\(\) takes a RunnableConfig.*{fix}"):
        call_with_config(team, method, {"configurable": {"thread_id": "t"}})


def test_a_team_keeps_its_conversation_on_a_thread():
    team = SequentialAgent("pipeline", [echo("first"), echo("second")])
    team.invoke("one", CFG)

    final = team.invoke("two", CFG)

    assert texts(final)[-3:] == ["two", "first: two", "second: first: two"]
    assert texts(team.get_state(CFG).values) == texts(final)


# ParallelAgent


def test_a_parallel_team_runs_its_agents_at_the_same_time(caller):
    agents, peak = meeting_agents("alpha", "beta", "gamma")
    team = ParallelAgent("panel", agents)

    final = caller.invoke(team, "Meet.")

    assert tool_results(final) == []
    assert texts(final) == ["Meet.", "alpha: met", "beta: met", "gamma: met"]
    assert final["outputs"] == {"alpha": "alpha: met", "beta": "beta: met", "gamma": "gamma: met"}
    assert peak == [3]


def test_max_concurrency_one_runs_the_parallel_agents_one_at_a_time():
    slow_calls: list[str] = []
    lock = threading.Lock()
    active, peak = [0], [0]

    @tool
    def slow(name: str) -> str:
        """Take a while."""
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.02)
        with lock:
            active[0] -= 1
        slow_calls.append(name)
        return "done"

    agents = [
        scripted(
            name, calls((f"c-{name}", "slow", {"name": name})), f"{name} finished", tools=[slow]
        )
        for name in ("alpha", "beta", "gamma")
    ]
    team = ParallelAgent("panel", agents, max_concurrency=1)

    final = team.invoke("Go.")

    assert peak == [1]
    assert sorted(slow_calls) == ["alpha", "beta", "gamma"]
    assert texts(final)[1:] == ["alpha finished", "beta finished", "gamma finished"]


def test_key_strategies_change_how_parallel_answers_merge():
    def ballot(old: Any, new: Any) -> list[str]:
        return [*(old or []), *new.values()]

    team = ParallelAgent(
        "vote",
        [scripted("alpha", "yes"), scripted("beta", "no"), scripted("gamma", "yes")],
        key_strategies={"outputs": ballot},
    )

    final = team.invoke("Should we ship?")

    assert final["outputs"] == ["yes", "no", "yes"]


def test_every_parallel_agent_sees_the_same_input():
    first, second = echo("first"), echo("second")

    ParallelAgent("pair", [first, second]).invoke("Same question.")

    for agent in (first, second):
        assert [m.text for m in agent.model.requests[0].messages] == ["Same question."]


# LlmRoutingAgent


def desk(
    router: ScriptedChatModel, *, fallback: bool = True
) -> tuple[LlmRoutingAgent, dict[str, Any]]:
    agents = {
        name: echo(name, description=f"handles {name} questions")
        for name in ("tech", "billing", "sales")
    }
    general = echo("general") if fallback else None
    team = LlmRoutingAgent("desk", router, list(agents.values()), fallback=general)
    if general is not None:
        agents["general"] = general
    return team, agents


def test_the_routing_model_picks_one_agent(caller):
    router = ScriptedChatModel(['{"agents": ["billing"]}'])
    team, agents = desk(router)

    final = caller.invoke(team, "Why was I charged twice?")

    assert texts(final) == ["Why was I charged twice?", "billing: Why was I charged twice?"]
    assert final["outputs"] == {"billing": "billing: Why was I charged twice?"}
    assert [
        len(agents[name].model.requests) for name in ("tech", "billing", "sales", "general")
    ] == [0, 1, 0, 0]


def test_the_routing_model_sees_every_agent_described_and_is_asked_for_json():
    router = ScriptedChatModel(['{"agents": ["tech"]}'])
    team, _ = desk(router)

    team.invoke("My wifi is down.")

    (request,) = router.requests
    prompt = request.messages[0].text
    for name in ("tech", "billing", "sales"):
        assert f"- {name}: handles {name} questions" in prompt
    assert "general" not in prompt
    assert '{"agents": ["name", ...]}' in prompt
    assert request.messages[-1].text == "My wifi is down."


def test_several_chosen_agents_run_in_parallel_and_merge_in_agent_order(caller):
    (alpha, gamma), peak = meeting_agents("alpha", "gamma")
    router = ScriptedChatModel(['{"agents": ["gamma", "alpha"]}'])
    beta_never = scripted("beta")
    team = LlmRoutingAgent("desk", router, [alpha, beta_never, gamma])

    final = caller.invoke(team, "Meet.")

    assert texts(final) == ["Meet.", "alpha: met", "gamma: met"]
    assert final["outputs"] == {"alpha": "alpha: met", "gamma": "gamma: met"}
    assert beta_never.model.requests == []
    assert peak == [2]


def test_saas_routing_answer_gives_each_chosen_agent_its_own_query(caller):
    router = ScriptedChatModel(
        [
            '{"agents": [{"agent": "billing", "query": "Refund the double charge."}, '
            '{"agent": "tech", "query": "Why is the wifi down?"}]}'
        ]
    )
    team, agents = desk(router)

    final = caller.invoke(team, "I was charged twice and my wifi is down.")

    assert final["outputs"] == {
        "tech": "tech: Why is the wifi down?",
        "billing": "billing: Refund the double charge.",
    }
    (billing_request,) = agents["billing"].model.requests
    assert [m.text for m in billing_request.messages] == [
        "I was charged twice and my wifi is down.",
        "Refund the double charge.",
    ]
    assert texts(final) == [  # the queries stay inside the agents' own runs
        "I was charged twice and my wifi is down.",
        "tech: Why is the wifi down?",
        "billing: Refund the double charge.",
    ]
    assert "_route_queries" not in final.data()


def test_a_routing_answer_may_mix_names_and_queries(caller):
    router = ScriptedChatModel(['{"agents": ["tech", {"agent": "sales", "query": "Discounts?"}]}'])
    team, _ = desk(router)

    final = caller.invoke(team, "Help.")

    assert final["outputs"] == {"tech": "tech: Help.", "sales": "sales: Discounts?"}


def test_a_query_from_an_earlier_routing_never_reaches_a_later_turn():
    router = ScriptedChatModel(
        ['{"agents": [{"agent": "tech", "query": "Reset the router."}]}', '{"agents": ["tech"]}']
    )
    team, _ = desk(router)
    team.invoke("first", CFG)

    final = team.invoke("second", CFG)

    assert final["outputs"]["tech"] == "tech: second"


@pytest.mark.parametrize(
    "reply",
    [
        '{"agents": ["nobody"]}',
        "I think billing.",
        '{"agents": []}',
        '{"agent": "billing"}',
        '{"agents": [{"agent": "nobody", "query": "x"}]}',
        '{"agents": [{"query": "no agent named"}]}',
    ],
    ids=["unknown-name", "not-json", "empty", "wrong-shape", "unknown-in-query", "no-agent-field"],
)
def test_an_invalid_choice_goes_to_the_fallback_agent(reply):
    team, agents = desk(ScriptedChatModel([reply]))

    final = team.invoke("Hello?")

    assert texts(final) == ["Hello?", "general: Hello?"]
    assert [len(agents[n].model.requests) for n in ("tech", "billing", "sales")] == [0, 0, 0]


def test_a_fenced_json_choice_is_understood():
    team, _ = desk(ScriptedChatModel(['```json\n{"agents": ["sales"]}\n```']))

    assert team.call("A discount?").text == "sales: A discount?"


def test_without_a_fallback_an_invalid_choice_is_a_clear_error():
    team, _ = desk(ScriptedChatModel(["nobody"]), fallback=False)

    with pytest.raises(NodeError) as failure:
        team.invoke("Hello?")

    assert failure.value.node == "route"
    cause = failure.value.__cause__
    assert isinstance(cause, GraphRuntimeError)
    assert str(cause) == (
        "desk: the routing model chose no known agent ('nobody'); known: tech, billing, sales; "
        "give the team a fallback agent"
    )


def test_an_agent_named_like_the_router_is_refused():
    team = LlmRoutingAgent("desk", ScriptedChatModel([]), [echo("route")])

    with pytest.raises(GraphSetupError, match="no agent may be named 'route'"):
        team.invoke("x")


# LoopAgent


def counting_agent(name: str = "worker") -> Any:
    count = [0]

    def reply(request: Any) -> str:
        count[0] += 1
        return f"pass {count[0]}"

    return scripted(name, *[reply] * 20)


def test_a_loop_runs_its_agent_a_number_of_times(caller):
    team = LoopAgent("refine", counting_agent(), times=3)

    final = caller.invoke(team, "Refine the draft.")

    assert texts(final) == ["Refine the draft.", "pass 1", "pass 2", "pass 3"]
    assert final["outputs"] == {"worker": "pass 3"}
    assert "_loop" not in final.data()


def test_a_loop_counts_again_on_each_new_input_on_the_same_thread(caller):
    team = LoopAgent("refine", counting_agent(), times=2)
    caller.invoke(team, "first", CFG)

    final = caller.invoke(team, "second", CFG)

    assert texts(final) == ["first", "pass 1", "pass 2", "second", "pass 3", "pass 4"]


def test_a_loop_over_items_gives_the_agent_one_item_at_a_time(caller):
    worker = echo("worker")
    team = LoopAgent("each", worker, items_key="todo")

    final = caller.invoke(
        team, {"todo": ["wash", "dry", "fold"], "messages": [UserMessage("Chores.")]}
    )

    assert texts(final) == [
        "Chores.",
        "wash",
        "worker: wash",
        "dry",
        "worker: dry",
        "fold",
        "worker: fold",
    ]
    assert [[m.text for m in r.messages] for r in worker.model.requests] == [
        ["wash"],
        ["dry"],
        ["fold"],
    ]
    assert final["item"] == "fold"


def test_a_loop_runs_until_its_condition_holds():
    team = LoopAgent(
        "refine", counting_agent(), until=lambda state: state["outputs"]["worker"] == "pass 4"
    )

    final = team.invoke("Refine.")

    assert texts(final)[-1] == "pass 4" and len(texts(final)) == 5


def test_max_loops_bounds_a_loop_whose_condition_never_holds():
    team = LoopAgent("refine", counting_agent(), until=lambda state: False, max_loops=3)

    assert texts(team.invoke("Refine."))[1:] == ["pass 1", "pass 2", "pass 3"]


def test_max_loops_also_bounds_times():
    team = LoopAgent("refine", counting_agent(), times=5, max_loops=2)

    assert texts(team.invoke("Refine."))[1:] == ["pass 1", "pass 2"]


@pytest.mark.parametrize(
    "modes",
    [{}, {"times": 2, "until": lambda state: True}, {"times": 2, "items_key": "todo"}],
    ids=["none", "times-and-until", "times-and-items"],
)
def test_a_loop_needs_exactly_one_mode(modes):
    with pytest.raises(GraphSetupError, match="exactly one of times=, items_key= or until="):
        LoopAgent("refine", echo("worker"), **modes)


def test_a_loop_needs_at_least_one_pass():
    with pytest.raises(GraphSetupError, match="times must be at least 1"):
        LoopAgent("refine", echo("worker"), times=0)


# teams in general


def test_teams_nest_and_a_nested_team_counts_as_one_agent(caller):
    research = ParallelAgent(
        "research", [scripted("web", "Web says A."), scripted("papers", "Papers say B.")]
    )
    writer = echo("writer")
    team = SequentialAgent("team", [research, writer])

    final = caller.invoke(team, "Write a report.")

    assert texts(final) == [
        "Write a report.",
        "Web says A.",
        "Papers say B.",
        "writer: Papers say B.",
    ]
    assert [m.text for m in writer.model.requests[0].messages] == texts(final)[:3]
    assert final["outputs"] == {
        "research": "Web says A.\n\nPapers say B.",
        "writer": "writer: Papers say B.",
    }


def test_a_sequential_team_inside_a_team_answers_with_its_last_answer_only():
    drafting = SequentialAgent(
        "drafting", [scripted("writer", "A draft."), scripted("editor", "An edit.")]
    )
    team = SequentialAgent("team", [drafting, echo("publisher")])

    final = team.invoke("Publish something.")

    assert texts(final) == ["Publish something.", "An edit.", "publisher: An edit."]


def test_a_parallel_team_as_a_tool_answers_with_every_agents_answer():
    panel = ParallelAgent("panel", [scripted("alpha", "Yes."), scripted("beta", "No.")])
    boss = scripted(
        "boss", calls(("c1", "panel", {"request": "Ship?"})), "Split vote.", tools=[panel.as_tool()]
    )

    final = boss.invoke("Ask the panel.")

    assert tool_results(final) == ["Yes.\n\nNo."]


def test_a_team_can_be_a_tool_of_an_agent():
    team = SequentialAgent("pipeline", [scripted("writer", "A draft."), echo("editor")])
    boss = scripted(
        "boss",
        calls(("c1", "pipeline", {"request": "Write."})),
        lambda request: f"boss: {request.messages[-1].text}",
        tools=[team.as_tool(description="Writes and edits.")],
    )

    assert boss.call("Get me a text.").text == "boss: editor: A draft."


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: SequentialAgent("empty", []), "empty: a team needs at least one agent"),
        (
            lambda: ParallelAgent("twins", [echo("same"), echo("same")]),
            r"twins: agent names must be unique within a team, \['same'\] repeat",
        ),
    ],
    ids=["empty", "duplicate-names"],
)
def test_a_malformed_team_is_refused_at_construction(make, message):
    with pytest.raises(GraphSetupError, match=message):
        make()


def test_acall_returns_the_teams_answer():
    import asyncio

    team = SequentialAgent("pipeline", [scripted("writer", "A draft."), echo("editor")])

    assert asyncio.run(team.acall("Write.")).text == "editor: A draft."


def test_a_team_streams_in_a_stream_mode_its_agents_as_tasks(caller):
    team = SequentialAgent("pipeline", [scripted("writer", "A draft."), echo("editor")])
    if caller.kind == "sync":
        parts = list(team.stream("Write.", CFG, stream_mode="tasks"))
    else:

        async def main() -> list[Any]:
            return [part async for part in team.astream("Write.", CFG, stream_mode="tasks")]

        parts = asyncio.run(main())
    starts = [part["name"] for part in parts if "input" in part]
    ends = [part["name"] for part in parts if "result" in part]
    assert starts == ends
    assert starts.index("writer") < starts.index("editor")
