"""The ``graph-agent`` command: parsing, logging, and turning failures into one clear line."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence

from graph_agent.cli.errors import EXIT_INTERRUPTED, EXIT_USAGE, CliError, RunStopped, explain
from graph_agent.cli.mcp import add_mcp_option
from graph_agent.cli.serve_auth import add_auth_options
from graph_agent.cli.serve_cpus import add_cpus_option
from graph_agent.cli.serve_retention import add_retention_options
from graph_agent.cli.serve_store import add_store_options
from graph_agent.cli.trace import add_trace_option, traced

__all__ = ["build_parser", "main"]

_DESCRIPTION = """\
Run, chat with, draw and inspect graph_agent agents and graphs.

  graph-agent demo                                    the demo agent, offline
  graph-agent run examples/quickstart.py:agent "Weather in Paris?"
  graph-agent chat examples/human_in_the_loop.py:agent
  graph-agent draw examples/workflow.py:build -f svg -o workflow.svg
  graph-agent threads list                            what the demo stored
  graph-agent serve examples/quickstart.py:agent      a LangGraph-Server-style HTTP API
  graph-agent studio graph_agent.demo:agent           watch and steer runs in the browser
  graph-agent mcp serve graph_agent.demo:agent        the agent as an MCP tool (stdio)

MODULE:OBJECT is a module (mypkg.agents) or a file (path/to/file.py) and the name of a
ReactAgent, CompiledGraph or StateGraph in it, or of a function with no arguments returning one.
"""


def _add_common(parser: argparse.ArgumentParser, *, top: bool) -> None:
    # The flags work before and after the subcommand; the subcommand's copy does not reset a
    # value given before it.
    default: object = False if top else argparse.SUPPRESS
    parser.add_argument(
        "--debug",
        action="store_true",
        default=default,
        help="show tracebacks and the library's log messages",
    )
    parser.add_argument(
        "--plain",
        action="store_true",
        default=default,
        help="plain text output (also when stdout is not a terminal)",
    )


def _add_db(parser: argparse.ArgumentParser, default: str | None, what: str) -> None:
    parser.add_argument("--db", metavar="PATH", default=default, help=what)


def _add_url(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        metavar="URL",
        help="talk to a server (graph-agent serve, or LangGraph Server): the target is then its "
        "assistant id, e.g. --url http://127.0.0.1:8123 demo",
    )
    parser.add_argument(
        "--api-key",
        metavar="KEY",
        help="the server's API key (default: $GRAPH_AGENT_API_KEY)",
    )


def _add_no_stream_model(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-stream-model",
        action="store_true",
        help="ask the model for whole answers, not streamed ones (for servers that lose tool "
        "calls when streaming); the answer then appears at once",
    )


def _at_least_one(text: str) -> int:
    """A count of 1 or more; a flag left out, not 0, means "no limit"."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"must be 1 or more, got {value} (leave it out to see every checkpoint)"
        )
    return value


