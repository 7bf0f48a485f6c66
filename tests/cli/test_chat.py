"""``graph-agent chat``: turns on one thread, and approvals answered at the prompt."""

from __future__ import annotations

from tests.cli.conftest import example


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
