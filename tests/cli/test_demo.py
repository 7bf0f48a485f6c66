"""``graph-agent demo``: offline by default, real tools, streamed, stored, and online on request."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.models.anthropic_fake_server import (
    FakeAnthropicServer,
    message,
    message_events,
    reply_events,
    text,
    thinking,
    tool_use,
)
from tests.models.openai_fake_server import (
    FakeOpenAIServer,
    chunk,
    completion,
    dynamic,
    reply_json,
    reply_sse,
    tool_call,
    tool_delta,
)


def test_the_demo_runs_offline_through_the_installed_command_and_names_the_tools(program):
    result = program("demo")

    assert result.code == 0, result.err
    for tool in ("calculator", "convert_units", "clock"):
        assert f"-> {tool}(" in result.out
        assert f"<- {tool}: " in result.out
    assert "(17 * 23) + 4 = 395" in result.out
    assert "26.2 miles is 42.1648 km" in result.out
    assert "In Tokyo it is" in result.out and "(Asia/Tokyo)" in result.out
    assert "offline demo model" in result.out
    assert Path(".graph_agent/demo.db").is_file()


def test_output_that_is_not_a_terminal_is_plain_text(program):
    result = program("demo", "What is 6 * 7?")

    assert result.code == 0, result.err
    assert "\x1b[" not in result.out
    assert not any(c in result.out for c in "╭│╰")
    assert "6 * 7 = 42" in result.out


def test_the_final_summary_shows_iterations_and_token_usage(cli):
    result = cli("demo", "--plain", "What is 2 ** 10, and what is 100 F in C?")

    assert result.code == 0, result.err
    assert "2 ** 10 = 1024" in result.out
    assert "100 F is 37.7778 °C" in result.out
    summary = re.search(r"1 iteration · 2 model calls · 2 tool calls · (\d+) tokens", result.out)
    assert summary and int(summary.group(1)) > 0


def test_a_terminal_gets_live_output_and_a_final_panel(cli, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "120")

    result = cli("demo", "What is 2 ** 10?")

    assert result.code == 0, result.err
    assert "\x1b[" in result.out
    assert "╭" in result.out and " answer " in result.out
    assert "→ " in result.out and 'calculator(expression="2 ** 10")' in result.out
    assert "- 2 ** 10 = 1024" in result.out
    assert "1 iteration · 2 model calls" in result.out


def test_plain_forces_plain_output_on_a_terminal(cli, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")

    result = cli("demo", "--plain", "What is 3 * 3?")

    assert "\x1b[" not in result.out
    assert "[step 2] __model__: 1 tool call" in result.out  # after the memory hook's step


def test_a_thread_continues_the_conversation(cli):
    first = cli("demo", "--plain", "--thread", "t1", "What is 6 * 7?")
    second = cli("demo", "--plain", "--thread", "t1", "What did I ask before?")

    assert first.code == second.code == 0
    assert "continuing thread t1" in second.out
    assert 'Before this you asked: "What is 6 * 7?"' in second.out


def test_the_db_flag_puts_the_threads_in_another_file(cli, tmp_path):
    result = cli("demo", "--plain", "--db", "runs/my.db", "--thread", "mine")

    assert result.code == 0, result.err
    assert (tmp_path / "runs" / "my.db").is_file()
    assert "--db runs/my.db" in result.out
    listed = cli("threads", "list", "--db", "runs/my.db")
    assert "mine" in listed.out


def test_keys_in_the_environment_alone_do_not_switch_the_demo_online(cli, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-used")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-not-used")

    result = cli("demo", "--plain", "What is 1 + 1?")

    assert result.code == 0, result.err
    assert "offline demo model" in result.out
    assert "1 + 1 = 2" in result.out


def test_base_url_and_model_run_the_demo_on_a_real_server_with_the_real_tools(cli):
    with FakeOpenAIServer() as server:
        server.enqueue(
            reply_sse(
                [
                    chunk(
                        {
                            "role": "assistant",
                            "tool_calls": [
                                tool_delta(
                                    0,
                                    call_id="c1",
                                    name="calculator",
                                    arguments='{"expression": "(17 * 23) + 4"}',
                                )
                            ],
                        }
                    ),
                    chunk(finish_reason="tool_calls"),
                ]
            ),
            reply_sse(
                [
                    chunk({"role": "assistant", "content": "It is "}),
                    chunk({"content": "395."}),
                    chunk(
                        finish_reason="stop",
                        usage={"prompt_tokens": 90, "completion_tokens": 4, "total_tokens": 94},
                    ),
                ]
            ),
        )
        result = cli(
            "demo", "--plain", "--base-url", server.base_url, "--model", "fake-model", "17*23+4?"
        )
        bodies = server.bodies

    assert result.code == 0, result.err
    assert f"fake-model at {server.base_url}" in result.out
    assert "<- calculator: 395" in result.out
    assert "It is 395." in result.out
    assert "94 tokens" in result.out
    assert {t["function"]["name"] for t in bodies[0]["tools"]} == {
        "calculator",
        "clock",
        "convert_units",
        "remember",  # the demo's long-term memory of the user
        "forget",
    }
    assert json.loads(bodies[1]["messages"][-1]["content"]) == 395


def test_a_thread_that_is_not_stored_is_said_to_be_new(cli):
    cli("demo", "--plain", "--thread", "work", "What is 6 * 7?")

    mistyped = cli("demo", "--plain", "--thread", "wrok", "What did I ask before?")

    assert mistyped.code == 0, mistyped.err
    assert "new thread wrok (not in .graph_agent/demo.db; see graph-agent threads list)" in (
        mistyped.out
    )
    assert "This is the first thing you asked in this conversation." in mistyped.out


def test_ctrl_c_in_the_demo_prints_the_command_that_finishes_the_run(cli, monkeypatch):
    from graph_agent.demo import DemoChatModel

    answer = DemoChatModel._reply

    def stopped_once(self, request):
        monkeypatch.setattr(DemoChatModel, "_reply", answer)
        raise KeyboardInterrupt

    monkeypatch.setattr(DemoChatModel, "_reply", stopped_once)

    stopped = cli("demo", "--plain", "--thread", "d1", "--db", "d.db", "What is 6 * 7?")
    continued = cli("demo", "--plain", "--thread", "d1", "--db", "d.db")

    assert stopped.code == 130
    assert stopped.error_lines == [
        "interrupted",
        "continue: graph-agent demo --thread d1 --db d.db",
    ]
    assert continued.code == 0, continued.err
    assert "thread d1 stopped before its run finished: finishing it" in continued.out
    assert "- 6 * 7 = 42" in continued.out
    assert "you: " not in continued.out


def test_no_stream_model_asks_a_server_whose_streamed_tool_calls_are_lost_unstreamed(cli):
    def like_the_server(request):
        if request.body.get("stream"):  # streamed, this server drops the tool calls
            return reply_sse([chunk({"content": "I cannot."}), chunk(finish_reason="stop")])
        if request.body["messages"][-1]["role"] == "tool":
            return reply_json(completion("It is 395."))
        call = tool_call("c1", "calculator", {"expression": "(17 * 23) + 4"})
        return reply_json(completion(None, tool_calls=[call], finish_reason="tool_calls"))

    with FakeOpenAIServer() as server:
        server.enqueue(dynamic(like_the_server), dynamic(like_the_server))
        result = cli(
            "demo",
            *("--plain", "--base-url", server.base_url, "--model", "m", "--no-stream-model"),
            "17*23+4?",
        )
        bodies = server.bodies

    assert result.code == 0, result.err
    assert "<- calculator: 395" in result.out
    assert "It is 395." in result.out
    assert [body.get("stream", False) for body in bodies] == [False, False]


def test_provider_anthropic_runs_the_demo_on_a_messages_api_server(cli):
    answer = message(text("It is 395."), usage={"input_tokens": 90, "output_tokens": 4})
    asks = message(
        thinking("Use the calculator.", "sig-calc"),
        tool_use("toolu_c1", "calculator", {"expression": "(17 * 23) + 4"}),
        stop_reason="tool_use",
    )
    with FakeAnthropicServer() as server:
        server.enqueue(reply_events(message_events(asks)), reply_events(message_events(answer)))
        result = cli(
            "demo",
            *("--plain", "--provider", "anthropic", "--base-url", server.base_url),
            *("--model", "claude-test", "17*23+4?"),
        )
        bodies = server.bodies

    assert result.code == 0, result.err
    assert f"claude-test at {server.base_url}" in result.out
    assert "<- calculator: 395" in result.out
    assert "It is 395." in result.out
    assert {t["name"] for t in bodies[0]["tools"]} == {
        "calculator",
        "clock",
        "convert_units",
        "remember",
        "forget",
    }
    assert bodies[1]["messages"][1]["content"][0]["signature"] == "sig-calc"
    assert bodies[1]["messages"][2]["content"][0]["tool_use_id"] == "toolu_c1"
