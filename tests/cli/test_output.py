"""Text that users, models and tools supply is shown, never obeyed: rich markup is printed as
written and control characters (escape sequences, newlines in an id) are shown escaped, in the
live terminal view and in plain mode alike."""

from __future__ import annotations

import json
import re

import pytest

from graph_agent.cli.output import printable

HOSTILE_IDS = [
    "[/oops]",
    "[link=https://evil.example]click[/link]",
    "osc\x1b]8;;https://evil.example\x07here\x1b]8;;\x07",
    "csi\x1b[2J",
    "c1\x9b31m",
    "row\nforged 99 99 finished",
    "bidi\u202eevil",
]
_RICH_STYLES = re.compile(r"\x1b\[[0-9;]*m")
_RICH_LIVE = re.compile(r"\x1b\[\?25[lh]|\x1b\[2K|\x1b\[1A|\r")


def _raw_controls(text: str) -> list[str]:
    """Control characters left in ``text`` once rich's own codes are taken out: colours, and
    the cursor moves of its live view."""
    bare = _RICH_LIVE.sub("", _RICH_STYLES.sub("", text))
    return [c for c in bare if c not in "\n" and (ord(c) < 32 or 0x7F <= ord(c) <= 0x9F)] + [
        c for c in bare if c == "\u202e"
    ]


@pytest.fixture
def terminal(monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "250")


@pytest.fixture
def hostile_db(cli):
    for thread in HOSTILE_IDS:
        result = cli(
            "run", "graph_agent.demo:agent", "What is 1 + 1?", "--db", "h.db", "--thread", thread
        )
        assert result.code == 0, result.err
    return "h.db"


def test_printable_escapes_control_characters_as_json_does():
    assert printable("a\x1b[2Jb\x9b\u202e\x7f") == "a\\u001b[2Jb\\u009b\\u202e\\u007f"
    assert printable("one\ntwo\tthree\r") == "one\\ntwo\\tthree\\r"
    assert printable("one\ntwo\tthree", multiline=True) == "one\ntwo\tthree"
    assert printable("naïve 北京 [bold]x[/bold] 😀") == "naïve 北京 [bold]x[/bold] 😀"


def test_threads_list_shows_hostile_ids_as_written_on_a_terminal(cli, hostile_db, terminal):
    result = cli("threads", "list", "--db", hostile_db)

    assert result.code == 0, result.err
    assert "\x1b[" in result.out  # the real rich rendering
    assert _raw_controls(result.out) == []
    assert "[/oops]" in result.out
    assert "[link=https://evil.example]click[/link]" in result.out
    assert "osc\\u001b]8;;https://evil.example\\u0007here" in result.out
    assert "row\\nforged 99 99 finished" in result.out
    assert "bidi\\u202eevil" in result.out


def test_threads_list_in_plain_mode_has_one_row_per_thread_and_no_control_characters(
    cli, hostile_db
):
    result = cli("threads", "list", "--db", hostile_db, "--plain")

    assert result.code == 0, result.err
    assert _raw_controls(result.out) == []
    header, *rows = result.out.splitlines()
    assert header.split()[0] == "thread"
    assert len(rows) == len(HOSTILE_IDS)
    assert sorted(row.split("  ")[0].rstrip() for row in rows) == sorted(
        printable(thread) for thread in HOSTILE_IDS
    )


@pytest.mark.parametrize("plain", [False, True], ids=["terminal", "plain"])
def test_deleting_a_thread_whose_id_looks_like_markup_prints_it_as_written(
    cli, hostile_db, terminal, plain
):
    result = cli("threads", "delete", "[/oops]", "--db", hostile_db, *(["--plain"] * plain))

    assert result.code == 0, result.err
    assert "deleted thread [/oops] (5 checkpoints" in _RICH_STYLES.sub("", result.out)


def test_history_and_show_of_a_hostile_thread_print_no_control_characters(
    cli, hostile_db, terminal
):
    thread = "osc\x1b]8;;https://evil.example\x07here\x1b]8;;\x07"

    history = cli("threads", "history", thread, "--db", hostile_db)
    shown = cli("threads", "show", thread, "--db", hostile_db, "--plain")

    assert history.code == shown.code == 0, history.err + shown.err
    assert _raw_controls(history.out + shown.out) == []
    assert "history of osc\\u001b]8;;https://evil.example" in history.out
    assert json.loads(shown.out)["thread"] == thread  # the escapes are JSON's own


def test_show_escapes_c1_characters_in_state_values_and_stays_json(cli):
    question = "What is 1 + 1? \x9b31m\u202e"
    cli("run", "graph_agent.demo:agent", question, "--db", "q.db", "--thread", "q")

    shown = cli("threads", "show", "q", "--db", "q.db", "--plain")

    assert shown.code == 0, shown.err
    assert _raw_controls(shown.out) == []
    assert json.loads(shown.out)["values"]["messages"][1]["content"] == question


HOSTILE_TOOL = """
from graph_agent import ReactAgent, tool
from graph_agent.messages import AssistantMessage, ToolCall
from graph_agent.models import ScriptedChatModel


@tool
def fetch(url: str) -> str:
    '''Fetch a page.'''
    return "\\x1b]0;pwned\\x07[bold red]page[/bold red]\\x1b[2J\\nnext line"


model = ScriptedChatModel([
    AssistantMessage(tool_calls=[ToolCall("c1", "fetch", {"url": "x"})]),
    "done \\x1b[31mred\\x1b[0m [link=https://evil.example]here[/link]",
])
agent = ReactAgent("hostile", model, tools=[fetch])
"""


@pytest.mark.parametrize("plain", [False, True], ids=["terminal", "plain"])
def test_tool_output_and_answers_are_shown_escaped_while_streaming(cli, tmp_path, terminal, plain):
    (tmp_path / "hostile.py").write_text(HOSTILE_TOOL)

    result = cli("run", f"{tmp_path / 'hostile.py'}:agent", "go", "--stream", *["--plain"] * plain)

    assert result.code == 0, result.err
    assert _raw_controls(result.out) == []
    assert "\\u001b]0;pwned\\u0007[bold red]page[/bold red]\\u001b[2J" in result.out
    assert "done \\u001b[31mred\\u001b[0m [link=https://evil.example]here[/link]" in result.out


def test_the_printed_answer_of_a_run_is_escaped_too(cli, tmp_path):
    (tmp_path / "hostile.py").write_text(HOSTILE_TOOL)

    result = cli("run", f"{tmp_path / 'hostile.py'}:agent", "go")

    assert result.code == 0, result.err
    assert result.out == "done \\u001b[31mred\\u001b[0m [link=https://evil.example]here[/link]\n"
