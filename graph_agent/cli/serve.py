"""graph-agent serve: graphs and agents behind LangGraph Server's HTTP API, on one SQLite file."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graph_agent.cli.errors import EXIT_USAGE, CliError
from graph_agent.cli.serve_auth import load_auth_and_app
from graph_agent.cli.serve_config import is_config, read_config
from graph_agent.cli.serve_cpus import cpus_of, pin_to
from graph_agent.cli.serve_retention import DEFAULTS as RETENTION_DEFAULTS
from graph_agent.cli.serve_retention import retention_of
from graph_agent.cli.serve_store import add_store_sweep, store_settings
from graph_agent.cli.targets import load_target, open_saver
from graph_agent.graph.concurrency import start_thread
from graph_agent.runnable import Runnable

__all__ = ["SERVE_DB", "records_path", "serve_command", "serve_targets"]

SERVE_DB = os.path.join(".graph_agent", "serve.db")
"""Where ``serve`` keeps its threads by default."""


def records_path(db: str, kind: str = "records") -> str:
    """The file of the server's thread and run records (or its ``kind="store"``), next to the
    checkpoint file ``db``: ``serve.db`` → ``serve.records.db``, ``serve.store.db``."""
    path = Path(db)
    return str(path.with_name(f"{path.stem}.{kind}{path.suffix or '.db'}"))


def serve_command(args: argparse.Namespace) -> int:
    """Serve every TARGET until Ctrl-C; each one's assistant id is its name."""
    cleanups: list[Callable[[], None]] = []  # --mcp: the agents' MCP servers, stopped at the end
    try:
        return _serve(args, cleanups)
    finally:
        while cleanups:
            cleanups.pop()()


def _serve(args: argparse.Namespace, cleanups: list[Callable[[], None]]) -> int:
    _need_serve_extra()
    targets = serve_targets(args)
    keys = _keys(args)
    retention = retention_of(args)
    if args.max_body_bytes < 1:
        raise CliError("--max-body-bytes must be at least 1", "", EXIT_USAGE)
    if args.workers < 0:  # before anything is loaded or opened
        raise CliError(f"--workers {args.workers}: give 0 or more", "e.g. --workers 2", EXIT_USAGE)
    cpus = cpus_of(args.cpus)  # a usage error before anything is loaded or opened
    runnables = _load_runnables(args, targets, cleanups)
    input_keys = _input_keys_by_id(args.input_key_table, list(runnables))
    auth, custom_app = load_auth_and_app(args)
    settings = store_settings(args)  # before anything opens: a bad index is a usage error
    stores = _open_stores(args, settings.options())
    if args.no_http:
        pin_to(cpus)
        return _work_only(runnables, stores)
    app = _app(
        args,
        runnables,
        stores,
        keys,
        input_keys,
        retention=retention,
        auth=auth,
        custom_app=custom_app,
    )
    add_store_sweep(app.state.api, settings)
    return _run_http(args, app, stores, ", ".join(runnables), keys, cpus)


def _need_serve_extra() -> None:
    """Raises a usage error naming the extra when the serve extra is not installed."""
    try:
        import uvicorn  # noqa: F401

        import graph_agent.serve.app  # noqa: F401
    except ImportError as exc:
        raise CliError(
            f"graph-agent serve needs the serve extra ({exc.name or 'a module'} is missing)",
            "pip install 'graph-agent[serve]'",
            EXIT_USAGE,
        ) from exc


@dataclass(frozen=True, kw_only=True)
class _Keys:
    """The API keys a request may carry: given alone, and by group."""

    api_keys: list[str]
    groups: dict[str, list[str]]

    @property
    def all(self) -> set[str]:
        return {*self.api_keys, *(key for keys in self.groups.values() for key in keys)}


