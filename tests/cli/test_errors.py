"""Mistakes a user can make: one line saying what, one hint saying how, a non-zero exit code,
and no traceback unless --debug."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from graph_agent.cli.errors import CliError
from tests.checkpoint.test_sqlite import langgraph_database
from tests.cli.conftest import example


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _corrupt(path: str) -> str:
    Path(path).write_bytes(b"this is not a database, just some text " * 200)
    return path


CASES = {
    "no colon": (["run", "agent_only", "hi"], 2, "expected MODULE:OBJECT, got 'agent_only'"),
    "unknown module": (
        ["run", "no_such_module:agent", "hi"],
        2,
        "no module named 'no_such_module'",
    ),
    "missing file": (["run", "missing.py:agent", "hi"], 2, "no such file: missing.py"),
    "unknown object": (
        ["draw", f"{example('quickstart.py')}:agnet"],
        2,
        "quickstart.py has no 'agnet'",
    ),
    "wrong type": (
        ["run", f"{example('quickstart.py')}:get_weather", "hi"],
        2,
        "quickstart.py:get_weather is a Tool, not an agent (a ReactAgent or a team such as "
        "SequentialAgent), a CompiledGraph or a StateGraph",
    ),
    "a failing import": (
        ["run", "@boom.py:agent", "hi"],
        2,
        "importing boom.py failed: RuntimeError: no API key in settings.toml",
    ),
    "unknown nested object": (
        ["run", "graph_agent.demo_tools:calculator.function.missing", "x"],
        2,
        "graph_agent.demo_tools has no 'calculator.function.missing'",
    ),
    "graph input not json": (
        ["run", f"{example('workflow.py')}:build", "topic"],
        2,
        "INPUT is not valid JSON",
    ),
    "compiled on another database": (
        ["run", "@own_db.py:app", "{}", "--db", "x.db"],
        2,
        "own_db.py:app was compiled with SqliteSaver, which --db x.db cannot replace",
    ),
    "missing key": (
        ["demo", "--online"],
        2,
        "--online needs a model endpoint, and none is set: no OPENAI_API_KEY, OPENAI_BASE_URL, "
        "DASHSCOPE_API_KEY or ANTHROPIC_API_KEY in the environment",
    ),
    "missing key variable": (
        ["demo", "--base-url", "http://127.0.0.1:9/v1", "--api-key-env", "NOT_SET_ANYWHERE"],
        2,
        "--api-key-env NOT_SET_ANYWHERE: that environment variable is not set",
    ),
    "corrupt db for the demo": (
        ["demo", "--db", "@corrupt.db"],
        1,
        "corrupt.db is not a usable graph_agent database (file is not a database)",
    ),
    "corrupt db for threads": (
        ["threads", "list", "--db", "@corrupt.db"],
        1,
        "corrupt.db is not a usable graph_agent database",
    ),
    "corrupt db for run": (
        ["run", "graph_agent.demo:agent", "hi", "--db", "@corrupt.db"],
        1,
        "corrupt.db is not a usable graph_agent database",
    ),
    "another program's db for threads": (
        ["threads", "list", "--db", "@langgraph.sqlite"],
        1,
        "langgraph.sqlite is not a graph_agent checkpoint database: it holds another program's "
        "tables (checkpoints)",
    ),
    "another program's db for the demo": (
        ["demo", "hi", "--db", "@langgraph.sqlite"],
        1,
        "langgraph.sqlite is not a graph_agent checkpoint database",
    ),
    "a one-byte file for threads": (
        ["threads", "list", "--db", "@one-byte.db"],
        1,
        "one-byte.db is not a usable graph_agent database (file is not a database)",
    ),
    "db under a file for the demo": (
        ["demo", "hi", "--db", "@afile/x.db"],
        1,
        "--db afile/x.db: afile is a file, not a folder",
    ),
    "db under a file for run": (
        ["run", "graph_agent.demo:agent", "hi", "--db", "@afile/x.db"],
        1,
        "--db afile/x.db: afile is a file, not a folder",
    ),
    "draw to a folder": (
        ["draw", "graph_agent.demo:agent", "-o", "@folder.mmd"],
        1,
        "-o folder.mmd is a folder, not a file",
    ),
    "draw under a file": (
        ["draw", "graph_agent.demo:agent", "-o", "@afile/x.mmd"],
        1,
        "-o afile/x.mmd: afile is a file, not a folder",
    ),
    "a bad port in base-url": (
        ["demo", "hi", "--base-url", "http://localhost:abc/v1", "--model", "m"],
        2,
        "--base-url is not a valid URL (Invalid port: 'abc')",
    ),
    "base-url without a scheme": (
        ["demo", "hi", "--base-url", "localhost:11434/v1", "--model", "m"],
        2,
        "--base-url must start with http:// or https://",
    ),
    "OPENAI_BASE_URL without a scheme": (
        ["demo", "hi", "--online", "@env:OPENAI_BASE_URL=localhost:11434/v1"],
        2,
        "OPENAI_BASE_URL must start with http:// or https://",
    ),
    "missing db": (["threads", "list", "--db", "none.db"], 1, "no database at none.db"),
    "unknown thread": (["threads", "show", "nope", "--db", "@demo"], 1, "no thread 'nope' in"),
    "resume with nothing paused": (
        ["run", "graph_agent.demo:agent", "--thread", "new", "--resume", '"yes"', "--db", "r.db"],
        2,
        "Command(resume=...) answers pending interrupts, and this thread has none",
    ),
    "continue a thread kept in memory": (
        ["run", "graph_agent.demo:agent", "--thread", "t1"],
        2,
        "thread t1 cannot be continued: without --db, graph_agent.demo:agent keeps its threads "
        "in memory",
    ),
    "nothing to run": (["run", "graph_agent.demo:agent"], 2, "nothing to run: give an INPUT"),
}


OWN_DB_GRAPH = """
from graph_agent import END, START, CompileConfig, StateGraph
from graph_agent.checkpoint.sqlite import SqliteSaver

