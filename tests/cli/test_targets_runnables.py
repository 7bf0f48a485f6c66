"""Loading ``MODULE:OBJECT`` takes any runnable, never asking its class: a team of agents
loads like an agent, ``--db`` runs a copy on that file (``with_saver``) and leaves the module's
object as it was, and a function saying it returns a team is offered as a target."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.checkpoint.sqlite import SqliteSaver
from graph_agent.cli.errors import CliError
from graph_agent.cli.mcp import add_mcp_tools
from graph_agent.cli.targets import load_target
from graph_agent.graph.types import RunnableConfig

TEAM_MODULE = """
from __future__ import annotations

from graph_agent.agent.flows import SequentialAgent
from graph_agent.agent.react import ReactAgent
from graph_agent.models.scripted import ScriptedChatModel

writer = ReactAgent("writer", ScriptedChatModel(["Draft 1.", "Draft 2."]))
editor = ReactAgent("editor", ScriptedChatModel(["Edited 1.", "Edited 2."]))
team = SequentialAgent("pipeline", [writer, editor])
helper = ReactAgent("helper", ScriptedChatModel(["Hi."]))
"""

FACTORY_MODULE = """
from __future__ import annotations

from graph_agent.agent.flows import SequentialAgent
from graph_agent.agent.react import ReactAgent
from graph_agent.models.scripted import ScriptedChatModel


def make_pipeline() -> SequentialAgent:
    writer = ReactAgent("writer", ScriptedChatModel(["Draft."]))
    return SequentialAgent("pipeline", [writer])


def unrelated() -> int:
    return 1
"""


@pytest.fixture
def team_file(tmp_path: Path) -> str:
    path = tmp_path / "teams.py"
    path.write_text(TEAM_MODULE)
    return str(path)


def module_of(target_runnable: object) -> object:
    return sys.modules[type(target_runnable).__module__]


def test_a_team_module_loads_as_an_agent_that_answers_a_question(team_file: str) -> None:
    with load_target(f"{team_file}:team") as target:
        answer = target.local.invoke("Write.", RunnableConfig(thread_id="t1"))

        assert target.is_agent
        assert target.name == "pipeline"
        assert answer["messages"][-1].text == "Edited 1."
        assert isinstance(target.saver, MemorySaver)


def test_a_team_with_db_runs_a_copy_on_the_file_and_the_module_team_keeps_its_saver(
    team_file: str, tmp_path: Path
) -> None:
    db = str(tmp_path / "teams.db")
    with load_target(f"{team_file}:team", db=db) as target:
        module = sys.modules["_graph_agent_target_teams"]
        own = module.team.saver
        target.local.invoke("Write.", RunnableConfig(thread_id="t1"))

        assert target.local is not module.team
        assert module.team.saver is own and isinstance(own, MemorySaver)
        assert own.get("t1") is None
        assert isinstance(target.saver, SqliteSaver)
    saver = SqliteSaver(db)
    try:
        kept = saver.get("t1")
    finally:
        saver.close()
    assert kept is not None
    assert kept.values["messages"][-1].text == "Edited 1."


def test_an_agent_with_db_is_never_given_another_saver(team_file: str, tmp_path: Path) -> None:
    with load_target(f"{team_file}:helper", db=str(tmp_path / "h.db")) as target:
        module = sys.modules["_graph_agent_target_teams"]
        own = module.helper.saver
        answer = target.local.invoke("Hi?", RunnableConfig(thread_id="t1"))

        assert module.helper.saver is own  # while the target is open, too
        assert isinstance(target.saver, SqliteSaver)
    assert answer["messages"][-1].text == "Hi."
    assert module.helper.saver is own


def test_a_function_annotated_to_return_a_team_is_named_as_a_target(cli, tmp_path: Path) -> None:
    (tmp_path / "factories.py").write_text(FACTORY_MODULE)
    result = cli("run", f"{tmp_path / 'factories.py'}:nothing", "Hi")

    assert result.code == 2
    assert "it defines: make_pipeline" in result.err
    assert "unrelated" not in result.err


def test_the_cli_runs_a_team_module_and_prints_the_last_agent_answer(cli, team_file) -> None:
    result = cli("run", f"{team_file}:team", "Write.")

    assert result.code == 0, result.err
    assert result.out == "Edited 1.\n"


def test_mcp_tools_for_a_team_are_refused_saying_it_is_a_team(team_file: str) -> None:
    target = load_target(f"{team_file}:team")
    with target, pytest.raises(CliError, match="is a team of agents"):
        add_mcp_tools(target.local, "teams.py:team", "unused.json")


def test_no_stream_model_leaves_a_team_as_it_is_and_refuses_a_graph(
    team_file: str, tmp_path: Path
) -> None:
    with load_target(f"{team_file}:team") as target:
        target.ask_model_unstreamed()  # its agents ask their models as they were built to
        assert target.previous_model is None
    graph_file = tmp_path / "graphs.py"
    graph_file.write_text(
        "from graph_agent import END, START, StateGraph\n"
        "graph = StateGraph('g')\n"
        "graph.add_node('n', lambda state: {'x': 1})\n"
        "graph.add_edge(START, 'n').add_edge('n', END)\n"
    )
    target = load_target(f"{graph_file}:graph")
    with target, pytest.raises(CliError, match="is a graph"):
        target.ask_model_unstreamed()