def _keys(args: argparse.Namespace) -> _Keys:
    """The keys of ``--api-key``, ``--key-group`` and the environment; without any, the
    server must listen on loopback only (or be told ``--insecure-no-auth``)."""
    from graph_agent.serve.auth import API_KEYS_ENV, binding_problem, keys_from_env

    keys = _Keys(
        api_keys=[*args.api_key, *keys_from_env(os.environ.get(API_KEYS_ENV))],
        groups=_key_groups(args.key_group),
    )
    if args.auth is not None and keys.all:
        raise CliError(
            "--auth and API keys both given: the Auth object's authenticate decides who calls",
            f"drop --api-key/--key-group (and {API_KEYS_ENV}), or check the keys in authenticate",
            EXIT_USAGE,
        )
    problem = binding_problem(args.host, bool(keys.all) or args.auth is not None)
    if problem is not None and not args.insecure_no_auth:
        raise CliError(
            problem,
            f"give --api-key KEY (or set {API_KEYS_ENV}), listen on 127.0.0.1, or, behind a "
            "proxy that checks keys itself, pass --insecure-no-auth",
            EXIT_USAGE,
        )
    return keys


def _load_runnables(
    args: argparse.Namespace,
    targets: list[tuple[str | None, str]],
    cleanups: list[Callable[[], None]],
) -> dict[str, Runnable]:
    """Each target loaded (any runnable, or a StateGraph compiled), by assistant id; with
    ``--mcp``, an agent gets those servers' tools (``cleanups`` takes them away)."""
    runnables: dict[str, Runnable] = {}
    for assistant_id, spec in targets:
        runnable = load_target(spec, default_saver=False).local
        name = assistant_id or runnable.name
        if name in runnables:
            raise CliError(
                f"two targets share the name {name!r}: an assistant id names one graph",
                "give each graph or agent its own name (or its own id in the config file)",
                EXIT_USAGE,
            )
        runnables[name] = runnable
        if getattr(args, "mcp", None) is not None:
            from graph_agent.cli.mcp import add_mcp_tools

            cleanups.append(add_mcp_tools(runnable, spec, args.mcp))
    return runnables


@dataclass(frozen=True, kw_only=True)
class _Stores:
    """Where the server keeps threads (``saver``), runs (``records``) and long-term memory
    (``store``, which ``/store`` serves and every run gets), said as ``where``."""

    saver: Any
    records: Any
    where: str
    store: Any = None

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
        self.records.close()
        self.saver.close()


def _open_stores(args: argparse.Namespace, store_options: dict[str, Any]) -> _Stores:
    """The saver, records and store the server keeps threads, runs and memory in, and where
    they are: the SQLite file ``--db``, or PostgreSQL (``--postgres``, notified over
    ``--redis``); the store opened with ``store_options`` (its index and TTLs)."""
    if args.postgres is None:
        if args.workers != 1 or args.no_http:
            raise CliError("--workers needs --postgres", "add --postgres DSN, or drop --workers")
        if args.redis is not None:
            raise CliError("--redis needs --postgres", "add --postgres DSN, or drop --redis")
        from graph_agent.serve.records import Records
        from graph_agent.store import SqliteStore

        return _Stores(
            saver=open_saver(args.db),
            records=Records(records_path(args.db)),
            store=SqliteStore(records_path(args.db, "store"), **store_options),
            where=args.db,
        )
    timeout = getattr(args, "worker_timeout", None)
    saver, records = _open_postgres(args.postgres, args.redis, timeout)
    where = "PostgreSQL" if args.redis is None else "PostgreSQL, notified over Redis"
    store = _postgres_store(args.postgres, saver, records, store_options)
    return _Stores(saver=saver, records=records, store=store, where=where)


def _postgres_store(dsn: str, saver: Any, records: Any, options: dict[str, Any]) -> Any:
    """The server's store in PostgreSQL (the saver and records closed if it cannot open)."""
    from graph_agent.store.postgres import PostgresStore

    try:
        return PostgresStore(dsn, pool_size=4, **options)
    except Exception as exc:
        records.close()
        saver.close()
        raise CliError(
            f"cannot open the store in PostgreSQL (--postgres): {type(exc).__name__}",
            "check the DSN, and that the server is up",
        ) from exc


