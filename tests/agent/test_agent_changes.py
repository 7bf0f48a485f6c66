"""Changing a made agent (``agent.model = other``, a new instruction, new options): its graph is
built again from one description, so its hooks and its nodes see the same model and settings,
and a run already going keeps what it started with."""

from __future__ import annotations

import threading

import pytest

from graph_agent import MemorySaver, RunnableConfig
from graph_agent.agent import ModelHook, ReactAgent, SequentialAgent
from graph_agent.agent.spec import AgentSpec
from graph_agent.messages import AssistantMessage, SystemMessage
from graph_agent.models import ScriptedChatModel
from graph_agent.models.base import ModelRequest


class SeesModel(ModelHook):
    """Records which model the hook is told its agent has, at each model call."""

    def __init__(self) -> None:
        self.models: list[object] = []

    def before_model(self, state, config, *, agent: AgentSpec):
        self.models.append(agent.model)


def test_after_the_model_is_replaced_hooks_and_the_model_node_see_the_same_new_model():
    first, second = ScriptedChatModel(["from the first"]), ScriptedChatModel(["from the second"])
    hook = SeesModel()
    agent = ReactAgent("helper", first, hooks=[hook])
    assert agent.call("hello").text == "from the first"

    agent.model = second
    answer = agent.call("hello again")

    assert answer.text == "from the second"
    assert hook.models == [first, second]
    assert len(first.requests) == 1 and len(second.requests) == 1
    assert agent.spec.model is second


def test_a_model_set_before_the_first_call_is_the_one_both_see():
    hook = SeesModel()
    agent = ReactAgent("helper", ScriptedChatModel(["unused"]), hooks=[hook])
    _ = agent.graph  # built with the first model
    replacement = ScriptedChatModel(["replaced"])
    agent.model = replacement
    assert agent.call("hi").text == "replaced"
    assert hook.models == [replacement]


def test_a_new_instruction_reaches_the_model_of_the_next_run():
    model = ScriptedChatModel(["one", "two"])
    agent = ReactAgent("helper", model, instruction="Be brief.")
    config = RunnableConfig(thread_id="t")
    agent.call("first", config)
    agent.instruction = "Be thorough."
    agent.call("second", config)
    systems = [m.text for m in model.requests[-1].messages if isinstance(m, SystemMessage)]
    assert systems == ["Be thorough."]


def test_new_model_options_reach_the_next_model_call():
    model = ScriptedChatModel(["one", "two"])
    agent = ReactAgent("helper", model, model_options={"temperature": 0})
    agent.call("first")
    agent.model_options = {"temperature": 1}
    agent.call("second")
    assert [r.options.get("temperature") for r in model.requests] == [0, 1]


def test_a_run_already_going_keeps_the_model_it_started_with():
    started, go_on = threading.Event(), threading.Event()

    def slow(request: ModelRequest) -> AssistantMessage:
        started.set()
        assert go_on.wait(10)
        return AssistantMessage(content="from the first")

    first, second = ScriptedChatModel([slow]), ScriptedChatModel(["from the second"])
    hook = SeesModel()
    agent = ReactAgent("helper", first, hooks=[hook])
    answers: list[str] = []
    running = threading.Thread(target=lambda: answers.append(agent.call("hello").text))
    running.start()
    assert started.wait(10)
    agent.model = second  # while the first run waits for its model
    go_on.set()
    running.join(10)

    assert answers == ["from the first"]
    assert hook.models == [first]
    assert agent.call("next").text == "from the second"
    assert hook.models == [first, second]


def test_with_saver_gives_a_new_agent_on_that_saver_and_leaves_this_one_as_it_was():
    own, other = MemorySaver(), MemorySaver()
    agent = ReactAgent("helper", ScriptedChatModel(["one", "two"]), saver=own)
    graph = agent.graph
    twin = agent.with_saver(other)
    config = RunnableConfig(thread_id="t")
    twin.call("hi", config)

    assert agent.saver is own and agent.graph is graph
    assert twin.saver is other and twin.graph is not graph
    assert other.get("t") is not None and own.get("t") is None


def test_a_team_on_another_saver_keeps_its_threads_there_and_its_state_can_be_updated():
    writer = ReactAgent("writer", ScriptedChatModel(["A draft."]))
    editor = ReactAgent("editor", ScriptedChatModel(["A better draft."]))
    team = SequentialAgent("pipeline", [writer, editor])
    saver = MemorySaver()
    served = team.with_saver(saver)
    config = RunnableConfig(thread_id="t")
    served.call("Write.", config)
    served.update_state(config, {"messages": "And a title?"})

    assert team.saver is not saver
    assert [m.text for m in served.get_state(config).values["messages"]][-1] == "And a title?"
    assert saver.get("t") is not None and team.saver.get("t") is None


def test_model_options_changed_in_place_fail_loudly_and_new_ones_take_effect():
    model = ScriptedChatModel(["one", "two"])
    agent = ReactAgent("helper", model, model_options={"temperature": 0})
    agent.call("first")
    with pytest.raises(TypeError):
        agent.model_options["temperature"] = 1  # would reach no graph: refused
    agent.model_options = {**agent.model_options, "temperature": 1}
    agent.call("second")
    assert [r.options.get("temperature") for r in model.requests] == [0, 1]


def test_a_setting_changed_while_the_agent_holds_its_lock_does_not_deadlock():
    agent = ReactAgent("helper", ScriptedChatModel(["hi"]))
    done = threading.Event()

    def change_under_the_lock() -> None:
        with agent._lock:
            agent.max_iterations = 3
        done.set()

    worker = threading.Thread(target=change_under_the_lock, daemon=True)
    worker.start()
    assert done.wait(10)
    assert agent.call("hello").text == "hi"


def test_every_setting_the_graph_is_built_from_rebuilds_it():
    from graph_agent.agent.react import REBUILT_ON_CHANGE

    assert {"model", "instruction", "model_options", "tool_timeout", "hooks", "store"} <= (
        REBUILT_ON_CHANGE
    )
    assert not {"toolkit", "steering", "spec"} & REBUILT_ON_CHANGE