g = StateGraph("own")
g.add_node("a", lambda state: {"done": True})
g.add_edge(START, "a")
g.add_edge("a", END)
app = g.compile(CompileConfig(saver=SqliteSaver("own.db")))
"""


def _argv(argv: list[str], cli, monkeypatch) -> list[str]:
    resolved = []
    for arg in argv:
        if arg == "@corrupt.db":
            arg = _corrupt("corrupt.db")
        elif arg == "@langgraph.sqlite":
            arg = str(langgraph_database(Path("langgraph.sqlite")))
        elif arg == "@one-byte.db":
            Path("one-byte.db").write_bytes(b"x")
            arg = "one-byte.db"
        elif arg.startswith("@afile/"):
            Path("afile").write_text("x")
            arg = arg[1:]
        elif arg == "@folder.mmd":
            Path("folder.mmd").mkdir()
            arg = "folder.mmd"
        elif arg.startswith("@env:"):
            name, _, value = arg.removeprefix("@env:").partition("=")
            monkeypatch.setenv(name, value)
            continue
        elif arg == "@boom.py:agent":
            Path("boom.py").write_text('raise RuntimeError("no API key in settings.toml")\n')
            arg = "boom.py:agent"
        elif arg == "@own_db.py:app":
            Path("own_db.py").write_text(OWN_DB_GRAPH)
            arg = "own_db.py:app"
        elif arg == "@demo":
            cli("demo", "--db", "demo.db", "What is 1 + 1?")
            arg = "demo.db"
        resolved.append(arg)
    return resolved


@pytest.mark.parametrize(("argv", "code", "message"), CASES.values(), ids=CASES.keys())
def test_a_user_error_is_one_line_and_a_hint(cli, monkeypatch, argv, code, message):
    result = cli(*_argv(argv, cli, monkeypatch))

    assert result.code == code
    assert len(result.error_lines) == 2, result.err
    what, hint = result.error_lines
    assert what.startswith("error: ") and message in what
    assert hint.startswith("hint: ") and len(hint) > 10
    assert "Traceback" not in result.err + result.out


def test_an_unreachable_model_server_is_one_line_and_a_hint(cli):
    url = f"http://127.0.0.1:{_closed_port()}/v1"

    result = cli("demo", "--plain", "--base-url", url, "--model", "m", "What is 1 + 1?")

    assert result.code == 1
    assert result.error_lines[0].startswith(
        f"error: cannot reach the model server: model 'm' at {url}"
    )
    assert result.error_lines[1].startswith("hint: check --base-url / OPENAI_BASE_URL")
    assert len(result.error_lines) == 2  # the client's retry warnings stay quiet
    assert "Traceback" not in result.err


def test_the_real_command_prints_no_traceback(program):
    _corrupt("bad.db")

    result = program("threads", "list", "--db", "bad.db")

    assert result.code == 1
    assert result.err.splitlines() == [
        "error: bad.db is not a usable graph_agent database (file is not a database)",
        "hint: give --db a new file or an existing graph_agent database; move this one away",
    ]


def test_debug_shows_the_traceback(cli):
    with pytest.raises(CliError, match="no module named 'no_such_module'"):
        cli("--debug", "run", "no_such_module:agent", "hi")


def test_debug_after_the_subcommand_works_too(program):
    result = program("run", "no_such_module:agent", "hi", "--debug")

    assert result.code == 1
    assert "Traceback (most recent call last)" in result.err
    assert "error: no module named 'no_such_module'" in result.err


def test_a_bad_flag_is_a_usage_error(cli):
    result = cli("draw", "graph_agent.demo:agent", "--format", "jpeg")

    assert result.code == 2
    assert "invalid choice: 'jpeg'" in result.err


def test_a_module_given_without_its_object_gets_a_hint_naming_its_build_function(cli):
    workflow = example("workflow.py")

    result = cli("run", workflow, '{"topic": "T"}')

    assert result.code == 2
    assert result.error_lines == [
        f"error: expected MODULE:OBJECT, got {workflow!r}",
        f"hint: name what to run in it: {workflow}:build",
    ]


def test_the_hint_names_each_agent_graph_and_builder_the_module_defines(cli):
    mail = example("human_in_the_loop.py")

    result = cli("draw", mail)

    assert result.code == 2
    assert result.error_lines[-1] == (
        f"hint: name what to run in it, one of: {mail}:agent, {mail}:build_agent"
    )


def test_a_team_subclass_at_any_depth_counts_as_a_target_kind(cli, tmp_path):
    (tmp_path / "deep.py").write_text(
        "from __future__ import annotations\n"
        "from graph_agent.agent.flows import SequentialAgent\n"
        "class Pipeline(SequentialAgent):\n    pass\n"
        "class Deeper(Pipeline):\n    pass\n"
        "def make() -> Deeper:\n    return Deeper('deep', [])\n"
    )

    result = cli("draw", str(tmp_path / "deep.py"))

    assert result.error_lines[-1] == f"hint: name what to run in it: {tmp_path / 'deep.py'}:make"