def _app(
    args: argparse.Namespace,
    runnables: dict[str, Runnable],
    stores: _Stores,
    keys: _Keys,
    input_keys: dict[str, list[str]],
    **custom: Any,
) -> Any:
    """The app serving ``runnables`` (``custom``: its ``retention``, ``auth`` and
    ``custom_app``); a usage
    error (the stores closed) when it refuses the options."""
    from graph_agent.serve.app import create_app

    try:
        return create_app(
            runnables,
            saver=stores.saver,
            records=stores.records,
            store=stores.store,
            work=args.workers > 0,
            api_keys=keys.api_keys,
            max_body_bytes=args.max_body_bytes,
            input_keys=input_keys,
            key_groups=keys.groups,
            shared_threads=args.shared_threads,
            bound_host=args.host,
            allow_hosts=args.allow_host,
            cors_origins=args.cors_origin,
            insecure_no_auth=args.insecure_no_auth,
            webhook_allow=args.webhook_allow,
            custom_app_auth=args.app_auth,
            **custom,
        )
    except ValueError as exc:
        stores.close()
        raise CliError(str(exc), "see graph-agent serve --help", EXIT_USAGE) from exc


def _run_http(
    args: argparse.Namespace, app: Any, stores: _Stores, names: str, keys: _Keys, cpus: list[int]
) -> int:
    """Serve ``app`` on ``--host``/``--port`` until Ctrl-C or SIGTERM (with ``--workers N``,
    beside N-1 more processes; on the CPUs of ``--cpus``, ``cpus``), then close the stores."""
    import uvicorn

    siblings = args.workers > 1 and hasattr(socket, "SO_REUSEPORT")
    try:
        listening = _listen(args.host, args.port, siblings=siblings, sibling=args.sibling_of)
    except OSError as exc:
        stores.close()
        raise CliError(
            f"cannot listen on {args.host}:{args.port} ({exc.strerror or exc})",
            "is another server there? pick another --port",
        ) from exc
    port = int(listening.getsockname()[1])
    # --workers N: N processes serving HTTP on the port they share (the kernel spreads the
    # connections) and running runs; without SO_REUSEPORT, N-1 of them without HTTP
    # with --cpus, each on the next CPU of the list (its own --cpus: the last one given counts)
    helpers = [
        _spawn_worker(port if siblings else None, cpus[(n + 1) % len(cpus)] if cpus else None)
        for n in range(args.workers - 1)
    ]
    pin_to(cpus)  # after the others started (a process on one CPU may start no other elsewhere)
    _announce(
        args, f"{names} at http://{args.host}:{port} (threads in {stores.where}", keys, siblings
    )
    # uvicorn shuts down on SIGTERM, then raises the signal again with the handler found at
    # start: with the default one the process would die here, before the worker processes it
    # started are stopped and the stores closed; this handler ends it as Ctrl-C does
    previous = signal.signal(signal.SIGTERM, _stop)
    # no access log: at this level its lines were built per request only to be dropped
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    _settle_garbage_collection()
    try:
        server.run(sockets=[listening])
    except KeyboardInterrupt:
        pass
    except SystemExit as exit:  # uvicorn exits when the app's startup failed
        raise CliError(
            f"the server on {args.host}:{port} did not start", "the log above says why"
        ) from exit
    finally:
        signal.signal(signal.SIGTERM, previous)
        listening.close()
        for helper in helpers:
            helper.terminate()
        for helper in helpers:
            helper.wait(15)
        stores.close()
    print("graph-agent serve: stopped", file=sys.stderr)
    return 0


GC_THRESHOLDS = (10_000, 20, 10)
"""The collector's thresholds while serving (Python's: 700, 10, 10). Each request and run
leaves a few hundred new objects, the finished runs kept in memory among them: at 700 a
young collection came every few runs and a full one every few thousand, about 0.2 ms of CPU
per durable run in all (and a pause of some 100 ms at each full one)."""


