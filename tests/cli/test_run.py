"""``graph-agent run``: an agent or a graph once, printed, streamed, paused and resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.conftest import entry_point, example
from tests.models.openai_fake_server import (
    FakeOpenAIServer,
    chunk,
    completion,
    dynamic,
    reply_json,
    reply_sse,
    tool_call,
)


def test_an_agent_prints_its_answer(cli):
    result = cli("run", f"{example('quickstart.py')}:agent", "Weather in Paris?")

    assert result.code == 0, result.err
    assert result.out == "Right now it is sunny and 23 °C in Paris.\n"


def test_a_team_of_agents_takes_a_question_and_prints_its_answer(cli):
    result = cli("run", f"{example('team.py')}:team", "Write about graph runtimes.", "--db", "t.db")

    assert result.code == 0, result.err
    assert result.out.strip() and "Traceback" not in result.err


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


TOOLLESS_AGENT = """
from graph_agent import AssistantMessage, ToolCall
from graph_agent.agent import ReactAgent
from graph_agent.models import ScriptedChatModel

calling = AssistantMessage(tool_calls=[ToolCall("c1", "search", {"q": "graphs"})])
agent = ReactAgent("bare", ScriptedChatModel([calling, "Hello."]))
"""


@pytest.mark.parametrize("stream", [[], ["--stream"]])
def test_an_agent_without_tools_whose_model_calls_one_says_so_and_exits_1(cli, tmp_path, stream):
    (tmp_path / "bare.py").write_text(TOOLLESS_AGENT)

    result = cli("run", "--plain", f"{tmp_path / 'bare.py'}:agent", "Find graphs", *stream)

    assert result.code == 1
    assert result.error_lines == [
        "error: the model called search(q=\"graphs\"), but agent 'bare' has no tools: nothing "
        "ran the call, so the run ended without an answer",
        "hint: give the agent that tool (ReactAgent(tools=[...]), or --mcp CONFIG for an MCP "
        "server's), or tell the model to answer without tools",
    ]
    if not stream:
        assert result.out == ""  # no empty answer


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


def test_the_summary_of_a_resumed_run_counts_the_tool_calls_that_ran(cli):
    target = f"{example('human_in_the_loop.py')}:agent"
    cli("run", target, "Tell the team", "--db", "mail.db", "--thread", "m1")
    decisions = {
        "mail_ada": {"decision": "approve"},
        "mail_bob": {"decision": "approve"},
        "mail_eve": {"decision": "reject", "reason": "on holiday"},
    }

    done = cli(
        "run",
        target,
        *("--db", "mail.db", "--thread", "m1", "--stream", "--plain"),
        *("--resume", json.dumps(decisions)),
    )

    assert done.code == 0, done.err
    assert "1 model call · 3 tool calls" in done.out


STOPPED_AGENT = """
from pathlib import Path

from graph_agent import ReactAgent, tool
from graph_agent.messages import AssistantMessage, ToolCall, ToolResponseMessage
from graph_agent.models.base import LocalChatModel


@tool
def lookup(topic: str) -> str:
    '''Look a topic up.'''
    return f"notes on {topic}"


class Model(LocalChatModel):
    '''Asks for a lookup, then answers from it; Ctrl-C (once) while it writes the answer.'''

    def _reply(self, request):
        last = request.messages[-1]
        if not isinstance(last, ToolResponseMessage):
            return AssistantMessage(tool_calls=[ToolCall("c1", "lookup", {"topic": "graphs"})])
        stopped = Path("stopped-once")
        if not stopped.exists():
            stopped.write_text("")
            raise KeyboardInterrupt
        return AssistantMessage(f"answer from {last.text}")


agent = ReactAgent("stoppable", Model(), tools=[lookup])
"""


def test_ctrl_c_prints_the_command_that_continues_the_run_and_that_command_finishes_it(
    cli, tmp_path
):
    (tmp_path / "stoppable.py").write_text(STOPPED_AGENT)
    target = f"{tmp_path / 'stoppable.py'}:agent"

    stopped = cli("run", target, "Tell me about graphs", "--db", "s.db", "--thread", "s 1")

    assert stopped.code == 130
    assert stopped.error_lines == [
        "interrupted",
        f"continue: graph-agent run {target} --thread 's 1' --db s.db",
    ]
    continued = cli("run", target, "--thread", "s 1", "--db", "s.db")
    assert continued.code == 0, continued.err
    assert continued.out == "answer from notes on graphs\n"


def test_ctrl_c_on_a_thread_kept_in_memory_says_it_cannot_be_continued(cli, tmp_path):
    (tmp_path / "stoppable.py").write_text(STOPPED_AGENT)

    stopped = cli("run", f"{tmp_path / 'stoppable.py'}:agent", "Tell me about graphs")

    assert stopped.code == 130
    assert stopped.error_lines == [
        "interrupted",
        "the thread lived in memory and is gone: with --db PATH it can be continued",
    ]


SERVED_AGENT = """
import os

