"""Finding the agent or graph a command works on: ``MODULE:OBJECT``, and its checkpoint file.

``MODULE`` is a dotted module name importable from the current folder (``mypkg.agents``) or a
path to a Python file (``examples/quickstart.py``). ``OBJECT`` names anything runnable in it (a
:class:`~graph_agent.runnable.Runnable`: a :class:`ReactAgent`, a team of agents such as
``SequentialAgent``, a :class:`CompiledGraph`) or a :class:`StateGraph` (compiled for you),
possibly dotted (``agents.support``), or a function taking no arguments that returns one.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import shlex
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.checkpoint.memory import MemorySaver
from graph_agent.checkpoint.sqlite import SqliteSaver
from graph_agent.cli.errors import EXIT_ERROR, EXIT_USAGE, CliError, cannot_write
from graph_agent.cli.unstreamed import UnstreamedModel
from graph_agent.client import RemoteGraph, RemoteGraphError
from graph_agent.graph.builder import StateGraph
from graph_agent.graph.errors import GraphRuntimeError, GraphSetupError, SerializationError
from graph_agent.graph.types import CompileConfig
from graph_agent.models.base import ChatModel
from graph_agent.runnable import Runnable
from graph_agent.runnable_traits import RUN_METHODS, is_runnable, saver_of, takes_question

__all__ = [
    "DEMO_DB",
    "Target",
    "db_option",
    "load_remote_target",
    "load_target",
    "open_existing_saver",
    "open_saver",
    "open_target",
]


DEMO_DB = os.path.join(".graph_agent", "demo.db")
"""Where ``demo`` keeps its threads and ``threads`` looks by default."""
_EXAMPLE = "e.g. examples/quickstart.py:agent or mypackage.agents:agent"


@dataclass(kw_only=True)
class Target:
    """What a command runs or draws: anything runnable, and where it came from.

    Used as a context manager, it closes the database it opened on leaving, and gives an agent
    whose model it replaced its own model back, so the user's objects are left as they were
    (a ``--db`` target runs a copy on that database: ``with_saver``).
    """

    spec: str
    runnable: Runnable
    remote: RemoteGraph | None = None
    """The served graph or agent (``--url``, or a RemoteGraph a module defines), or None for
    a local one."""
    by_url: bool = False
    """Whether ``--url`` named the server (a command run again needs it too)."""
    opened: SqliteSaver | None = None
    previous_model: ChatModel | None = None
    cleanups: list[Callable[[], None]] = field(default_factory=list)
    """Run first by :meth:`close`, last added first (``--mcp``: take the tools away)."""

    def __enter__(self) -> Target:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the database this target opened; restore an agent's own model."""
        while self.cleanups:
            self.cleanups.pop()()
        if self.previous_model is not None:
            agent: Any = self.runnable  # it has a model: ask_model_unstreamed replaced it
            agent.model = self.previous_model
            self.previous_model = None
        if self.opened is not None:
            self.opened.close()
            self.opened = None

    def ask_model_unstreamed(self) -> None:
        """Have an agent ask its model for whole answers (see :class:`UnstreamedModel`) until
        the target is closed.

        Raises:
            CliError: the target is a graph: its nodes call their models themselves.
        """
        if self.remote is not None:
            return  # the server's agent asks its model as it was built to
        agent: Any = self.runnable
        model = getattr(agent, "model", None)
        if model is None:
            if takes_question(agent):
                return  # a team: its agents ask their models as they were built to
            raise CliError(
                f"--no-stream-model works on an agent, and {self.spec} is a graph, whose nodes "
                "call their models themselves",
                "point at the ReactAgent, or drop --no-stream-model",
                EXIT_USAGE,
            )
        if self.previous_model is None:
            self.previous_model = model
            agent.model = UnstreamedModel(model)

    @property
    def is_agent(self) -> bool:
        """Whether it takes a question (an agent, a team; a served one as its server says)."""
        return takes_question(self.runnable)

    @property
    def local(self) -> Runnable:
        """The local agent or graph (``load_target``'s, never a served one).

        Raises:
            CliError: it is a served assistant (a RemoteGraph the module defines).
        """
        if self.remote is not None:
            raise CliError(
                f"{self.spec} is served at {self.remote.url}: this command works on an agent "
                "or a graph running here",
                "point at the module that defines the agent or graph",
                EXIT_USAGE,
            )
        return self.runnable

    @property
    def keeps_threads(self) -> bool:
        """Whether a thread outlives the call that ran it (a saver, or a server)."""
        return self.remote is not None or self.saver is not None

    def where(self, db: str | None) -> str:
        """The options that find this target's threads again (``--url``, or ``--db``)."""
        remote = self.remote
        if remote is not None:  # a module's RemoteGraph names its server itself
            return f" --url {shlex.quote(remote.url)}" if self.by_url else ""
        return db_option(db, default=None)

    @property
    def name(self) -> str:
        return self.runnable.name

    @property
    def saver(self) -> CheckpointSaver | None:
        """The local saver (None for a served target: its server keeps the threads)."""
        return None if self.remote is not None else saver_of(self.runnable)

    def get_graph(self, fmt: str) -> str:
        if self.remote is not None:
            raise CliError("draw works on a local MODULE:OBJECT", "point at the module", EXIT_USAGE)
        return self.runnable.get_graph(fmt)


