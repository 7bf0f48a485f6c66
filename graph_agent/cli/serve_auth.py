"""``graph-agent serve --auth MODULE:OBJECT --app MODULE:OBJECT``: custom auth (an
:class:`~graph_agent.serve.Auth`, or a ``langgraph_sdk.Auth``) instead of API keys, and a
Starlette app whose routes are served beside the API (see :mod:`graph_agent.serve.auth_custom`
and :mod:`graph_agent.serve.custom_routes`). The config file says the same with LangGraph's
``"auth": {"path": ...}`` and ``"http": {"app": ..., "enable_custom_route_auth": ...}``.
"""

from __future__ import annotations

import argparse
from typing import Any

from graph_agent.cli.errors import EXIT_USAGE, CliError
from graph_agent.cli.targets import _import, _split

__all__ = ["add_auth_options", "load_auth_and_app"]


def add_auth_options(parser: argparse.ArgumentParser) -> None:
    """The options ``serve`` and ``studio`` take for custom auth and routes."""
    parser.add_argument(
        "--auth",
        metavar="MODULE:OBJECT",
        help="custom auth instead of API keys: an Auth object (graph_agent.serve.Auth or "
        "langgraph_sdk.Auth) whose authenticate says who calls and whose @auth.on handlers "
        "filter what each caller sees (LangGraph's auth.path)",
    )
    parser.add_argument(
        "--app",
        metavar="MODULE:OBJECT",
        help="a Starlette or FastAPI app served on the same port, its routes tried before the "
        "API's (LangGraph's http.app); open to all unless --app-auth",
    )
    parser.add_argument(
        "--app-auth",
        action="store_true",
        default=None,
        help="the API's auth (keys or --auth) covers --app's routes too "
        "(LangGraph's http.enable_custom_route_auth)",
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="FILE",
        help="a config file (.json or .toml: graph_agent.json, or LangGraph's langgraph.json) "
        "with targets and options; the same as giving it as a TARGET",
    )


def load_auth_and_app(args: argparse.Namespace) -> tuple[Any, Any]:
    """The objects ``--auth`` and ``--app`` name (None for those not given).

    Raises:
        CliError: one cannot be imported or is not there.
    """
    auth = _load(args.auth, "--auth", "auth.py:auth") if args.auth else None
    app = _load(args.app, "--app", "webapp.py:app") if args.app else None
    return auth, app


def _load(spec: str, option: str, example: str) -> Any:
    try:
        module_part, object_part = _split(spec)
    except CliError as exc:
        raise CliError(f"{option}: {exc.message}", f"e.g. {option} {example}", EXIT_USAGE) from exc
    found: Any = _import(module_part)
    for attribute in object_part.split("."):
        if not hasattr(found, attribute):
            raise CliError(
                f"{option} {spec}: {module_part} has no {object_part}",
                f"e.g. {option} {example}",
                EXIT_USAGE,
            )
        found = getattr(found, attribute)
    return found