def _settle_garbage_collection() -> None:
    """Before serving: what the process holds by now (modules, graphs, the app) is moved out
    of the collector's sight (``gc.freeze``: it lives as long as the server), and collections
    come less often (:data:`GC_THRESHOLDS`); reference counting frees a request's objects
    as before, the collector only finds cycles later."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _announce(args: argparse.Namespace, serving: str, keys: _Keys, siblings: bool) -> None:
    """Say what is served where, ``serving`` ending in an open parenthesis the keys and the
    processes close (the first process); a sibling process stops with it instead."""
    if args.sibling_of is not None:
        _stop_with_parent(args.sibling_of)
        return
    every = keys.all
    said = f", {len(every)} API key{'s' * (len(every) != 1)}" if every else ""
    if every and args.shared_threads:
        said += " sharing every thread"
    said += f", auth {args.auth}" if args.auth else ""
    said += f", routes of {args.app}" if args.app else ""
    processes = f", {args.workers} processes" if siblings else ""
    print(f"graph-agent serve: {serving}{said}{processes})", flush=True)


_DEFAULTS: dict[str, Any] = {
    "db": SERVE_DB,
    "postgres": None,
    "redis": None,
    "host": "127.0.0.1",
    "port": 8123,
    "workers": 1,
    "max_body_bytes": 4 * 1024 * 1024,  # serve.limits.DEFAULT_MAX_BODY_BYTES (needs the extra)
    "shared_threads": False,
    **RETENTION_DEFAULTS,
    "auth": None,
    "app": None,
    "app_auth": False,
}


def serve_targets(args: argparse.Namespace) -> list[tuple[str | None, str]]:
    """The targets to serve, as ``(assistant id or None, MODULE:OBJECT)``, with config files'
    targets read; ``args`` gets each option from the command line, else a config file, else
    its default."""
    targets: list[tuple[str | None, str]] = []
    options: dict[str, Any] = {}
    named = [(target, is_config(target)) for target in args.target]
    for target, config_file in [*named, *((path, True) for path in getattr(args, "config", []))]:
        if not config_file:
            targets.append((None, target))
            continue
        config = read_config(target)
        targets += config.targets
        for key, value in config.options.items():
            if key in options and options[key] != value:
                raise CliError(
                    f"the config files disagree on {key}", "set it once, or on the command line"
                )
            options[key] = value
        if config.ignored:
            print(
                f"graph-agent serve: {target}: ignoring {', '.join(config.ignored)} "
                "(not graph-agent settings)",
                file=sys.stderr,
            )
    if not targets:
        raise CliError(
            "nothing to serve: give MODULE:OBJECT targets or a config file",
            "e.g. graph-agent serve --config graph_agent.json",
            EXIT_USAGE,
        )
    for key, default in _DEFAULTS.items():
        if getattr(args, key, None) is None:
            setattr(args, key, options.get(key, default))
    lists = (("allow_hosts", "allow_host"), ("cors_origins", "cors_origin"))
    for key, option in (*lists, ("webhook_allow", "webhook_allow")):
        given = getattr(args, option, None) or []  # the command line's add to the files'
        setattr(args, option, [*options.get(key, []), *given])
    table: dict[str | None, list[str]] = dict(options.get("input_keys", {}))
    for text in getattr(args, "input_keys", None) or ():
        name, equals, keys = text.partition("=")
        if not equals:
            name, keys = "", text
        table[name.strip() or None] = [key.strip() for key in keys.split(",") if key.strip()]
    args.input_key_table = table
    args.store_config = options.get("store")  # the files' store table (the options win)
    return targets


def _input_keys_by_id(table: dict[str | None, list[str]], names: list[str]) -> dict[str, list[str]]:
    """``--input-keys`` and the config files' ``input_keys`` by assistant id: a value given
    without ``ASSISTANT=`` belongs to the one target served."""
    if None not in table:
        return {name: keys for name, keys in table.items() if name is not None}
    if len(names) != 1:
        raise CliError(
            "--input-keys without an assistant id, and several assistants are served",
            f"name it: --input-keys {names[0]}=KEY,KEY",
            EXIT_USAGE,
        )
    found = {name: keys for name, keys in table.items() if name is not None}
    found[names[0]] = table[None]  # the command line's: it wins over a file's
    return found


def _key_groups(given: list[str]) -> dict[str, list[str]]:
    """The key groups of ``--key-group`` and of the environment (see serve.auth)."""
    from graph_agent.serve.auth import KEY_GROUPS_ENV, key_group, key_groups_from_env

    try:
        groups = key_groups_from_env(os.environ.get(KEY_GROUPS_ENV))
        for text in given:
            name, keys = key_group(text)
            groups.setdefault(name, []).extend(keys)
    except ValueError as exc:
        raise CliError(
            str(exc), f"e.g. --key-group support=KEY1,KEY2 (or {KEY_GROUPS_ENV})", EXIT_USAGE
        ) from exc
    return groups


def _stop(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _open_postgres(
    dsn: str, redis_url: str | None = None, worker_timeout: float | None = None
) -> tuple[Any, Any]:
    if worker_timeout is not None and not 0 < worker_timeout < float("inf"):
        raise CliError(
            f"--worker-timeout {worker_timeout}: give a positive number of seconds",
            "e.g. --worker-timeout 30",
            EXIT_USAGE,
        )
    notifier = _open_redis(redis_url) if redis_url is not None else None
    try:
        from graph_agent.checkpoint.postgres import AsyncPostgresSaver
        from graph_agent.serve.pg_records import WORKER_TIMEOUT, PostgresRecords

        timeout = WORKER_TIMEOUT if worker_timeout is None else worker_timeout
        # one timeout for both: a silent worker's runs are claimed again, and resume once its
        # leases on their threads lapsed
        saver = AsyncPostgresSaver(dsn, pool_size=16, lease_ttl=timeout)  # pool: less waiting
        return saver, PostgresRecords(dsn, notifier=notifier, worker_timeout=timeout)
    except ImportError as exc:
        raise CliError(
            f"--postgres needs psycopg ({exc.name or 'a module'} is missing)",
            "pip install 'graph-agent[serve,postgres]'",
            EXIT_USAGE,
        ) from exc
    except Exception as exc:
        # the DSN may hold a password: name the option, not its value
        raise CliError(
            f"cannot use PostgreSQL (--postgres): {type(exc).__name__}",
            "check the DSN, and that the server is up",
        ) from exc


def _open_redis(url: str) -> Any:
    """The Redis notifier of ``--redis URL``, once Redis answered (checked here, at start, so
    that a wrong URL fails at once rather than in every process's subscription)."""
    from graph_agent.serve.notify import NotifierUnreachable, RedisNotifier, redis_where

    try:
        notifier = RedisNotifier(url)
    except ImportError as exc:
        raise CliError(str(exc), "pip install 'graph-agent[serve]'", EXIT_USAGE) from exc
    except ValueError as exc:  # not a redis:// URL; it may hold a password: not shown
        raise CliError(
            "--redis is not a Redis URL",
            "give redis://HOST:PORT/DB (rediss:// for TLS)",
            EXIT_USAGE,
        ) from exc

    async def check() -> None:
        try:
            await notifier.check()
        finally:
            await notifier.aclose()

    try:
        asyncio.run(check())
    except NotifierUnreachable as exc:
        raise CliError(str(exc), f"is Redis running at {redis_where(url)}?") from exc
    return RedisNotifier(url)  # the checked one's connections belong to the loop that ended


def _spawn_worker(port: int | None, cpu: int | None = None) -> subprocess.Popen[bytes]:
    """This command again: serving HTTP on ``port`` beside this process (shared with
    SO_REUSEPORT), or, without a port, as a worker process without HTTP; on ``cpu``."""
    command = [sys.executable, "-m", "graph_agent", *sys.argv[1:]]
    if cpu is not None:
        command += ["--cpus", str(cpu)]
    if port is None:
        return subprocess.Popen([*command, "--no-http"])
    return subprocess.Popen(
        [*command, "--port", str(port), "--workers", "1", "--sibling-of", str(os.getpid())]
    )


def _listen(host: str, port: int, *, siblings: bool, sibling: int | None) -> socket.socket:
    """The server's socket, bound to ``host:port``; with SO_REUSEPORT when this process will
    start ``siblings`` (the other processes of ``--workers``) or is the ``sibling`` of the
    server with that PID, so that they bind the same port. A port some other server listens on
    is refused even then: the first process binds a plain socket to it first, which fails when
    anyone holds it (with SO_REUSEPORT, only sockets that all set it may share a port)."""
    shared = siblings or sibling is not None
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    if siblings and port != 0:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    listening = socket.socket(family, kind, proto)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if shared:
            listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        listening.bind(address)
    except OSError:
        listening.close()
        raise
    return listening


def _stop_with_parent(parent: int) -> None:
    """End this process (as SIGTERM does) once the server that started it is gone, killed
    too hard to stop it: it would otherwise go on serving the port alone."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    start_thread(watch, name="graph-agent-serve-parent")


def _work_only(runnables: dict[str, Runnable], stores: _Stores) -> int:
    from graph_agent.serve.app import assistants_on
    from graph_agent.serve.queue import work_forever

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    stop = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, interrupt)
    try:
        assistants = assistants_on(runnables, stores.saver)
        asyncio.run(work_forever(assistants, stores.records, store=stores.store))
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, stop)
        stores.close()
    return 0