def open_target(args: Any) -> Target:
    """What ``run`` and ``chat`` talk to: a served assistant (``--url``), else MODULE:OBJECT;
    with ``--mcp``, an agent given those servers' tools until the target is closed."""
    if args.url is None:
        target = load_target(args.target, db=args.db)
        if getattr(args, "mcp", None) is not None:
            from graph_agent.cli.mcp import add_mcp_tools

            try:
                target.cleanups.append(add_mcp_tools(target.runnable, args.target, args.mcp))
            except BaseException:
                target.close()
                raise
        return target
    if getattr(args, "mcp", None) is not None:
        raise CliError(
            "--mcp and --url do not go together: a served agent has the tools its server gave it",
            "give --mcp to the graph-agent serve that serves it",
            EXIT_USAGE,
        )
    if args.db is not None:
        raise CliError(
            "--db and --url do not go together: a server keeps its threads itself",
            "drop --db",
            EXIT_USAGE,
        )
    return load_remote_target(args.url, args.target, api_key=args.api_key)


def load_remote_target(url: str, assistant: str, *, api_key: str | None = None) -> Target:
    """A graph or agent served at ``url`` (``graph-agent serve``, or LangGraph Server), by its
    assistant id; the server must answer and know the assistant.

    Raises:
        CliError: the server cannot be reached, refuses the key, or has no such assistant.
    """
    remote = RemoteGraph(url, assistant, api_key=api_key or os.environ.get("GRAPH_AGENT_API_KEY"))
    target = _served(assistant, remote)
    target.by_url = True
    return target


def _served(spec: str, remote: RemoteGraph) -> Target:
    """The target of a served assistant, once its server answered for it.

    Raises:
        CliError: the server cannot be reached, refuses the key, or has no such assistant.
    """
    url, assistant = remote.url, remote.assistant
    try:
        _ = remote.is_agent  # asks the server: what it is, and that it is there
    except RemoteGraphError as exc:
        raise CliError(
            f"{url} refused assistant {assistant!r}: {exc.detail or exc}",
            "list the assistants with: curl -X POST " + f"{url.rstrip('/')}/assistants/search",
            EXIT_USAGE,
        ) from exc
    except httpx.HTTPError as exc:
        raise CliError(
            f"cannot reach {url}: {type(exc).__name__}",
            "start it with: graph-agent serve MODULE:OBJECT, or check --url",
            EXIT_ERROR,
        ) from exc
    return Target(spec=spec, runnable=remote, remote=remote)


def load_target(spec: str, *, db: str | None = None, default_saver: bool = True) -> Target:
    """Import ``spec`` and make it runnable, on a SQLite file when ``db`` is given.

    Args:
        spec: ``MODULE:OBJECT``.
        db: A SQLite file to keep threads in: an agent or a team runs on it (a copy, made
            with ``with_saver``: the object in the module keeps its saver); a StateGraph is
            compiled with it; a compiled graph without a saver, or with a MemorySaver, runs on
            it (as LangGraph's server runs a compiled graph on its own checkpointer); a
            compiled graph on another database must already use that file.
        default_saver: Compile a StateGraph with a MemorySaver when there is no ``db``, so its
            interrupts can be resumed within the process.

    Raises:
        CliError: the spec is malformed, cannot be imported, or names the wrong kind of object.
    """
    module_part, object_part = _split(spec)
    module = _import(module_part)
    found = _resolve(module, module_part, object_part)
    if isinstance(found, StateGraph):  # the one kind that is not runnable yet
        return _compiled_target(spec, found, db, default_saver)
    if isinstance(found, RemoteGraph):  # a served assistant, as with --url
        if db is not None:
            raise CliError(
                f"--db and {spec} do not go together: it is served at {found.url}, and a "
                "server keeps its threads itself",
                "drop --db",
                EXIT_USAGE,
            )
        return _served(spec, found)
    if db is None:
        return Target(spec=spec, runnable=found)
    own = saver_of(found)
    if own is None or isinstance(own, MemorySaver) or takes_question(found):
        return _copy_on(spec, found, db)
    _check_compiled_saver(spec, own, db)
    return Target(spec=spec, runnable=found)


