"""graph-agent studio: ``graph-agent serve`` for a local target, with the Studio page opened in
a browser once the server answers."""

from __future__ import annotations

import argparse
import time
import webbrowser
from collections.abc import Callable

import httpx

from graph_agent.cli.serve import serve_command
from graph_agent.graph.concurrency import start_thread

__all__ = ["studio_command", "studio_url"]

READY_TIMEOUT = 60.0
"""Seconds to wait for the server to answer before giving up on opening the page."""


def studio_url(host: str, port: int) -> str:
    """Where a browser on this machine finds the Studio of a server bound to ``host``."""
    if host in ("0.0.0.0", "", "::"):  # bound to every address: this machine is one of them
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}/studio/"


def studio_command(args: argparse.Namespace) -> int:
    """Serve every TARGET (as ``serve`` does) and open the Studio when the server is up."""
    if not args.no_http and args.sibling_of is None:  # one process of --workers opens it
        start_thread(
            open_when_ready,
            args=(args, None if args.no_browser else webbrowser.open),
            name="graph-agent-studio-opener",
        )
    return serve_command(args)


def open_when_ready(
    args: argparse.Namespace,
    opener: Callable[[str], object] | None,
    timeout: float = READY_TIMEOUT,
) -> str | None:
    """Wait until the server answers ``GET /ok``, then print the Studio's address and open it
    with ``opener`` (None: print only). ``args.host``/``args.port`` are read once ``serve``
    has filled in their defaults. The address, or None when the server never answered."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        host, port = getattr(args, "host", None), getattr(args, "port", None)
        if host is not None and port is not None:
            url = studio_url(host, port)
            if _answers(url.removesuffix("studio/") + "ok"):
                print(f"graph-agent studio: {url}", flush=True)
                if opener is not None:
                    opener(url)
                return url
        time.sleep(0.1)
    return None


def _answers(url: str) -> bool:
    try:  # straight to the server: no proxy from the environment
        return httpx.get(url, timeout=2, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False
