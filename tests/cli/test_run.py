"""``graph-agent run``: an agent or a graph once, printed, streamed, paused and resumed."""

from __future__ import annotations

import json

from tests.cli.conftest import example


def test_an_agent_prints_its_answer(cli):
    result = cli("run", f"{example('quickstart.py')}:agent", "Weather in Paris?")

    assert result.code == 0, result.err
    assert result.out == "Right now it is sunny and 23 °C in Paris.\n"


def test_a_graph_takes_json_and_prints_its_final_state(cli):
    result = cli("run", f"{example('workflow.py')}:build", '{"topic": "Graphs"}')

    assert result.code == 0, result.err
    state = json.loads(result.out)
    assert state["draft"] == "Graphs (v2)"
    assert state["log"][0] == "draft v1"


def test_stream_shows_each_node_of_a_graph(cli):
    result = cli("run", "--plain", f"{example('workflow.py')}:build", '{"topic": "G"}', "--stream")

    assert result.code == 0, result.err
    assert "[step 1] style" in result.out and "[step 1] legal" in result.out
    assert "[step 5] decide" in result.out
    assert "final state:" in result.out


def test_a_module_name_works_as_well_as_a_file(cli):
    result = cli("run", "graph_agent.demo:agent", "What is 2 ** 8?")

    assert result.code == 0, result.err
    assert result.out.strip() == "- 2 ** 8 = 256"


def test_a_state_graph_is_compiled_on_the_db_and_resumed_from_another_call(cli):
    target = f"{example('checkpoints.py')}:publisher"

    paused = cli("run", target, '{"topic": "cli"}', "--db", "runs.db", "--thread", "p1")
    done = cli("run", target, "--db", "runs.db", "--thread", "p1", "--resume", '"yes"')

    assert paused.code == 0, paused.err
    assert "paused, waiting for input" in paused.out
    assert "Publish this draft?" in paused.out
    assert f"resume: graph-agent run {target} --thread p1 --db runs.db --resume" in paused.out
    assert json.loads(done.out)["published"] == "A post about cli"


def test_an_approval_pause_suggests_the_resume_and_the_resume_runs_the_decisions(cli):
    target = f"{example('human_in_the_loop.py')}:agent"

    paused = cli("run", target, "Tell the team", "--db", "mail.db", "--thread", "m1")
    decisions = {
        "mail_ada": {"decision": "approve"},
        "mail_bob": {"decision": "edit", "arguments": {"to": "bob@example.com", "subject": "1.0"}},
        "mail_eve": {"decision": "reject", "reason": "on holiday"},
    }
    done = cli(
        "run", target, "--db", "mail.db", "--thread", "m1", "--resume", json.dumps(decisions)
    )

    assert 'approve send_email(to="bob@exmaple.com", subject="Release 1.0 is out")?' in paused.out
    assert '"mail_ada": {"decision": "approve"}' in paused.out
    assert done.code == 0, done.err
    assert "mail_ada: sent to ada@example.com" in done.out
    assert "mail_bob: sent to bob@example.com" in done.out
    assert "mail_eve: A human rejected this tool call: on holiday" in done.out


GUARDED_AGENT = """
from graph_agent import ReactAgent
from graph_agent.agent import AgentHook, JumpTo
from graph_agent.models import ScriptedChatModel


class RefusePasswords(AgentHook):
    can_jump_to = (JumpTo.END,)

    def before_agent(self, state, config):
        if "password" in state["messages"][-1].text:
            return {"jump_to": JumpTo.END}
        return None


agent = ReactAgent("guarded", ScriptedChatModel(["Paris."]), hooks=[RefusePasswords()])
"""


def test_a_run_that_gives_no_answer_prints_none_not_an_earlier_turns(cli, tmp_path):
    (tmp_path / "guarded.py").write_text(GUARDED_AGENT)
    target = f"{tmp_path / 'guarded.py'}:agent"

    first = cli("run", target, "Capital of France?", "--db", "g.db", "--thread", "g1")
    refused = cli("run", target, "Tell me the admin password", "--db", "g.db", "--thread", "g1")

    assert first.code == 0, first.err
    assert first.out == "Paris.\n"
    assert refused.code == 0, refused.err
    assert refused.out == "\n"


def test_a_pause_without_a_db_says_it_cannot_be_resumed_later(cli):
    result = cli("run", f"{example('human_in_the_loop.py')}:agent", "Tell the team")

    assert result.code == 0, result.err
    assert "lives in memory only" in result.out


def test_a_new_thread_on_a_db_is_named_so_it_can_be_continued(cli):
    result = cli("run", "graph_agent.demo:agent", "What is 1 + 2?", "--db", "x.db")

    assert result.code == 0, result.err
    assert result.err.startswith("thread: thread-")
    thread = result.err.split()[1]
    again = cli(
        "run",
        "graph_agent.demo:agent",
        "What did I ask before?",
        "--db",
        "x.db",
        "--thread",
        thread,
    )
    assert 'Before this you asked: "What is 1 + 2?"' in again.out


def test_a_refused_resume_suggests_threads_show_on_the_same_db(cli):
    result = cli(
        "run", "graph_agent.demo:agent", "--thread", "t 1", "--resume", '"yes"', "--db", "r.db"
    )

    assert result.code == 2
    assert result.error_lines[1] == (
        "hint: show what the thread waits for with: graph-agent threads show 't 1' --db r.db"
    )


def test_a_graph_compiled_without_a_saver_runs_on_the_db_and_its_thread_is_kept(cli):
    target = f"{example('workflow.py')}:build"

    result = cli("run", target, '{"topic": "Graphs"}', "--db", "runs.db", "--thread", "w1")
    shown = cli("threads", "show", "w1", "--db", "runs.db")

    assert result.code == 0, result.err
    assert json.loads(result.out)["draft"] == "Graphs (v2)"
    assert shown.code == 0, shown.err
    assert json.loads(shown.out)["values"]["draft"] == "Graphs (v2)"


MEMORY_GRAPH = """
from graph_agent import END, START, CompileConfig, MemorySaver, StateGraph

g = StateGraph("count")
g.add_node("add", lambda state: {"count": state.value("count", 0) + 1})
g.add_edge(START, "add")
g.add_edge("add", END)
app = g.compile(CompileConfig(saver=MemorySaver()))
"""


def test_a_graph_compiled_with_a_memory_saver_keeps_its_threads_in_the_db(cli, tmp_path):
    (tmp_path / "counter.py").write_text(MEMORY_GRAPH)
    target = f"{tmp_path / 'counter.py'}:app"

    first = cli("run", target, "{}", "--db", "c.db", "--thread", "c1")
    second = cli("run", target, "{}", "--db", "c.db", "--thread", "c1")

    assert first.code == second.code == 0, first.err + second.err
    assert json.loads(first.out)["count"] == 1
    assert json.loads(second.out)["count"] == 2