def _copy_on(spec: str, found: Runnable, db: str) -> Target:
    """``found`` running on the SQLite file ``db`` (a ``with_saver`` copy); the file is closed
    again when the copy cannot be made."""
    opened = open_saver(db)
    try:
        runnable = found.with_saver(opened)
    except (ValueError, TypeError) as exc:
        opened.close()
        raise CliError(
            f"{spec} cannot run on {db}: {exc}", "drop --db, or give it a saver", EXIT_USAGE
        ) from exc
    except BaseException:
        opened.close()
        raise
    return Target(spec=spec, runnable=runnable, opened=opened)


def _compiled_target(spec: str, graph: StateGraph, db: str | None, default_saver: bool) -> Target:
    """A StateGraph compiled on ``db`` (else, with ``default_saver``, on a MemorySaver)."""
    graph_saver = open_saver(db) if db is not None else None
    saver: CheckpointSaver | None = graph_saver
    if saver is None and default_saver:
        saver = MemorySaver()
    try:
        compiled = graph.compile(CompileConfig(saver=saver))
    except GraphSetupError as exc:
        raise CliError(f"{spec} does not compile: {exc}", "fix the graph", EXIT_USAGE) from exc
    return Target(spec=spec, runnable=compiled, opened=graph_saver)


def _check_compiled_saver(spec: str, saver: CheckpointSaver, db: str) -> None:
    """A graph compiled on a database of its own runs there: ``--db`` must name that file."""
    if isinstance(saver, SqliteSaver) and _same_file(saver.path, db):
        return
    raise CliError(
        f"{spec} was compiled with {type(saver).__name__}, which --db {db} cannot replace",
        "drop --db to use the graph's own saver, or point at the StateGraph instead",
        EXIT_USAGE,
    )


def _same_file(a: str, b: str) -> bool:
    return a != ":memory:" and Path(a).resolve() == Path(b).resolve()


def open_saver(path: str) -> SqliteSaver:
    """A SqliteSaver on ``path`` (created with its folder when missing).

    Raises:
        CliError: ``path`` is a folder, cannot be created, or is not a graph_agent database.
    """
    if Path(path).is_dir():
        raise CliError(f"--db {path} is a folder", "give the path of a database file")
    return _open(path, read_only=False)


def open_existing_saver(path: str, *, read_only: bool = True) -> SqliteSaver:
    """A SqliteSaver on a graph_agent database that must exist already (for its threads).

    With ``read_only`` (the default) nothing in the file is created or migrated.

    Raises:
        CliError: there is no file at ``path``, or it is not a graph_agent database.
    """
    if not Path(path).exists():
        raise CliError(
            f"no database at {path}",
            f"store a run there first, e.g. graph-agent demo{db_option(path)}",
        )
    if Path(path).is_dir():
        raise CliError(f"--db {path} is a folder", "give the path of a database file")
    return _open(path, read_only=read_only)


def _open(path: str, *, read_only: bool) -> SqliteSaver:
    try:
        return SqliteSaver(path, read_only=read_only)
    except SerializationError as exc:
        cause = exc.__cause__
        if isinstance(cause, sqlite3.Error):  # damaged, or not a SQLite file at all
            raise CliError(
                f"{path} is not a usable graph_agent database ({cause})",
                "give --db a new file or an existing graph_agent database; move this one away",
            ) from exc
        raise CliError(  # another program's database, or a newer graph_agent's
            " ".join(str(exc).split()),
            "give --db a new file or a database graph_agent made",
        ) from exc
    except GraphRuntimeError as exc:
        if isinstance(exc.__cause__, OSError):
            raise cannot_write("--db", path, exc.__cause__) from exc
        raise CliError(
            " ".join(str(exc).split()), "give --db a file in a folder you can read and write"
        ) from exc


def db_option(path: str | None, *, default: str | None = DEMO_DB) -> str:
    """`` --db PATH`` for a command suggested to the user, so that it works as printed; empty
    when ``path`` is the suggested command's ``default``."""
    if path is None or path == default:
        return ""
    return f" --db {shlex.quote(path)}"


def _split(spec: str) -> tuple[str, str]:
    module_part, colon, object_part = spec.rpartition(":")
    if os.name == "nt" and len(module_part) == 1:  # "C:path.py" has no object part
        colon = ""
    if not colon or not module_part or not object_part:
        raise CliError(f"expected MODULE:OBJECT, got {spec!r}", _name_it(spec), EXIT_USAGE)
    return module_part, object_part


def _name_it(spec: str) -> str:
    """The hint for a ``spec`` that names a module but nothing in it: what it defines that
    can run (``examples/workflow.py:build``), else an example."""
    module_part = spec.rstrip(":")
    if not module_part:
        return _EXAMPLE
    try:
        module = _import(module_part)
    except CliError:
        return _EXAMPLE
    names = [f"{module_part}:{name}" for name in _candidates(module)]
    if not names:
        return _EXAMPLE
    if len(names) == 1:
        return f"name what to run in it: {names[0]}"
    return f"name what to run in it, one of: {', '.join(names)}"


