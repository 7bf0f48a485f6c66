"""graph-agent serve: graphs and agents behind LangGraph Server's HTTP API, on one SQLite file."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from graph_agent.cli.errors import EXIT_USAGE, CliError
from graph_agent.cli.targets import load_target, open_saver

__all__ = ["SERVE_DB", "records_path", "serve_command"]

SERVE_DB = os.path.join(".graph_agent", "serve.db")
"""Where ``serve`` keeps its threads by default."""


def records_path(db: str) -> str:
    """The file of the server's thread and run records, next to the checkpoint file ``db``:
    ``serve.db`` → ``serve.records.db``."""
    path = Path(db)
    return str(path.with_name(f"{path.stem}.records{path.suffix or '.db'}"))


def serve_command(args: argparse.Namespace) -> int:
    """Serve every TARGET until Ctrl-C; each one's assistant id is its name."""
    try:
        import uvicorn

        from graph_agent.serve import Records, create_app
        from graph_agent.serve.auth import API_KEYS_ENV, binding_problem, keys_from_env
    except ImportError as exc:
        raise CliError(
            f"graph-agent serve needs the serve extra ({exc.name or 'a module'} is missing)",
            "pip install 'graph-agent[serve]'",
            EXIT_USAGE,
        ) from exc
    api_keys = [*args.api_key, *keys_from_env(os.environ.get(API_KEYS_ENV))]
    problem = binding_problem(args.host, bool(api_keys))
    if problem is not None and not args.insecure_no_auth:
        raise CliError(
            problem,
            f"give --api-key KEY (or set {API_KEYS_ENV}), listen on 127.0.0.1, or, behind a "
            "proxy that checks keys itself, pass --insecure-no-auth",
            EXIT_USAGE,
        )
    if args.max_body_bytes < 1:
        raise CliError("--max-body-bytes must be at least 1", "", EXIT_USAGE)
    runnables = [load_target(spec, default_saver=False).local for spec in args.target]
    names = [runnable.name for runnable in runnables]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise CliError(
            f"two targets share the name {twice[0]!r}: an assistant id names one graph",
            "give each graph or agent its own name",
            EXIT_USAGE,
        )
    saver = open_saver(args.db)
    records = Records(records_path(args.db))
    app = create_app(
        runnables,
        saver=saver,
        records=records,
        api_keys=api_keys,
        max_body_bytes=args.max_body_bytes,
    )
    url = f"http://{args.host}:{args.port}"
    keys = f", {len(api_keys)} API key{'s' * (len(api_keys) != 1)}" if api_keys else ""
    print(
        f"graph-agent serve: {', '.join(names)} at {url} (threads in {args.db}{keys})", flush=True
    )
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    except SystemExit as exit:  # uvicorn exits when it cannot bind
        raise CliError(
            f"cannot listen on {args.host}:{args.port}",
            "is another server there? pick another --port",
        ) from exit
    finally:
        records.close()
        saver.close()
    print("graph-agent serve: stopped", file=sys.stderr)
    return 0