def _version() -> str:
    """The installed distribution's version ("unknown" when run from a bare source tree)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("graph-agent")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _add_serve_options(parser: argparse.ArgumentParser, serve_db: str) -> None:
    """The options of ``serve``, which ``studio`` shares."""
    parser.add_argument("target", metavar="MODULE:OBJECT|CONFIG", nargs="*")
    _add_db(parser, None, f"SQLite file for the threads (default: {serve_db})")
    parser.add_argument("--host", help="default: 127.0.0.1")
    parser.add_argument("--port", type=int, help="default: 8123")
    parser.add_argument(
        "--api-key",
        action="append",
        default=[],
        metavar="KEY",
        help="a key clients must send (x-api-key header); repeatable; each key sees only its "
        "own threads (unless --key-group or --shared-threads). Also read from "
        "GRAPH_AGENT_API_KEYS (comma-separated), which, unlike the command line, other users "
        "of the machine cannot see in the process list",
    )
    parser.add_argument(
        "--key-group",
        action="append",
        default=[],
        metavar="TEAM=KEY,KEY",
        help="valid keys that see each other's threads (a team's: they own the threads any of "
        "them creates); repeatable. Also read from GRAPH_AGENT_KEY_GROUPS "
        "(TEAM=KEY,KEY;OTHER=KEY)",
    )
    parser.add_argument(
        "--shared-threads",
        action="store_true",
        default=None,
        help="every valid key sees, runs, resumes and deletes every thread (default: each key "
        "only the threads it or its group created)",
    )
    parser.add_argument(
        "--input-keys",
        action="append",
        default=[],
        metavar="[ASSISTANT=]KEY,KEY",
        help="the only state keys clients may send to ASSISTANT (others are a 422); repeatable; "
        "ASSISTANT= may be left out when serving one target. Default: any key but the "
        "graph's private ones",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        metavar="N",
        help="refuse larger request bodies with a 413 (default: 4 MiB)",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help="without API keys, also answer requests naming HOST in their Host header (any "
        "port); repeatable; * for any (only with --insecure-no-auth). By default a keyless "
        "server answers only to its own address, localhost, 127.0.0.1 and [::1]: no web page "
        "reaches it by DNS rebinding",
    )
    parser.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let web pages at ORIGIN (e.g. http://localhost:3000) call the server: their "
        "CORS preflights are answered; repeatable; * for any (without API keys, only with "
        "--insecure-no-auth). Requests from other pages (an Origin header other than the "
        "server's own) are refused with a 403",
    )
    parser.add_argument(
        "--webhook-allow",
        action="append",
        default=[],
        metavar="HOST[,HOST]",
        help="let runs' webhooks call HOST: a name (hooks.example.com), *.example.com, *, an "
        "IP address or a network (10.0.0.0/8); repeatable. None by default: a run with a "
        "webhook is refused (422). Internal addresses are called only when listed",
    )
    parser.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="listen beyond loopback, or take * for --allow-host or --cors-origin, without API "
        "keys (only behind a proxy that checks who calls)",
    )
    parser.add_argument(
        "--postgres",
        metavar="DSN",
        help="keep checkpoints, threads, runs and events in PostgreSQL instead of --db: runs "
        "become durable jobs that every server and worker on the database may claim",
    )
    parser.add_argument(
        "--redis",
        metavar="URL",
        help="with --postgres: processes tell each other of new runs and events over Redis "
        "pub/sub at URL (redis://host:6379/0) instead of PostgreSQL's LISTEN/NOTIFY",
    )
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="with --postgres: N processes that each serve HTTP on the port and run runs "
        "(this one and N-1 more; 0: this one only serves HTTP)",
    )
    parser.add_argument(
        "--worker-timeout",
        type=float,
        metavar="SECONDS",
        help="with --postgres: a worker silent this long (no heartbeat: frozen, hung or cut "
        "off) has its runs claimed again by another, and its checkpoint leases lapse "
        "(default: 30)",
    )
    parser.add_argument(
        "--no-http",
        action="store_true",
        help="with --postgres: only run runs, serving no HTTP (a worker on another machine)",
    )
    parser.add_argument("--sibling-of", type=int, metavar="PID", help=argparse.SUPPRESS)
    add_cpus_option(parser)
    add_mcp_option(parser)
    add_store_options(parser)
    add_retention_options(parser)
    add_auth_options(parser)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``graph-agent``."""
    from graph_agent.cli.draw import FORMATS
    from graph_agent.cli.endpoints import PROVIDERS
    from graph_agent.cli.mcp import add_mcp_parser
    from graph_agent.cli.run import DEMO_DB
    from graph_agent.cli.serve import SERVE_DB

    parser = argparse.ArgumentParser(
        prog="graph-agent",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_common(parser, top=True)
    parser.add_argument("--version", action="version", version=f"graph-agent {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = commands.add_parser(
        "demo",
        help="run the demo agent (calculator, clock, unit converter)",
        description="Run the demo agent. Offline unless --online, --base-url or --model is "
        "given; API keys in the environment alone never switch it online.",
    )
    demo.add_argument(
        "question", nargs="?", help="what to ask (default: a question using every tool)"
    )
    demo.add_argument(
        "--thread",
        help="continue this conversation (default: a new thread); with no question, a run "
        "stopped by Ctrl-C is finished",
    )
    _add_db(demo, DEMO_DB, f"SQLite file for the threads (default: {DEMO_DB})")
    demo.add_argument(
        "--user",
        default="me",
        help="whose long-term memories the agent recalls and keeps, in the same file, across "
        "threads (default: me)",
    )
    demo.add_argument(
        "--online",
        action="store_true",
        help="use a real model: OPENAI_API_KEY/OPENAI_BASE_URL, else DASHSCOPE_API_KEY",
    )
    demo.add_argument(
        "--base-url", help="an OpenAI-compatible server, e.g. http://localhost:11434/v1"
    )
    demo.add_argument(
        "--model", help="the model name (default gpt-4o-mini; qwen-plus on DashScope)"
    )
    demo.add_argument(
        "--api-key-env", metavar="VAR", help="read the API key for --base-url from VAR"
    )
    demo.add_argument(
        "--provider",
        choices=PROVIDERS,
        help="the API --base-url speaks: openai (OpenAI-compatible, the default) or anthropic "
        "(Messages API; ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, model claude-sonnet-4-5)",
    )
    demo.add_argument(
        "--image",
        metavar="PATH",
        help="attach a picture (.png, .jpg, .gif, .webp) to the question, for a vision model",
    )
    _add_no_stream_model(demo)
    add_mcp_option(demo)
    add_trace_option(demo)
    _add_common(demo, top=False)

    run = commands.add_parser(
        "run",
        help="run an agent or a graph once",
        description="Run MODULE:OBJECT once and print the answer (an agent) or the final state "
        "(a graph); --stream shows every node as it finishes.",
    )
    run.add_argument("target", metavar="MODULE:OBJECT", help="or, with --url, an assistant id")
    run.add_argument(
        "input",
        nargs="?",
        metavar="INPUT",
        help="a question for an agent, a JSON object for a graph; leave out to continue --thread",
    )
    run.add_argument("--thread", help="the thread to run on (default: a new one)")
    _add_db(run, None, "keep the threads in this SQLite file (created if missing)")
    _add_url(run)
    run.add_argument("--stream", action="store_true", help="show nodes, tokens and tool calls live")
    _add_no_stream_model(run)
    add_mcp_option(run)
    run.add_argument(
        "--resume",
        metavar="JSON",
        help='answer a pause, e.g. \'{"call_1": {"decision": "approve"}}\'',
    )
    add_trace_option(run)
    _add_common(run, top=False)

    chat = commands.add_parser(
        "chat",
        help="talk to an agent; approve, edit or reject tool calls at the prompt",
        description="An interactive loop on one thread. Pauses for approval are answered at "
        "the prompt: approve, edit (JSON arguments) or reject (with a reason).",
    )
    chat.add_argument("target", metavar="MODULE:OBJECT", help="or, with --url, an assistant id")
    chat.add_argument("--thread", help="the thread to talk on (default: a new one)")
    _add_db(chat, None, "keep the thread in this SQLite file")
    _add_url(chat)
    _add_no_stream_model(chat)
    add_mcp_option(chat)
    _add_common(chat, top=False)

    draw = commands.add_parser(
        "draw",
        help="draw a graph as Mermaid, PlantUML, DOT, ASCII, SVG or PNG",
        description="Print the graph's diagram, or write it to a file. SVG and PNG are "
        "rendered with Graphviz `dot`.",
    )
    draw.add_argument("target", metavar="MODULE:OBJECT")
    draw.add_argument(
        "-f",
        "--format",
        choices=FORMATS,
        help="default: from the -o suffix (.mmd .puml .dot .txt .svg .png), else mermaid",
    )
    draw.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    draw.add_argument(
        "--xray",
        action="store_true",
        help="draw agents and subgraphs that run as nodes open, as clusters",
    )
    _add_common(draw, top=False)

    threads = commands.add_parser(
        "threads",
        help="list, show, history or delete stored threads",
        description="Inspect the threads in a SQLite checkpoint file.",
    )
    actions = threads.add_subparsers(dest="action", metavar="ACTION", required=True)
    db_help = f"the SQLite file (default: {DEMO_DB})"
    listing = actions.add_parser("list", help="every thread: checkpoints, step, status, size")
    _add_db(listing, DEMO_DB, db_help)
    _add_common(listing, top=False)
    show = actions.add_parser("show", help="a thread's state as JSON")
    show.add_argument("thread")
    show.add_argument("--checkpoint", metavar="ID", help="an older checkpoint (see history)")
    show.add_argument("--all", action="store_true", help="include _private bookkeeping keys")
    _add_db(show, DEMO_DB, db_help)
    _add_common(show, top=False)
    history = actions.add_parser("history", help="a thread's checkpoints, newest first")
    history.add_argument("thread")
    history.add_argument(
        "--limit",
        type=_at_least_one,
        metavar="N",
        help="only the newest N checkpoints, N of 1 or more (default: all of them)",
    )
    _add_db(history, DEMO_DB, db_help)
    _add_common(history, top=False)
    delete = actions.add_parser(
        "delete", help="delete a thread: its checkpoints, and a server's record of it"
    )
    delete.add_argument("thread")
    _add_db(delete, DEMO_DB, db_help)
    _add_common(delete, top=False)

    from graph_agent.cli.store import add_store_parser

    _add_common(add_store_parser(commands, DEMO_DB), top=False)
    from graph_agent.cli.crons import add_crons_parser

    _add_common(add_crons_parser(commands), top=False)

    serve = commands.add_parser(
        "serve",
        help="serve agents and graphs over HTTP, as LangGraph Server does",
        description="Serve each MODULE:OBJECT as an assistant (its id is its name) with "
        "LangGraph Server's HTTP API, so langgraph-sdk clients work against it. A config "
        "file (.json or .toml; --config FILE, or as a TARGET) lists several, with options: "
        '{"targets": [...], "port": 8123}, or LangGraph\'s langgraph.json '
        '({"graphs": {"id": "./file.py:object"}, "auth": {"path": "./auth.py:auth"}}). '
        "Needs the serve extra: pip install 'graph-agent[serve]'.",
    )
    _add_serve_options(serve, SERVE_DB)
    _add_common(serve, top=False)

    studio = commands.add_parser(
        "studio",
        help="serve agents and graphs, and open the Studio page on them in a browser",
        description="graph-agent serve, then open http://HOST:PORT/studio/ in a browser: the "
        "graph drawn, runs watched live, threads and checkpoints browsed, time travel and "
        "human-in-the-loop answers by mouse. Takes every option of serve. Needs the serve "
        "extra: pip install 'graph-agent[serve]'.",
    )
    _add_serve_options(studio, SERVE_DB)
    studio.add_argument(
        "--no-browser", action="store_true", help="print the page's address, open no browser"
    )
    _add_common(studio, top=False)
    add_mcp_parser(commands, _add_common)
    return parser


def _handler(command: str) -> Callable[[argparse.Namespace], int]:
    if command == "demo":
        from graph_agent.cli.run import demo_command

        return demo_command
    if command == "run":
        from graph_agent.cli.run import run_command

        return run_command
    if command == "chat":
        from graph_agent.cli.chat import chat_command

        return chat_command
    if command == "serve":
        from graph_agent.cli.serve import serve_command

        return serve_command
    if command == "studio":
        from graph_agent.cli.studio import studio_command

        return studio_command
    if command == "mcp":
        from graph_agent.cli.mcp_serve import mcp_command

        return mcp_command
    if command == "draw":
        from graph_agent.cli.draw import draw_command

        return draw_command
    if command == "store":
        from graph_agent.cli.store import store_command

        return store_command
    if command == "crons":
        from graph_agent.cli.crons import crons_command

        return crons_command
    from graph_agent.cli.threads import threads_command

    return threads_command


@contextlib.contextmanager
def _logging(debug: bool) -> Iterator[None]:
    """Library log messages (retries, fallbacks) only with --debug; restored afterwards."""
    logger = logging.getLogger("graph_agent")
    level, propagate = logger.level, logger.propagate
    handler: logging.Handler | None = None
    if debug:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    else:
        logger.setLevel(logging.CRITICAL)
        logger.propagate = False
    try:
        yield
    finally:
        logger.setLevel(level)
        logger.propagate = propagate
        if handler is not None:
            logger.removeHandler(handler)


def _fail(error: CliError) -> int:
    from graph_agent.cli.output import print_error

    print_error(error)
    return error.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``graph-agent`` with ``argv`` (default: the process's arguments); the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit:
        return exit.code if isinstance(exit.code, int) else EXIT_USAGE
    with _logging(args.debug):
        try:
            with traced(getattr(args, "trace", False)):
                return _handler(args.command)(args)
        except KeyboardInterrupt as stop:
            print("\ninterrupted", file=sys.stderr)
            if isinstance(stop, RunStopped) and stop.advice:
                from graph_agent.cli.output import printable

                print(printable(stop.advice), file=sys.stderr)
            return EXIT_INTERRUPTED
        except BrokenPipeError:  # the reader went away (`| head`): stop quietly
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        except Exception as exc:
            error = explain(exc)
            if error is None or args.debug:
                if error is not None:
                    _fail(error)
                raise
            return _fail(error)
