"""graph-agent serve: graphs and agents behind LangGraph Server's HTTP API (needs the ``serve``
extra: ``pip install 'graph-agent[serve]'``).

The app loads on first use (``from graph_agent.serve import create_app``), so the wire format
(``graph_agent.serve.wire``, which :class:`~graph_agent.client.RemoteGraph` shares) imports
without the extra.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graph_agent.serve.app import ApiError, create_app
    from graph_agent.serve.auth_handlers import Auth
    from graph_agent.serve.records import Records
    from graph_agent.serve.retention import ServerRetention

_LAZY = {
    "Auth": "auth_handlers",
    "ApiError": "app",
    "create_app": "app",
    "Records": "records",
    "ServerRetention": "retention",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        import importlib

        return getattr(importlib.import_module(f"graph_agent.serve.{module}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ApiError", "Auth", "Records", "ServerRetention", "create_app"]
