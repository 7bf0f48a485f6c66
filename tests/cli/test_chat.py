"""``graph-agent chat``: turns on one thread, and approvals answered at the prompt."""

from __future__ import annotations

from tests.cli.conftest import example
from tests.cli.test_run import TOOLLESS_AGENT


def test_each_line_is_a_turn_on_one_thread(cli):
    result = cli(
        "chat",
        "--plain",
        "graph_agent.demo:agent",
        stdin="What is 6 * 7?\n\nWhat did I ask before?\n/exit\n",
    )

    assert result.code == 0, result.err
    assert "assistant: - 6 * 7 = 42" in result.out
    assert 'Before this you asked: "What is 6 * 7?"' in result.out
    assert result.out.count("you> ") == 4  # the empty line asks again


def test_approve_edit_and_reject_at_the_prompt_resume_the_run(cli):
    answers = "\n".join(
        [
            "Tell the team 1.0 is out",
            "a",  # ada: approve
            "e",  # bob: edit
            "not json",
            "e",
            '{"to": "bob@example.com", "subject": "1.0"}',
            "x",  # eve: not an answer, asked again
            "r",
            "on holiday",
        ]
    )
    result = cli("chat", "--plain", f"{example('human_in_the_loop.py')}:agent", stdin=answers)

    assert result.code == 0, result.err
    out = result.out
    assert out.count("approval needed: send_email(") == 3
    assert "not JSON" in out and "please answer a, e or r" in out
    assert "mail_ada: sent to ada@example.com" in out
    assert "mail_bob: sent to bob@example.com" in out
    assert "mail_eve: A human rejected this tool call: on holiday" in out


def test_a_failing_turn_prints_the_error_and_the_chat_goes_on(cli):
    result = cli(
        "chat", "--plain", f"{example('workflow.py')}:build", stdin='[1]\n{"topic": "T"}\n'
    )

    assert result.code == 0
    assert "error: a graph's INPUT is a JSON object" in result.err
    assert "[step 5] decide" in result.out
    assert '"draft": "T (v2)"' in result.out


def test_a_turn_whose_model_calls_a_tool_the_agent_lacks_says_so_and_the_chat_goes_on(
    cli, tmp_path
):
    (tmp_path / "bare.py").write_text(TOOLLESS_AGENT)

    result = cli("chat", "--plain", f"{tmp_path / 'bare.py'}:agent", stdin="Find graphs\nhi\n")

    assert result.code == 0, result.err
    assert result.err.count("but agent 'bare' has no tools: nothing ran the call") == 1
    assert "Hello." in result.out  # the next turn answered


def test_chat_on_a_paused_thread_asks_for_its_pending_approvals_first(cli):
    target = f"{example('human_in_the_loop.py')}:agent"
    paused = cli("run", target, "Tell the team", "--db", "mail.db", "--thread", "m1")
    assert "paused, waiting for input" in paused.out

    result = cli(
        "chat", "--plain", target, "--thread", "m1", "--db", "mail.db", stdin="a\na\nr\nbusy\n"
    )

    assert result.code == 0, result.err
    out = result.out
    assert out.index("paused, waiting for input") < out.index("approval needed: send_email(")
    assert out.count("approval needed: send_email(") == 3
    assert "mail_ada: sent to ada@example.com" in out
    assert "mail_bob: sent to bob@exmaple.com" in out
    assert "mail_eve: A human rejected this tool call: busy" in out


def test_invalid_json_in_the_edit_prompt_asks_for_the_arguments_again(cli):
    answers = "\n".join(
        [
            "Tell the team 1.0 is out",
            "a",
            "e",
            '{"to": "bob@example.com", subject: "1.0"}',  # a key without quotes
            '["not", "an", "object"]',
            '{"to": "bob@example.com", "subject": "1.0"}',
            "r",
            "on holiday",
        ]
    )
    result = cli("chat", "--plain", f"{example('human_in_the_loop.py')}:agent", stdin=answers)

    assert result.code == 0, result.err
    assert result.out.count("new arguments (JSON object, empty to go back)> ") == 3
    assert "please answer a, e or r" not in result.out
    assert "mail_bob: sent to bob@example.com" in result.out
    assert "mail_eve: A human rejected this tool call: on holiday" in result.out


def test_a_turn_that_paused_for_approval_sums_up_every_call_of_the_turn(cli, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")

    result = cli("chat", f"{example('human_in_the_loop.py')}:agent", stdin="Tell\na\na\na\n")

    assert result.code == 0, result.err
    assert "1 iteration · 2 model calls · 3 tool calls" in result.out


def test_ctrl_c_in_a_chat_prints_the_command_that_picks_the_thread_up_again(cli, tmp_path):
    from tests.cli.test_run import STOPPED_AGENT

    (tmp_path / "stoppable.py").write_text(STOPPED_AGENT)
    target = f"{tmp_path / 'stoppable.py'}:agent"

    stopped = cli("chat", "--plain", target, "--thread", "c1", "--db", "c.db", stdin="Graphs?\n")
    again = cli("chat", "--plain", target, "--thread", "c1", "--db", "c.db", stdin="")

    assert stopped.code == 130
    assert stopped.error_lines == [
        "interrupted",
        f"continue: graph-agent chat {target} --thread c1 --db c.db",
    ]
    assert again.code == 0, again.err
    assert "thread c1 stopped before its run finished: finishing it" in again.out
    assert "answer from notes on graphs" in again.out