def _import(module_part: str) -> ModuleType:
    is_file = module_part.endswith(".py") or os.sep in module_part or "/" in module_part
    try:
        if is_file:
            return _import_file(Path(module_part))
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())
        return importlib.import_module(module_part)
    except CliError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name and (module_part == exc.name or module_part.startswith(exc.name + ".")):
            raise CliError(
                f"no module named {module_part!r}",
                "run from the folder that contains it, or give a file: path/to/file.py:OBJECT",
                EXIT_USAGE,
            ) from exc
        raise _import_failed(module_part, exc) from exc
    except Exception as exc:
        raise _import_failed(module_part, exc) from exc


def _import_failed(module_part: str, exc: BaseException) -> CliError:
    return CliError(
        f"importing {module_part} failed: {type(exc).__name__}: {' '.join(str(exc).split())}",
        "run with --debug to see the traceback",
        EXIT_USAGE,
    )


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise CliError(f"no such file: {path}", _EXAMPLE, EXIT_USAGE)
    resolved = path.resolve()
    # A fresh module per load: each command gets new objects (a scripted model that was used up
    # by an earlier call in the same process starts again).
    name = f"_graph_agent_target_{resolved.stem}"
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot import {path}: not a Python file", _EXAMPLE, EXIT_USAGE)
    module = importlib.util.module_from_spec(spec)
    folder = str(resolved.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # so the file can import its neighbours
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _resolve(module: ModuleType, module_part: str, object_part: str) -> Any:
    found: Any = module
    for attribute in object_part.split("."):
        if not hasattr(found, attribute):
            candidates = _candidates(module)
            hint = (
                f"it defines: {', '.join(candidates)}"
                if candidates
                else "it defines no agent (ReactAgent, or a team such as SequentialAgent), "
                "CompiledGraph or StateGraph (nor a build() function returning one)"
            )
            raise CliError(f"{module_part} has no {object_part!r}", hint, EXIT_USAGE)
        found = getattr(found, attribute)
    if inspect.isfunction(found):
        found = _call_factory(found, f"{module_part}:{object_part}")
    if not _loadable(found):
        raise CliError(
            f"{module_part}:{object_part} is a {type(found).__name__}, not an agent (a "
            "ReactAgent or a team such as SequentialAgent), a CompiledGraph or a StateGraph",
            "point at an agent or a graph (or a function with no arguments returning one)",
            EXIT_USAGE,
        )
    return found


def _required(function: Any) -> list[str]:
    """The parameters ``function`` cannot be called without."""
    return [
        p.name
        for p in inspect.signature(function).parameters.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]


def _call_factory(factory: Any, spec: str) -> Any:
    required = _required(factory)
    if required:
        names = ", ".join(required)
        raise CliError(
            f"{spec} is a function that needs arguments ({names})",
            "point at an agent or a graph, or a function with no required arguments",
            EXIT_USAGE,
        )
    try:
        return factory()
    except Exception as exc:
        raise CliError(
            f"{spec}() failed: {type(exc).__name__}: {' '.join(str(exc).split())}",
            "run with --debug to see the traceback",
        ) from exc


def _candidates(module: ModuleType) -> list[str]:
    """What ``module`` defines that a command can run: its agents and graphs, and its
    functions that take no arguments and are named ``build...`` or say they return one."""
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and (_loadable(value) or _is_builder(value, module))
    )


def _is_builder(value: Any, module: ModuleType) -> bool:
    """Whether ``value`` is a function of ``module`` that takes no arguments and is named
    ``build...`` or says it returns an agent or a graph."""
    if not inspect.isfunction(value) or value.__module__ != module.__name__ or _required(value):
        return False
    if value.__name__.startswith("build"):
        return True
    returns = inspect.signature(value).return_annotation
    if isinstance(returns, str):  # postponed annotations: the name as written, looked up
        returns = _looked_up(returns, value.__globals__)
    if not isinstance(returns, type):
        return False
    return issubclass(returns, StateGraph) or all(
        callable(getattr(returns, method, None)) for method in RUN_METHODS
    )


def _loadable(value: Any) -> bool:
    """Whether a command can run ``value``: it is runnable, or a StateGraph to compile."""
    return isinstance(value, StateGraph) or is_runnable(value)


def _looked_up(dotted: str, namespace: dict[str, Any]) -> Any:
    """What the annotation ``dotted`` (``ReactAgent``, ``ga.ReactAgent``) names in
    ``namespace``, or None when it names nothing there (imported only for type checkers)."""
    head, *rest = dotted.split(".")
    found = namespace.get(head)
    for attribute in rest:
        found = getattr(found, attribute, None)
    return found