from graph_agent import ReactAgent
from graph_agent.demo_tools import calculator
from graph_agent.models import OpenAIChatModel

model = OpenAIChatModel("m", base_url=os.environ["SERVED_URL"], api_key="k", max_retries=0)
agent = ReactAgent("served", model, tools=[calculator])
"""


def _lossy_server(request):
    """A server whose streamed answers lose the tool calls, as some do."""
    if request.body.get("stream"):
        return reply_sse([chunk({"content": "I cannot."}), chunk(finish_reason="stop")])
    if request.body["messages"][-1]["role"] == "tool":
        return reply_json(completion("It is 4."))
    call = tool_call("c1", "calculator", {"expression": "2 + 2"})
    return reply_json(completion(None, tool_calls=[call], finish_reason="tool_calls"))


@pytest.mark.parametrize(
    "flags", [(), ("--stream", "--no-stream-model")], ids=["no stream", "no-stream-model"]
)
def test_the_model_is_asked_unstreamed_without_stream_or_with_no_stream_model(
    cli, tmp_path, monkeypatch, flags
):
    (tmp_path / "served.py").write_text(SERVED_AGENT)
    with FakeOpenAIServer() as server:
        monkeypatch.setenv("SERVED_URL", server.base_url)
        server.enqueue(dynamic(_lossy_server), dynamic(_lossy_server))
        result = cli("run", "--plain", f"{tmp_path / 'served.py'}:agent", "2 + 2?", *flags)
        bodies = server.bodies

    assert result.code == 0, result.err
    assert "It is 4." in result.out
    assert [body.get("stream", False) for body in bodies] == [False, False]


def test_no_stream_model_on_a_graph_says_it_works_on_agents(cli):
    result = cli("run", f"{example('workflow.py')}:build", "{}", "--no-stream-model")

    assert result.code == 2
    assert result.error_lines[0].startswith("error: --no-stream-model works on an agent")


def test_run_without_stream_shows_the_running_node_on_a_terminal_and_nothing_in_plain_mode(
    cli, monkeypatch
):
    monkeypatch.setenv("FORCE_COLOR", "1")

    live = cli("run", "graph_agent.demo:agent", "What is 2 + 2?")
    plain = cli("run", "graph_agent.demo:agent", "What is 2 + 2?", "--plain")

    assert live.code == plain.code == 0, live.err + plain.err
    assert live.out == plain.out == "- 2 + 2 = 4\n"
    assert "running __model__" in live.err and "running __tool__" in live.err
    assert plain.err == ""


def test_run_without_stream_prints_nothing_but_the_answer_when_not_on_a_terminal(program):
    result = program("run", "graph_agent.demo:agent", "What is 2 + 2?")

    assert result.code == 0, result.err
    assert (result.out, result.err) == ("- 2 + 2 = 4\n", "")


SLEEPY_AGENT = """
import time
from pathlib import Path

from graph_agent import ReactAgent
from graph_agent.messages import AssistantMessage
from graph_agent.models.base import LocalChatModel


class Model(LocalChatModel):
    '''Works for a long time on the first call (until Ctrl-C); answers on the next.'''

    def _reply(self, request):
        started = Path("started")
        if not started.exists():
            started.write_text("")
            time.sleep(60)
        return AssistantMessage("done")


agent = ReactAgent("sleepy", Model())
"""


def test_a_real_ctrl_c_stops_the_program_with_the_command_that_continues(program, tmp_path):
    (tmp_path / "sleepy.py").write_text(SLEEPY_AGENT)
    target = f"{tmp_path / 'sleepy.py'}:agent"
    command = [*entry_point(), "run", target, "Hi", "--db", "s.db", "--thread", "t1"]
    # a child that does not stop dumps its threads' stacks (faulthandler, at SIGABRT)
    environment = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    running = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment
    )
    try:
        deadline = time.monotonic() + 30
        while not Path("started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        running.send_signal(signal.SIGINT)
        try:
            _, err = running.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            running.send_signal(signal.SIGABRT)
            _, err = running.communicate(timeout=30)
            pytest.fail(f"still running 30 s after Ctrl-C; its threads:\n{err}")
    finally:
        running.kill()

    assert running.returncode == 130
    assert [line for line in err.splitlines() if line] == [
        "interrupted",
        f"continue: graph-agent run {target} --thread t1 --db s.db",
    ]
    continued = program("run", target, "--thread", "t1", "--db", "s.db")
    assert (continued.code, continued.out) == (0, "done\n"), continued.err
